//! The Secrets translating one Ingress may read, so the controller can fetch those its
//! `kubernetes.io/tls`-only Secret store does not hold (an `Opaque` `spec.tls` Secret, the IAP
//! OAuth client Secret) before translating. Pure: reads the snapshot only.
//!
//! GKE's controller (kubernetes/ingress-gce) does not cache Secrets either: it reads the
//! `spec.tls` Secrets and the BackendConfig `iap.oauthclientCredentials.secretName` Secret with
//! a GET by namespace and name when it translates the Ingress.

use std::collections::BTreeSet;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use super::annotations;
use super::{ClusterSnapshot, ObjectKey, TranslateConfig};

/// Every Secret `ingress`'s translation may read, as namespace/name keys:
/// - `spec.tls[*].secretName` (in the Ingress's namespace);
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
    for tls in spec.tls.iter().flatten() {
        if let Some(name) = tls.secret_name.as_deref().filter(|n| !n.is_empty()) {
            out.insert(ObjectKey::new(key.namespace.clone(), name));
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
}
