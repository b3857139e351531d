//! Server-side apply over raw HTTPS: create, merge and prune, the `fieldManager` it requires,
//! and the typed conversion that refuses a configuration before anything else (wrong-typed
//! values and list keys, duplicated keys, undeclared fields), with kube-apiserver v1.28.7's
//! answers (checked on the real server).

mod api_support;

use api_support::http::Http;
use api_support::start;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";
const APPLY: &str = "application/apply-patch+yaml";

#[tokio::test]
async fn server_side_apply_creates_merges_and_prunes() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let path = format!("{CMS}/applied?fieldManager=tool");
    let (code, created) = http.patch(&path, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1", "b": "2"}}), APPLY).await;
    assert_eq!(code, 201, "{created}");
    let (code, _) = http
        .patch(
            &format!("{CMS}/applied"),
            json!({"data": {"other": "x"}}),
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200);
    let (code, after) = http.patch(&path, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "3"}}), APPLY).await;
    assert_eq!(code, 200);
    assert_eq!(
        after["data"],
        json!({"a": "3", "other": "x"}),
        "b was dropped by its manager; other belongs to another"
    );
    let managers: Vec<&str> = after["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(managers.contains(&"tool"), "{managers:?}");
    let (code, status) = http
        .patch(&format!("{CMS}/applied"), json!({"data": {}}), APPLY)
        .await;
    assert_eq!(code, 422, "apply needs a fieldManager: {status}");
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typed"},
        "spec": {"containers": containers}})
}

/// The answer of a typed-conversion (or Go conversion) refusal: 500, a Status without a reason.
fn typed_refusal(code: u16, status: &Value) -> String {
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status.get("reason"), None, "{status}");
    status["message"].as_str().unwrap_or_default().to_string()
}

/// The patch fuzz target's finding (seeds 10227668286827572431, 3949533465239213863): a
/// container whose `name` (the list's key) is `{"$patch": "delete"}` was accepted and every
/// apply appended another container. kube-apiserver v1.28.7 refuses it in its typed conversion.
#[tokio::test]
async fn apply_refuses_wrong_typed_list_keys_duplicates_and_undeclared_fields() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let path = format!("{PODS}/typed?fieldManager=tool");
    let web = json!({"name": "web", "image": "nginx"});
    let (code, created) = http.patch(&path, pod(json!([web])), APPLY).await;
    assert_eq!(code, 201, "{created}");

    let bad_key = pod(json!([{"name": {"$patch": "delete"}, "image": "nginx"}]));
    for _ in 0..2 {
        let (code, status) = http.patch(&path, bad_key.clone(), APPLY).await;
        assert_eq!(
            typed_refusal(code, &status),
            r#"failed to create typed patch object (/typed; /v1, Kind=Pod): .spec.containers[name=$patch="delete"].name: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"$patch":"delete"}}"#
        );
    }
    let (code, live) = http.get(&format!("{PODS}/typed")).await;
    assert_eq!(code, 200);
    assert_eq!(
        live["spec"]["containers"].as_array().map(Vec::len),
        Some(1),
        "{live}"
    );

    let (code, status) = http
        .patch(&path, pod(json!([web, {"name": "web"}])), APPLY)
        .await;
    assert_eq!(
        typed_refusal(code, &status),
        r#"failed to create typed patch object (/typed; /v1, Kind=Pod): .spec.containers: duplicate entries for key [name="web"]"#
    );

    // Refused as a typed-conversion error whatever fieldValidation says, and before the
    // namespace is looked up.
    let undeclared = pod(json!([{"name": "web", "image": "nginx", "x": 1}]));
    let strict = format!("{path}&fieldValidation=Strict");
    let (code, status) = http.patch(&strict, undeclared.clone(), APPLY).await;
    assert_eq!(
        typed_refusal(code, &status),
        r#"failed to create typed patch object (/typed; /v1, Kind=Pod): .spec.containers[name="web"].x: field not declared in schema"#
    );
    let elsewhere = "/api/v1/namespaces/missing/pods/typed?fieldManager=tool";
    let (code, status) = http.patch(elsewhere, undeclared, APPLY).await;
    typed_refusal(code, &status);

    // A fraction for an int32 passes the typed conversion but not the conversion to the Go
    // type, also when apply creates the object.
    let mut fraction = pod(json!([web]));
    fraction["metadata"]["name"] = json!("fraction");
    fraction["spec"]["priority"] = json!(0.5);
    let (code, status) = http
        .patch(
            &format!("{PODS}/fraction?fieldManager=tool"),
            fraction,
            APPLY,
        )
        .await;
    assert_eq!(
        typed_refusal(code, &status),
        "failed to convert new object (/fraction; /v1, Kind=Pod) to proper version: unable to convert unstructured object to /v1, Kind=Pod: cannot convert float64 to int32"
    );
    let (code, _) = http.get(&format!("{PODS}/fraction")).await;
    assert_eq!(code, 404);
}
