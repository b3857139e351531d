//! Protobuf request bodies over real HTTPS, as client-go sends them with the protobuf content
//! type (GKE's Ingress controller does): an Event POSTed as protobuf is stored and read back as
//! JSON; a Lease created and then updated as protobuf keeps its resourceVersion check; a kind
//! the server does not decode answers 415 naming it.

mod api_support;

use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::Value;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// client-go's Accept header for a protobuf client: JSON is its fallback.
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), u.encode_to_vec()].concat()
}

/// Sends a protobuf body; returns (status, content type, JSON body).
async fn send(
    srv: &api_support::ApiServer,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> (u16, String, Value) {
    let r = srv
        .http()
        .request(method, format!("{}{path}", srv.url))
        .bearer_auth(srv.token())
        .header("content-type", PROTOBUF)
        .header("accept", ACCEPT)
        .body(body)
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, ct, r.json().await.unwrap_or(Value::Null))
}

async fn get_json(srv: &api_support::ApiServer, path: &str) -> Value {
    srv.http()
        .get(format!("{}{path}", srv.url))
        .bearer_auth(srv.token())
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON")
}

fn meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        // What Go's marshaller writes for unset non-pointer fields.
        generate_name: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    })
}

#[tokio::test]
async fn a_protobuf_event_is_stored_and_read_back_as_json() {
    let srv = api_support::start(&[]);
    let at = Some(meta::Time {
        seconds: Some(1_795_623_729),
        nanos: Some(0),
    });
    let event = core::Event {
        metadata: meta("my-ingress.18eb5682304da0bd", "default"),
        involved_object: Some(core::ObjectReference {
            kind: Some("Ingress".into()),
            namespace: Some("default".into()),
            name: Some("my-ingress".into()),
            uid: Some("0d4e6c1a-1111-2222-3333-444455556666".into()),
            api_version: Some("networking.k8s.io/v1".into()),
            resource_version: Some("42".into()),
            field_path: Some(String::new()),
        }),
        reason: Some("Sync".into()),
        message: Some("Scheduled for sync".into()),
        source: Some(core::EventSource {
            component: Some("loadbalancer-controller".into()),
            host: Some(String::new()),
        }),
        first_timestamp: at,
        last_timestamp: at,
        count: Some(1),
        r#type: Some("Normal".into()),
        event_time: Some(meta::MicroTime::default()),
        series: None,
        action: Some(String::new()),
        related: None,
        reporting_component: Some("loadbalancer-controller".into()),
        reporting_instance: Some(String::new()),
    };
    let (status, ct, created) = send(
        &srv,
        reqwest::Method::POST,
        "/api/v1/namespaces/default/events",
        envelope("v1", "Event", &event),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(ct.starts_with("application/json"), "answered in JSON: {ct}");
    let stored = get_json(
        &srv,
        "/api/v1/namespaces/default/events/my-ingress.18eb5682304da0bd",
    )
    .await;
    assert_eq!(stored["kind"], "Event", "{stored}");
    assert_eq!(stored["involvedObject"]["kind"], "Ingress");
    assert_eq!(stored["involvedObject"]["name"], "my-ingress");
    assert_eq!(
        stored["involvedObject"]["apiVersion"],
        "networking.k8s.io/v1"
    );
    assert!(
        stored["involvedObject"].get("fieldPath").is_none(),
        "empty strings are unset"
    );
    assert_eq!(stored["reason"], "Sync");
    assert_eq!(stored["message"], "Scheduled for sync");
    assert_eq!(
        stored["source"],
        serde_json::json!({"component": "loadbalancer-controller"})
    );
    assert_eq!(stored["firstTimestamp"], "2026-11-25T16:22:09Z");
    assert_eq!(stored["lastTimestamp"], "2026-11-25T16:22:09Z");
    assert_eq!(stored["count"], 1);
    assert_eq!(stored["type"], "Normal");
    assert!(
        stored.get("eventTime").is_none(),
        "a zero MicroTime is unset: {stored}"
    );
    assert_eq!(stored["reportingComponent"], "loadbalancer-controller");
    assert!(stored["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    assert!(stored["metadata"].get("generateName").is_none());
    // And kubectl lists it.
    let out = srv.kubectl_ok(&["get", "events", "-n", "default", "-o", "name"]);
    assert!(out.contains("event/my-ingress.18eb5682304da0bd"), "{out}");
}

#[tokio::test]
async fn a_protobuf_lease_is_created_then_updated_with_its_resource_version() {
    let srv = api_support::start(&[]);
    let renew = |secs: i64| {
        Some(meta::MicroTime {
            seconds: Some(secs),
            nanos: Some(500_000_000),
        })
    };
    let mut lease = coordination::Lease {
        metadata: meta("ingress-gce-lock", "kube-system"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("glbc-1".into()),
            lease_duration_seconds: Some(15),
            acquire_time: renew(1_795_623_700),
            renew_time: renew(1_795_623_700),
            lease_transitions: Some(0),
            strategy: None,
            preferred_holder: None,
        }),
    };
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let (status, _, created) = send(
        &srv,
        reqwest::Method::POST,
        path,
        envelope("coordination.k8s.io/v1", "Lease", &lease),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["leaseTransitions"], 0,
        "a present 0 is kept"
    );
    assert_eq!(created["spec"]["renewTime"], "2026-11-25T16:21:40.500000Z");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // A renewal with the resourceVersion it read succeeds; one with a stale version conflicts.
    let m = lease.metadata.as_mut().unwrap();
    m.resource_version = Some(rv.clone());
    m.uid = created["metadata"]["uid"].as_str().map(str::to_string);
    lease.spec.as_mut().unwrap().renew_time = renew(1_795_623_710);
    let item = format!("{path}/ingress-gce-lock");
    let body = envelope("coordination.k8s.io/v1", "Lease", &lease);
    let (status, _, updated) = send(&srv, reqwest::Method::PUT, &item, body.clone()).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["spec"]["renewTime"], "2026-11-25T16:21:50.500000Z");
    assert_ne!(updated["metadata"]["resourceVersion"], rv);
    let (status, _, conflict) = send(&srv, reqwest::Method::PUT, &item, body).await;
    assert_eq!(status, 409, "{conflict}");
}

#[tokio::test]
async fn kinds_not_decoded_answer_415_naming_the_kind() {
    let srv = api_support::start(&[]);
    let pod = core::Pod {
        metadata: meta("p", "default"),
        ..Default::default()
    };
    let (status, _, v) = send(
        &srv,
        reqwest::Method::POST,
        "/api/v1/namespaces/default/pods",
        envelope("v1", "Pod", &pod),
    )
    .await;
    assert_eq!(status, 415, "{v}");
    assert!(v["message"].as_str().unwrap().contains("v1 Pod"), "{v}");
    let (status, _, v) = send(
        &srv,
        reqwest::Method::POST,
        "/api/v1/namespaces/default/events",
        b"k8s\0\x0a\x05garbage".to_vec(),
    )
    .await;
    assert_eq!(status, 400, "{v}");
}
