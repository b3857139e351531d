//! Server-side printing: `meta.k8s.io/v1` `Table` responses for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, which `kubectl get` asks for. Columns
//! of the built-in kinds follow the real server's printers (pkg/printers/internalversion);
//! custom resources use the CRD's `additionalPrinterColumns` (default: `Age`).

use chrono::Utc;
use serde_json::{json, Value};

use crate::meta::{self, age, human_duration, parse_time};
use crate::registry::ResourceInfo;

use columns::{age_col, col, name_col};

mod apps;
mod columns;
mod node;
mod rbac;

pub use apps::format_label_selector;

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Column definitions for `res`.
pub fn columns(res: &ResourceInfo) -> Vec<Value> {
    if let Some(v) = &res.crd_version {
        let mut cols = vec![name_col()];
        match v["additionalPrinterColumns"]
            .as_array()
            .filter(|a| !a.is_empty())
        {
            Some(extra) => cols.extend(extra.iter().map(|c| {
                let ty = c["type"].as_str().unwrap_or("string");
                col(
                    c["name"].as_str().unwrap_or_default(),
                    if ty == "date" { "string" } else { ty },
                    c["format"].as_str().unwrap_or_default(),
                    c["priority"].as_i64().unwrap_or(0),
                    c["description"].as_str().unwrap_or_default(),
                )
            })),
            None => cols.push(age_col()),
        }
        return cols;
    }
    let s = |n: &str| col(n, "string", "", 0, "");
    let wide = |n: &str| col(n, "string", "", 1, "");
    let mut cols = vec![name_col()];
    if let Some(apps) = apps::columns(&res.storage) {
        cols.extend(apps);
        return cols;
    }
    match res.storage.as_str() {
        "/pods" => cols.extend([
            s("Ready"),
            s("Status"),
            col("Restarts", "string", "", 0, ""),
            age_col(),
            wide("IP"),
            wide("Node"),
            wide("Nominated Node"),
            wide("Readiness Gates"),
        ]),
        "/services" => cols.extend([
            s("Type"),
            s("Cluster-IP"),
            s("External-IP"),
            s("Port(s)"),
            age_col(),
            wide("Selector"),
        ]),
        "networking.k8s.io/ingresses" => {
            cols.extend([s("Class"), s("Hosts"), s("Address"), s("Ports"), age_col()])
        }
        "networking.k8s.io/ingressclasses" => {
            cols.extend([s("Controller"), s("Parameters"), age_col()])
        }
        "/nodes" => cols.extend(node::columns()),
        "/namespaces" => cols.extend([s("Status"), age_col()]),
        "/configmaps" => cols.extend([col("Data", "integer", "", 0, ""), age_col()]),
        "/secrets" => cols.extend([s("Type"), col("Data", "integer", "", 0, ""), age_col()]),
        "/endpoints" => cols.extend([s("Endpoints"), age_col()]),
        "discovery.k8s.io/endpointslices" => {
            cols.extend([s("AddressType"), s("Ports"), s("Endpoints"), age_col()])
        }
        "coordination.k8s.io/leases" => cols.extend([s("Holder"), age_col()]),
        "/serviceaccounts" => cols.extend([col("Secrets", "integer", "", 0, ""), age_col()]),
        "rbac.authorization.k8s.io/rolebindings"
        | "rbac.authorization.k8s.io/clusterrolebindings" => cols.extend([
            s("Role"),
            age_col(),
            wide("Users"),
            wide("Groups"),
            wide("ServiceAccounts"),
        ]),
        "admissionregistration.k8s.io/mutatingwebhookconfigurations"
        | "admissionregistration.k8s.io/validatingwebhookconfigurations" => {
            cols.extend([col("Webhooks", "integer", "", 0, ""), age_col()])
        }
        "/events" if !res.is_events_v1() => {
            return vec![
                s("Last Seen"),
                s("Type"),
                s("Reason"),
                s("Object"),
                s("Message"),
            ];
        }
        _ => cols.push(col("Created At", "date", "", 0, "")),
    }
    cols
}

fn join_or(items: Vec<String>, empty: &str) -> String {
    if items.is_empty() {
        empty.to_string()
    } else {
        items.join(",")
    }
}

