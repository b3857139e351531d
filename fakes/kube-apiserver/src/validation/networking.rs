//! Ingress and IngressClass validation as k8s.io/kubernetes v1.28
//! `pkg/apis/networking/validation/validation.go` does it (`ValidateIngressSpec`,
//! `validateHTTPIngressPath`, `validateIngressBackend`, `validateIngressTLS`,
//! `ValidateIngressLoadBalancerStatus`, `validateIngressClassSpec`), with its field paths and
//! messages.

use serde_json::Value;

use super::errors::{arr, invalid, invalid_raw, not_supported, port_name, port_num, required, s};
use super::names::{dns1035_label, dns1123_subdomain};
use crate::crd_validation::FieldError;

const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];
const WILDCARD_MSG: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn host_errors(host: &str) -> Vec<String> {
    if host.contains('*') {
        let ok = host
            .strip_prefix("*.")
            .is_some_and(|rest| dns1123_subdomain(rest).is_empty());
        if ok {
            Vec::new()
        } else {
            vec![WILDCARD_MSG.to_string()]
        }
    } else {
        dns1123_subdomain(host)
    }
}

fn backend(b: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let svc = b.get("service").filter(|v| !v.is_null());
    let resource = b.get("resource").filter(|v| !v.is_null());
    match (svc, resource) {
        (Some(_), Some(_)) => errs.push(invalid(
            path,
            &Value::from(""),
            "cannot set both resource and service backends",
        )),
        (None, Some(_)) => {}
        (Some(svc), None) => {
            let name = s(svc, &["name"]);
            if name.is_empty() {
                errs.push(required(format!("{path}.service.name"), ""));
            } else {
                for m in dns1035_label(name) {
                    errs.push(invalid(
                        format!("{path}.service.name"),
                        &Value::from(name),
                        m,
                    ));
                }
            }
            let port_name_v = s(svc, &["port", "name"]);
            let number = &svc["port"]["number"];
            let has_number = number.as_i64().unwrap_or(0) != 0;
            if !port_name_v.is_empty() && has_number {
                errs.push(invalid(
                    path,
                    &Value::from(""),
                    "cannot set both port name & port number",
                ));
            } else if !port_name_v.is_empty() {
                for m in port_name(port_name_v) {
                    errs.push(invalid(
                        format!("{path}.service.port.name"),
                        &Value::from(port_name_v),
                        m,
                    ));
                }
            } else if has_number {
                errs.extend(port_num(format!("{path}.service.port.number"), number));
            } else {
                errs.push(required(path, "port name or number is required"));
            }
        }
        (None, None) => errs.push(invalid(
            path,
            &Value::from(""),
            "resource or service backend is required",
        )),
    }
}

fn http_path(p: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(path_type) = p["pathType"].as_str() else {
        errs.push(required(
            format!("{path}.pathType"),
            "pathType must be specified",
        ));
        return;
    };
    let value = s(p, &["path"]);
    let field = format!("{path}.path");
    match path_type {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(invalid(
                    &field,
                    &Value::from(value),
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(invalid(
                            &field,
                            &Value::from(value),
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(invalid(
                            &field,
                            &Value::from(value),
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(invalid(
                    &field,
                    &Value::from(value),
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(not_supported(
            format!("{path}.pathType"),
            &Value::from(other),
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    backend(&p["backend"], &format!("{path}.backend"), errs);
}

/// `ValidateIngressSpec` (on create and update).
pub fn ingress_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let rules = arr(&spec["rules"]);
    let default_backend = spec.get("defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default_backend.is_none() {
        errs.push(invalid_raw(
            "spec",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        backend(b, "spec.defaultBackend", &mut errs);
    }
    for (i, rule) in rules.iter().enumerate() {
        let host = s(rule, &["host"]);
        let field = format!("spec.rules[{i}].host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(invalid(
                    &field,
                    &Value::from(host),
                    "must be a DNS name, not an IP address",
                ));
            }
            for m in host_errors(host) {
                errs.push(invalid(&field, &Value::from(host), m));
            }
        }
        if let Some(http) = rule.get("http").filter(|v| !v.is_null()) {
            let paths = arr(&http["paths"]);
            if paths.is_empty() {
                errs.push(required(format!("spec.rules[{i}].http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                http_path(p, &format!("spec.rules[{i}].http.paths[{j}]"), &mut errs);
            }
        }
    }
    for (i, tls) in arr(&spec["tls"]).iter().enumerate() {
        for (j, host) in arr(&tls["hosts"]).iter().enumerate() {
            let h = host.as_str().unwrap_or_default();
            for m in host_errors(h) {
                errs.push(invalid(format!("spec.tls[{i}].hosts[{j}]"), host, m));
            }
        }
        let secret = s(tls, &["secretName"]);
        if !secret.is_empty() {
            for m in dns1123_subdomain(secret) {
                errs.push(invalid(
                    format!("spec.tls[{i}].secretName"),
                    &Value::from(secret),
                    m,
                ));
            }
        }
    }
    if let Some(class) = spec["ingressClassName"].as_str() {
        for m in dns1123_subdomain(class) {
            errs.push(invalid("spec.ingressClassName", &Value::from(class), m));
        }
    }
    errs
}

/// `ValidateIngressLoadBalancerStatus` (on `/status` writes) for Ingresses, and the same rules
/// for Services' `status.loadBalancer` (`ValidateLoadBalancerStatus`).
pub fn load_balancer_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ing) in arr(&obj["status"]["loadBalancer"]["ingress"])
        .iter()
        .enumerate()
    {
        let field = format!("status.loadBalancer.ingress[{i}]");
        let ip = s(ing, &["ip"]);
        if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
            errs.push(invalid(
                format!("{field}.ip"),
                &Value::from(ip),
                "must be a valid IP address",
            ));
        }
        let hostname = s(ing, &["hostname"]);
        if !hostname.is_empty() {
            for m in dns1123_subdomain(hostname) {
                errs.push(invalid(
                    format!("{field}.hostname"),
                    &Value::from(hostname),
                    m,
                ));
            }
            if hostname.parse::<std::net::IpAddr>().is_ok() {
                errs.push(invalid(
                    format!("{field}.hostname"),
                    &Value::from(hostname),
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    errs
}

/// `validateIngressClassSpec`: `spec.controller` a domain-prefixed path of at most 250
/// characters (`IsDomainPrefixedPath`).
pub fn ingress_class_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let controller = s(obj, &["spec", "controller"]);
    let field = "spec.controller";
    if controller.len() > 250 {
        errs.push(FieldError {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: "Too long: may not be longer than 250".into(),
        });
    }
    if controller.is_empty() {
        errs.push(required(field, ""));
        return errs;
    }
    let Some((host, _)) = controller.split_once('/') else {
        errs.push(invalid(
            field,
            &Value::from(controller),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return errs;
    };
    for m in dns1123_subdomain(host) {
        errs.push(invalid(field, &Value::from(host), m));
    }
    errs
}
