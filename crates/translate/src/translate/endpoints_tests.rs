//! Which EndpointSlice entries become NEG endpoints ([`service_endpoints`]), case by case, with
//! the readiness gate's states across the window where the EndpointSlice lags the gate (issue 40).
//!
//! Cases ported from ingress-gce's `pkg/neg/syncers/utils_test.go` (`TestToZoneNetworkEndpointMap`:
//! ready addresses attached, not-ready addresses of live Pods attached, terminating Pods and
//! addresses without a Pod left out), narrowed where this operator differs (module docs): a
//! not-ready entry is attached only for a gated Pod whose containers are ready.

use super::*;
use crate::translate::test_support::{config, one_pod_service_yaml, snapshot_from_yaml, web_port};

/// [`one_pod_service_yaml`]'s cluster.
fn cluster(
    slice_conditions: &str,
    gated: bool,
    pod_extra: &str,
    conditions: &[(&str, &str)],
) -> ClusterSnapshot {
    snapshot_from_yaml(&one_pod_service_yaml(
        slice_conditions,
        gated,
        pod_extra,
        conditions,
    ))
}

/// Whether 10.0.0.9 is attached (in a NEG) for Service `web` port 80.
fn attached(snapshot: &ClusterSnapshot) -> bool {
    let service = ObjectKey::new("default", "web");
    let eps = service_endpoints(snapshot, &config(), &service, &web_port());
    eps.by_zone
        .values()
        .flatten()
        .any(|e| e.ip_address == "10.0.0.9" && e.port == 8080)
}

const GATE: &str = NEG_READINESS_GATE;

#[test]
fn a_ready_entry_is_attached() {
    assert!(attached(&cluster("{ready: true}", false, "", &[])));
    // The API says an unset `ready` reads as ready.
    assert!(attached(&cluster("{}", false, "", &[])));
}

#[test]
fn a_gated_pod_waiting_for_its_gate_is_attached_so_the_load_balancer_can_check_it() {
    let s = cluster(
        "{ready: false}",
        true,
        "",
        &[
            ("ContainersReady", "True"),
            (GATE, "False"),
            ("Ready", "False"),
        ],
    );
    assert!(attached(&s));
    // Before the operator first writes the condition at all.
    let s = cluster(
        "{ready: false}",
        true,
        "",
        &[("ContainersReady", "True"), ("Ready", "False")],
    );
    assert!(attached(&s));
}

/// Issue 40: the operator has just set the gate True, and the kubelet's `Ready` and the
/// EndpointSlice controller's `ready: true` have not caught up yet. The endpoint is HEALTHY in
/// the NEG; detaching it now would bring it back UNHEALTHY for a health-check cycle.
#[test]
fn a_gated_pod_whose_gate_just_opened_stays_attached_while_its_entry_lags() {
    // The kubelet has not written Ready yet.
    let s = cluster(
        "{ready: false}",
        true,
        "",
        &[
            ("ContainersReady", "True"),
            (GATE, "True"),
            ("Ready", "False"),
        ],
    );
    assert!(
        attached(&s),
        "detached in the window before the kubelet's Ready"
    );
    // The kubelet wrote Ready; the EndpointSlice controller has not.
    let s = cluster(
        "{ready: false}",
        true,
        "",
        &[
            ("ContainersReady", "True"),
            (GATE, "True"),
            ("Ready", "True"),
        ],
    );
    assert!(attached(&s), "detached before the EndpointSlice caught up");
    // Caught up.
    let s = cluster(
        "{ready: true, serving: true}",
        true,
        "",
        &[
            ("ContainersReady", "True"),
            (GATE, "True"),
            ("Ready", "True"),
        ],
    );
    assert!(attached(&s));
}

#[test]
fn a_gated_pod_whose_containers_are_not_ready_is_not_attached() {
    for gate in ["False", "True"] {
        let s = cluster(
            "{ready: false}",
            true,
            "",
            &[
                ("ContainersReady", "False"),
                (GATE, gate),
                ("Ready", "False"),
            ],
        );
        assert!(
            !attached(&s),
            "gate {gate}: a failing readiness probe withdraws the Pod"
        );
    }
}

#[test]
fn a_terminating_pod_is_never_attached() {
    // The Pod is being deleted, its entry not yet updated.
    let s = cluster(
        "{ready: false}",
        true,
        "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"",
        &[
            ("ContainersReady", "True"),
            (GATE, "True"),
            ("Ready", "True"),
        ],
    );
    assert!(!attached(&s));
    // The slice says terminating (and still serving, as during a preStop sleep).
    let s = cluster(
        "{ready: false, serving: true, terminating: true}",
        true,
        "",
        &[
            ("ContainersReady", "True"),
            (GATE, "True"),
            ("Ready", "True"),
        ],
    );
    assert!(!attached(&s));
}

#[test]
fn a_not_ready_pod_without_the_gate_is_not_attached() {
    let s = cluster(
        "{ready: false}",
        false,
        "",
        &[("ContainersReady", "True"), ("Ready", "False")],
    );
    assert!(!attached(&s));
}

#[test]
fn a_not_ready_entry_whose_pod_is_unknown_is_not_attached() {
    let mut s = cluster(
        "{ready: false}",
        true,
        "",
        &[("ContainersReady", "True"), (GATE, "False")],
    );
    s.pods.clear();
    assert!(!attached(&s));
}
