use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::*;
use crate::readiness::neg::{BackendHealth, EndpointHealth, NegRef};
use crate::translate::pod::PodRecord;

const IP: &str = "127.64.0.7";
const TIMEOUT: Duration = Duration::from_secs(600);

fn created() -> Timestamp {
    "2026-11-22T03:00:00Z".parse().unwrap()
}

fn after(secs: i64) -> Timestamp {
    created() + SignedDuration::from_secs(secs)
}

fn neg(name: &str) -> NegRef {
    NegRef::new("us-central1-a", name)
}

fn endpoint(ip: &str, healths: &[(&str, &str)]) -> EndpointHealth {
    EndpointHealth {
        ip_address: ip.to_owned(),
        port: Some(8080),
        healths: healths
            .iter()
            .map(|(bs, state)| BackendHealth {
                backend_service: (*bs).to_owned(),
                health_state: (*state).to_owned(),
            })
            .collect(),
    }
}

fn observed(endpoints: Vec<EndpointHealth>, checked_by: Option<&[&str]>) -> NegObservation {
    NegObservation {
        endpoints: Some(endpoints),
        health_checked_by: checked_by.map(|c| c.iter().map(|s| (*s).to_owned()).collect()),
    }
}

fn decide_at(negs: &BTreeMap<NegRef, NegObservation>, now: Timestamp) -> NegCondition {
    decide(&[IP.to_owned()], created(), negs, now, TIMEOUT)
}

#[test]
fn rule_1_healthy_for_a_backend_service_is_ready() {
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(vec![endpoint(IP, &[("bs-1", "HEALTHY")])], None),
    )]);
    let c = decide_at(&negs, after(5));
    assert!(c.status);
    assert_eq!(c.reason, Reason::Ready);
    assert_eq!(c.reason.as_str(), "LoadBalancerNegReady");
    assert!(c.message.contains("\"neg-a\""), "{}", c.message);
    assert!(c.message.contains("\"bs-1\""), "{}", c.message);
}

#[test]
fn rule_1_any_backend_service_suffices_and_other_negs_do_not_matter() {
    let negs = BTreeMap::from([
        (
            neg("neg-a"),
            observed(
                vec![endpoint(IP, &[("bs-1", "UNHEALTHY"), ("bs-2", "HEALTHY")])],
                None,
            ),
        ),
        (
            neg("neg-b"),
            observed(vec![endpoint(IP, &[("bs-3", "UNHEALTHY")])], None),
        ),
    ]);
    let c = decide_at(&negs, after(5));
    assert_eq!((c.status, c.reason), (true, Reason::Ready));
    assert!(c.message.contains("bs-2"));
}

#[test]
fn unhealthy_unknown_and_draining_wait() {
    for state in ["UNHEALTHY", "UNKNOWN", "DRAINING", ""] {
        let negs = BTreeMap::from([(
            neg("neg-a"),
            observed(vec![endpoint(IP, &[("bs-1", state)])], Some(&["bs-1"])),
        )]);
        let c = decide_at(&negs, after(5));
        assert_eq!(
            (c.status, c.reason),
            (false, Reason::NotReady),
            "state {state:?}"
        );
        assert_eq!(
            c.message,
            "Waiting for pod to become healthy in at least one of the NEG(s): [neg-a]"
        );
    }
}

#[test]
fn healthy_without_a_backend_service_reference_does_not_count() {
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(vec![endpoint(IP, &[("", "HEALTHY")])], None),
    )]);
    assert!(!decide_at(&negs, after(5)).status);
}

#[test]
fn another_pods_health_does_not_count() {
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(
            vec![endpoint("127.64.0.8", &[("bs-1", "HEALTHY")])],
            Some(&["bs-1"]),
        ),
    )]);
    let c = decide_at(&negs, after(5));
    assert_eq!((c.status, c.reason), (false, Reason::NotReady));
}

