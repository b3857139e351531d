//! Server-side apply over raw HTTPS: create, merge and prune, and the `fieldManager` it requires.

mod api_support;

use api_support::http::Http;
use api_support::start;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
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
    assert_eq!(code, 400, "apply needs a fieldManager: {status}");
}
