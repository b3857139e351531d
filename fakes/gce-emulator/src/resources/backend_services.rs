//! `backendServices` and `regionBackendServices`: backend services whose backends are zonal
//! GCE_VM_IP_PORT NEGs (instance groups are not emulated), plus `getHealth`, answered from the
//! health checker's [`HealthTable`], and the signed URL keys of Cloud CDN.
//!
//! A regional backend service (Compute API v1 reference, `regionBackendServices`) is validated
//! as a global one, then: the emulator serves the proxy load balancers, so it is one of the
//! regional internal Application Load Balancer (`loadBalancingScheme: INTERNAL_MANAGED`) or of
//! the regional external Application Load Balancer (`EXTERNAL_MANAGED`); the passthrough schemes
//! (INTERNAL, EXTERNAL: the API's default for this collection) answer 400 saying so. Cloud CDN
//! is a feature of the global external load balancers only ("Cloud CDN ... is supported with
//! the global external Application Load Balancer and the classic Application Load Balancer"),
//! so `enableCDN: true` and `cdnPolicy` are refused, as is `edgeSecurityPolicy`. Health checks
//! and NEGs must be in the service's region (`resources::reference_scopes`).

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::health_state::{HealthKey, HealthState, HealthTable};
use crate::resources::collections::Scope;
use crate::resources::references::Prepare;
use crate::store::State;
use crate::validate::{self, Obj};

/// Load balancing schemes of the regional Application Load Balancers, the only ones a regional
/// backend service (and a regional forwarding rule) may have in the emulator.
pub const PROXY_SCHEMES: &[&str] = &["INTERNAL_MANAGED", "EXTERNAL_MANAGED"];

const PROTOCOLS: &[&str] = &[
    "HTTP",
    "HTTPS",
    "HTTP2",
    "TCP",
    "SSL",
    "UDP",
    "GRPC",
    "H2C",
    "UNSPECIFIED",
];
const SCHEMES: &[&str] = &[
    "EXTERNAL",
    "EXTERNAL_MANAGED",
    "INTERNAL",
    "INTERNAL_MANAGED",
    "INTERNAL_SELF_MANAGED",
];
const AFFINITIES: &[&str] = &[
    "NONE",
    "CLIENT_IP",
    "CLIENT_IP_NO_DESTINATION",
    "CLIENT_IP_PORT_PROTO",
    "CLIENT_IP_PROTO",
    "GENERATED_COOKIE",
    "HEADER_FIELD",
    "HTTP_COOKIE",
    "STRONG_COOKIE_AFFINITY",
];
const BALANCING_MODES: &[&str] = &["UTILIZATION", "RATE", "CONNECTION", "CUSTOM_METRICS"];

/// Validates a backend service of `scope` (global or regional): enums, `timeoutSec` (1-86400,
/// default 30), `healthChecks` (at most one, must exist), `backends[].group` (distinct NEGs that
/// exist, balancing mode RATE or CONNECTION for NEGs, default RATE), `securityPolicy`,
/// `connectionDraining`, `logConfig`; a regional one as the module docs say. Errors: 400
/// `invalid` naming the field, 404 for a reference to a missing resource.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj, scope: Scope) -> Result<(), ApiError> {
    if scope != Scope::Regional {
        return prepare_any(cx, r);
    }
    if validate::opt_str(r, "resource", "loadBalancingScheme")?.is_none() {
        r.insert("loadBalancingScheme".into(), "INTERNAL".into());
    }
    prepare_any(cx, r)?;
    let scheme = validate::req_str(r, "resource", "loadBalancingScheme")?;
    if !PROXY_SCHEMES.contains(&scheme) {
        return Err(ApiError::invalid_value(
            "resource.loadBalancingScheme",
            scheme,
            "The emulator serves regional backend services of the regional Application Load Balancers only: use INTERNAL_MANAGED or EXTERNAL_MANAGED (passthrough Network Load Balancers are not emulated).",
        ));
    }
    if r.get("enableCDN").and_then(Value::as_bool) == Some(true) || r.contains_key("cdnPolicy") {
        return Err(ApiError::invalid_value(
            "resource.enableCDN",
            "true",
            "Cloud CDN is not supported for regional backend services; it requires the global external Application Load Balancer.",
        ));
    }
    if r.get("edgeSecurityPolicy").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid_value(
            "resource.edgeSecurityPolicy",
            "",
            "Edge security policies are not supported for regional backend services.",
        ));
    }
    Ok(())
}

