//! Validation of the core, discovery and coordination kinds this project writes, as k8s.io/kubernetes
//! v1.28 `pkg/apis/core/validation/validation.go` (`ValidateService`, `validateServicePort`,
//! `ValidateSecret`, `validatePodIPs`), `events.go` (`legacyValidateEvent`,
//! `ValidateEventCreate`), `pkg/apis/discovery/validation` (`ValidateEndpointSlice`) and
//! `pkg/apis/coordination/validation` (`ValidateLeaseSpec`) do it, with their field paths and
//! messages. Only the rules this project's objects meet are ported (see docs/kube-apiserver.md).

use std::collections::BTreeSet;

use serde_json::Value;

use super::errors::{
    arr, duplicate, forbidden, invalid, not_supported, port_num, required, s, too_many,
};
use super::names::{dns1123_label, dns1123_subdomain, qualified_name};
use crate::crd_validation::FieldError;

/// `ValidateService` (ports, type, protocol, nodePort with `ClusterIP`, sessionAffinity).
pub fn service_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    let ty = s(spec, &["type"]);
    let ports = arr(&spec["ports"]);
    let headless = s(spec, &["clusterIP"]) == "None";
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(required("spec.ports", ""));
    }
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = s(p, &["name"]);
        if ports.len() > 1 && name.is_empty() {
            errs.push(required(format!("{path}.name"), ""));
        } else if !name.is_empty() {
            for m in dns1123_label(name) {
                errs.push(invalid(format!("{path}.name"), &Value::from(name), m));
            }
            if !names.insert(name.to_string()) {
                errs.push(duplicate(format!("{path}.name"), &Value::from(name)));
            }
        }
        errs.extend(port_num(format!("{path}.port"), &p["port"]));
        match &p["targetPort"] {
            Value::String(name) => {
                for m in super::errors::port_name(name) {
                    errs.push(invalid(format!("{path}.targetPort"), &p["targetPort"], m));
                }
            }
            Value::Null => {}
            number => errs.extend(port_num(format!("{path}.targetPort"), number)),
        }
        match p["protocol"].as_str() {
            None | Some("") => errs.push(required(format!("{path}.protocol"), "")),
            Some("TCP" | "UDP" | "SCTP") => {}
            Some(other) => errs.push(not_supported(
                format!("{path}.protocol"),
                &Value::from(other),
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    match ty {
        "" => errs.push(required("spec.type", "")),
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName" => {}
        other => errs.push(not_supported(
            "spec.type",
            &Value::from(other),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        )),
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if p["nodePort"].as_i64().unwrap_or(0) != 0 {
                errs.push(forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    match s(spec, &["sessionAffinity"]) {
        "" | "None" | "ClientIP" => {}
        other => errs.push(not_supported(
            "spec.sessionAffinity",
            &Value::from(other),
            &["ClientIP", "None"],
        )),
    }
    errs
}

/// The service-node-port range of a kube-apiserver started without
/// `--service-node-port-range`: 30000-32767.
pub const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The node port allocator's refusal (k8s.io/kubernetes `pkg/registry/core/service/portallocator`
/// `ErrNotInRange`, raised by the Service registry's `allocNodePorts` after validation): a
/// `nodePort` this Service did not hold before, outside [`NODE_PORT_RANGE`], is
/// `spec.ports[i].nodePort: Invalid value: 80: provided port is not in the valid range. The
/// range of valid ports is 30000-32767`.
pub fn service_node_ports(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let held: BTreeSet<i64> = old
        .map(|o| arr(&o["spec"]["ports"]))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["nodePort"].as_i64())
        .collect();
    let mut errs = Vec::new();
    for (i, p) in arr(&obj["spec"]["ports"]).iter().enumerate() {
        let Some(np) = p["nodePort"].as_i64().filter(|n| *n != 0) else {
            continue;
        };
        if !held.contains(&np) && !NODE_PORT_RANGE.contains(&np) {
            errs.push(invalid(
                format!("spec.ports[{i}].nodePort"),
                &Value::from(np),
                "provided port is not in the valid range. The range of valid ports is 30000-32767",
            ));
        }
    }
    errs
}

/// `validatePodIPs`: every `status.podIPs[i].ip` a valid IP, at most one per family.
pub fn pod_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ips = arr(&obj["status"]["podIPs"]);
    let mut families = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, ip) in ips.iter().enumerate() {
        let text = s(ip, &["ip"]);
        match text.parse::<std::net::IpAddr>() {
            Ok(addr) => {
                families.insert(addr.is_ipv4());
            }
            Err(_) => errs.push(invalid(
                format!("status.podIPs[{i}]"),
                &Value::from(text),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )),
        }
        if !seen.insert(text.to_string()) {
            errs.push(FieldError {
                reason: "FieldValueDuplicate",
                field: format!("status.podIPs[{i}]"),
                message: format!("Duplicate value: core.PodIP{{IP:{text:?}}}"),
            });
        }
    }
    if ips.len() > 1 && (families.len() < 2 || ips.len() > 2) {
        errs.push(FieldError {
            reason: "FieldValueInvalid",
            field: "status.podIPs".into(),
            message: "Invalid value: \"[...]\": may specify no more than one IP for each IP family"
                .into(),
        });
    }
    errs
}

/// `legacyValidateEvent` (every Event) and, for events.k8s.io/v1 creates, the strict part of
/// `ValidateEventCreate` (`eventTime` required, `type` Normal or Warning).
pub fn event(obj: &Value, namespace: &str, events_v1: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let involved_ns = s(obj, &["involvedObject", "namespace"]);
    let event_time = s(obj, &["eventTime"]);
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            &Value::from(involved_ns),
            "does not match event.namespace",
        )
    };
    if event_time.is_empty() {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(mismatch());
            }
        } else if namespace != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let controller_field = if events_v1 {
            "reportingController"
        } else {
            "reportingComponent"
        };
        let controller = s(obj, &["reportingComponent"]);
        if controller.is_empty() {
            errs.push(required(controller_field, ""));
        }
        for m in qualified_name(controller) {
            errs.push(invalid(controller_field, &Value::from(controller), m));
        }
        for (field, value) in [
            ("reportingInstance", s(obj, &["reportingInstance"])),
            ("action", s(obj, &["action"])),
            ("reason", s(obj, &["reason"])),
        ] {
            if value.is_empty() {
                errs.push(required(field, ""));
            }
        }
    }
    if events_v1 {
        if event_time.is_empty() {
            errs.push(required("eventTime", ""));
        }
        let ty = s(obj, &["type"]);
        if ty != "Normal" && ty != "Warning" {
            errs.push(invalid(
                "type",
                &Value::from(""),
                format!("has invalid value: {ty}"),
            ));
        }
    }
    errs
}

