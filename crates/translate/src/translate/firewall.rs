//! The shared L7 firewall rule that lets Google's proxies and health checkers reach the NEG
//! endpoints, and the Shared VPC (XPN) hint (inventory §8; reference 000 "Shared VPC").

use std::collections::BTreeSet;

use google_cloud_compute_v1::model::{self, firewall::Allowed};

use super::{cidr, DesiredIngress, TranslateConfig};

/// Source ranges of Google Front Ends and health checkers.
pub const L7_SOURCE_RANGES: [&str; 2] = ["130.211.0.0/22", "35.191.0.0/16"];
/// Description GKE gives the rule.
pub const L7_FIREWALL_DESCRIPTION: &str = "GCE L7 firewall rule";

/// The one L7 firewall rule `k8s-fw-l7--<uid>` for all desired Ingresses: TCP to every NEG
/// target port and BackendConfig health-check port (sorted numerically), from
/// [`L7_SOURCE_RANGES`], on the cluster network, with the configured target tags.
///
/// `None` when no Ingress remains or no port is known (an empty `allowed.ports` would open
/// every port); the caller then deletes the rule.
pub fn translate_firewall(
    ingresses: &[&DesiredIngress],
    config: &TranslateConfig,
) -> Option<model::Firewall> {
    let ports: BTreeSet<u16> = ingresses
        .iter()
        .flat_map(|i| i.backends.values())
        .flat_map(|b| b.firewall_ports.iter().copied())
        .collect();
    firewall_for_ports(&ports, config)
}

/// The shared L7 rule opening `ports` (the union of the live Ingresses' backends'
/// `firewall_ports`); `None` when there are none. [`translate_firewall`] of Ingresses whose
/// ports the caller has already gathered (the controller keeps only those of each Ingress).
pub fn firewall_for_ports(
    ports: &BTreeSet<u16>,
    config: &TranslateConfig,
) -> Option<model::Firewall> {
    l7_firewall(
        config.l7_firewall_name(),
        L7_FIREWALL_DESCRIPTION,
        ports,
        config,
    )
}

/// An L7 firewall rule `name`: TCP to `ports` (in numeric order) from [`L7_SOURCE_RANGES`], on
/// the cluster network, with the configured target tags (sorted, deduplicated). `None` when
/// `ports` is empty (an empty `allowed.ports` would open every port). Shared by the Ingress
/// rule ([`translate_firewall`]) and the Gateway controller's (`gateway/firewall.rs`).
pub fn l7_firewall(
    name: String,
    description: &str,
    ports: &BTreeSet<u16>,
    config: &TranslateConfig,
) -> Option<model::Firewall> {
    if ports.is_empty() {
        return None;
    }
    let mut tags = config.firewall_target_tags.clone();
    tags.sort();
    tags.dedup();
    let mut allowed = Allowed::default();
    allowed.ip_protocol = Some("tcp".to_owned());
    allowed.ports = ports.iter().map(u16::to_string).collect();
    if config.mode.scheme() == super::namer::Scheme::Gke {
        // GKE's controller sorts the ports as strings (ingress-gce `pkg/firewalls`
        // buildExpectedFW, `sets.String.List()`): the same order leaves its rule unchanged.
        allowed.ports.sort();
    }
    let mut firewall = model::Firewall::default();
    firewall.name = Some(name);
    firewall.description = Some(description.to_owned());
    firewall.network = Some(config.network_ref());
    firewall.allowed = vec![allowed];
    firewall.source_ranges = L7_SOURCE_RANGES.iter().map(|r| (*r).to_owned()).collect();
    firewall.target_tags = tags;
    Some(firewall)
}

/// Which gcloud command the security admin must run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirewallHintOp {
    /// The rule does not exist yet.
    Create,
    /// The rule exists with other settings.
    Update,
}