/// What every backend service is validated for, whatever its scope (see [`prepare`]).
fn prepare_any(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::enum_field(r, "resource", "protocol", PROTOCOLS, Some("HTTP"))?;
    validate::enum_field(
        r,
        "resource",
        "loadBalancingScheme",
        SCHEMES,
        Some("EXTERNAL"),
    )?;
    validate::enum_field(r, "resource", "sessionAffinity", AFFINITIES, Some("NONE"))?;
    validate::enum_field(
        r,
        "resource",
        "localityLbPolicy",
        &[
            "ROUND_ROBIN",
            "LEAST_REQUEST",
            "RING_HASH",
            "RANDOM",
            "ORIGINAL_DESTINATION",
            "MAGLEV",
            "WEIGHTED_MAGLEV",
            "WEIGHTED_ROUND_ROBIN",
        ],
        None,
    )?;
    validate::int_field(r, "resource", "timeoutSec", 1, 86400, Some(30))?;
    validate::int_field(r, "resource", "affinityCookieTtlSec", 0, 1_209_600, Some(0))?;
    validate::bool_field(r, "resource", "enableCDN", None)?;
    if validate::opt_str(r, "resource", "portName")?.is_none() {
        r.insert("portName".into(), "http".into());
    }
    let hcs = cx.ref_list(r, "resource", "healthChecks", &["healthChecks"])?;
    if hcs.len() > 1 {
        return Err(ApiError::invalid_value(
            "resource.healthChecks",
            &hcs.len().to_string(),
            "At most one health check may be specified.",
        ));
    }
    cx.ref_field(r, "resource", "securityPolicy", &["securityPolicies"])?;
    cx.ref_field(r, "resource", "edgeSecurityPolicy", &["securityPolicies"])?;
    if let Some(cd) = validate::object_mut(r, "resource", "connectionDraining", true)? {
        validate::int_field(
            cd,
            "resource.connectionDraining",
            "drainingTimeoutSec",
            0,
            3600,
            Some(0),
        )?;
    }
    if let Some(lc) = validate::object_mut(r, "resource", "logConfig", false)? {
        validate::bool_field(lc, "resource.logConfig", "enable", None)?;
        validate::float_field(lc, "resource.logConfig", "sampleRate", 0.0, 1.0, None)?;
    }
    if let Some(iap) = validate::object_mut(r, "resource", "iap", false)? {
        validate::bool_field(iap, "resource.iap", "enabled", None)?;
        validate::opt_str(iap, "resource.iap", "oauth2ClientId")?;
        keep_iap_secret_hash(cx, iap)?;
    }
    keep_signed_url_key_names(cx, r);
    validate::str_list(r, "resource", "customRequestHeaders")?;
    validate::str_list(r, "resource", "customResponseHeaders")?;
    let mut groups = Vec::new();
    if let Some(backends) = validate::array_mut(r, "resource", "backends")? {
        for (i, b) in backends.iter_mut().enumerate() {
            let prefix = format!("resource.backends[{i}]");
            let Value::Object(o) = b else {
                return Err(ApiError::invalid_value(
                    &prefix,
                    &validate::show(b),
                    "Expected an object.",
                ));
            };
            let group = validate::req_str(o, &prefix, "group")?.to_string();
            let url = cx.reference(
                &format!("{prefix}.group"),
                &group,
                &["networkEndpointGroups"],
            )?;
            if groups.contains(&url) {
                return Err(ApiError::invalid_value(
                    &format!("{prefix}.group"),
                    &group,
                    "Duplicate backend group.",
                ));
            }
            groups.push(url.clone());
            o.insert("group".into(), url.into());
            validate::enum_field(o, &prefix, "balancingMode", BALANCING_MODES, Some("RATE"))?;
            let mode = validate::opt_str(o, &prefix, "balancingMode")?
                .unwrap_or_default()
                .to_string();
            if mode == "UTILIZATION" {
                return Err(ApiError::invalid_value(&format!("{prefix}.balancingMode"), &mode, "Balancing mode must be RATE or CONNECTION for network endpoint group backends."));
            }
            validate::float_field(o, &prefix, "capacityScaler", 0.0, 1.0, Some(1.0))?;
            validate::float_field(o, &prefix, "maxRatePerEndpoint", 0.0, f64::MAX, None)?;
            validate::int_field(
                o,
                &prefix,
                "maxConnectionsPerEndpoint",
                0,
                i64::from(i32::MAX),
                None,
            )?;
            validate::bool_field(o, &prefix, "failover", None)?;
        }
    }
    validate::opt_str(r, "resource", "description")?;
    Ok(())
}

