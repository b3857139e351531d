//! Which Ingresses to re-queue when a related object changes (pure functions over store
//! contents). An Ingress uses a Service when any rule or `spec.defaultBackend` names it; every
//! Ingress uses the system default backend Service unless it has its own default.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;

use crate::translate::pod::PodRecord;

/// The label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Names of the Services `ingress` routes to (same namespace as the Ingress).
pub fn services_of(ingress: &Ingress) -> Vec<String> {
    let Some(spec) = &ingress.spec else {
        return Vec::new();
    };
    let mut out: Vec<String> = spec
        .default_backend
        .iter()
        .chain(
            spec.rules
                .iter()
                .flatten()
                .filter_map(|r| r.http.as_ref())
                .flat_map(|h| h.paths.iter().map(|p| &p.backend)),
        )
        .filter_map(|b| b.service.as_ref().map(|s| s.name.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `ingress` falls back to the system default backend (no `spec.defaultBackend`).
pub fn uses_system_default(ingress: &Ingress) -> bool {
    ingress
        .spec
        .as_ref()
        .and_then(|s| s.default_backend.as_ref())
        .is_none()
}

/// Ingresses affected by a change of Service `namespace/name`; `default_backend` is the
/// system default backend (namespace, name).
pub fn ingresses_for_service<'a>(
    ingresses: impl IntoIterator<Item = &'a Ingress>,
    namespace: &str,
    name: &str,
    default_backend: Option<(&str, &str)>,
) -> Vec<&'a Ingress> {
    let is_default = default_backend == Some((namespace, name));
    ingresses
        .into_iter()
        .filter(|i| {
            (is_default && uses_system_default(i))
                || (i.namespace().as_deref() == Some(namespace)
                    && services_of(i).iter().any(|s| s == name))
        })
        .collect()
}

/// Names of the Services in the Pod's namespace whose selector matches the Pod's labels.
pub fn services_selecting<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    pod: &PodRecord,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    services
        .into_iter()
        .filter(|s| s.namespace() == pod.namespace())
        .filter(|s| {
            let selector = s.spec.as_ref().and_then(|spec| spec.selector.as_ref());
            match selector {
                Some(sel) if !sel.is_empty() => sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
                _ => false,
            }
        })
        .map(|s| s.name_any())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(ns: &str, name: &str, spec: serde_json::Value) -> Ingress {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn service_changes_map_to_the_ingresses_that_use_them() {
        let a = ingress(
            "default",
            "a",
            serde_json::json!({"rules": [{"http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}
            ]}}]}),
        );
        let b = ingress(
            "other",
            "b",
            serde_json::json!({"defaultBackend":
            {"service": {"name": "web", "port": {"number": 80}}}}),
        );
        let all = [a.clone(), b.clone()];
        let hit = ingresses_for_service(
            &all,
            "default",
            "web",
            Some(("kube-system", "default-http-backend")),
        );
        assert_eq!(hit.len(), 1);
        assert_eq!(hit[0].name_any(), "a");
        let hit = ingresses_for_service(
            &all,
            "kube-system",
            "default-http-backend",
            Some(("kube-system", "default-http-backend")),
        );
        assert_eq!(
            hit.len(),
            1,
            "only the Ingress without its own default backend"
        );
        assert_eq!(hit[0].name_any(), "a");
    }

    #[test]
    fn pods_map_to_selecting_services() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "web"},
            "spec": {"selector": {"app": "web"}}
        }))
        .unwrap();
        let pod: PodRecord = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "web", "x": "y"}}
        }))
        .unwrap();
        assert_eq!(services_selecting([&svc], &pod), vec!["web".to_string()]);
        let other: PodRecord = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "q", "labels": {"app": "db"}}
        }))
        .unwrap();
        assert!(services_selecting([&svc], &other).is_empty());
    }
}