#[test]
fn rule_2_neg_without_health_checking_backend_service() {
    let negs = BTreeMap::from([(neg("neg-a"), observed(vec![endpoint(IP, &[])], Some(&[])))]);
    let c = decide_at(&negs, after(5));
    assert_eq!((c.status, c.reason), (true, Reason::WithoutHealthCheck));
    assert_eq!(c.reason.as_str(), "LoadBalancerNegWithoutHealthCheck");
    assert!(c.message.contains("not attached to any BackendService"));
}

#[test]
fn rule_2_needs_the_endpoint_to_be_attached() {
    // The NEG has no health-checking backend service, but the Pod is not an endpoint yet.
    let negs = BTreeMap::from([(neg("neg-a"), observed(vec![], Some(&[])))]);
    let c = decide_at(&negs, after(5));
    assert_eq!((c.status, c.reason), (false, Reason::NotReady));
}

#[test]
fn empty_healths_while_a_backend_service_checks_the_neg_waits() {
    // GKE's early-ready bug (#769/#1718): no health state yet is not "no health check".
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(vec![endpoint(IP, &[])], Some(&["bs-1"])),
    )]);
    assert_eq!(decide_at(&negs, after(5)).reason, Reason::NotReady);
    // ... and when the backend services were not read, it waits too.
    let negs = BTreeMap::from([(neg("neg-a"), observed(vec![endpoint(IP, &[])], None))]);
    assert_eq!(decide_at(&negs, after(5)).reason, Reason::NotReady);
    assert!(needs_backend_services(
        &[IP.to_owned()],
        &negs[&neg("neg-a")]
    ));
}

#[test]
fn needs_backend_services_only_for_own_endpoints_without_health() {
    let ips = [IP.to_owned()];
    assert!(!needs_backend_services(
        &ips,
        &observed(vec![endpoint(IP, &[("bs", "UNHEALTHY")])], None)
    ));
    assert!(!needs_backend_services(
        &ips,
        &observed(vec![endpoint("127.0.0.9", &[])], None)
    ));
    assert!(!needs_backend_services(
        &ips,
        &observed(vec![endpoint(IP, &[])], Some(&[]))
    ));
    assert!(!needs_backend_services(&ips, &NegObservation::default()));
}

#[test]
fn rule_3_no_neg_is_ready() {
    let c = decide_at(&BTreeMap::new(), after(0));
    assert_eq!((c.status, c.reason), (true, Reason::Ready));
    assert!(c.message.contains("does not belong to any NEG"));
}

#[test]
fn rule_4_timeout_since_creation() {
    let negs = BTreeMap::from([
        (neg("neg-b"), NegObservation::default()),
        (
            neg("neg-a"),
            observed(vec![endpoint(IP, &[("bs-1", "UNHEALTHY")])], None),
        ),
    ]);
    let before = decide_at(&negs, after(599));
    assert_eq!((before.status, before.reason), (false, Reason::NotReady));
    assert_eq!(
        before.message,
        "Waiting for pod to become healthy in at least one of the NEG(s): [neg-a neg-b]"
    );
    let at = decide_at(&negs, after(600));
    assert_eq!((at.status, at.reason), (true, Reason::Timeout));
    assert_eq!(at.reason.as_str(), "LoadBalancerNegTimeout");
    assert!(at
        .message
        .starts_with("Timeout waiting for pod to become healthy"));
    assert!(at.message.contains("[neg-a neg-b]"));
}

#[test]
fn health_wins_over_timeout() {
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(vec![endpoint(IP, &[("bs", "HEALTHY")])], None),
    )]);
    assert_eq!(decide_at(&negs, after(3600)).reason, Reason::Ready);
}

#[test]
fn unpolled_negs_wait_then_time_out() {
    let negs = BTreeMap::from([(neg("neg-a"), NegObservation::default())]);
    assert_eq!(decide_at(&negs, after(1)).reason, Reason::NotReady);
    assert_eq!(decide_at(&negs, after(601)).reason, Reason::Timeout);
}

#[test]
fn a_clock_before_creation_waits() {
    let negs = BTreeMap::from([(neg("neg-a"), NegObservation::default())]);
    assert_eq!(decide_at(&negs, after(-30)).reason, Reason::NotReady);
}