/// `iap.oauth2ClientSecret` is input only: Compute Engine never returns it, and answers with
/// `iap.oauth2ClientSecretSha256`, the SHA-256 of the secret in lowercase hex, instead (Compute
/// API v1 reference, `BackendServiceIAP`: "For security reasons, this value cannot be
/// retrieved via the API. Instead, the SHA-256 hash of the value is returned in the
/// oauth2ClientSecretSha256 field. @InputOnly"; `oauth2ClientSecretSha256` is "[Output Only]";
/// <https://cloud.google.com/compute/docs/reference/rest/v1/backendServices>). GKE compares
/// that hash to decide whether IAP credentials changed (ingress-gce
/// `pkg/backends/features/iap.go`).
///
/// The secret is replaced by its hash before the resource is stored (the data plane never
/// needs it), so no representation the emulator serves (`get`, `list`, `aggregatedList`, the
/// admin state) holds it. A client-sent hash is ignored (output only). A write without a
/// secret (a `patch` of other fields, or an update sending back what `get` returned) keeps the
/// hash the resource had. Errors: 400 naming `resource.iap.oauth2ClientSecret` when it is not
/// a string.
fn keep_iap_secret_hash(cx: &Prepare<'_>, iap: &mut Obj) -> Result<(), ApiError> {
    use sha2::Digest as _;
    const SHA: &str = "oauth2ClientSecretSha256";
    let hash = match validate::opt_str(iap, "resource.iap", "oauth2ClientSecret")? {
        Some(secret) => Some(Value::from(hex::encode(sha2::Sha256::digest(secret)))),
        None => cx
            .old
            .and_then(|o| o.pointer("/iap/oauth2ClientSecretSha256"))
            .cloned(),
    };
    iap.remove("oauth2ClientSecret");
    iap.remove(SHA);
    if let Some(hash) = hash {
        iap.insert(SHA.into(), hash);
    }
    Ok(())
}

/// `cdnPolicy.signedUrlKeyNames` is output only: an update that does not name the keys keeps
/// the ones `addSignedUrlKey` added (the verbs themselves send the new list).
fn keep_signed_url_key_names(cx: &Prepare<'_>, r: &mut Obj) {
    let Some(old) = cx
        .old
        .and_then(|o| o.pointer("/cdnPolicy/signedUrlKeyNames"))
        .cloned()
    else {
        return;
    };
    let policy = r.entry("cdnPolicy").or_insert_with(|| json!({}));
    if let Some(p) = policy.as_object_mut() {
        p.entry("signedUrlKeyNames").or_insert(old);
    }
}

/// `backendServices.getHealth`: body `{"group": URL}` naming one of the service's backends.
/// Returns `{"kind":"compute#backendServiceGroupHealth","healthStatus":[{ipAddress, port,
/// healthState, instance?}]}`; states come from `health` (absent entries are `UNKNOWN`); a
/// service without a health check reports no `healthStatus`, like the real API.
/// Errors: 404 (service), 400 `invalid` naming `group` when it is not a backend.
pub fn get_health(
    state: &State,
    project: &str,
    key: &str,
    body: &Obj,
    health: &HealthTable,
) -> Result<Value, ApiError> {
    let bs = state
        .resources
        .get(key)
        .ok_or_else(|| ApiError::not_found(key))?;
    let group = validate::req_str(body, "resourceGroupReference", "group")?;
    let cx = Prepare {
        state,
        project,
        zone: None,
        key,
        old: None,
        address_range: (std::net::Ipv4Addr::LOCALHOST, 32),
    };
    let neg = cx.parse_reference(
        "resourceGroupReference.group",
        group,
        &["networkEndpointGroups"],
    )?;
    let is_backend = bs["backends"].as_array().into_iter().flatten().any(|b| {
        b["group"]
            .as_str()
            .and_then(crate::snapshot::key_from_url)
            .as_deref()
            == Some(&neg)
    });
    if !is_backend {
        return Err(ApiError::invalid_value(
            "resourceGroupReference.group",
            group,
            &format!("The group is not a backend of '{key}'."),
        ));
    }
    let mut out = json!({"kind": "compute#backendServiceGroupHealth"});
    let has_hc = bs["healthChecks"].as_array().is_some_and(|a| !a.is_empty());
    if !has_hc {
        return Ok(out);
    }
    let zone_url = state
        .resources
        .get(&neg)
        .and_then(|n| n["zone"].as_str().map(str::to_string))
        .unwrap_or_default();
    let statuses: Vec<Value> = state
        .neg_endpoints
        .get(&neg)
        .into_iter()
        .flatten()
        .map(|ep| {
            let st = health
                .get(&HealthKey {
                    backend_service: key.to_string(),
                    neg: neg.clone(),
                    ip_address: ep.ip_address.clone(),
                    port: ep.port,
                })
                .unwrap_or(HealthState::Unknown);
            let mut s =
                json!({"ipAddress": ep.ip_address, "port": ep.port, "healthState": st.as_str()});
            if let Some(i) = &ep.instance {
                s["instance"] = json!(format!("{zone_url}/instances/{i}"));
            }
            s
        })
        .collect();
    if !statuses.is_empty() {
        out["healthStatus"] = json!(statuses);
    }
    Ok(out)
}

