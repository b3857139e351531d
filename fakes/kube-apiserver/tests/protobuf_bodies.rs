//! Protobuf bodies over real HTTPS, as client-go sends and reads them with the protobuf content
//! type (GKE's Ingress controller does): an Event POSTed as protobuf is stored and read back as
//! JSON; a Lease created and then updated as protobuf keeps its resourceVersion check; any
//! built-in kind (a Deployment, a Service, a ClusterRole) is decoded, and answered in protobuf
//! when the client lists protobuf first (objects and lists, read back with the `k8s-pb`
//! crate's generated messages); a kind without a protobuf form (a custom resource) answers 415
//! naming it.

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
    let bytes = r.bytes().await.expect("body");
    let body = if ct.starts_with(PROTOBUF) {
        k8s_protobuf::decode(&bytes).expect("a protobuf answer decodes")
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    (status, ct, body)
}

/// GETs `path` preferring protobuf; returns (content type, body bytes).
async fn get_protobuf(srv: &api_support::ApiServer, path: &str) -> (String, Vec<u8>) {
    let r = srv
        .http()
        .get(format!("{}{path}", srv.url))
        .bearer_auth(srv.token())
        .header("accept", ACCEPT)
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status().as_u16(), 200, "GET {path}");
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (ct, r.bytes().await.expect("body").to_vec())
}

/// The message inside a protobuf answer's `k8s\0` envelope, as `(apiVersion, kind, raw)`.
fn unwrap_envelope(body: &[u8]) -> (String, String, Vec<u8>) {
    let u = Unknown::decode(body.strip_prefix(b"k8s\0".as_slice()).expect("magic"))
        .expect("runtime.Unknown");
    let tm = u.type_meta.unwrap_or_default();
    (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
        u.raw.unwrap_or_default(),
    )
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
    assert!(
        ct.starts_with(PROTOBUF),
        "answered in protobuf, first in Accept: {ct}"
    );
    assert_eq!(created["involvedObject"]["name"], "my-ingress", "{created}");
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
async fn any_built_in_kind_is_decoded_and_answered_in_protobuf() {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::rbac::v1 as rbac;
    let srv = api_support::start(&["--no-local-controllers"]);
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())].into();
    let deployment = apps::Deployment {
        metadata: meta("web", "default"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: labels.clone(),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("web".into()),
                        image: Some("registry.k8s.io/e2e-test-images/agnhost:2.39".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: Some(Default::default()),
    };
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let (status, ct, created) = send(
        &srv,
        reqwest::Method::POST,
        path,
        envelope("apps/v1", "Deployment", &deployment),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert!(ct.starts_with(PROTOBUF), "{ct}");
    assert_eq!(created["spec"]["replicas"], 2, "{created}");
    // Defaulted by the server, read back through the generated messages.
    let (ct, body) = get_protobuf(&srv, &format!("{path}/web")).await;
    assert!(ct.starts_with(PROTOBUF), "{ct}");
    let (api_version, kind, raw) = unwrap_envelope(&body);
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        ("apps/v1", "Deployment")
    );
    let read = apps::Deployment::decode(raw.as_slice()).expect("a Deployment");
    let spec = read.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.strategy.and_then(|s| s.r#type).as_deref(),
        Some("RollingUpdate"),
        "the server's defaults are encoded too"
    );
    assert!(read
        .metadata
        .and_then(|m| m.creation_timestamp)
        .and_then(|t| t.seconds)
        .is_some_and(|s| s > 0));
    // A list.
    let (_, body) = get_protobuf(&srv, path).await;
    let (_, kind, raw) = unwrap_envelope(&body);
    assert_eq!(kind, "DeploymentList");
    let list = apps::DeploymentList::decode(raw.as_slice()).expect("a DeploymentList");
    assert_eq!(list.items.len(), 1);
    // Other groups: a Service (int-or-string target port) and a ClusterRole.
    let service = core::Service {
        metadata: meta("web", "default"),
        spec: Some(core::ServiceSpec {
            selector: labels,
            ports: vec![core::ServicePort {
                port: Some(80),
                target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                    r#type: Some(1),
                    int_val: Some(0),
                    str_val: Some("http".into()),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let (status, _, created) = send(
        &srv,
        reqwest::Method::POST,
        "/api/v1/namespaces/default/services",
        envelope("v1", "Service", &service),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"]["ports"][0]["targetPort"], "http",
        "{created}"
    );
    let role = rbac::ClusterRole {
        metadata: meta("reader", ""),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["pods".into()],
            ..Default::default()
        }],
        aggregation_rule: None,
    };
    let (status, _, created) = send(
        &srv,
        reqwest::Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        envelope("rbac.authorization.k8s.io/v1", "ClusterRole", &role),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["rules"][0]["resources"][0], "pods", "{created}");
    let out = srv.kubectl_ok(&[
        "get",
        "deployment,service",
        "web",
        "-n",
        "default",
        "-o",
        "name",
    ]);
    assert!(
        out.contains("deployment.apps/web") && out.contains("service/web"),
        "{out}"
    );
}

#[tokio::test]
async fn kinds_without_a_protobuf_form_answer_415_naming_the_kind() {
    let srv = api_support::start(&[]);
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("gclb-operator.dev/v1alpha1".into()),
            kind: Some("TLSCertificateDelegation".into()),
        }),
        raw: Some(Vec::new()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let (status, _, v) = send(
        &srv,
        reqwest::Method::POST,
        // Decoding comes first: the kind, not the path, is refused.
        "/api/v1/namespaces/default/configmaps",
        [b"k8s\0".to_vec(), u.encode_to_vec()].concat(),
    )
    .await;
    assert_eq!(status, 415, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("gclb-operator.dev/v1alpha1 TLSCertificateDelegation"),
        "{v}"
    );
    let (status, _, v) = send(
        &srv,
        reqwest::Method::POST,
        "/api/v1/namespaces/default/events",
        b"k8s\0\x0a\x05garbage".to_vec(),
    )
    .await;
    assert_eq!(status, 400, "{v}");
}