fn truncated(items: Vec<String>, max: usize) -> String {
    if items.is_empty() {
        return "<none>".into();
    }
    let more = items.len().saturating_sub(max);
    let shown = items.into_iter().take(max).collect::<Vec<_>>().join(",");
    if more > 0 {
        format!("{shown} + {more} more...")
    } else {
        shown
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Evaluates the kubectl JSONPath subset used by printer columns: `.a.b`, `.a[0]`, `.a[*].b`,
/// `.a[?(@.type=="Ready")].status`. Returns every match.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![obj];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            current = current.into_iter().filter_map(|v| v.get(key)).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Vec::new();
            };
            let sel = &r[..end];
            rest = &r[end + 1..];
            let items = current.into_iter().filter_map(Value::as_array).flatten();
            current = if sel == "*" {
                items.collect()
            } else if let Ok(i) = sel.parse::<usize>() {
                items.skip(i).take(1).collect()
            } else if let Some(filter) = sel.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let (field, want) = filter.split_once("==").unwrap_or((filter, ""));
                let want = want.trim().trim_matches('"').trim_matches('\'');
                items
                    .filter(|i| crate::selectors::field_value(i, field.trim()) == want)
                    .collect()
            } else {
                Vec::new()
            };
        } else {
            return Vec::new();
        }
    }
    current
}

fn cell_from_path(obj: &Value, path: &str, ty: &str) -> Value {
    let found = json_path(obj, path);
    let Some(first) = found.first() else {
        return Value::Null;
    };
    if ty == "date" {
        return first
            .as_str()
            .and_then(parse_time)
            .map(|t| json!(human_duration(Utc::now() - t)))
            .unwrap_or(Value::Null);
    }
    if found.len() > 1 {
        return json!(found
            .iter()
            .map(|v| v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string()))
            .collect::<Vec<_>>()
            .join(","));
    }
    (*first).clone()
}

fn pod_cells(o: &Value) -> Vec<Value> {
    let statuses = o["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c["ready"] == json!(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let mut status = o["status"]["reason"]
        .as_str()
        .or(o["status"]["phase"].as_str())
        .unwrap_or("Pending")
        .to_string();
    if o["metadata"]["deletionTimestamp"].is_string() {
        status = "Terminating".into();
    }
    let gates = o["spec"]["readinessGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = o["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let met = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts.to_string()),
        json!(age(o)),
        json!(o["status"]["podIP"].as_str().unwrap_or("<none>")),
        json!(o["spec"]["nodeName"].as_str().unwrap_or("<none>")),
        json!(o["status"]["nominatedNodeName"]
            .as_str()
            .unwrap_or("<none>")),
        json!(gates_cell),
    ]
}

fn service_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(np) => format!("{}:{np}/{proto}", p["port"]),
                None => format!("{}/{proto}", p["port"]),
            }
        })
        .collect();
    let mut external: Vec<String> = strs(&spec["externalIPs"]);
    for i in o["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(ip) = i["ip"].as_str().or(i["hostname"].as_str()) {
            external.push(ip.to_string());
        }
    }
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    let external = if external.is_empty() {
        if ty == "LoadBalancer" {
            "<pending>".to_string()
        } else {
            "<none>".to_string()
        }
    } else {
        external.join(",")
    };
    let selector = spec["selector"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into());
    vec![
        json!(ty),
        json!(spec["clusterIP"].as_str().unwrap_or("<none>")),
        json!(external),
        json!(join_or(ports, "<none>")),
        json!(age(o)),
        json!(selector),
    ]
}

fn ingress_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let class = spec["ingressClassName"]
        .as_str()
        .or(o["metadata"]["annotations"]["kubernetes.io/ingress.class"].as_str())
        .unwrap_or("<none>");
    let hosts: Vec<String> = spec["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["host"].as_str().unwrap_or("*").to_string())
        .collect();
    let addresses: Vec<String> = o["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .or(i["hostname"].as_str())
                .map(str::to_string)
        })
        .collect();
    let ports = if spec["tls"].as_array().is_some_and(|t| !t.is_empty()) {
        "80, 443"
    } else {
        "80"
    };
    vec![
        json!(class),
        json!(truncated(hosts, 4).replace("<none>", "*")),
        json!(addresses.join(",")),
        json!(ports),
        json!(age(o)),
    ]
}

