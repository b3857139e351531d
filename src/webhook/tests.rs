use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};

use super::admission::{review, AdmissionError, Decision};
use super::*;
use crate::readiness::{NegRef, StaticLookup, NEG_READINESS_GATE};

/// Pods labelled `app: web` in namespace `shop` are behind an Ingress-backed Service.
fn lookup() -> StaticLookup {
    StaticLookup {
        entries: vec![(
            "shop".to_owned(),
            BTreeMap::from([("app".to_owned(), "web".to_owned())]),
            vec![NegRef::new(
                "us-central1-a",
                "k8s1-abc-shop-web-80-12345678",
            )],
        )],
    }
}

/// An AdmissionReview v1 the API server sends for `kubectl run`-like Pod creation; the object
/// has no namespace (CREATE), the request names it.
fn review_doc(operation: &str, labels: Value, spec_extra: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "web-1",
            "namespace": "shop",
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web-1", "labels": labels}, "spec": spec},
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn run(doc: &Value) -> (Value, Decision) {
    review(doc.to_string().as_bytes(), &lookup()).expect("valid review")
}

fn decoded_patch(answer: &Value) -> Value {
    let b64 = answer["response"]["patch"]
        .as_str()
        .expect("patch is a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("valid base64");
    serde_json::from_slice(&bytes).expect("patch is JSON")
}

#[test]
fn pod_behind_an_ingress_service_gets_the_gate() {
    let (answer, decision) = run(&review_doc("CREATE", json!({"app": "web"}), json!({})));
    assert!(matches!(decision, Decision::Patched(_)));
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(
        answer["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    assert_eq!(
        decoded_patch(&answer),
        json!([{"op": "add", "path": "/spec/readinessGates",
                "value": [{"conditionType": NEG_READINESS_GATE}]}])
    );
}

#[test]
fn existing_gates_are_appended_to() {
    let doc = review_doc(
        "CREATE",
        json!({"app": "web"}),
        json!({"readinessGates": [{"conditionType": "example.com/other"}]}),
    );
    let (answer, _) = run(&doc);
    assert_eq!(
        decoded_patch(&answer),
        json!([{"op": "add", "path": "/spec/readinessGates/-",
                "value": {"conditionType": NEG_READINESS_GATE}}])
    );
}

#[test]
fn applying_the_patch_gives_the_gated_pod() {
    let doc = review_doc("CREATE", json!({"app": "web"}), json!({}));
    let (answer, _) = run(&doc);
    let ops = decoded_patch(&answer);
    // Apply the RFC 6902 "add" the way the API server does, to check the paths are right.
    let mut pod = doc["request"]["object"].clone();
    for op in ops.as_array().unwrap() {
        assert_eq!(op["op"], "add");
        match op["path"].as_str().unwrap() {
            "/spec/readinessGates" => pod["spec"]["readinessGates"] = op["value"].clone(),
            other => panic!("unexpected path {other}"),
        }
    }
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod).unwrap();
    let record = crate::translate::pod::PodRecord::from_pod(&pod).unwrap();
    assert!(crate::readiness::rules::has_gate(&record));
}

#[test]
fn pod_not_selected_is_allowed_unpatched() {
    for doc in [
        review_doc("CREATE", json!({"app": "batch"}), json!({})),
        review_doc("CREATE", json!(null), json!({})),
    ] {
        let (answer, decision) = run(&doc);
        assert_eq!(
            decision,
            Decision::Unchanged("Pod is behind no Ingress-backed Service")
        );
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"].get("patch").is_none());
        assert!(answer["response"].get("patchType").is_none());
    }
}

#[test]
fn same_labels_in_another_namespace_are_not_selected() {
    let mut doc = review_doc("CREATE", json!({"app": "web"}), json!({}));
    doc["request"]["namespace"] = json!("other");
    let (_, decision) = run(&doc);
    assert!(matches!(decision, Decision::Unchanged(_)));
}

#[test]
fn already_gated_pod_is_unpatched() {
    let doc = review_doc(
        "CREATE",
        json!({"app": "web"}),
        json!({"readinessGates": [{"conditionType": NEG_READINESS_GATE}]}),
    );
    let (answer, decision) = run(&doc);
    assert_eq!(
        decision,
        Decision::Unchanged("Pod already has the readiness gate")
    );
    assert!(answer["response"].get("patch").is_none());
}

#[test]
fn updates_and_other_kinds_are_allowed_unpatched() {
    let (_, decision) = run(&review_doc("UPDATE", json!({"app": "web"}), json!({})));
    assert_eq!(decision, Decision::Unchanged("not a CREATE"));
    let mut doc = review_doc("CREATE", json!({"app": "web"}), json!({}));
    doc["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let (answer, decision) = run(&doc);
    assert_eq!(decision, Decision::Unchanged("not a Pod"));
    assert_eq!(answer["response"]["allowed"], true);
}

#[test]
fn malformed_reviews_give_clear_errors() {
    let l = lookup();
    let err = review(b"{not json", &l).unwrap_err();
    assert!(matches!(err, AdmissionError::Malformed(_)));
    assert!(err
        .to_string()
        .contains("not an admission.k8s.io/v1 AdmissionReview"));

    let mut v1beta1 = review_doc("CREATE", json!({"app": "web"}), json!({}));
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let err = review(v1beta1.to_string().as_bytes(), &l).unwrap_err();
    assert_eq!(
        err,
        AdmissionError::Unsupported {
            field: "apiVersion",
            value: "admission.k8s.io/v1beta1".into()
        }
    );
    assert!(err.to_string().contains("admissionReviewVersions: [v1]"));

    let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    assert_eq!(
        review(no_request.to_string().as_bytes(), &l).unwrap_err(),
        AdmissionError::MissingRequest
    );
}

#[tokio::test]
async fn https_endpoint_answers_admission_reviews() {
    let dir = tempfile::tempdir().unwrap();
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let cert_path = dir.path().join("tls.crt");
    let key_path = dir.path().join("tls.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, signing_key.serialize_pem()).unwrap();

    let tls_config = tls::server_config(&cert_path, &key_path).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = WebhookState::new(Arc::new(lookup()));
    let server = tokio::spawn(tls::serve(listener, tls_config, router(state)));

    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    // The certificate names 127.0.0.1 (an IP SAN), so the client verifies it by address.
    let url = format!("https://127.0.0.1:{}{MUTATE_PODS_PATH}", addr.port());
    let answer: Value = client
        .post(&url)
        .json(&review_doc("CREATE", json!({"app": "web"}), json!({})))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["response"]["patchType"], "JSONPatch");

    let bad = client.post(&url).body("nope").send().await.unwrap();
    assert_eq!(bad.status(), reqwest::StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("AdmissionReview"));

    let health = client
        .get(format!("https://127.0.0.1:{}/healthz", addr.port()))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success());
    server.abort();
}

#[test]
fn tls_errors_name_the_file() {
    let err = tls::server_config(
        std::path::Path::new("/nonexistent/tls.crt"),
        std::path::Path::new("/nonexistent/tls.key"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/nonexistent/tls.crt"), "{text}");
    assert!(text.contains("--webhook-tls-cert"), "{text}");
}

fn write_pair(dir: &std::path::Path) -> rcgen::CertifiedKey<rcgen::KeyPair> {
    let pair = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    std::fs::write(dir.join("tls.crt"), pair.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), pair.signing_key.serialize_pem()).unwrap();
    pair
}

async fn healthz_trusting(pem: &str, port: u16) -> Result<reqwest::StatusCode, reqwest::Error> {
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    client
        .get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .map(|r| r.status())
}

#[tokio::test]
async fn rotated_certificate_is_served_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_pair(dir.path());
    let tls_config =
        tls::server_config(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(tls::serve(
        listener,
        tls_config,
        router(WebhookState::new(Arc::new(lookup()))),
    ));
    assert!(healthz_trusting(&first.cert.pem(), port)
        .await
        .unwrap()
        .is_success());

    // cert-manager writes a new pair; later modification times mark the rotation.
    let second = write_pair(dir.path());
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
    for f in ["tls.crt", "tls.key"] {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(f))
            .unwrap()
            .set_modified(later)
            .unwrap();
    }
    assert!(healthz_trusting(&second.cert.pem(), port)
        .await
        .unwrap()
        .is_success());
    assert!(healthz_trusting(&first.cert.pem(), port).await.is_err());
    server.abort();
}