/// Where the data plane finds a signed URL key of backend service `key` (base64url), in
/// `State::private_keys` / `Snapshot::private_keys`; never served by the API.
pub fn signed_url_key_slot(key: &str, name: &str) -> String {
    format!("{key}/signedUrlKeys/{name}")
}

/// A change of signed URL keys: the key names the resource lists afterwards
/// (`cdnPolicy.signedUrlKeyNames`), and the key to store (`Some((name, value))`) or remove.
#[derive(Debug, PartialEq, Eq)]
pub struct SignedUrlKeyChange {
    /// `cdnPolicy.signedUrlKeyNames` after the change.
    pub names: Vec<String>,
    /// The key name.
    pub name: String,
    /// The base64url value to store; `None` removes the key.
    pub value: Option<String>,
}

/// Most signed URL keys a backend service holds (Cloud CDN docs, "Use signed URLs").
pub const MAX_SIGNED_URL_KEYS: usize = 3;

/// `backendServices.addSignedUrlKey` (body `{keyName, keyValue}`: an RFC 1035 name and a
/// base64url-encoded 128-bit key) and `deleteSignedUrlKey` (query `keyName`). Errors: 400
/// naming the field for a bad name or value, a fourth key, or an unknown key to delete; 409
/// `alreadyExists` for a name already in use.
pub fn signed_url_key_change(
    bs: &Value,
    verb: &str,
    body: &Obj,
    query: &[(String, String)],
) -> Result<SignedUrlKeyChange, ApiError> {
    use base64::Engine as _;
    let mut names: Vec<String> = bs["cdnPolicy"]["signedUrlKeyNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if verb == "deleteSignedUrlKey" {
        let name = query
            .iter()
            .find(|(k, _)| k == "keyName")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| ApiError::required("keyName"))?;
        let before = names.len();
        names.retain(|n| *n != name);
        if names.len() == before {
            return Err(ApiError::invalid_value(
                "keyName",
                &name,
                "The backend service has no signed URL key with this name.",
            ));
        }
        return Ok(SignedUrlKeyChange {
            names,
            name,
            value: None,
        });
    }
    let name = validate::req_str(body, "signedUrlKey", "keyName")?.to_string();
    validate::check_name("signedUrlKey.keyName", &name)?;
    let value = validate::req_str(body, "signedUrlKey", "keyValue")?.to_string();
    let decoded = base64::engine::general_purpose::URL_SAFE
        .decode(value.trim())
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(value.trim()));
    if decoded.map(|d| d.len()) != Ok(16) {
        return Err(ApiError::invalid_value(
            "signedUrlKey.keyValue",
            "(not shown)",
            "The key value must be a 128-bit key encoded in base64url (RFC 4648 section 5).",
        ));
    }
    if names.contains(&name) {
        return Err(ApiError::already_exists(&format!("signedUrlKey {name}")));
    }
    if names.len() >= MAX_SIGNED_URL_KEYS {
        return Err(ApiError::invalid_value(
            "signedUrlKey.keyName",
            &name,
            "A backend service holds at most 3 signed URL keys; delete one first.",
        ));
    }
    names.push(name.clone());
    Ok(SignedUrlKeyChange {
        names,
        name,
        value: Some(value),
    })
}

/// The backend services a URL map routes to (every reference to `backendServices` in it):
/// the caches `urlMaps.invalidateCache` applies to.
pub fn services_of_url_map(um: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.contains("/backendServices/") => {
                if let Some(k) = crate::snapshot::key_from_url(s) {
                    if !out.contains(&k) {
                        out.push(k);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(um, &mut out);
    out
}