/// The cells of one row (without the leading name cell for events).
pub fn cells(res: &ResourceInfo, o: &Value) -> Vec<Value> {
    if let Some(v) = &res.crd_version {
        let mut cells = vec![json!(meta::name(o))];
        match v["additionalPrinterColumns"]
            .as_array()
            .filter(|a| !a.is_empty())
        {
            Some(extra) => cells.extend(extra.iter().map(|c| {
                cell_from_path(
                    o,
                    c["jsonPath"].as_str().unwrap_or_default(),
                    c["type"].as_str().unwrap_or("string"),
                )
            })),
            None => cells.push(json!(age(o))),
        }
        return cells;
    }
    let mut cells = vec![json!(meta::name(o))];
    if let Some(apps) = apps::cells(&res.storage, o) {
        cells.extend(apps);
        return cells;
    }
    match res.storage.as_str() {
        "/pods" => cells.extend(pod_cells(o)),
        "/nodes" => cells.extend(node::cells(o, age(o))),
        "/services" => cells.extend(service_cells(o)),
        "networking.k8s.io/ingresses" => cells.extend(ingress_cells(o)),
        "networking.k8s.io/ingressclasses" => {
            let params = &o["spec"]["parameters"];
            let p = if params.is_object() {
                format!(
                    "{}/{}",
                    params["kind"].as_str().unwrap_or_default(),
                    params["name"].as_str().unwrap_or_default()
                )
            } else {
                "<none>".into()
            };
            cells.extend([
                json!(o["spec"]["controller"].as_str().unwrap_or_default()),
                json!(p),
                json!(age(o)),
            ]);
        }
        "/namespaces" => cells.extend([
            json!(o["status"]["phase"].as_str().unwrap_or("Active")),
            json!(age(o)),
        ]),
        "/configmaps" => {
            let n = o["data"].as_object().map_or(0, |m| m.len())
                + o["binaryData"].as_object().map_or(0, |m| m.len());
            cells.extend([json!(n), json!(age(o))]);
        }
        "/secrets" => {
            let n = o["data"].as_object().map_or(0, |m| m.len());
            cells.extend([
                json!(o["type"].as_str().unwrap_or("Opaque")),
                json!(n),
                json!(age(o)),
            ]);
        }
        "/endpoints" => {
            let mut eps = Vec::new();
            for s in o["subsets"].as_array().into_iter().flatten() {
                for a in s["addresses"].as_array().into_iter().flatten() {
                    for p in s["ports"].as_array().into_iter().flatten() {
                        eps.push(format!(
                            "{}:{}",
                            a["ip"].as_str().unwrap_or_default(),
                            p["port"]
                        ));
                    }
                }
            }
            cells.extend([json!(truncated(eps, 3)), json!(age(o))]);
        }
        "discovery.k8s.io/endpointslices" => {
            let ports: Vec<String> = o["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["port"].to_string())
                .collect();
            let addrs: Vec<String> = o["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| strs(&e["addresses"]))
                .collect();
            cells.extend([
                json!(o["addressType"].as_str().unwrap_or_default()),
                json!(join_or(ports, "<unset>")),
                json!(truncated(addrs, 3)),
                json!(age(o)),
            ]);
        }
        "coordination.k8s.io/leases" => cells.extend([
            json!(o["spec"]["holderIdentity"].as_str().unwrap_or_default()),
            json!(age(o)),
        ]),
        "/serviceaccounts" => cells.extend([
            json!(o["secrets"].as_array().map_or(0, Vec::len)),
            json!(age(o)),
        ]),
        "rbac.authorization.k8s.io/rolebindings"
        | "rbac.authorization.k8s.io/clusterrolebindings" => cells.extend(rbac::binding_cells(o)),
        "admissionregistration.k8s.io/mutatingwebhookconfigurations"
        | "admissionregistration.k8s.io/validatingwebhookconfigurations" => cells.extend([
            json!(o["webhooks"].as_array().map_or(0, Vec::len)),
            json!(age(o)),
        ]),
        "/events" if !res.is_events_v1() => {
            let last = o["lastTimestamp"]
                .as_str()
                .or(o["eventTime"].as_str())
                .or(o["metadata"]["creationTimestamp"].as_str())
                .and_then(parse_time);
            let io = &o["involvedObject"];
            return vec![
                json!(last
                    .map(|t| human_duration(Utc::now() - t))
                    .unwrap_or_else(|| "<unknown>".into())),
                json!(o["type"].as_str().unwrap_or_default()),
                json!(o["reason"].as_str().unwrap_or_default()),
                json!(format!(
                    "{}/{}",
                    io["kind"].as_str().unwrap_or_default().to_lowercase(),
                    io["name"].as_str().unwrap_or_default()
                )),
                json!(o["message"].as_str().unwrap_or_default()),
            ];
        }
        _ => cells.push(json!(meta::str_field(o, "creationTimestamp"))),
    }
    cells
}

/// A row; `include_object` is `None`, `Metadata` (default) or `Object`.
pub fn row(res: &ResourceInfo, o: &Value, include_object: &str) -> Value {
    let object = match include_object {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
        }
    };
    json!({"cells": cells(res, o), "object": object})
}

/// A Table of `items`.
pub fn table(
    res: &ResourceInfo,
    items: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    include_object: &str,
) -> Value {
    let mut md = json!({"resourceVersion": resource_version});
    if let Some(c) = continue_token {
        md["continue"] = json!(c);
    }
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md,
        "columnDefinitions": columns(res),
        "rows": items.iter().map(|o| row(res, o, include_object)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_filters_and_indexes() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}, "spec": {"l": [1, 2]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(json_path(&o, ".spec.l[1]"), vec![&json!(2)]);
        assert_eq!(json_path(&o, ".status.conditions[*].type").len(), 2);
        assert!(json_path(&o, ".nope.x").is_empty());
    }
}
