//! `metadata.managedFields`, simplified: one entry per (manager, operation, subresource) whose
//! `fieldsV1` is the set of fields the manager last wrote (`f:` keys for map fields; lists are
//! leaves). For `Apply` it is the applied configuration, which is what server-side apply uses to
//! remove fields a manager stops applying.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::meta::{metadata_mut, timestamp};
use crate::store::Writer;

/// Metadata fields that are never tracked as owned.
const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "generateName",
];

/// The `fieldsV1` set of a JSON value: `{"f:spec": {"f:rules": {}}}`.
pub fn fields_v1(v: &Value) -> Value {
    fn walk(v: &Value, top: bool, in_metadata: bool) -> Value {
        let mut out = Map::new();
        if let Some(map) = v.as_object() {
            for (k, child) in map {
                if top && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                if in_metadata && UNTRACKED_METADATA.contains(&k.as_str()) {
                    continue;
                }
                let sub = if child.is_object() {
                    walk(child, false, top && k == "metadata")
                } else {
                    json!({})
                };
                out.insert(format!("f:{k}"), sub);
            }
        }
        Value::Object(out)
    }
    walk(v, true, false)
}

/// A managedFields entry.
pub fn entry(
    writer: &Writer,
    api_version: &str,
    subresource: Option<&str>,
    obj: &Value,
    now: DateTime<Utc>,
) -> Value {
    let source = writer.applied.as_ref().unwrap_or(obj);
    let mut e = json!({
        "manager": writer.manager, "operation": writer.operation, "apiVersion": api_version,
        "time": timestamp(now), "fieldsType": "FieldsV1", "fieldsV1": fields_v1(source),
    });
    if let Some(s) = subresource {
        e["subresource"] = json!(s);
    }
    e
}

/// Replaces (or adds) the entry of this writer in `obj.metadata.managedFields`.
pub fn record(
    obj: &mut Value,
    writer: &Writer,
    api_version: &str,
    subresource: Option<&str>,
    now: DateTime<Utc>,
) {
    let new = entry(writer, api_version, subresource, obj, now);
    let md = metadata_mut(obj);
    let mut entries = md
        .get("managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| {
        !(e["manager"] == new["manager"]
            && e["operation"] == new["operation"]
            && e.get("subresource") == new.get("subresource"))
    });
    entries.push(new);
    md.insert("managedFields".into(), Value::Array(entries));
}

/// The `fieldsV1` this manager applied last time on this subresource, if any.
pub fn applied_fields(obj: &Value, manager: &str, subresource: Option<&str>) -> Option<Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find_map(|e| {
            let same = e["manager"] == json!(manager)
                && e["operation"] == "Apply"
                && e.get("subresource").and_then(Value::as_str) == subresource;
            same.then(|| e["fieldsV1"].clone())
        })
}

/// Removes from `obj` the map fields present in `old` but absent from `new` (both `fieldsV1`
/// sets): what server-side apply does when a manager stops applying a field. Lists are leaves.
pub fn prune(obj: &mut Value, old: &Value, new: &Value) {
    let (Some(old), Some(target)) = (old.as_object(), obj.as_object_mut()) else {
        return;
    };
    for (fk, old_child) in old {
        let Some(k) = fk.strip_prefix("f:") else {
            continue;
        };
        match new.get(fk) {
            None => {
                target.remove(k);
            }
            Some(new_child) => {
                if let Some(child) = target.get_mut(k) {
                    prune(child, old_child, new_child);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_removes_fields_no_longer_applied() {
        let mut obj = json!({"spec": {"a": 1, "b": {"c": 2, "d": 3}}, "status": {"x": 1}});
        let old = fields_v1(&json!({"spec": {"a": 1, "b": {"c": 2, "d": 3}}}));
        let new = fields_v1(&json!({"spec": {"b": {"c": 2}}}));
        prune(&mut obj, &old, &new);
        assert_eq!(obj, json!({"spec": {"b": {"c": 2}}, "status": {"x": 1}}));
    }
}