/// `ValidateLeaseSpec`.
pub fn lease(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &obj["spec"];
    if let Some(d) = spec["leaseDurationSeconds"].as_i64() {
        if d <= 0 {
            errs.push(invalid(
                "spec.leaseDurationSeconds",
                &Value::from(d),
                "must be greater than 0",
            ));
        }
    }
    if let Some(t) = spec["leaseTransitions"].as_i64() {
        if t < 0 {
            errs.push(invalid(
                "spec.leaseTransitions",
                &Value::from(t),
                "must be greater than or equal to 0",
            ));
        }
    }
    errs
}

/// `ValidateNonSpecialIP` without its loopback rule (the documented deviation: the local
/// stack's Pods live on 127.0.0.0/8): unspecified, link-local and link-local multicast refused.
fn special_ip(field: &str, v: &Value, ip: std::net::IpAddr) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (link_local, multicast) = match ip {
        std::net::IpAddr::V4(a) => (a.is_link_local(), a.octets()[..3] == [224, 0, 0]),
        std::net::IpAddr::V6(a) => (
            a.segments()[0] & 0xffc0 == 0xfe80,
            a.segments()[0] & 0xff0f == 0xff02,
        ),
    };
    if ip.is_unspecified() {
        errs.push(invalid(
            field,
            v,
            format!(
                "may not be unspecified ({})",
                v.as_str().unwrap_or_default()
            ),
        ));
    }
    if link_local {
        errs.push(invalid(
            field,
            v,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if multicast {
        errs.push(invalid(
            field,
            v,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

/// `ValidateEndpointSlice`: `addressType`, 1-100 addresses per endpoint (each of the address
/// type), at most 1000 endpoints, port names and numbers. Loopback addresses are accepted
/// here (the documented deviation: the local stack's Pods live on 127.0.0.0/8).
pub fn endpoint_slice(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let addr_type = s(obj, &["addressType"]);
    match addr_type {
        "" => errs.push(required("addressType", "")),
        "IPv4" | "IPv6" | "FQDN" => {}
        other => errs.push(not_supported(
            "addressType",
            &Value::from(other),
            &["FQDN", "IPv4", "IPv6"],
        )),
    }
    let endpoints = arr(&obj["endpoints"]);
    if endpoints.len() > 1000 {
        errs.push(too_many("endpoints", endpoints.len(), 1000));
        return errs;
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}].addresses");
        let addresses = arr(&ep["addresses"]);
        if addresses.is_empty() {
            errs.push(required(&path, "must contain at least 1 address"));
        } else if addresses.len() > 100 {
            errs.push(too_many(&path, addresses.len(), 100));
        }
        for (j, a) in addresses.iter().enumerate() {
            let text = a.as_str().unwrap_or_default();
            let field = format!("{path}[{j}]");
            let parsed = text.parse::<std::net::IpAddr>();
            match (addr_type, parsed) {
                ("IPv4", Ok(ip @ std::net::IpAddr::V4(_)))
                | ("IPv6", Ok(ip @ std::net::IpAddr::V6(_))) => {
                    errs.extend(special_ip(&field, a, ip))
                }
                ("IPv4" | "IPv6", parsed) => {
                    errs.push(invalid(
                        &field,
                        a,
                        format!("must be a valid {addr_type} address"),
                    ));
                    match parsed {
                        Ok(ip) => errs.extend(special_ip(&field, a, ip)),
                        Err(_) => errs.push(invalid(&field, a, "must be a valid IP address")),
                    }
                }
                _ => {}
            }
        }
        if let Some(node) = ep["nodeName"].as_str() {
            for m in dns1123_subdomain(node) {
                errs.push(invalid(
                    format!("endpoints[{i}].nodeName"),
                    &Value::from(node),
                    m,
                ));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (i, p) in arr(&obj["ports"]).iter().enumerate() {
        let name = s(p, &["name"]);
        if !name.is_empty() {
            for m in dns1123_label(name) {
                errs.push(invalid(format!("ports[{i}].name"), &Value::from(name), m));
            }
        }
        if !names.insert(name.to_string()) {
            errs.push(duplicate(format!("ports[{i}].name"), &Value::from(name)));
        }
        if let Some(port) = p.get("port").filter(|v| !v.is_null()) {
            errs.extend(port_num(format!("ports[{i}].port"), port));
        }
    }
    errs
}
