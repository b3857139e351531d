//! The Table cells of RoleBindings and ClusterRoleBindings, as `kubectl get rolebindings
//! [-o wide]` prints them (kubernetes/pkg/printers/internalversion `printRoleBinding`).

use serde_json::{json, Value};

use crate::meta::age;

/// (Cluster)RoleBinding cells as `printRoleBinding` prints them: ROLE `Kind/name`, AGE; wide
/// USERS, GROUPS, SERVICEACCOUNTS (`namespace:name`).
pub fn binding_cells(o: &Value) -> Vec<Value> {
    let subjects = |kind: &str| -> String {
        o["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["kind"] == kind)
            .map(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                match s["namespace"].as_str() {
                    Some(ns) if kind == "ServiceAccount" => format!("{ns}:{name}"),
                    _ => name.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let role = &o["roleRef"];
    vec![
        json!(format!(
            "{}/{}",
            role["kind"].as_str().unwrap_or_default(),
            role["name"].as_str().unwrap_or_default()
        )),
        json!(age(o)),
        json!(subjects("User")),
        json!(subjects("Group")),
        json!(subjects("ServiceAccount")),
    ]
}
