//! Pure translation: a snapshot of cluster objects -> the desired load balancer. No I/O.
//!
//! Entry points: [`owns_ingress`] (is this Ingress ours?), [`translate_ingress`] (one Ingress
//! -> its [`DesiredIngress`]) and [`translate_firewall`] (all desired Ingresses -> the shared
//! L7 firewall rule). Every Compute resource name comes from [`namer`]. The same snapshot and
//! config always give identical output (all maps are ordered; nothing reads the clock or the
//! environment).

pub mod annotations;
pub mod backend_config_checks;
pub mod backends;
pub mod certificates;
pub mod cidr;
pub mod config;
pub mod delegation_status;
pub mod desired;
pub mod endpoints;
pub mod errors;
pub mod firewall;
pub mod frontend;
pub mod gke_fields;
pub mod health_check;
pub mod hosts;
pub mod namer;
pub mod ncp;
pub mod ownership;
pub mod paths;
pub mod pod;
pub mod proxy_only_subnet;
pub mod regional;
pub mod regional_address;
pub mod secret_refs;
pub mod service_ports;
pub mod snapshot;
pub mod source_ranges;
pub mod url_map;

pub use config::{
    Mode, TranslateConfig, GCE_CLASS, GCE_INGRESS_CONTROLLER, GCLB_CLASS, GCLB_INGRESS_CONTROLLER,
};
pub use desired::*;
pub use errors::TranslateError;
pub use firewall::{
    firewall_hint, google_ranges_blocked, translate_firewall, FirewallBlock, FirewallHintOp,
};
pub use ownership::owns_ingress;
pub use snapshot::{ClusterSnapshot, ObjectKey, SnapshotObject};

use k8s_openapi::api::networking::v1::Ingress;

/// Translates one Ingress into its desired load balancer.
///
/// # Errors
/// A [`TranslateError`] naming the Ingress, the field and the fix when the Ingress cannot be
/// built (bad path, missing Service or port, unsupported backend, ...), or asks for what its
/// load balancing scheme does not accept (`ncp/use-regex` without `regexMatch`:
/// [`ncp::refuse_unsupported_regex`]). Problems that do not stop the load balancer (path
/// collisions, a missing TLS Secret) are returned as [`Finding`]s inside the result instead.
pub fn translate_ingress(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> Result<DesiredIngress, TranslateError> {
    let desired = translate_for_class(snapshot, ingress, config)?;
    ncp::refuse_unsupported_regex(ingress, &desired)?;
    Ok(desired)
}

/// [`translate_ingress`] up to the load balancer of the Ingress's class (global, or regional
/// by [`regional::regionalize`]), before the checks that depend on its load balancing scheme.
fn translate_for_class(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> Result<DesiredIngress, TranslateError> {
    let key = ObjectKey::of(ingress);
    let namer = config.ingress_namer(ingress);
    let default = default_backend(snapshot, ingress, config, &key)?;
    let default_name = config.backend_name(
        &default.key.namespace,
        &default.key.service,
        default.key.port,
    );
    let default_ref = config.global_ref("backendServices", &default_name);
    let ncp_options = ncp::options(ingress)?;
    let plan = url_map::url_map(
        snapshot,
        config,
        ingress,
        &namer.url_map(),
        &default_ref,
        &ncp_options,
    )?;
    let mut findings = plan.findings;
    findings.extend(ncp::unsupported_findings(
        ingress,
        &[
            ncp::HTTP_REDIRECT,
            ncp::USE_REGEX,
            ncp::WHITELIST_SOURCE_RANGE,
            secret_refs::TLS_CERT_NAMESPACE,
        ],
    ));

    let mut backends = std::collections::BTreeMap::new();
    for resolved in std::iter::once(&default).chain(plan.backends.iter()) {
        let desired = backends::desired_backend(snapshot, config, resolved)?;
        let name = desired.backend_service.name.clone().unwrap_or_default();
        if !backends.contains_key(&name) {
            findings.extend(desired.findings.iter().cloned());
        }
        backends.entry(name).or_insert(desired);
    }
    let frontend = frontend::frontend(
        snapshot,
        config,
        ingress,
        &namer,
        plan.url_map,
        &ncp_options,
        &mut findings,
    )?;
    let security_policy = source_ranges::apply(
        snapshot,
        config,
        ingress,
        &ncp_options,
        &mut backends,
        &mut findings,
    );
    let desired = DesiredIngress {
        backends,
        frontend,
        security_policy,
        findings,
        region: None,
    };
    let Some(kind) = regional::regional_class(snapshot, ingress, config) else {
        return Ok(desired);
    };
    let region = regional::cluster_region(snapshot, config).ok_or_else(|| {
        TranslateError::UnknownRegion {
            ingress: key.to_string(),
        }
    })?;
    regional::regionalize(desired, ingress, config, kind, &region)
}

/// `spec.defaultBackend`, else the operator's system default backend.
fn default_backend<'a>(
    snapshot: &'a ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
    key: &ObjectKey,
) -> Result<service_ports::ResolvedBackend<'a>, TranslateError> {
    if let Some(backend) = ingress
        .spec
        .as_ref()
        .and_then(|s| s.default_backend.as_ref())
    {
        return service_ports::resolve_ingress_backend(
            snapshot,
            key,
            backend,
            "spec.defaultBackend",
        );
    }
    let Some((namespace, service, port)) = config.default_backend.as_ref() else {
        return Err(TranslateError::NoDefaultBackend {
            ingress: key.to_string(),
            default_backend: "(none configured)".to_owned(),
        });
    };
    service_ports::resolve(
        snapshot,
        key,
        &ObjectKey::new(namespace.clone(), service.clone()),
        &service_ports::PortRef::parse(port),
        "spec.defaultBackend",
        "spec.defaultBackend",
    )
    .map_err(|_| TranslateError::NoDefaultBackend {
        ingress: key.to_string(),
        default_backend: format!("{namespace}/{service}:{port}"),
    })
}

#[cfg(test)]
mod backends_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod invariants_tests;
#[cfg(test)]
mod ncp_regex_tests;
#[cfg(test)]
mod regional_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod zones_tests;
