//! The error answers on the backend side: NEGs, security policies, the firewall rule and
//! backend services.

use super::*;

/// A NEG whose insert loses a race (409) exists: the sync goes on without an error or a
/// reported creation.
#[tokio::test]
async fn a_neg_that_loses_the_insert_race_is_kept() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    once(
        &server,
        "POST",
        "/compute/v1/projects/p1/zones/z1/networkEndpointGroups",
        answer(409, "ALREADY_EXISTS", "The resource 'neg1' already exists"),
    )
    .await;
    let compute = compute_for(&server).await;
    let desired = DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints: Default::default(),
    };
    let mut changes = Changes::new();
    network_endpoint_groups::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

/// A NEG insert refused for another reason (400) fails the sync with the API's message; it is
/// not taken for an existing NEG.
#[tokio::test]
async fn a_neg_insert_refused_as_invalid_fails_the_sync() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    once(
        &server,
        "POST",
        "/compute/v1/projects/p1/zones/z1/networkEndpointGroups",
        answer(
            400,
            "INVALID_ARGUMENT",
            "Invalid value for field 'resource.network'",
        ),
    )
    .await;
    let compute = compute_for(&server).await;
    let desired = DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints: Default::default(),
    };
    let mut changes = Changes::new();
    let err = network_endpoint_groups::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Invalid value for field 'resource.network'"),
        "{err}"
    );
    assert!(changes.is_empty(), "{changes:?}");
}

/// A security policy insert refused for another reason than a race (here 400) fails the sync:
/// no backend service may name a policy that does not exist.
#[tokio::test]
async fn a_refused_security_policy_insert_fails_the_sync() {
    let server = MockServer::start().await;
    let policies = format!("{G}/securityPolicies");
    Mock::given(method("GET"))
        .and(path(format!("{policies}/sp1")))
        .respond_with(crate::compute::test_support::not_found())
        .mount(&server)
        .await;
    once(
        &server,
        "POST",
        &policies,
        answer(
            400,
            "INVALID_ARGUMENT",
            "Invalid value for field 'resource.rules'",
        ),
    )
    .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let err = security_policies::ensure(
        &compute,
        &model::SecurityPolicy::new().set_name("sp1"),
        &mut changes,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("sp1"), "{err}");
    assert!(changes.is_empty(), "{changes:?}");
}

/// A security policy insert that loses a race (409: another worker made it between the GET
/// and the insert) is the policy existing: no error, no reported creation.
#[tokio::test]
async fn a_security_policy_that_loses_the_insert_race_is_kept() {
    let server = MockServer::start().await;
    let policies = format!("{G}/securityPolicies");
    Mock::given(method("GET"))
        .and(path(format!("{policies}/sp1")))
        .respond_with(crate::compute::test_support::not_found())
        .mount(&server)
        .await;
    once(
        &server,
        "POST",
        &policies,
        answer(409, "ALREADY_EXISTS", "The resource 'sp1' already exists"),
    )
    .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    security_policies::ensure(
        &compute,
        &model::SecurityPolicy::new().set_name("sp1"),
        &mut changes,
    )
    .await
    .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

/// The shared firewall rule's delete: a 403 (Shared VPC: the admin owns the rule) is only
/// logged, as GKE does; any other refusal is an error, and the rule is not taken as gone (the
/// next delete is sent again).
#[tokio::test]
async fn a_firewall_delete_is_forgiven_only_when_forbidden() {
    let fw = "/compute/v1/projects/host/global/firewalls/k8s-fw-l7--uid";
    for (code, status, forgiven) in [
        (403, "PERMISSION_DENIED", true),
        (400, "INVALID_ARGUMENT", false),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("DELETE"))
            .and(path(fw))
            .respond_with(answer(code, status, "scripted refusal"))
            .expect(2)
            .mount(&server)
            .await;
        let compute = compute_for(&server).await;
        let mut state = firewalls::RuleState::default();
        for _ in 0..2 {
            let mut changes = Changes::new();
            let result =
                firewalls::delete(&compute, "host", "k8s-fw-l7--uid", &mut state, &mut changes)
                    .await;
            assert_eq!(result.is_ok(), forgiven, "{code}: {result:?}");
            assert!(changes.is_empty(), "{changes:?}");
        }
    }
}

/// An update carries the fingerprint it read; the operator's own write, which the cache holds
/// without one (the API changes it on every write), is read again before the next update,
/// which would otherwise be refused with 412 (Compute API `backendServices.update`: the
/// fingerprint "must be provided in order to update the BackendService"). The URL map's twin is
/// `update_sends_fingerprint_refetches_after_412_and_before_updating_its_own_write`.
#[tokio::test]
async fn a_backend_service_update_after_its_own_write_reads_the_new_fingerprint_first() {
    let server = MockServer::start().await;
    list_b1(&server, json!({})).await;
    other_lists_empty(&server).await;
    let b1 = format!("{G}/backendServices/b1");
    Mock::given(method("GET"))
        .and(path(&b1))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": "b1",
            "fingerprint": "bmV3", "protocol": "HTTP", "portName": "http", "timeoutSec": 40})),
        )
        .expect(1)
        .mount(&server)
        .await;
    for (fingerprint, op) in [("YWJj", "op-1"), ("bmV3", "op-2")] {
        Mock::given(method("PUT"))
            .and(path(&b1))
            .and(body_partial_json(json!({ "fingerprint": fingerprint })))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op(op)))
            .expect(1)
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    for timeout in [40, 50] {
        let mut changes = Changes::new();
        backend_services::ensure(
            &compute,
            &desired_b1().set_timeout_sec(timeout),
            &mut changes,
        )
        .await
        .unwrap_or_else(|e| panic!("timeoutSec {timeout}: {e}"));
        assert_eq!(changes.len(), 1, "timeoutSec {timeout}: {changes:?}");
    }
}