/// The exact command a Shared VPC security admin must run, as GKE prints it in its `XPN` Event
/// (inventory §8):
/// `gcloud compute firewall-rules create <name> --network <net> --description "GCE L7 firewall rule"
/// --allow tcp:8080,tcp:50000 --source-ranges 130.211.0.0/22,35.191.0.0/16 --target-tags <tags>
/// --project <p>`. `update` has no `--network` (gcloud does not accept it); `--target-tags` is
/// left out when there are none; `--priority` is added when the rule has one. `project` is the
/// network's (host) project.
pub fn firewall_hint(
    op: FirewallHintOp,
    firewall: &model::Firewall,
    network: &str,
    project: &str,
) -> String {
    let name = firewall.name.as_deref().unwrap_or_default();
    let mut cmd = match op {
        FirewallHintOp::Create => {
            format!("gcloud compute firewall-rules create {name} --network {network}")
        }
        FirewallHintOp::Update => format!("gcloud compute firewall-rules update {name}"),
    };
    let description = firewall
        .description
        .as_deref()
        .unwrap_or(L7_FIREWALL_DESCRIPTION);
    cmd.push_str(&format!(" --description \"{description}\""));
    let allow: Vec<String> = firewall
        .allowed
        .iter()
        .flat_map(|a| {
            let proto = a.ip_protocol.clone().unwrap_or_default();
            a.ports.iter().map(move |p| format!("{proto}:{p}"))
        })
        .collect();
    cmd.push_str(&format!(" --allow {}", allow.join(",")));
    let mut ranges = firewall.source_ranges.clone();
    ranges.sort();
    cmd.push_str(&format!(" --source-ranges {}", ranges.join(",")));
    if !firewall.target_tags.is_empty() {
        let mut tags = firewall.target_tags.clone();
        tags.sort();
        cmd.push_str(&format!(" --target-tags {}", tags.join(",")));
    }
    if let Some(priority) = firewall.priority {
        cmd.push_str(&format!(" --priority {priority}"));
    }
    cmd.push_str(&format!(" --project {project}"));
    cmd
}

/// Why Google's health checkers and proxies cannot reach a port of the cluster's nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FirewallBlock {
    /// No enabled INGRESS rule allows TCP on the port from all of both ranges: the implied
    /// "deny all ingress" rule applies.
    NoAllowRule,
    /// A deny rule matches before any allow rule.
    Denied {
        /// The deny rule's name.
        rule: String,
        /// Its priority.
        priority: i32,
    },
}

/// Whether the entries (`allowed` or `denied`: protocol and ports) cover TCP `port`.
fn covers_port<'a>(
    mut entries: impl Iterator<Item = (&'a Option<String>, &'a Vec<String>)>,
    port: u16,
) -> bool {
    entries.any(|(proto, ports)| {
        let proto = proto.as_deref().unwrap_or_default();
        matches!(proto, "tcp" | "6" | "all")
            && (ports.is_empty()
                || ports.iter().any(|p| {
                    let (lo, hi) = p.split_once('-').unwrap_or((p, p));
                    matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&port))
                }))
    })
}

