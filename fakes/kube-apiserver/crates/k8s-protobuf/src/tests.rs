use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::*;

/// A body as client-go sends it, built with the `k8s-pb` crate's generated messages (code
/// generated independently of the descriptors under test).
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC.to_vec(), u.encode_to_vec()].concat()
}

fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: Some("web".into()),
        image: Some("registry.k8s.io/e2e-test-images/agnhost:2.39".into()),
        ports: vec![core::ContainerPort {
            container_port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }],
        resources: Some(core::ResourceRequirements {
            requests: [(
                "cpu".to_string(),
                Quantity {
                    string: Some("100m".into()),
                },
            )]
            .into(),
            ..Default::default()
        }),
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: Some("/".into()),
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("http".into()),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            generate_name: Some(String::new()),
            labels: [("app".to_string(), "web".to_string())].into(),
            creation_timestamp: Some(meta::Time {
                seconds: Some(0),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(meta::LabelSelector {
                match_labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    volumes: vec![core::Volume {
                        name: Some("scratch".into()),
                        volume_source: Some(core::VolumeSource {
                            empty_dir: Some(core::EmptyDirVolumeSource::default()),
                            ..Default::default()
                        }),
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("25%".into()),
                    }),
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: Some(String::new()),
                    }),
                }),
            }),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

fn deployment_json() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web", "image": "registry.k8s.io/e2e-test-images/agnhost:2.39",
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "resources": {"requests": {"cpu": "100m"}},
                        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                    }],
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                },
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        },
        "status": {},
    })
}

#[test]
fn decodes_a_deployment_client_go_style() {
    let body = envelope("apps/v1", "Deployment", deployment().encode_to_vec());
    assert_eq!(decode(&body).unwrap(), deployment_json());
}

#[test]
fn encodes_what_the_generated_messages_read_back() {
    let body = encode(&deployment_json()).unwrap();
    let u = Unknown::decode(body.strip_prefix(MAGIC).unwrap()).unwrap();
    let tm = u.type_meta.unwrap();
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some("apps/v1"), Some("Deployment"))
    );
    let d = apps::Deployment::decode(u.raw.unwrap().as_slice()).unwrap();
    let spec = d.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let ru = spec.strategy.unwrap().rolling_update.unwrap();
    assert_eq!(ru.max_surge.unwrap().str_val.as_deref(), Some("25%"));
    assert_eq!(ru.max_unavailable.unwrap().int_val, Some(1));
    let pod = spec.template.unwrap().spec.unwrap();
    assert_eq!(pod.containers[0].ports[0].container_port, Some(8080));
    assert_eq!(
        pod.containers[0].resources.as_ref().unwrap().requests["cpu"]
            .string
            .as_deref(),
        Some("100m")
    );
    assert!(pod.volumes[0]
        .volume_source
        .as_ref()
        .unwrap()
        .empty_dir
        .is_some());
    // And back: the same object.
    assert_eq!(decode(&body).unwrap(), deployment_json());
}

#[test]
fn times_bytes_and_raw_json_take_their_json_forms() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "creationTimestamp": "2026-11-25T16:22:09Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:a": {}}}, "time": "2026-11-25T16:22:09Z"}]},
        "type": "Opaque", "data": {"a": "AP8="}});
    assert_eq!(decode(&encode(&secret).unwrap()).unwrap(), secret);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-11-25T16:22:09.123456Z"}});
    assert_eq!(decode(&encode(&lease).unwrap()).unwrap(), lease);
}

#[test]
fn every_served_group_finds_its_messages() {
    for (api_version, kind, full) in [
        ("v1", "Pod", "api.core.v1.Pod"),
        ("v1", "Status", "apimachinery.pkg.apis.meta.v1.Status"),
        ("apps/v1", "DeploymentList", "api.apps.v1.DeploymentList"),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "api.rbac.v1.ClusterRoleBinding",
        ),
        (
            "networking.k8s.io/v1",
            "Ingress",
            "api.networking.v1.Ingress",
        ),
        (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        ),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "api.admissionregistration.v1.ValidatingWebhookConfiguration",
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "api.policy.v1.PodDisruptionBudget",
        ),
        (
            "discovery.k8s.io/v1",
            "EndpointSlice",
            "api.discovery.v1.EndpointSlice",
        ),
    ] {
        let m = message_for(api_version, kind).unwrap_or_else(|| panic!("{api_version} {kind}"));
        assert_eq!(m.full_name(), full);
    }
    assert!(message_for("gclb-operator.dev/v1alpha1", "TLSCertificateDelegation").is_none());
    let body = envelope("example.com/v1", "Widget", vec![]);
    assert!(matches!(decode(&body), Err(Error::UnknownKind { .. })));
    assert!(matches!(decode(b"nope"), Err(Error::Malformed(_))));
    let body = envelope("v1", "Event", vec![0x0a, 0x05, 1]);
    assert!(matches!(decode(&body), Err(Error::Malformed(_))));
}

#[test]
fn a_value_of_the_wrong_type_names_its_field() {
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"replicas": "two"}});
    match encode(&bad) {
        Err(Error::Json { field, .. }) => assert_eq!(field, "spec.replicas"),
        other => panic!("{other:?}"),
    }
}
