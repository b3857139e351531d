//! The Secrets translating one Ingress may read, so the controller can fetch those its
//! `kubernetes.io/tls`-only Secret store does not hold (an `Opaque` `spec.tls` Secret, the IAP
//! OAuth client Secret) before translating; and where each `spec.tls` Secret lives, with the
//! TLS certificate delegation check for a Secret of another namespace. Pure: reads the
//! snapshot only.
//!
//! GKE's controller (kubernetes/ingress-gce) does not cache Secrets either: it reads the
//! `spec.tls` Secrets and the BackendConfig `iap.oauthclientCredentials.secretName` Secret with
//! a GET by namespace and name when it translates the Ingress.
//!
//! **Secrets of another namespace** (Contour's TLS certificate delegation, reference 004
//! "TLS"). The Kubernetes Ingress API says `spec.tls[].secretName` names a Secret in the
//! Ingress's namespace, and `networking.k8s.io/v1` validation refuses a `/` in it. Contour's
//! extensions are read as Contour reads them: the Ingress annotation
//! [`TLS_CERT_NAMESPACE`] (`projectcontour.io/tls-cert-namespace: <namespace>`) moves every
//! `secretName` of the Ingress to that namespace, and a `namespace/name` value (possible only
//! on objects that skipped v1 validation, e.g. converted from `v1beta1`) names one directly.
//! Such a Secret is used only when a TLSCertificateDelegation in its namespace delegates it to
//! the Ingress's namespace or to `*` ([`delegated`]); default deny otherwise.

use std::collections::BTreeSet;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use kube::ResourceExt;

use super::annotations;
use super::snapshot::in_namespace;
use super::{ClusterSnapshot, ObjectKey, TranslateConfig, TranslateError};

/// Ingress annotation (Contour's name, reference 004): the namespace of the Ingress's
/// `spec.tls` Secrets when it is not the Ingress's own.
pub const TLS_CERT_NAMESPACE: &str = "projectcontour.io/tls-cert-namespace";

/// Where one `spec.tls[i].secretName` points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSecretRef {
    /// `spec.tls[i].secretName`, the field for messages.
    pub field: String,
    /// The Secret's namespace and name.
    pub key: ObjectKey,
    /// The Secret is in another namespace than the Ingress.
    pub cross_namespace: bool,
    /// Whether the Ingress may use it: always in its own namespace; from another namespace
    /// only when a TLSCertificateDelegation there allows it ([`delegated`]).
    pub permitted: bool,
}

/// Whether a TLSCertificateDelegation in `secret`'s namespace names `secret` and lists
/// `namespace` (or `*`) among its target namespaces (Contour's `DelegationPermitted`). A
/// Secret is always permitted to its own namespace.
pub fn delegated(snapshot: &ClusterSnapshot, secret: &ObjectKey, namespace: &str) -> bool {
    secret.namespace == namespace
        || in_namespace(&snapshot.tls_certificate_delegations, &secret.namespace)
            .any(|(_, d)| d.spec.delegates(&secret.name, namespace))
}

/// The `spec.tls` Secrets of `ingress` in order, entries without a `secretName` skipped,
/// each with its namespace resolved ([`TLS_CERT_NAMESPACE`], `namespace/name`) and the
/// delegation check done.
///
/// # Errors
/// [`TranslateError::InvalidAnnotation`] when [`TLS_CERT_NAMESPACE`] is not a namespace name
/// (a DNS-1123 label).
pub fn tls_secrets(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
) -> Result<Vec<TlsSecretRef>, TranslateError> {
    let own = ingress.namespace().unwrap_or_default();
    let cert_namespace = match annotations::get(ingress, TLS_CERT_NAMESPACE).map(str::trim) {
        None | Some("") => None,
        Some(ns) if is_dns_label(ns) => Some(ns.to_owned()),
        Some(ns) => {
            return Err(TranslateError::InvalidAnnotation {
                kind: "Ingress",
                object: ObjectKey::of(ingress).to_string(),
                annotation: TLS_CERT_NAMESPACE.to_owned(),
                reason: format!("{ns:?} is not a namespace name (lower-case letters, digits and `-`, at most 63 characters); write the namespace that holds the TLS Secrets"),
            })
        }
    };
    let tls = ingress.spec.as_ref().and_then(|s| s.tls.as_deref());
    let mut out = Vec::new();
    for (i, entry) in tls.unwrap_or_default().iter().enumerate() {
        let Some(name) = entry.secret_name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let key = match name.split_once('/') {
            Some((ns, name)) => ObjectKey::new(ns, name),
            None => ObjectKey::new(cert_namespace.clone().unwrap_or_else(|| own.clone()), name),
        };
        out.push(TlsSecretRef {
            field: format!("spec.tls[{i}].secretName"),
            cross_namespace: key.namespace != own,
            permitted: delegated(snapshot, &key, &own),
            key,
        });
    }
    Ok(out)
}

