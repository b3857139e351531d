//! The auto-mode `default` network Google Cloud creates with a project, and that network's
//! pre-populated firewall rules (Google Cloud "VPC networks", "Default network"; "VPC firewall
//! rules", "Pre-populated rules in the default network"). `projects::ensure` stores them on a
//! project's first use; an insert of a network named `default` gets the same rules.

use serde_json::{json, Value};

/// The wire JSON of the auto-mode `default` network stored at `key`
/// (`projects/{p}/global/networks/default`); `base` is the API base URL.
pub fn network(base: &str, key: &str) -> Value {
    json!({
        "kind": "compute#network",
        "id": crate::store::new_id().to_string(),
        "creationTimestamp": crate::store::timestamp(),
        "name": "default",
        "description": "Default network for the project",
        "selfLink": format!("{base}{key}"),
        "selfLinkWithId": format!("{base}{key}"),
        "autoCreateSubnetworks": true,
        "routingConfig": {"routingMode": "REGIONAL"},
        "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
    })
}

/// The four rules Google Cloud creates with a project's auto-mode `default` network (Google
/// Cloud "VPC firewall rules", "Pre-populated rules in the default network"), as
/// `(key, wire JSON)`: `default-allow-internal` (TCP and UDP on every port and ICMP from
/// 10.128.0.0/9), `default-allow-ssh` (TCP 22), `default-allow-rdp` (TCP 3389) and
/// `default-allow-icmp` from anywhere, all at priority 65534. None admits Google's load
/// balancer ranges to a serving port: a load balancer still needs its own rule.
pub fn firewall_rules(base: &str, project: &str) -> Vec<(String, Value)> {
    let network = format!("{base}projects/{project}/global/networks/default");
    let rule = |name: &str, description: &str, ranges: &[&str], allowed: Value| {
        let key = format!("projects/{project}/global/firewalls/{name}");
        let v = json!({
            "kind": "compute#firewall",
            "id": crate::store::new_id().to_string(),
            "creationTimestamp": crate::store::timestamp(),
            "name": name,
            "description": description,
            "network": network,
            "priority": 65534,
            "sourceRanges": ranges,
            "allowed": allowed,
            "direction": "INGRESS",
            "logConfig": {"enable": false},
            "disabled": false,
            "selfLink": format!("{base}{key}"),
        });
        (key, v)
    };
    vec![
        rule(
            "default-allow-icmp",
            "Allow ICMP from anywhere",
            &["0.0.0.0/0"],
            json!([{"IPProtocol": "icmp"}]),
        ),
        rule(
            "default-allow-internal",
            "Allow internal traffic on the default network",
            &["10.128.0.0/9"],
            json!([{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]}, {"IPProtocol": "icmp"}]),
        ),
        rule(
            "default-allow-rdp",
            "Allow RDP from anywhere",
            &["0.0.0.0/0"],
            json!([{"IPProtocol": "tcp", "ports": ["3389"]}]),
        ),
        rule(
            "default-allow-ssh",
            "Allow SSH from anywhere",
            &["0.0.0.0/0"],
            json!([{"IPProtocol": "tcp", "ports": ["22"]}]),
        ),
    ]
}
