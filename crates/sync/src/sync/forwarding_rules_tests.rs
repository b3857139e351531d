//! Which differences make a rule be deleted and inserted again (inventory §4 "Update details":
//! the IP address, the port range, the protocol and the scheme cannot change in place), for a
//! global rule and for a regional one.

use serde_json::{json, Value};

use super::*;

fn rule(fields: Value) -> model::ForwardingRule {
    serde_json::from_value(fields).expect("a ForwardingRule")
}

#[test]
fn only_a_changed_ip_port_protocol_or_scheme_that_is_asked_for_recreates() {
    let observed = rule(json!({
        "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "80-80",
        "IPProtocol": "TCP", "loadBalancingScheme": "EXTERNAL_MANAGED",
        "target": "projects/p1/global/targetHttpProxies/tp1"
    }));
    let cases = [
        // What is not asked for is kept: the ephemeral IP, and everything else unset.
        (json!({}), false, "nothing asked"),
        (
            json!({"IPAddress": ""}),
            false,
            "an empty IP keeps the ephemeral one",
        ),
        (
            json!({"target": "projects/p1/global/targetHttpProxies/other"}),
            false,
            "a target is set in place",
        ),
        // Each asked-for field equal to what is there.
        (
            json!({"IPAddress": "127.130.0.5", "portRange": "80", "IPProtocol": "TCP",
                   "loadBalancingScheme": "EXTERNAL_MANAGED"}),
            false,
            "all equal (80 is 80-80)",
        ),
        // Each asked-for field that differs, alone.
        (json!({"IPAddress": "127.130.0.9"}), true, "another IP"),
        (json!({"portRange": "443"}), true, "another port"),
        (json!({"IPProtocol": "UDP"}), true, "another protocol"),
        (
            json!({"loadBalancingScheme": "EXTERNAL"}),
            true,
            "another scheme",
        ),
    ];
    for (mut fields, want, what) in cases {
        fields["name"] = json!("fr1");
        assert_eq!(must_recreate(&rule(fields), &observed), want, "{what}");
    }
}

/// A regional rule: all differences but the target (set in place) replace it.
#[test]
fn a_regional_rule_stays_only_while_what_is_asked_for_matches() {
    let observed = rule(json!({
        "name": "fr1", "IPAddress": "10.0.0.5", "portRange": "80-80",
        "loadBalancingScheme": "INTERNAL_MANAGED",
        "network": "https://www.googleapis.com/compute/v1/projects/p1/global/networks/default",
        "subnetwork": "https://www.googleapis.com/compute/v1/projects/p1/regions/r1/subnetworks/s1",
        "target": "projects/p1/regions/r1/targetHttpProxies/tp1"
    }));
    let asked = json!({
        "portRange": "80", "loadBalancingScheme": "INTERNAL_MANAGED",
        "network": "projects/p1/global/networks/default",
        "subnetwork": "projects/p1/regions/r1/subnetworks/s1",
        "IPAddress": "10.0.0.5",
        "target": "projects/p1/regions/r1/targetHttpProxies/other"
    });
    let with = |key: &str, value: Value| {
        let mut fields = asked.clone();
        match value {
            Value::Null => drop(fields.as_object_mut().unwrap().remove(key)),
            v => fields[key] = v,
        }
        rule(fields)
    };
    let cases = [
        (
            rule(asked.clone()),
            true,
            "the same, by relative names; 80 is 80-80; another target",
        ),
        (with("network", Value::Null), true, "no network asked"),
        (with("subnetwork", Value::Null), true, "no subnetwork asked"),
        (with("IPAddress", Value::Null), true, "no IP asked"),
        (
            with("network", json!("projects/p1/global/networks/other")),
            false,
            "another network",
        ),
        (
            with("subnetwork", json!("projects/p1/regions/r1/subnetworks/s2")),
            false,
            "another subnetwork",
        ),
        (with("portRange", json!("8080")), false, "another port"),
        (
            with("loadBalancingScheme", json!("EXTERNAL_MANAGED")),
            false,
            "another scheme",
        ),
        (with("IPAddress", json!("10.0.0.6")), false, "another IP"),
    ];
    for (desired, want, what) in cases {
        assert_eq!(keeps_regional("p1", &desired, &observed), want, "{what}");
    }
}