/// The namespaces other than its own whose Secrets `ingress` names in `spec.tls`, whether or
/// not delegated (the controller re-reconciles the Ingress when a Secret or a
/// TLSCertificateDelegation there changes). Malformed annotations add nothing.
pub fn foreign_secret_namespaces(ingress: &Ingress) -> BTreeSet<String> {
    let snapshot = ClusterSnapshot::default();
    tls_secrets(&snapshot, ingress)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.cross_namespace)
        .map(|r| r.key.namespace)
        .collect()
}

/// A DNS-1123 label: what a namespace name must be.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Every Secret `ingress`'s translation may read, as namespace/name keys:
/// - `spec.tls[*].secretName` ([`tls_secrets`]), only those the Ingress may use: a Secret of
///   another namespace that is not delegated is never read;
/// - `spec.iap.oauthclientCredentials.secretName` of each BackendConfig (in its namespace) with
///   `iap.enabled: true` that a Service port the Ingress uses binds (annotation
///   `cloud.google.com/backend-config` or its beta spelling; every port of each referenced
///   Service is looked at, so a port the Ingress does not use may add a key, which only costs a
///   read). The system default backend's Service counts when `spec.defaultBackend` is unset.
///
/// Services, BackendConfigs or annotations that are missing or malformed add nothing here:
/// translation reports them.
pub fn referenced_secrets(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> BTreeSet<ObjectKey> {
    let key = ObjectKey::of(ingress);
    let mut out = BTreeSet::new();
    let Some(spec) = ingress.spec.as_ref() else {
        return out;
    };
    for tls in tls_secrets(snapshot, ingress).unwrap_or_default() {
        if tls.permitted {
            out.insert(tls.key);
        }
    }

    let service_name = |b: &IngressBackend| b.service.as_ref().map(|s| s.name.clone());
    let mut services: BTreeSet<ObjectKey> = spec
        .rules
        .iter()
        .flatten()
        .filter_map(|r| r.http.as_ref())
        .flat_map(|h| h.paths.iter())
        .filter_map(|p| service_name(&p.backend))
        .map(|name| ObjectKey::new(key.namespace.clone(), name))
        .collect();
    match spec.default_backend.as_ref() {
        Some(b) => {
            services.extend(service_name(b).map(|name| ObjectKey::new(key.namespace.clone(), name)))
        }
        None => services.extend(
            config
                .default_backend
                .as_ref()
                .map(|(ns, svc, _)| ObjectKey::new(ns.clone(), svc.clone())),
        ),
    }

    for service_key in services {
        let Some(service) = snapshot.services.get(&service_key) else {
            continue;
        };
        let ports = service.spec.as_ref().and_then(|s| s.ports.as_ref());
        for port in ports.into_iter().flatten() {
            let Ok(Some(bc_name)) = annotations::backend_config_name(service, port) else {
                continue;
            };
            let bc_key = ObjectKey::new(service_key.namespace.clone(), bc_name);
            let Some(bc) = snapshot.backend_configs.get(&bc_key) else {
                continue;
            };
            if let Some(creds) = bc
                .spec
                .iap
                .as_ref()
                .filter(|iap| iap.enabled)
                .and_then(|iap| iap.oauthclient_credentials.as_ref())
            {
                out.insert(ObjectKey::new(
                    bc_key.namespace.clone(),
                    creds.secret_name.clone(),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::test_support::{config, snapshot_from_yaml};

    const YAML: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: web
  annotations:
    cloud.google.com/backend-config: '{"ports": {"http": "with-iap"}, "default": "no-iap"}'
spec:
  ports:
  - {name: http, port: 80}
  - {name: admin, port: 81}
---
apiVersion: v1
kind: Service
metadata: {name: other, namespace: web}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {name: with-iap, namespace: web}
spec:
  iap: {enabled: true, oauthclientCredentials: {secretName: oauth}}
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {name: no-iap, namespace: web}
spec:
  iap: {enabled: false, oauthclientCredentials: {secretName: unused-oauth}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: web}
spec:
  tls:
  - {hosts: [a.example], secretName: opaque-tls}
  - {hosts: [b.example]}
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: app, port: {name: http}}}
      - path: /missing
        pathType: Prefix
        backend: {service: {name: gone, port: {number: 80}}}
  defaultBackend: {service: {name: other, port: {number: 80}}}
"#;

    /// The `spec.tls` Secret and the IAP Secret of the enabled BackendConfig, nothing from the
    /// disabled one, the Service without a BackendConfig or the missing Service. Fails when
    /// either kind of reference is left out (the controller would then never fetch it).
    #[test]
    fn tls_and_enabled_iap_secrets_are_referenced() {
        let snapshot = snapshot_from_yaml(YAML);
        let ingress = &snapshot.ingresses[&ObjectKey::new("web", "shop")];
        let keys: Vec<String> = referenced_secrets(&snapshot, ingress, &config())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(keys, ["web/oauth", "web/opaque-tls"]);
    }

    /// Secrets `a` and `c` in `certs` (fake PEM: only the markers are read), a delegation in
    /// `certs` of `a` to `web` and of `b` to `*`, and a delegation in `web` of `c` to `*`,
    /// which counts for nothing for `certs/c` (a delegation lives in the Secret's namespace).
    const DELEGATIONS: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: a, namespace: certs}
type: kubernetes.io/tls
stringData: {tls.crt: "-----BEGIN CERTIFICATE-----a", tls.key: "-----BEGIN PRIVATE KEY-----a"}
---
apiVersion: v1
kind: Secret
metadata: {name: c, namespace: certs}
type: kubernetes.io/tls
stringData: {tls.crt: "-----BEGIN CERTIFICATE-----c", tls.key: "-----BEGIN PRIVATE KEY-----c"}
---
apiVersion: gclb-operator.dev/v1alpha1
kind: TLSCertificateDelegation
metadata: {name: to-web, namespace: certs}
spec:
  delegations:
  - {secretName: a, targetNamespaces: [web]}
  - {secretName: b, targetNamespaces: [other, "*"]}
---
apiVersion: gclb-operator.dev/v1alpha1
kind: TLSCertificateDelegation
metadata: {name: self-service, namespace: web}
spec:
  delegations: [{secretName: c, targetNamespaces: ["*"]}]
"#;

    fn ingress(ns: &str, annotations: &str, secrets: &[&str]) -> Ingress {
        let tls: Vec<String> = secrets
            .iter()
            .map(|s| format!("{{hosts: [{s}.example], secretName: '{s}'}}"))
            .collect();
        serde_yaml::from_str(&format!(
            "metadata: {{name: shop, namespace: {ns}, annotations: {{{annotations}}}}}\nspec: {{tls: [{}]}}",
            tls.join(", ")
        ))
        .unwrap()
    }

    fn resolved(snapshot: &ClusterSnapshot, ingress: &Ingress) -> Vec<(String, bool)> {
        tls_secrets(snapshot, ingress)
            .unwrap()
            .into_iter()
            .map(|r| (r.key.to_string(), r.permitted))
            .collect()
    }

    /// Contour's DelegationPermitted: the named namespace or `*`, only by a delegation in the
    /// Secret's own namespace, only for the Secret it names; the own namespace always. Fails
    /// when the check ignores the target namespace, the `*`, the Secret name or where the
    /// delegation lives.
    #[test]
    fn delegation_permits_only_the_named_secret_to_the_named_namespaces() {
        let snapshot = snapshot_from_yaml(DELEGATIONS);
        let cert_ns = "projectcontour.io/tls-cert-namespace: certs";
        let web = ingress("web", cert_ns, &["a", "b", "c"]);
        assert_eq!(
            resolved(&snapshot, &web),
            [
                ("certs/a".to_owned(), true),
                ("certs/b".to_owned(), true),
                ("certs/c".to_owned(), false)
            ]
        );
        let shop = ingress("shop", cert_ns, &["a", "b"]);
        assert_eq!(
            resolved(&snapshot, &shop),
            [("certs/a".to_owned(), false), ("certs/b".to_owned(), true)]
        );
        // Without the annotation the Secrets are the Ingress's own; `ns/name` names one.
        let own = ingress("shop", "", &["a", "certs/a", "certs/b"]);
        assert_eq!(
            resolved(&snapshot, &own),
            [
                ("shop/a".to_owned(), true),
                ("certs/a".to_owned(), false),
                ("certs/b".to_owned(), true)
            ]
        );
        assert_eq!(
            foreign_secret_namespaces(&own)
                .into_iter()
                .collect::<Vec<_>>(),
            ["certs"]
        );
        // Only permitted Secrets are ever read (the controller GETs what this lists).
        let keys: Vec<String> = referenced_secrets(&snapshot, &web, &config())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(keys, ["certs/a", "certs/b"]);
    }

    /// A tls-cert-namespace that is no namespace name is an error naming the annotation.
    #[test]
    fn a_malformed_cert_namespace_is_refused() {
        let snapshot = snapshot_from_yaml(DELEGATIONS);
        let bad = ingress(
            "web",
            "projectcontour.io/tls-cert-namespace: Certs/x",
            &["a"],
        );
        let err = tls_secrets(&snapshot, &bad).unwrap_err().to_string();
        assert!(err.contains(TLS_CERT_NAMESPACE), "{err}");
        // A DNS-1123 label: lower-case letters, digits and `-` inside, at most 63 characters.
        let long = "a".repeat(64);
        for (ns, ok) in [
            ("team-2", true),
            ("2fa", true),
            (&long[1..], true),
            (long.as_str(), false),
            ("-certs", false),
            ("certs-", false),
            ("certs.io", false),
        ] {
            let web = ingress(
                "web",
                &format!("projectcontour.io/tls-cert-namespace: {ns}"),
                &["a"],
            );
            assert_eq!(tls_secrets(&snapshot, &web).is_ok(), ok, "{ns}");
        }
    }

    /// A refused Secret is a Warning naming the Ingress, the field, the Secret and the
    /// delegation to create, and no certificate; a delegated one becomes a certificate.
    /// Fails when the refusal is skipped (certs/c would be served) or its message lacks a part.
    #[test]
    fn certificates_use_delegated_secrets_and_warn_for_the_others() {
        use crate::translate::certificates::{certificates, DELEGATION_REFUSED};
        let snapshot = snapshot_from_yaml(DELEGATIONS);
        let web = ingress(
            "web",
            "projectcontour.io/tls-cert-namespace: certs",
            &["a", "c"],
        );
        let config = config();
        let namer = config.frontend_namer("web", "shop");
        let plan = certificates(&snapshot, &config, &web, &namer).unwrap();
        let served: Vec<&str> = plan
            .self_managed
            .iter()
            .filter_map(|c| c.certificate.as_deref())
            .collect();
        assert_eq!(served, ["-----BEGIN CERTIFICATE-----a"]);
        assert_eq!(plan.findings.len(), 1, "{:?}", plan.findings);
        let finding = &plan.findings[0];
        assert!(finding.warning);
        assert_eq!(finding.reason, DELEGATION_REFUSED);
        for part in [
            "Ingress web/shop",
            "spec.tls[1].secretName",
            "Secret certs/c",
            "kind: TLSCertificateDelegation",
            "secretName: c, targetNamespaces: [web]",
        ] {
            assert!(
                finding.message.contains(part),
                "{part}: {}",
                finding.message
            );
        }
    }
}
