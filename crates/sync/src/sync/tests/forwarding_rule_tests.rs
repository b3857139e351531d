//! Forwarding rules: a target change in place, a port change by recreation, an insert race,
//! and the managed static IP (promoting the rule's ephemeral IP, or reserving a fresh one).

use super::*;

#[tokio::test]
async fn forwarding_rule_target_change_uses_set_target_and_keeps_ip() {
    let server = MockServer::start().await;
    list(
        &server,
        &format!("{G}/forwardingRules"),
        json!([{
            "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "80-80",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/old"
        }]),
        Some(1),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules/fr1/setTarget")))
        .and(body_partial_json(
            json!({"target": "projects/p1/global/targetHttpProxies/tp1"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-t")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::ForwardingRule::new()
        .set_name("fr1")
        .set_port_range("80")
        .set_target("projects/p1/global/targetHttpProxies/tp1");
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.5"));
    assert_eq!(changes[0].to_string(), "ForwardingRule \"fr1\" updated");
    // Recorded: in sync now, nothing sent.
    let mut changes = Changes::new();
    forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

/// A rule on another port is deleted and inserted again (a port range cannot be changed in
/// place, inventory §4); `80` and `80-80` are the same range and change nothing.
#[tokio::test]
async fn a_forwarding_rule_on_another_port_is_recreated() {
    let server = MockServer::start().await;
    list(
        &server,
        &format!("{G}/forwardingRules"),
        json!([{
            "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "443-443",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/tp1"
        }]),
        Some(1),
    )
    .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{G}/forwardingRules/fr1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr1", "portRange": "80"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-i")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::ForwardingRule::new()
        .set_name("fr1")
        .set_ip_address("127.130.0.5")
        .set_port_range("80")
        .set_target("projects/p1/global/targetHttpProxies/tp1");
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.5"));
    let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "ForwardingRule \"fr1\" deleted",
            "ForwardingRule \"fr1\" created"
        ]
    );
    for (a, b, same) in [
        ("80", "80-80", true),
        ("80-80", "80-80", true),
        ("80", "443", false),
        ("80-443", "80-443", true),
        ("80-443", "80", false),
    ] {
        assert_eq!(
            forwarding_rules::port_range(Some(a)) == forwarding_rules::port_range(Some(b)),
            same,
            "{a} vs {b}"
        );
    }
    assert_eq!(forwarding_rules::port_range(Some("8080-8080")), "8080");
    assert_eq!(forwarding_rules::port_range(None), "");
}

/// An insert that loses a race (409: another writer made the rule between the list and the
/// insert) reads the rule back and takes its IP; any other insert error is the sync's error.
#[tokio::test]
async fn a_forwarding_rule_insert_that_loses_a_race_reads_the_winner_and_other_errors_fail() {
    let server = MockServer::start().await;
    list(&server, &format!("{G}/forwardingRules"), json!([]), Some(1)).await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr1"})))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({"error": {
            "code": 409, "status": "ALREADY_EXISTS",
            "message": "The resource 'projects/p1/global/forwardingRules/fr1' already exists"}})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/forwardingRules/fr1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "127.130.0.7", "portRange": "80-80",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/tp1"})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr2"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "status": "INVALID_ARGUMENT",
            "message": "Invalid value for field 'resource.portRange': '0'"}})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let on = |name: &str| {
        model::ForwardingRule::new()
            .set_name(name)
            .set_port_range("80")
            .set_target("projects/p1/global/targetHttpProxies/tp1")
    };
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &on("fr1"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.7"), "the winner's IP");
    assert!(changes.is_empty(), "this sync created nothing: {changes:?}");
    let err = forwarding_rules::ensure(&compute, &on("fr2"), &mut changes)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Invalid value for field 'resource.portRange'"),
        "the API's error, not a conflict: {err}"
    );
}

/// Without a static IP name the IP a rule already has is promoted to a reserved address named
/// like the HTTP rule (inventory §4), so the IP the Ingress shows does not change. The IP is
/// known from the insert: nothing is read back.
#[tokio::test]
async fn managed_static_ip_promotes_the_rules_ephemeral_ip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(
            json!({"name": "k8s2-fr-x", "address": "127.200.0.7"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-x")))
        .respond_with(not_found())
        .expect(0)
        .named("get the address")
        .mount(&server)
        .await;
    // The first read of the collection, after the insert: the list.
    list(
        &server,
        ADDR,
        json!([{"name": "k8s2-fr-x", "address": "127.200.0.7"}]),
        Some(1),
    )
    .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = addresses::ensure_managed(&compute, "k8s2-fr-x", Some("127.200.0.7"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip, "127.200.0.7");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        addresses::get_ip(&compute, "k8s2-fr-x")
            .await
            .unwrap()
            .as_deref(),
        Some("127.200.0.7"),
        "known without a GET"
    );
}

/// An IP that Compute refuses to promote (another address reserves it, as after a user's
/// static IP annotation was removed) gets a fresh reservation, whose IP is read back.
#[tokio::test]
async fn managed_static_ip_is_freshly_reserved_when_promotion_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-new")))
        .respond_with(not_found())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-new")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "k8s2-fr-new", "address": "127.200.0.2"})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(json!({"address": "127.200.0.9"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "message": "The IP address is already reserved", "status": "INVALID_ARGUMENT",
            "errors": [{"domain": "global", "reason": "invalid", "message": "reserved"}]}})))
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(json!({"name": "k8s2-fr-new"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-b")))
        .with_priority(2)
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let fresh =
        addresses::ensure_managed(&compute, "k8s2-fr-new", Some("127.200.0.9"), &mut changes)
            .await
            .unwrap();
    assert_eq!(fresh, "127.200.0.2");
    assert_eq!(changes.len(), 1, "{changes:?}");
}
