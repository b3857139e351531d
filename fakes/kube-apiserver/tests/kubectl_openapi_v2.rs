//! `/openapi/v2` (issue 30): kubectl 1.32 downloads it in protobuf to validate a `kind: List`
//! client-side, so `kubectl apply -f` of a List works, refuses an unknown field in an item with
//! the v2 schema's words (built-in kinds and CRD kinds alike), and `kubectl explain` works for an
//! Ingress and a BackendConfig field. The JSON form is served too, and an unacceptable type is 406.

mod api_support;

use api_support::start;

const LIST: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
  data: {x: "1"}
- apiVersion: cloud.google.com/v1
  kind: BackendConfig
  metadata: {name: bc}
  spec: {timeoutSec: 40}
"#;

#[test]
fn kubectl_apply_of_a_list_validates_with_openapi_v2() {
    let server = start(&["--no-local-controllers"]);
    let crd = format!(
        "{}/../../crds/backendconfigs.cloud.google.com.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    server.kubectl_ok(&["apply", "-f", &crd]);
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(LIST));
    assert!(ok, "apply of a List failed:\n{out}\n{err}");
    assert!(out.contains("configmap/a created"), "{out}");
    assert!(
        out.contains("backendconfig.cloud.google.com/bc created"),
        "{out}"
    );

    let typo = LIST.replace("data: {x: \"1\"}", "dta: {x: \"1\"}");
    let (ok, _, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(&typo));
    assert!(!ok, "a List with an unknown field was accepted");
    assert!(
        err.contains(
            r#"ValidationError(ConfigMap): unknown field "dta" in io.k8s.api.core.v1.ConfigMap"#
        ),
        "{err}"
    );
    let crd_typo = LIST.replace("timeoutSec: 40", "timeoutSecs: 40");
    let (ok, _, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(&crd_typo));
    assert!(!ok, "a List with an unknown CRD field was accepted");
    assert!(
        err.contains(r#"unknown field "timeoutSecs" in com.google.cloud.v1.BackendConfig.spec"#),
        "{err}"
    );

    let explain = server.kubectl_ok(&["explain", "ingress.spec.rules"]);
    assert!(
        explain.contains("FIELD: rules <[]IngressRule>"),
        "{explain}"
    );
    let explain = server.kubectl_ok(&["explain", "backendconfig.spec.cdn"]);
    assert!(explain.contains("FIELD: cdn <Object>"), "{explain}");
}

#[tokio::test]
async fn openapi_v2_json_and_406() {
    let server = start(&["--no-local-controllers"]);
    let http = server.http();
    let url = format!("{}/openapi/v2", server.url);
    let resp = http
        .get(&url)
        .bearer_auth(server.token())
        .header("Accept", "application/json")
        .send()
        .await
        .expect("GET /openapi/v2");
    assert_eq!(resp.status(), 200);
    let doc: serde_json::Value = resp.json().await.expect("JSON");
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["definitions"]["io.k8s.api.networking.v1.IngressSpec"]["properties"]["rules"]["items"]
            ["$ref"],
        "#/definitions/io.k8s.api.networking.v1.IngressRule"
    );
    let resp = http
        .get(&url)
        .bearer_auth(server.token())
        .header("Accept", "application/yaml")
        .send()
        .await
        .expect("GET /openapi/v2");
    assert_eq!(resp.status(), 406);
}
