//! `managedFields` as the real server writes them, and apply conflicts as it words them.

use chrono::Utc;
use serde_json::{json, Value};

use super::conflicts::check;
use super::field_set::{display, FieldSet};
use super::{fields_v1, prune, record, Write};
use crate::openapi::OpenApi;
use crate::store::Writer;

fn write<'a>(writer: &'a Writer, openapi: &'a OpenApi, kind: &str) -> Write<'a> {
    Write {
        writer,
        api_version: "v1",
        subresource: None,
        schema: openapi.schema_for("", "v1", kind),
        skip_status: kind == "Pod",
        builtin: true,
    }
}

fn apply(manager: &str, config: Value) -> Writer {
    Writer {
        manager: manager.into(),
        operation: "Apply",
        applied: Some(config),
        openapi: None,
    }
}

#[test]
fn prune_removes_fields_no_longer_applied() {
    let mut obj = json!({"spec": {"a": 1, "b": {"c": 2, "d": 3}}, "status": {"x": 1}});
    let old = fields_v1(&json!({"spec": {"a": 1, "b": {"c": 2, "d": 3}}}));
    let new = fields_v1(&json!({"spec": {"b": {"c": 2}}}));
    prune(&mut obj, &old, &new);
    assert_eq!(obj, json!({"spec": {"b": {"c": 2}}, "status": {"x": 1}}));
}

#[test]
fn an_update_owns_what_it_added_with_dots_and_lists_by_key() {
    let openapi = OpenApi::new();
    let w = Writer::update("kubectl-create");
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
        "status": {"phase": "Pending"}});
    record(&mut pod, None, &write(&w, &openapi, "Pod"), Utc::now());
    let entries = pod["metadata"]["managedFields"]
        .as_array()
        .expect("entries");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}})
    );
}

#[test]
fn an_apply_owns_its_configuration_and_takes_changed_fields_from_others() {
    let openapi = OpenApi::new();
    let create = Writer::update("creator");
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    record(
        &mut cm,
        None,
        &write(&create, &openapi, "ConfigMap"),
        Utc::now(),
    );
    let old = cm.clone();
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
    cm["data"]["a"] = json!("9");
    let applier = apply("applier", config);
    record(
        &mut cm,
        Some(&old),
        &write(&applier, &openapi, "ConfigMap"),
        Utc::now(),
    );
    let entries = cm["metadata"]["managedFields"].as_array().expect("entries");
    assert_eq!(entries[0]["manager"], "applier");
    assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    assert_eq!(entries[1]["manager"], "creator");
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:data": {".": {}, "f:b": {}}})
    );
}

#[test]
fn an_apply_changing_another_managers_field_is_a_conflict_worded_as_the_real_server() {
    let openapi = OpenApi::new();
    let schema = openapi.schema_for("", "v1", "ConfigMap");
    let create = Writer::update("kubectl-create");
    let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    record(
        &mut live,
        None,
        &write(&create, &openapi, "ConfigMap"),
        Utc::now(),
    );
    let mut same = live.clone();
    same["data"]["c"] = json!("3");
    assert!(check(&live, &same, "m", None, schema, false, true).is_ok());
    let mut merged = live.clone();
    merged["data"]["a"] = json!("9");
    let err = check(&live, &merged, "m", None, schema, false, true).expect_err("conflict");
    let status = err.to_status();
    assert_eq!(status["code"], 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl-create\" using v1", "field": ".data.a"}])
    );
    merged["data"]["b"] = json!("9");
    let err = check(&live, &merged, "m", None, schema, false, true).expect_err("conflicts");
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-create\" using v1:\n- .data.a\n- .data.b"
    );
}

#[test]
fn paths_print_as_structured_merge_diff_prints_them() {
    let set = FieldSet::from_fields_v1(
        &json!({"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}}}},
        "f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}}}),
    );
    let shown: Vec<String> = set.0.iter().map(|p| display(p)).collect();
    assert!(
        shown.contains(&".spec.containers[name=\"web\"].image".to_string()),
        "{shown:?}"
    );
    assert!(
        shown.contains(&".metadata.finalizers[=\"a/b\"]".to_string()),
        "{shown:?}"
    );
}
