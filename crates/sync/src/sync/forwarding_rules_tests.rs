//! Which differences make a rule be deleted and inserted again (inventory §4 "Update details":
//! the IP address, the port range, the protocol and the scheme cannot change in place).

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