/// Whether Google's health checkers and proxies ([`L7_SOURCE_RANGES`]) can reach TCP `port` on
/// nodes tagged `node_tags` in the network `network_ref` (`projects/{p}/global/networks/{n}`),
/// judged from that network's `rules` as Google Cloud evaluates VPC firewall rules ("VPC
/// firewall rules": INGRESS rules by priority, a deny before an allow at equal priority, the
/// first match decides, else the implied deny). An allow rule counts only when its sources
/// hold the whole of a range; a deny rule when they touch it. A rule with target tags counts
/// for the nodes when they share a tag, or when the nodes' tags are not known (`node_tags`
/// empty); one with target service accounts always counts (the nodes' accounts are not known).
/// `None` when both ranges get through.
pub fn google_ranges_blocked(
    rules: &[model::Firewall],
    network_ref: &str,
    port: u16,
    node_tags: &[String],
) -> Option<FirewallBlock> {
    let mut candidates: Vec<&model::Firewall> = rules
        .iter()
        .filter(|r| {
            let net = r.network.as_deref().unwrap_or_default();
            let net = net.find("projects/").map_or(net, |i| &net[i..]);
            net == network_ref
                && r.disabled != Some(true)
                && r.direction
                    .as_ref()
                    .is_none_or(|d| d.name() == Some("INGRESS"))
                && (r.target_tags.is_empty()
                    || node_tags.is_empty()
                    || r.target_tags.iter().any(|t| node_tags.contains(t)))
        })
        .collect();
    // Priority ascending (default 1000), deny before allow at equal priority.
    candidates.sort_by_key(|r| (r.priority.unwrap_or(1000), r.denied.is_empty()));
    let mut block = None;
    for range in L7_SOURCE_RANGES {
        let google = cidr::parse_v4(range).expect("a valid constant");
        let verdict = candidates.iter().find_map(|r| {
            let sources: Vec<_> = r
                .source_ranges
                .iter()
                .filter_map(|s| cidr::parse_v4(s))
                .collect();
            let any_source = sources.is_empty()
                && r.source_tags.is_empty()
                && r.source_service_accounts.is_empty();
            if !r.denied.is_empty() {
                let hit = any_source || sources.iter().any(|s| cidr::overlaps(s, &google));
                (hit && covers_port(r.denied.iter().map(|e| (&e.ip_protocol, &e.ports)), port))
                    .then(|| {
                        Some(FirewallBlock::Denied {
                            rule: r.name.clone().unwrap_or_default(),
                            priority: r.priority.unwrap_or(1000),
                        })
                    })
            } else {
                let hit = any_source || sources.iter().any(|s| cidr::covers(s, &google));
                (hit && covers_port(r.allowed.iter().map(|e| (&e.ip_protocol, &e.ports)), port))
                    .then_some(None)
            }
        });
        match verdict {
            Some(None) => {}
            Some(Some(denied)) => return Some(denied),
            None => block = Some(FirewallBlock::NoAllowRule),
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NET: &str = "projects/host/global/networks/shared";

    fn rules(v: serde_json::Value) -> Vec<model::Firewall> {
        serde_json::from_value(v).unwrap()
    }

    fn l7(extra: serde_json::Value) -> serde_json::Value {
        let mut r = json!({"name": "k8s-fw-l7--uid", "network": format!("https://compute.googleapis.com/compute/v1/{NET}"),
            "direction": "INGRESS", "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
            "allowed": [{"IPProtocol": "tcp", "ports": ["8080", "9000-9010"]}], "targetTags": ["node"]});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    }

    #[test]
    fn google_ranges_get_through_only_an_allow_rule_that_covers_both() {
        let node = vec!["node".to_string()];
        let ok = rules(json!([l7(json!({}))]));
        assert_eq!(google_ranges_blocked(&ok, NET, 8080, &node), None);
        assert_eq!(google_ranges_blocked(&ok, NET, 9005, &node), None);
        assert_eq!(
            google_ranges_blocked(&ok, NET, 8081, &node),
            Some(FirewallBlock::NoAllowRule)
        );
        // Another network, a disabled rule, EGRESS, other tags, or one range only: blocked.
        for bad in [
            json!({"network": "projects/host/global/networks/other"}),
            json!({"disabled": true}),
            json!({"direction": "EGRESS"}),
            json!({"targetTags": ["db"]}),
            json!({"sourceRanges": ["35.191.0.0/16"]}),
            json!({"sourceRanges": ["130.211.0.0/23", "35.191.0.0/16"]}),
            json!({"allowed": [{"IPProtocol": "udp"}]}),
        ] {
            let r = rules(json!([l7(bad.clone())]));
            assert_eq!(
                google_ranges_blocked(&r, NET, 8080, &node),
                Some(FirewallBlock::NoAllowRule),
                "{bad}"
            );
        }
        // Unknown node tags: a rule with target tags may apply. 0.0.0.0/0 and `all` cover.
        assert_eq!(google_ranges_blocked(&ok, NET, 8080, &[]), None);
        let wide = rules(json!([l7(
            json!({"sourceRanges": ["0.0.0.0/0"], "allowed": [{"IPProtocol": "all"}]})
        )]));
        assert_eq!(google_ranges_blocked(&wide, NET, 1, &node), None);
    }

    #[test]
    fn a_deny_rule_first_in_priority_order_blocks() {
        let node = vec!["node".to_string()];
        let deny = |priority: i32, port: &str| {
            json!({"name": format!("deny-{priority}"), "network": NET, "priority": priority,
                "sourceRanges": ["35.191.5.0/24"], "denied": [{"IPProtocol": "tcp", "ports": [port]}]})
        };
        let r = rules(json!([l7(json!({})), deny(900, "8080")]));
        assert_eq!(
            google_ranges_blocked(&r, NET, 8080, &node),
            Some(FirewallBlock::Denied {
                rule: "deny-900".into(),
                priority: 900
            })
        );
        assert_eq!(google_ranges_blocked(&r, NET, 9000, &node), None);
        // A deny rule counts only when its sources touch one of Google's ranges.
        let mut elsewhere = deny(900, "8080");
        elsewhere["sourceRanges"] = json!(["10.0.0.0/8"]);
        let r = rules(json!([l7(json!({})), elsewhere]));
        assert_eq!(google_ranges_blocked(&r, NET, 8080, &node), None);
        // Equal priority: deny first; lower priority (a larger number): the allow wins.
        let r = rules(json!([l7(json!({})), deny(1000, "8080")]));
        assert!(google_ranges_blocked(&r, NET, 8080, &node).is_some());
        let r = rules(json!([l7(json!({})), deny(2000, "8080")]));
        assert_eq!(google_ranges_blocked(&r, NET, 8080, &node), None);
    }

    #[test]
    fn the_hint_carries_a_priority_when_the_rule_has_one() {
        let mut fw: model::Firewall = serde_json::from_value(l7(json!({}))).unwrap();
        fw.priority = Some(899);
        let cmd = firewall_hint(FirewallHintOp::Create, &fw, "shared", "host");
        assert!(
            cmd.ends_with(" --target-tags node --priority 899 --project host"),
            "{cmd}"
        );
    }
}