#[test]
fn any_pod_ip_matches() {
    let negs = BTreeMap::from([(
        neg("neg-a"),
        observed(vec![endpoint("fd00::7", &[("bs", "HEALTHY")])], None),
    )]);
    let c = decide(
        &["127.64.0.7".to_owned(), "fd00::7".to_owned()],
        created(),
        &negs,
        after(1),
        TIMEOUT,
    );
    assert!(c.status);
}

fn pod(value: serde_json::Value) -> PodRecord {
    serde_json::from_value(value).unwrap()
}

#[test]
fn gate_detection_and_processing() {
    let gated = json!({"metadata": {"name": "p"}, "spec": {"containers": [],
        "readinessGates": [{"conditionType": "other"}, {"conditionType": NEG_READINESS_GATE}]}});
    let p = pod(gated.clone());
    assert!(has_gate(&p));
    assert!(needs_processing(&p));

    let mut with_false = gated.clone();
    with_false["status"] = json!({"conditions": [{"type": NEG_READINESS_GATE, "status": "False"}]});
    assert!(needs_processing(&pod(with_false)));

    let mut with_true = gated.clone();
    with_true["status"] = json!({"conditions": [
        {"type": "Ready", "status": "False"},
        {"type": NEG_READINESS_GATE, "status": "True"}]});
    let p = pod(with_true);
    assert_eq!(gate_condition(&p).unwrap().status, "True");
    assert!(!needs_processing(&p));

    let mut terminating = gated;
    terminating["metadata"]["deletionTimestamp"] = json!("2026-11-22T03:00:00Z");
    assert!(!needs_processing(&pod(terminating)));

    let ungated = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
        "readinessGates": [{"conditionType": "other"}]}}));
    assert!(!has_gate(&ungated));
    assert!(!needs_processing(&ungated));
    assert!(!needs_processing(&pod(json!({"metadata": {"name": "p"}}))));
}

#[test]
fn pod_ips_are_deduplicated_in_order() {
    let p = pod(
        json!({"metadata": {"name": "p"}, "status": {"podIP": "127.64.0.7",
        "podIPs": [{"ip": "127.64.0.7"}, {"ip": "fd00::7"}]}}),
    );
    assert_eq!(
        pod_ips(&p),
        vec!["127.64.0.7".to_owned(), "fd00::7".to_owned()]
    );
    assert!(pod_ips(&pod(json!({"metadata": {"name": "p"}}))).is_empty());
}

#[test]
fn is_current_compares_status_reason_and_message() {
    let decided = NegCondition {
        status: true,
        reason: Reason::Ready,
        message: "m".to_owned(),
    };
    let cond = |status: &str, reason: &str, message: &str| {
        serde_json::from_value::<k8s_openapi::api::core::v1::PodCondition>(json!({
            "type": NEG_READINESS_GATE, "status": status, "reason": reason, "message": message}))
        .unwrap()
    };
    assert!(is_current(
        Some(&cond("True", "LoadBalancerNegReady", "m")),
        &decided
    ));
    assert!(!is_current(
        Some(&cond("False", "LoadBalancerNegReady", "m")),
        &decided
    ));
    assert!(!is_current(
        Some(&cond("True", "LoadBalancerNegTimeout", "m")),
        &decided
    ));
    assert!(!is_current(
        Some(&cond("True", "LoadBalancerNegReady", "x")),
        &decided
    ));
    assert!(!is_current(None, &decided));
}

/// A reason prints as GKE's condition and Event reason.
#[test]
fn reasons_print_as_gkes_condition_reasons() {
    let printed: Vec<String> = [
        Reason::Ready,
        Reason::WithoutHealthCheck,
        Reason::Timeout,
        Reason::NotReady,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        printed,
        [
            "LoadBalancerNegReady",
            "LoadBalancerNegWithoutHealthCheck",
            "LoadBalancerNegTimeout",
            "LoadBalancerNegNotReady"
        ]
    );
}
