//! Server-side apply conflicts: an apply that changes a field another manager owns, without
//! `force`, is refused (sigs.k8s.io/structured-merge-diff v4 `merge/update.go` `update`, and
//! k8s.io/apiserver `pkg/endpoints/handlers/fieldmanager/internal/conflict.go`
//! `NewConflictError`): 409 `Conflict`, worded as the real server words it:
//!
//! - one: `Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.key`;
//! - several: `Apply failed with 2 conflicts: conflicts with "a" using v1:\n- .data.x\n- .data.y`
//!   (managers sorted, each with its paths);
//!
//! a manager printed as `"name"` for an `Apply` entry, `"name" using v1` for an `Update`, with
//! ` with subresource "status"` after the name for a subresource's entry. Each conflict is a
//! cause: `reason: FieldManagerConflict`, `message: conflict with "name" using v1`, `field:
//! .data.key`.

use serde_json::Value;

use super::field_set::{compare, display, FieldSet};
use crate::crd_validation::FieldError;
use crate::schema::Schema;
use crate::status::ApiError;

/// `printManager`.
fn manager_label(e: &Value) -> String {
    let mut s = format!("{:?}", e["manager"].as_str().unwrap_or_default());
    if let Some(sub) = e["subresource"].as_str().filter(|s| !s.is_empty()) {
        s.push_str(&format!(" with subresource {sub:?}"));
    }
    if e["operation"] == "Update" {
        s.push_str(&format!(
            " using {}",
            e["apiVersion"].as_str().unwrap_or_default()
        ));
    }
    s
}

/// Refuses the apply of `manager` on `subresource` that turns `live` into `merged` when it
/// changes fields other managers own.
///
/// Errors: [`ApiError::ApplyConflict`].
pub fn check(
    live: &Value,
    merged: &Value,
    manager: &str,
    subresource: Option<&str>,
    schema: Option<Schema<'_>>,
    skip_status: bool,
    builtin: bool,
) -> Result<(), ApiError> {
    let changed = compare(live, merged, schema, skip_status, builtin).changed();
    let mut conflicts: Vec<(String, Vec<String>)> = Vec::new();
    for e in live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let mine = e["manager"] == manager
            && e["operation"] == "Apply"
            && e.get("subresource").and_then(Value::as_str) == subresource;
        if mine {
            continue;
        }
        let owned = FieldSet::from_fields_v1(&e["fieldsV1"]).intersection(&changed);
        if !owned.0.is_empty() {
            let paths = owned.0.iter().map(|p| display(p)).collect();
            conflicts.push((manager_label(e), paths));
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    conflicts.sort();
    let count: usize = conflicts.iter().map(|(_, p)| p.len()).sum();
    let message = if count == 1 {
        let (who, paths) = &conflicts[0];
        format!(
            "Apply failed with 1 conflict: conflict with {who}: {}",
            paths[0]
        )
    } else {
        let mut lines = Vec::new();
        for (who, paths) in &conflicts {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!("Apply failed with {count} conflicts: {}", lines.join("\n"))
    };
    let causes = conflicts
        .iter()
        .flat_map(|(who, paths)| {
            paths.iter().map(move |p| FieldError {
                reason: "FieldManagerConflict",
                field: p.clone(),
                message: format!("conflict with {who}"),
            })
        })
        .collect();
    Err(ApiError::ApplyConflict { message, causes })
}
