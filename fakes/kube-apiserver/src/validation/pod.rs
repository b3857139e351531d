//! Pod specs, of Pods and of the Pod templates of workloads, as k8s.io/kubernetes
//! `pkg/apis/core/validation/validation.go` does it (`ValidatePodSpec`, `validateContainers`,
//! `validateContainerPorts`, `validateProbe`, `validateHandler`, `ValidateEnv`,
//! `ValidateVolumes` (names), `ValidateVolumeMounts` (names and paths), `validatePullPolicy`,
//! `validateRestartPolicy`, `validateDNSPolicy`, `validateReadinessGates`,
//! `ValidatePodTemplateSpec`), with its field paths and messages. Fields the real server
//! defaults (`restartPolicy`, `dnsPolicy`, `imagePullPolicy`, `terminationMessagePolicy`, port
//! `protocol`) are checked only when present: the local API's defaulting fills them in, and a
//! value is refused as the real server refuses it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::errors::{arr, duplicate, forbidden, invalid, not_supported, port_name, required, s};
use super::names::{dns1123_label, dns1123_subdomain, qualified_name};
use super::object_meta;
use crate::crd_validation::FieldError;

const ENV_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

/// `field.NotFound(path, value)`: `Not found: "x"`.
fn not_found(field: String, value: &str) -> FieldError {
    FieldError {
        reason: "FieldValueNotFound",
        field,
        message: format!("Not found: {value:?}"),
    }
}

/// `IsValidPortNum` / `IsValidPortName` of a probe's or handler's `port` (an int or a name).
fn port_num_or_name(v: &Value, path: String, errs: &mut Vec<FieldError>) {
    match v {
        Value::String(name) if name.is_empty() => errs.push(required(path, "")),
        Value::String(name) => {
            for m in port_name(name) {
                errs.push(invalid(&path, v, m));
            }
        }
        Value::Null => errs.push(required(path, "")),
        n => {
            if !(1..=65535).contains(&n.as_i64().unwrap_or(0)) {
                errs.push(invalid(path, n, "must be between 1 and 65535, inclusive"));
            }
        }
    }
}

/// `ValidateNonnegativeField`.
fn non_negative(v: &Value, path: String, errs: &mut Vec<FieldError>) {
    if v.as_i64().is_some_and(|n| n < 0) {
        errs.push(invalid(path, v, "must be greater than or equal to 0"));
    }
}

