//! The Table columns and cells of Nodes, as `kubectl get nodes [-o wide]` prints them
//! (kubernetes/pkg/printers/internalversion `nodeColumnDefinitions` / `printNode`): Status is
//! `Ready`/`NotReady`/`Unknown` from the Ready condition (plus `,SchedulingDisabled` when
//! cordoned), Roles from `node-role.kubernetes.io/<role>` labels (and the legacy
//! `kubernetes.io/role`), the wide columns from `status.addresses` and `status.nodeInfo`.
//! Zones are labels: `kubectl get nodes -o wide -L topology.kubernetes.io/zone` adds them.

use serde_json::{json, Value};

use super::columns::{age_col, col};

/// Columns after Name.
pub fn columns() -> Vec<Value> {
    let s = |n: &str| col(n, "string", "", 0, "");
    let wide = |n: &str| col(n, "string", "", 1, "");
    vec![
        s("Status"),
        s("Roles"),
        age_col(),
        s("Version"),
        wide("Internal-IP"),
        wide("External-IP"),
        wide("OS-Image"),
        wide("Kernel-Version"),
        wide("Container-Runtime"),
    ]
}

/// Cells after the name; `age` is the Age cell.
pub fn cells(o: &Value, age: String) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if o["spec"]["unschedulable"] == json!(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == "kubernetes.io/role" => v.as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    roles.sort();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |kind: &str| {
        o["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let info = &o["status"]["nodeInfo"];
    let text = |v: &Value| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("<unknown>")
            .to_string()
    };
    vec![
        json!(status),
        json!(roles),
        json!(age),
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(text(&info["osImage"])),
        json!(text(&info["kernelVersion"])),
        json!(text(&info["containerRuntimeVersion"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_node_prints_like_kubectl() {
        let node = json!({
            "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "127.32.0.5"}],
                "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Local"}
            }
        });
        let cells = cells(&node, "5m".into());
        assert_eq!(cells.len(), columns().len());
        assert_eq!(cells[0], "Ready,SchedulingDisabled");
        assert_eq!(cells[1], "worker");
        assert_eq!(cells[3], "v1.36.0");
        assert_eq!(cells[4], "127.32.0.5");
        assert_eq!(cells[5], "<none>");
        assert_eq!(cells[7], "<unknown>");
        let bare = cells_of_unknown();
        assert_eq!(bare[0], "Unknown");
        assert_eq!(bare[1], "<none>");
    }

    fn cells_of_unknown() -> Vec<Value> {
        cells(&json!({"metadata": {"name": "n"}}), "1s".into())
    }
}
