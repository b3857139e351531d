//! Which differences replace a regional rule: all but the target (set in place).

use serde_json::{json, Value};

use super::*;

fn rule(fields: Value) -> model::ForwardingRule {
    serde_json::from_value(fields).expect("a ForwardingRule")
}

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
        assert_eq!(keeps("p1", &desired, &observed), want, "{what}");
    }
}
