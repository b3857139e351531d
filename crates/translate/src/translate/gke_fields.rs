//! Field values GKE's Ingress controller writes, for takeover mode ([`super::Mode::Takeover`]):
//! with them an adopted resource matches what the operator wants, so switching a cluster from
//! GKE's controller to this operator updates nothing (and recreates nothing: a NEG's fields and a
//! forwarding rule's description cannot be changed in place). Sources are ingress-gce v1.23:
//! `pkg/utils/description.go` and `pkg/backends/features/features.go` (backend service),
//! `pkg/translator/healthchecks.go` (health check), `pkg/neg/types` `NegDescription` (NEG).
//!
//! GKE writes these with Go's `encoding/json`, which escapes `&`, `<` and `>` as `\u0026`,
//! `\u003c` and `\u003e`; the strings here are byte for byte what it writes.

use super::annotations::AppProtocol;
use super::service_ports::{PortRef, ResolvedBackend};

/// Health check description when settings came from the Pods' readiness probe.
pub const HEALTH_CHECK_FROM_PROBE: &str =
    "Kubernetes L7 health check generated with readiness probe settings.";
/// Health check description of a NEG backend without a readiness probe.
pub const HEALTH_CHECK_DEFAULT_NEG: &str =
    "Default kubernetes L7 Loadbalancing health check for NEG.";

/// A JSON string literal as Go's `encoding/json` writes it (HTML characters escaped).
fn go_json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned())
        .to_string()
        .replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

/// The health check's description: GKE's readiness-probe text when a probe gave the settings,
/// else its default NEG text. A BackendConfig `healthCheck` keeps the description (GKE rewrites
/// it only with `--enable-update-custom-health-check-description`, off by default).
pub fn health_check_description(from_probe: bool) -> &'static str {
    if from_probe {
        HEALTH_CHECK_FROM_PROBE
    } else {
        HEALTH_CHECK_DEFAULT_NEG
    }
}

/// The backend service's description: `{"kubernetes.io/service-name":"ns/svc",
/// "kubernetes.io/service-port":"&ServiceBackendPort{Name:<name>,Number:<number>,}",
/// "x-features":[...]}`, the port as the Ingress named it (Go's `String()` of a
/// `ServiceBackendPort`: a port named `http` is `Name:http,Number:0`), features sorted:
/// `HTTP2` for an HTTP/2 port, `NEG` always (every backend here is a NEG), `SecurityPolicy`
/// when a BackendConfig sets one.
pub fn backend_service_description(
    resolved: &ResolvedBackend<'_>,
    protocol: AppProtocol,
    security_policy: bool,
) -> String {
    let (name, number) = match &resolved.by {
        PortRef::Name(n) => (n.as_str(), 0),
        PortRef::Number(n) => ("", *n),
    };
    let port = format!("&ServiceBackendPort{{Name:{name},Number:{number},}}");
    let mut features = vec!["NEG"];
    if protocol == AppProtocol::Http2 {
        features.push("HTTP2");
    }
    if security_policy {
        features.push("SecurityPolicy");
    }
    features.sort_unstable();
    let features: Vec<String> = features.into_iter().map(go_json_string).collect();
    format!(
        "{{\"kubernetes.io/service-name\":{},\"kubernetes.io/service-port\":{},\"x-features\":[{}]}}",
        go_json_string(&format!(
            "{}/{}",
            resolved.key.namespace, resolved.key.service
        )),
        go_json_string(&port),
        features.join(",")
    )
}

/// The NEG's description: `{"cluster-uid":"<kube-system UID>","namespace":...,
/// "service-name":...,"port":"<port>"}` in GKE's field order.
pub fn neg_description(kube_system_uid: &str, namespace: &str, service: &str, port: i32) -> String {
    format!(
        "{{\"cluster-uid\":{},\"namespace\":{},\"service-name\":{},\"port\":{}}}",
        go_json_string(kube_system_uid),
        go_json_string(namespace),
        go_json_string(service),
        go_json_string(&port.to_string())
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Service, ServicePort};

    use super::*;
    use crate::translate::desired::ServicePortKey;

    /// The strings GKE's controller (glbc v1.23) wrote for the demo Ingress on the local stack.
    #[test]
    fn descriptions_are_byte_for_byte_gkes() {
        let service = Service::default();
        let port = ServicePort::default();
        let resolved = |svc: &str, ns: &str, number: i32, by: PortRef| ResolvedBackend {
            key: ServicePortKey {
                namespace: ns.into(),
                service: svc.into(),
                port: number,
            },
            service: &service,
            port: &port,
            by,
        };
        assert_eq!(
            backend_service_description(
                &resolved("my-products", "default", 60000, PortRef::Number(60000)),
                AppProtocol::Http,
                false
            ),
            r#"{"kubernetes.io/service-name":"default/my-products","kubernetes.io/service-port":"\u0026ServiceBackendPort{Name:,Number:60000,}","x-features":["NEG"]}"#
        );
        assert_eq!(
            backend_service_description(
                &resolved(
                    "default-http-backend",
                    "kube-system",
                    80,
                    PortRef::Name("http".into())
                ),
                AppProtocol::Http2,
                true
            ),
            r#"{"kubernetes.io/service-name":"kube-system/default-http-backend","kubernetes.io/service-port":"\u0026ServiceBackendPort{Name:http,Number:0,}","x-features":["HTTP2","NEG","SecurityPolicy"]}"#
        );
        assert_eq!(
            neg_description(
                "6732e2a7-a568-48e5-97a6-b0f24a37c713",
                "default",
                "my-discounted-products",
                80
            ),
            r#"{"cluster-uid":"6732e2a7-a568-48e5-97a6-b0f24a37c713","namespace":"default","service-name":"my-discounted-products","port":"80"}"#
        );
        assert_eq!(health_check_description(true), HEALTH_CHECK_FROM_PROBE);
        assert_eq!(health_check_description(false), HEALTH_CHECK_DEFAULT_NEG);
    }
}
