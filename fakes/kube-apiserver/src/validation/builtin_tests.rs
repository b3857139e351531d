//! The built-in kinds' rules, each with the real server's field path and message.

use serde_json::{json, Value};

use super::{config, core, networking};

fn lines(errs: Vec<crate::crd_validation::FieldError>) -> Vec<String> {
    errs.iter().map(|e| e.to_line()).collect()
}

fn ingress(spec: Value) -> Value {
    json!({"spec": spec})
}

#[test]
fn ingress_rules() {
    assert_eq!(
        lines(networking::ingress_spec(&ingress(json!({})))),
        ["spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]
    );
    let spec = json!({"rules": [{"host": "1.2.3.4", "http": {"paths": [
        {"path": "/a", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
        {"path": "a//b", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80, "name": "http"}}}},
        {"path": "/", "pathType": "Regex", "backend": {"service": {"name": "Web", "port": {"number": 70000}}}},
    ]}}]});
    assert_eq!(
        lines(networking::ingress_spec(&ingress(spec))),
        [
            "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[1].path: Invalid value: \"a//b\": must be an absolute path",
            "spec.rules[0].http.paths[1].path: Invalid value: \"a//b\": must not contain '//'",
            "spec.rules[0].http.paths[1].backend: Invalid value: \"\": cannot set both port name & port number",
            "spec.rules[0].http.paths[2].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            "spec.rules[0].http.paths[2].backend.service.name: Invalid value: \"Web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.rules[0].http.paths[2].backend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ]
    );
    let ok = json!({"rules": [{"host": "*.example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}],
        "tls": [{"hosts": ["*.example.com"], "secretName": "tls"}]});
    assert!(networking::ingress_spec(&ingress(ok)).is_empty());
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "300.1.1.1"}]}}});
    assert_eq!(
        lines(networking::load_balancer_status(&status)),
        ["status.loadBalancer.ingress[0].ip: Invalid value: \"300.1.1.1\": must be a valid IP address"]
    );
}

#[test]
fn ingress_class_service_secret_lease() {
    assert_eq!(
        lines(networking::ingress_class_spec(&json!({"spec": {"controller": "gclb"}}))),
        ["spec.controller: Invalid value: \"gclb\": must be a domain-prefixed path (such as \"acme.io/foo\")"]
    );
    let svc = json!({"spec": {"type": "ClusterIP", "ports": [
        {"port": 80, "protocol": "TCP"}, {"name": "b", "port": 0, "protocol": "HTTP", "nodePort": 30001}]}});
    assert_eq!(
        lines(core::service_spec(&svc)),
        [
            "spec.ports[0].name: Required value",
            "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.ports[1].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        ]
    );
    let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
    assert_eq!(
        lines(config::secret(&tls)),
        ["data[tls.key]: Required value"]
    );
    let lease = json!({"spec": {"leaseDurationSeconds": 0}});
    assert_eq!(
        lines(core::lease(&lease)),
        ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    );
}

#[test]
fn endpoint_slice_pod_status_event() {
    let slice = json!({"addressType": "IPv4", "endpoints": [{"addresses": []}, {"addresses": ["fe80::1"]}]});
    assert_eq!(
        lines(core::endpoint_slice(&slice)),
        [
            "endpoints[0].addresses: Required value: must contain at least 1 address",
            "endpoints[1].addresses[0]: Invalid value: \"fe80::1\": must be a valid IPv4 address",
            "endpoints[1].addresses[0]: Invalid value: \"fe80::1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ]
    );
    let pod = json!({"status": {"podIPs": [{"ip": "10.0.0.300"}]}});
    assert_eq!(
        lines(core::pod_status(&pod)),
        ["status.podIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    );
    let event = json!({"involvedObject": {"namespace": "other"}});
    assert_eq!(
        lines(core::event(&event, "default", false)),
        ["involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"]
    );
}