/// `validateHandler`: exactly one of `exec`, `httpGet`, `tcpSocket`, `grpc`, each valid.
fn handler(h: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut count = 0;
    for kind in ["exec", "httpGet", "tcpSocket", "grpc"] {
        let Some(action) = h.get(kind).filter(|v| !v.is_null()) else {
            continue;
        };
        let p = format!("{path}.{kind}");
        if count > 0 {
            errs.push(forbidden(p, "may not specify more than 1 handler type"));
            continue;
        }
        count += 1;
        match kind {
            "exec" => {
                if arr(&action["command"]).is_empty() {
                    errs.push(required(format!("{p}.command"), ""));
                }
            }
            "httpGet" => {
                if s(action, &["path"]).is_empty() {
                    errs.push(required(format!("{p}.path"), ""));
                }
                port_num_or_name(&action["port"], format!("{p}.port"), errs);
                match s(action, &["scheme"]) {
                    "" | "HTTP" | "HTTPS" => {}
                    other => errs.push(not_supported(
                        format!("{p}.scheme"),
                        &Value::from(other),
                        &["HTTP", "HTTPS"],
                    )),
                }
            }
            "tcpSocket" => port_num_or_name(&action["port"], format!("{p}.port"), errs),
            _ => {
                let port = &action["port"];
                if !(1..=65535).contains(&port.as_i64().unwrap_or(0)) {
                    errs.push(invalid(
                        format!("{p}.port"),
                        port,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
    if count == 0 {
        errs.push(required(path, "must specify a handler type"));
    }
}

/// `validateProbe` (and the liveness and startup probes' `successThreshold` of 1).
fn probe(p: &Value, path: String, must_succeed_once: bool, errs: &mut Vec<FieldError>) {
    if !p.is_object() {
        return;
    }
    handler(p, &path, errs);
    for f in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        non_negative(&p[f], format!("{path}.{f}"), errs);
    }
    if let Some(t) = p["terminationGracePeriodSeconds"].as_i64() {
        if t <= 0 {
            errs.push(invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                &Value::from(t),
                "must be greater than 0",
            ));
        }
    }
    let threshold = &p["successThreshold"];
    if must_succeed_once && threshold.as_i64().is_some_and(|t| t != 1) {
        errs.push(invalid(
            format!("{path}.successThreshold"),
            threshold,
            "must be 1",
        ));
    }
}

/// `validateContainerPorts`.
fn container_ports(ports: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    for (i, p) in arr(ports).iter().enumerate() {
        let path = format!("{path}[{i}]");
        let name = s(p, &["name"]);
        if !name.is_empty() {
            let msgs = port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(invalid(format!("{path}.name"), &Value::from(name), m));
                }
            } else if !names.insert(name.to_string()) {
                errs.push(duplicate(format!("{path}.name"), &Value::from(name)));
            }
        }
        let cp = &p["containerPort"];
        if cp.as_i64().unwrap_or(0) == 0 {
            errs.push(required(format!("{path}.containerPort"), ""));
        } else if !(1..=65535).contains(&cp.as_i64().unwrap_or(0)) {
            errs.push(invalid(
                format!("{path}.containerPort"),
                cp,
                "must be between 1 and 65535, inclusive",
            ));
        }
        let hp = &p["hostPort"];
        if hp.as_i64().unwrap_or(0) != 0 && !(1..=65535).contains(&hp.as_i64().unwrap_or(0)) {
            errs.push(invalid(
                format!("{path}.hostPort"),
                hp,
                "must be between 1 and 65535, inclusive",
            ));
        }
        match p["protocol"].as_str() {
            None | Some("TCP" | "UDP" | "SCTP") => {}
            Some("") => errs.push(required(format!("{path}.protocol"), "")),
            Some(other) => errs.push(not_supported(
                format!("{path}.protocol"),
                &Value::from(other),
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

/// `ValidateEnv` (names and `valueFrom` exclusivity are the parts ported: names).
fn env(list: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (i, e) in arr(list).iter().enumerate() {
        let name = s(e, &["name"]);
        let p = format!("{path}[{i}].name");
        if name.is_empty() {
            errs.push(required(p, ""));
        } else {
            let ok = !name.starts_with(|c: char| c.is_ascii_digit())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                errs.push(invalid(p, &Value::from(name), ENV_NAME_MSG));
            }
        }
    }
}

/// One container of `containers`/`initContainers` (`validateContainers`,
/// `validateInitContainers` share these rules).
fn container(
    c: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    regular: bool,
    errs: &mut Vec<FieldError>,
) {
    let name = s(c, &["name"]);
    if name.is_empty() {
        errs.push(required(format!("{path}.name"), ""));
    } else {
        for m in dns1123_label(name) {
            errs.push(invalid(format!("{path}.name"), &Value::from(name), m));
        }
    }
    if !names.insert(name.to_string()) {
        errs.push(duplicate(format!("{path}.name"), &Value::from(name)));
    }
    if s(c, &["image"]).is_empty() {
        errs.push(required(format!("{path}.image"), ""));
    }
    if regular {
        probe(
            &c["livenessProbe"],
            format!("{path}.livenessProbe"),
            true,
            errs,
        );
        probe(
            &c["readinessProbe"],
            format!("{path}.readinessProbe"),
            false,
            errs,
        );
        probe(
            &c["startupProbe"],
            format!("{path}.startupProbe"),
            true,
            errs,
        );
    } else {
        for p in [
            "lifecycle",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
        ] {
            if c.get(p).is_some_and(|v| !v.is_null()) {
                errs.push(forbidden(
                    format!("{path}.{p}"),
                    "may not be set for init containers",
                ));
            }
        }
    }
    match c["terminationMessagePolicy"].as_str() {
        None | Some("File" | "FallbackToLogsOnError") => {}
        Some("") => errs.push(required(format!("{path}.terminationMessagePolicy"), "")),
        Some(other) => errs.push(not_supported(
            format!("{path}.terminationMessagePolicy"),
            &Value::from(other),
            &["File", "FallbackToLogsOnError"],
        )),
    }
    container_ports(&c["ports"], &format!("{path}.ports"), errs);
    env(&c["env"], &format!("{path}.env"), errs);
    for (i, m) in arr(&c["volumeMounts"]).iter().enumerate() {
        let p = format!("{path}.volumeMounts[{i}]");
        let vol = s(m, &["name"]);
        if vol.is_empty() {
            errs.push(required(format!("{p}.name"), ""));
        } else if !volumes.contains(vol) {
            errs.push(not_found(format!("{p}.name"), vol));
        }
        if s(m, &["mountPath"]).is_empty() {
            errs.push(required(format!("{p}.mountPath"), ""));
        }
    }
    match c["imagePullPolicy"].as_str() {
        None | Some("Always" | "IfNotPresent" | "Never") => {}
        Some("") => errs.push(required(format!("{path}.imagePullPolicy"), "")),
        Some(other) => errs.push(not_supported(
            format!("{path}.imagePullPolicy"),
            &Value::from(other),
            &["Always", "IfNotPresent", "Never"],
        )),
    }
}

/// `ValidatePodSpec` at `path` (`spec`, or `spec.template.spec` of a workload).
pub fn spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut volumes = BTreeSet::new();
    for (i, v) in arr(&spec["volumes"]).iter().enumerate() {
        let p = format!("{path}.volumes[{i}].name");
        let name = s(v, &["name"]);
        if name.is_empty() {
            errs.push(required(p, ""));
        } else {
            for m in dns1123_label(name) {
                errs.push(invalid(&p, &Value::from(name), m));
            }
            if !volumes.insert(name.to_string()) {
                errs.push(duplicate(p, &Value::from(name)));
            }
        }
    }
    let containers = arr(&spec["containers"]);
    let mut names = BTreeSet::new();
    if containers.is_empty() {
        errs.push(required(format!("{path}.containers"), ""));
    }
    for (i, c) in containers.iter().enumerate() {
        let p = format!("{path}.containers[{i}]");
        container(c, &p, &volumes, &mut names, true, &mut errs);
    }
    for (i, c) in arr(&spec["initContainers"]).iter().enumerate() {
        let p = format!("{path}.initContainers[{i}]");
        container(c, &p, &volumes, &mut names, false, &mut errs);
    }
    match spec["restartPolicy"].as_str() {
        None | Some("Always" | "OnFailure" | "Never") => {}
        Some("") => errs.push(required(format!("{path}.restartPolicy"), "")),
        Some(other) => errs.push(not_supported(
            format!("{path}.restartPolicy"),
            &Value::from(other),
            &["Always", "OnFailure", "Never"],
        )),
    }
    match spec["dnsPolicy"].as_str() {
        None | Some("ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None") => {}
        Some("") => errs.push(required(format!("{path}.dnsPolicy"), "")),
        Some(other) => errs.push(not_supported(
            format!("{path}.dnsPolicy"),
            &Value::from(other),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    errs.extend(object_meta::labels(
        &spec["nodeSelector"],
        &format!("{path}.nodeSelector"),
    ));
    for (i, g) in arr(&spec["readinessGates"]).iter().enumerate() {
        let ty = s(g, &["conditionType"]);
        for m in qualified_name(ty) {
            errs.push(invalid(
                format!("{path}.readinessGates[{i}].conditionType"),
                &Value::from(ty),
                m,
            ));
        }
    }
    let sa = s(spec, &["serviceAccountName"]);
    if !sa.is_empty() {
        for m in dns1123_subdomain(sa) {
            errs.push(invalid(
                format!("{path}.serviceAccountName"),
                &Value::from(sa),
                m,
            ));
        }
    }
    if let Some(d) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64) {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            errs.push(invalid(
                format!("{path}.activeDeadlineSeconds"),
                &Value::from(d),
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    for f in ["hostname", "subdomain"] {
        let v = s(spec, &[f]);
        if !v.is_empty() {
            for m in dns1123_label(v) {
                errs.push(invalid(format!("{path}.{f}"), &Value::from(v), m));
            }
        }
    }
    errs
}

/// `ValidatePodTemplateSpec` at `path` (`spec.template`): the template's labels
/// (`spec.template.labels`, as the real server names them, without `metadata`), annotations
/// and its Pod spec.
pub fn template(t: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = object_meta::labels(&t["metadata"]["labels"], &format!("{path}.labels"));
    errs.extend(object_meta::annotations(
        &t["metadata"]["annotations"],
        &format!("{path}.annotations"),
    ));
    errs.extend(spec(&t["spec"], &format!("{path}.spec")));
    errs
}
