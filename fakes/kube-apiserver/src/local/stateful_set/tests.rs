//! Unit cases of the StatefulSet controller's pure parts (upstream `stateful_set_utils_test.go`
//! and `stateful_set_status_updater` cases, ported).

use super::*;

fn set(extra: serde_json::Value) -> StatefulSet {
    let mut v = json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 4},
        "spec": {"replicas": 3, "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "agnhost:2.52",
                    "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}}]},
    });
    if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(v).unwrap()
}

fn revision(sts: &StatefulSet, name: &str) -> Revision {
    Revision {
        name: name.into(),
        hash: name.rsplit('-').next().unwrap().into(),
        number: 1,
        template: sts.spec.clone().unwrap().template,
    }
}

fn pod(name: &str, rev: &str, ready: bool, terminating: bool) -> Arc<Pod> {
    let conditions = if ready {
        json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}])
    } else {
        json!([])
    };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {CONTROLLER_REVISION_HASH: rev},
                "deletionTimestamp": if terminating { json!("2030-01-01T00:00:00Z") } else { json!(null) }},
            "spec": {"containers": []},
            "status": {"phase": "Running", "conditions": conditions},
        }))
        .unwrap(),
    )
}

#[test]
fn ordinals_parse_only_from_the_sets_own_names() {
    assert_eq!(ordinal_of("web", "web-0"), Some(0));
    assert_eq!(ordinal_of("web", "web-12"), Some(12));
    assert_eq!(ordinal_of("web", "web-x"), None);
    assert_eq!(ordinal_of("web", "web--1"), None);
    assert_eq!(ordinal_of("web", "web-+1"), None);
    assert_eq!(ordinal_of("web", "webapp-1"), None);
    assert_eq!(ordinal_of("web-a", "web-a-3"), Some(3));
}

#[test]
fn pods_have_stable_identity_labels_owner_and_claim_volumes() {
    let sts = set(json!({}));
    let p = pod_for(&sts, &revision(&sts, "web-7c9f"), 2);
    assert_eq!(p.metadata.name.as_deref(), Some("web-2"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("shop"));
    let labels = p.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "nginx");
    assert_eq!(labels[POD_NAME_LABEL], "web-2");
    assert_eq!(labels[POD_INDEX_LABEL], "2");
    assert_eq!(labels[CONTROLLER_REVISION_HASH], "web-7c9f");
    let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", "u1", Some(true))
    );
    let spec = p.spec.unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("web-2"), Some("nginx"))
    );
    let volume = &spec.volumes.unwrap()[0];
    assert_eq!(volume.name, "www");
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-2"
    );
}

#[test]
fn current_revision_follows_the_update_once_every_pod_is_updated_and_ready() {
    let sts = set(json!({}));
    let (old, new) = (revision(&sts, "web-old"), revision(&sts, "web-new"));
    let mid = [
        pod("web-0", "web-old", true, false),
        pod("web-1", "web-old", true, false),
        pod("web-2", "web-new", false, false),
    ];
    let (s, _) = status_of(&sts, &mid, &old, &new);
    assert_eq!(s["replicas"], 3);
    assert_eq!(s["readyReplicas"], 2);
    assert_eq!(s["currentReplicas"], 2);
    assert_eq!(s["updatedReplicas"], 1);
    assert_eq!(s["currentRevision"], "web-old");
    assert_eq!(s["updateRevision"], "web-new");
    assert_eq!(s["observedGeneration"], 4);
    let done = [
        pod("web-0", "web-new", true, false),
        pod("web-1", "web-new", true, false),
        pod("web-2", "web-new", true, false),
    ];
    let (s, _) = status_of(&sts, &done, &old, &new);
    assert_eq!(
        (s["currentRevision"].as_str(), s["currentReplicas"].as_i64()),
        (Some("web-new"), Some(3))
    );
    let on_delete = set(json!({"updateStrategy": {"type": "OnDelete"}}));
    let (s, _) = status_of(&on_delete, &done, &old, &new);
    assert_eq!(
        s["currentRevision"], "web-old",
        "OnDelete never completes a rolling update"
    );
    let terminating = [pod("web-0", "web-old", true, true)];
    let (s, _) = status_of(&sts, &terminating, &old, &new);
    assert_eq!(
        (s["replicas"].as_i64(), s["currentReplicas"].as_i64()),
        (Some(1), None)
    );
}
