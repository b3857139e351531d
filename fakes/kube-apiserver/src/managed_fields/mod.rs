//! `metadata.managedFields` as the real server's field manager keeps them
//! (k8s.io/apiserver `pkg/endpoints/handlers/fieldmanager`, k8s.io/apimachinery
//! `pkg/util/managedfields`, sigs.k8s.io/structured-merge-diff v4 `merge/update.go`):
//!
//! - one entry per manager identity (manager, operation, subresource; `apiVersion` too for
//!   `Update`), `fieldsV1` the set of fields it owns ([`field_set`]), sorted as
//!   `sortEncodedManagedFields` sorts them (operation, time, manager, apiVersion, subresource);
//! - an `Update` (create, update, patch) owns what it added or changed; an `Apply` owns exactly
//!   the fields of its configuration; either takes what it changed away from every other
//!   manager, and a removed field leaves every set; a manager left with no field is dropped;
//! - server-side apply that changes a field another manager owns is refused with 409 Conflict
//!   unless `force=true` ([`conflicts`]).
//!
//! `status` is not owned through the main resource of a kind with a status subresource (the
//! strategies' reset fields).

pub mod conflicts;
pub mod field_set;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::meta::{metadata_mut, timestamp};
use crate::schema::Schema;
use crate::store::Writer;
use field_set::{compare, FieldSet};

pub use field_set::display;

/// Whether `e` is the entry of `manager`'s `operation` on `subresource` (`apiVersion` counted
/// for `Update` entries only, as `BuildManagerIdentifier` does).
fn same_identity(
    e: &Value,
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
) -> bool {
    e["manager"] == manager
        && e["operation"] == operation
        && e.get("subresource").and_then(Value::as_str) == subresource
        && (operation == "Apply" || e["apiVersion"] == api_version)
}

/// What one write did to the fields: recorded by [`record`].
pub struct Write<'a> {
    /// Who wrote, and for `Apply` the configuration.
    pub writer: &'a Writer,
    /// `v1`, `apps/v1`...
    pub api_version: &'a str,
    /// `Some("status")` for `/status` writes.
    pub subresource: Option<&'a str>,
    /// The kind's schema (list keys); `None`: lists are leaves.
    pub schema: Option<Schema<'a>>,
    /// The kind has a status subresource and this is a main-resource write: `status` is not
    /// owned.
    pub skip_status: bool,
    /// A built-in kind (not a custom resource): see [`field_set::compare`].
    pub builtin: bool,
}

/// Updates `new.metadata.managedFields` for a write of `new` over `old` (`None` for a create),
/// starting from `old`'s entries.
pub fn record(new: &mut Value, old: Option<&Value>, w: &Write<'_>, now: DateTime<Utc>) {
    let empty = json!({});
    let before = old.unwrap_or(&empty);
    let cmp = compare(before, new, w.schema, w.skip_status, w.builtin);
    let changed = cmp.changed();
    let manager = w.writer.manager.as_str();
    let op = w.writer.operation;
    let mut own = FieldSet::default();
    let mut entries: Vec<Value> = Vec::new();
    let mut own_time = None;
    for e in before["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let set = FieldSet::from_fields_v1(&e["fieldsV1"]);
        if same_identity(e, manager, op, w.api_version, w.subresource) {
            own = set;
            own_time = e.get("time").cloned();
            continue;
        }
        let kept = set.difference(&changed).difference(&cmp.removed);
        if kept.0.is_empty() {
            continue;
        }
        let mut e = e.clone();
        e["fieldsV1"] = kept.to_fields_v1();
        entries.push(e);
    }
    let mine = match &w.writer.applied {
        Some(config) => FieldSet::of(config, w.schema, false, w.skip_status),
        None => own.difference(&cmp.removed).union(&changed),
    };
    if !mine.0.is_empty() {
        let time = if mine != own || own_time.is_none() {
            json!(timestamp(now))
        } else {
            own_time.unwrap_or_default()
        };
        let mut e = json!({
            "manager": manager, "operation": op, "apiVersion": w.api_version,
            "time": time, "fieldsType": "FieldsV1", "fieldsV1": mine.to_fields_v1(),
        });
        if let Some(s) = w.subresource {
            e["subresource"] = json!(s);
        }
        entries.push(e);
    }
    entries.sort_by(|a, b| {
        let key = |e: &Value| {
            (
                e["operation"].as_str().unwrap_or_default().to_string(),
                e["time"]
                    .as_str()
                    .unwrap_or_default()
                    .get(..19)
                    .unwrap_or_default()
                    .to_string(),
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["apiVersion"].as_str().unwrap_or_default().to_string(),
                e["subresource"].as_str().unwrap_or_default().to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    let md = metadata_mut(new);
    if entries.is_empty() {
        md.remove("managedFields");
    } else {
        md.insert("managedFields".into(), Value::Array(entries));
    }
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

/// The `fieldsV1` set of a JSON value, without list keys (every list a leaf):
/// `{"f:spec": {"f:rules": {}}}`.
pub fn fields_v1(v: &Value) -> Value {
    FieldSet::of(v, None, false, false).to_fields_v1()
}

/// Removes from `obj` the map fields present in `old` but absent from `new` (both `fieldsV1`
/// sets): what server-side apply does when a manager stops applying a field. List elements
/// (`k:`, `v:` keys) are not pruned one by one: a list no longer applied at all goes.
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
#[path = "tests.rs"]
mod tests;
