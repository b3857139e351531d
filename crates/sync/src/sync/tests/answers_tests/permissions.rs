//! What a call refused for a missing IAM permission (403) leaves behind: the refusal is
//! returned (the controller turns it into the `PermissionDenied` Event naming the permission,
//! src/controller/permission.rs) and nothing the operator made is forgotten, so its deletion
//! still deletes it (issue 43: the role proven exact, no silent leak).

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::super::{list, other_lists_empty, G};
use super::{answer, once};
use crate::compute::test_support::{compute_for, done_op};
use crate::compute::ErrorKind;
use crate::sync::{addresses, firewalls, health_checks, Changes};

/// IAM's refusal text for `permission` on `resource` (Compute API, "Authorization").
fn refused(permission: &str, resource: &str) -> ResponseTemplate {
    answer(
        403,
        "PERMISSION_DENIED",
        &format!("Required '{permission}' permission for '{resource}'"),
    )
}

/// `error` and its sources, joined.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut e = error.source();
    while let Some(cur) = e {
        out += &format!(": {cur}");
        e = cur.source();
    }
    out
}

/// A fresh managed address whose insert succeeded but whose read-back is refused (no
/// `compute.globalAddresses.get`): the refusal is the error, and the address is known to
/// exist, so deleting the Ingress's frontend deletes it (it was listed before the insert:
/// trusting that listing leaked it).
#[tokio::test]
async fn an_address_whose_read_back_is_refused_is_still_deleted() {
    let server = MockServer::start().await;
    let addresses_path = format!("{G}/addresses");
    list(&server, &addresses_path, json!([]), None).await;
    other_lists_empty(&server).await;
    once(
        &server,
        "POST",
        &addresses_path,
        ResponseTemplate::new(200).set_body_json(done_op("op-1")),
    )
    .await;
    let resource = "projects/p1/global/addresses/k8s2-fr-x";
    once(
        &server,
        "GET",
        &format!("{addresses_path}/k8s2-fr-x"),
        refused("compute.globalAddresses.get", resource),
    )
    .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{addresses_path}/k8s2-fr-x")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-2")))
        .expect(1)
        .named("the address's delete")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    // The cache lists the collection first, as the Ingress's sync does (get_ip).
    assert_eq!(
        addresses::get_ip(&compute, "k8s2-fr-x").await.unwrap(),
        None
    );
    let mut changes = Changes::new();
    let err = addresses::ensure_managed(&compute, "k8s2-fr-x", None, &mut changes)
        .await
        .unwrap_err();
    assert_eq!(err.compute_kind(), Some(ErrorKind::Forbidden), "{err}");
    assert!(chain(&err).contains("compute.globalAddresses.get"), "{err}");
    let mut changes = Changes::new();
    addresses::delete(&compute, "k8s2-fr-x", &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "the delete is reported: {changes:?}");
}

/// The shared firewall rule in the operator's own project (no Shared VPC): a refused delete
/// (no `compute.firewalls.delete`) is the error naming the permission, every time (the rule is
/// not taken as gone), not a rule silently left to a security admin who does not exist.
#[tokio::test]
async fn a_firewall_delete_refused_in_the_own_project_is_an_error() {
    let server = MockServer::start().await;
    let resource = "projects/p1/global/firewalls/k8s-fw-l7--uid";
    Mock::given(method("DELETE"))
        .and(path(format!("/compute/v1/{resource}")))
        .respond_with(refused("compute.firewalls.delete", resource))
        .expect(2)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = firewalls::RuleState::default();
    for _ in 0..2 {
        let mut changes = Changes::new();
        let err = firewalls::delete(&compute, "p1", "k8s-fw-l7--uid", &mut state, &mut changes)
            .await
            .unwrap_err();
        assert_eq!(err.compute_kind(), Some(ErrorKind::Forbidden), "{err}");
        assert!(chain(&err).contains("compute.firewalls.delete"), "{err}");
        assert!(changes.is_empty(), "{changes:?}");
    }
}

/// A health check whose insert the API accepted but whose Operation the operator may not wait
/// on (no `compute.globalOperations.get`): the refusal is the error, and deleting the
/// Ingress's backends afterwards deletes the health check (it was forgotten, so the permission
/// report saw `global/healthChecks/k8s1-...` left behind once the Ingress was deleted).
#[tokio::test]
async fn a_health_check_whose_operation_wait_is_refused_is_still_deleted() {
    let server = MockServer::start().await;
    let collection = format!("{G}/healthChecks");
    // Listed before the insert: empty; afterwards the API lists what it created.
    once(
        &server,
        "GET",
        &collection,
        ResponseTemplate::new(200).set_body_json(json!({"items": []})),
    )
    .await;
    list(&server, &collection, json!([{"name": "k8s1-hc"}]), None).await;
    other_lists_empty(&server).await;
    let running = json!({"kind": "compute#operation", "name": "op-1", "status": "RUNNING",
        "operationType": "insert"});
    once(
        &server,
        "POST",
        &collection,
        ResponseTemplate::new(200).set_body_json(running),
    )
    .await;
    once(
        &server,
        "POST",
        &format!("{G}/operations/op-1/wait"),
        refused(
            "compute.globalOperations.get",
            "projects/p1/global/operations/op-1",
        ),
    )
    .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{collection}/k8s1-hc")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-2")))
        .expect(1)
        .named("the health check's delete")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::HealthCheck::new().set_name("k8s1-hc");
    let err = health_checks::ensure(&compute, &desired, &mut Changes::new())
        .await
        .unwrap_err();
    assert_eq!(err.compute_kind(), Some(ErrorKind::Forbidden), "{err}");
    assert!(
        chain(&err).contains("compute.globalOperations.get"),
        "{err}"
    );
    let mut changes = Changes::new();
    health_checks::delete(&compute, "k8s1-hc", &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "the delete is reported: {changes:?}");
}
