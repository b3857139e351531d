//! VPC firewall rules as the data plane evaluates them: INGRESS rules of one network, in
//! priority order (lower number first; at equal priority a deny rule before an allow rule),
//! the first rule that matches decides; no match is the implied "deny all ingress" rule
//! (priority 65535). Source: Google Cloud "VPC firewall rules" overview ("Components of
//! firewall rules", "Priority", "Implied rules") and the Compute API v1 `firewalls` reference.
//!
//! A rule matches a connection when it is enabled (`disabled` false), its `direction` is
//! INGRESS, its target covers the destination instance (`targetTags` share a tag with the
//! instance, or `targetServiceAccounts` hold one of its service accounts, or neither is set),
//! its source covers the connection's source (`sourceRanges` contain the address; `sourceTags`
//! and `sourceServiceAccounts` name instances, which Google's probers and proxies are not; a
//! rule with no source field at all means 0.0.0.0/0), `destinationRanges` (when set) contain
//! the destination address, and one of its `allowed`/`denied` entries covers the protocol and
//! port (`IPProtocol` `tcp`, `6` or `all`; no `ports` means every port).

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::validate::{cidr_contains, parse_cidr};

/// Priority of the implied deny-ingress rule.
pub const IMPLIED_PRIORITY: u32 = 65535;

/// One compiled firewall rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule's name.
    pub name: String,
    /// `priority` (0-65535, default 1000).
    pub priority: u32,
    /// Whether it is an `allowed` rule (else `denied`).
    pub allow: bool,
    /// Whether the rule takes part (`direction` INGRESS and not `disabled`).
    pub active: bool,
    /// `sourceRanges` (parsed CIDRs).
    pub source_ranges: Vec<(Ipv4Addr, u8)>,
    /// Whether the rule names instance sources only (`sourceTags`/`sourceServiceAccounts`
    /// without `sourceRanges`): then no address outside an instance matches.
    pub instance_sources_only: bool,
    /// `destinationRanges` (parsed CIDRs); empty: any destination.
    pub destination_ranges: Vec<(Ipv4Addr, u8)>,
    /// `targetTags`.
    pub target_tags: Vec<String>,
    /// `targetServiceAccounts`.
    pub target_service_accounts: Vec<String>,
    /// TCP port ranges covered (inclusive); `None` when the rule covers no TCP at all.
    pub tcp_ports: Option<Vec<(u16, u16)>>,
}

/// What a connection is aimed at: the instance's tags and service accounts and the address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// Network tags of the instance (`tags.items`).
    pub tags: Vec<String>,
    /// Service account emails of the instance (`serviceAccounts[].email`).
    pub service_accounts: Vec<String>,
    /// Destination address.
    pub ip: Option<Ipv4Addr>,
}

/// The outcome of evaluating one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An allow rule matched first.
    Allowed {
        /// Its name.
        rule: String,
    },
    /// A deny rule matched first (`Some(name)`), or none matched (`None`: the implied deny).
    Denied {
        /// The deny rule, if any.
        rule: Option<String>,
        /// Its priority ([`IMPLIED_PRIORITY`] for the implied rule).
        priority: u32,
    },
}

impl Verdict {
    /// Whether the connection may pass.
    pub fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed { .. })
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Allowed { rule } => write!(f, "allowed by firewall rule {rule}"),
            Verdict::Denied {
                rule: Some(r),
                priority,
            } => write!(f, "denied by firewall rule {r} (priority {priority})"),
            Verdict::Denied { rule: None, .. } => {
                write!(f, "no firewall rule allows it (implied deny ingress)")
            }
        }
    }
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn ranges(v: &Value, field: &str) -> Vec<(Ipv4Addr, u8)> {
    strings(v, field)
        .iter()
        .filter_map(|r| parse_cidr(r))
        .collect()
}

/// TCP port ranges of `allowed`/`denied` entries: `None` when no entry covers TCP.
fn tcp_ports(entries: &[Value]) -> Option<Vec<(u16, u16)>> {
    let mut out: Option<Vec<(u16, u16)>> = None;
    for e in entries {
        let proto = e
            .get("IPProtocol")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !matches!(proto.as_str(), "tcp" | "6" | "all") {
            continue;
        }
        let ports = strings(e, "ports");
        let list = out.get_or_insert_with(Vec::new);
        if ports.is_empty() || proto == "all" {
            list.push((0, u16::MAX));
            continue;
        }
        for p in ports {
            let (lo, hi) = p.split_once('-').unwrap_or((&p, &p));
            if let (Ok(lo), Ok(hi)) = (lo.trim().parse(), hi.trim().parse()) {
                list.push((lo, hi));
            }
        }
    }
    out
}

impl Rule {
    /// Compiles a `compute#firewall` (wire JSON, as stored).
    pub fn compile(fw: &Value) -> Rule {
        let allowed = fw.get("allowed").and_then(Value::as_array);
        let denied = fw.get("denied").and_then(Value::as_array);
        let allow = allowed.is_some_and(|a| !a.is_empty()) || denied.is_none();
        let entries = if allow { allowed } else { denied };
        let direction = fw
            .get("direction")
            .and_then(Value::as_str)
            .unwrap_or("INGRESS");
        let disabled = fw.get("disabled").and_then(Value::as_bool).unwrap_or(false);
        let source_ranges = ranges(fw, "sourceRanges");
        let instance_sources = !strings(fw, "sourceTags").is_empty()
            || !strings(fw, "sourceServiceAccounts").is_empty();
        let has_range_field = fw
            .get("sourceRanges")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        Rule {
            name: fw
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            priority: fw
                .get("priority")
                .and_then(Value::as_u64)
                .map_or(1000, |p| p.min(65535) as u32),
            allow,
            active: direction == "INGRESS" && !disabled,
            // No source field at all: the API's default, 0.0.0.0/0.
            source_ranges: if !has_range_field && !instance_sources {
                vec![(Ipv4Addr::UNSPECIFIED, 0)]
            } else {
                source_ranges
            },
            instance_sources_only: instance_sources && !has_range_field,
            destination_ranges: ranges(fw, "destinationRanges"),
            target_tags: strings(fw, "targetTags"),
            target_service_accounts: strings(fw, "targetServiceAccounts"),
            tcp_ports: tcp_ports(entries.map(Vec::as_slice).unwrap_or(&[])),
        }
    }

    fn covers_target(&self, t: &Target) -> bool {
        if !self.target_tags.is_empty() {
            return self.target_tags.iter().any(|x| t.tags.contains(x));
        }
        if !self.target_service_accounts.is_empty() {
            return self
                .target_service_accounts
                .iter()
                .any(|x| t.service_accounts.contains(x));
        }
        true
    }

    /// Whether this rule matches a TCP connection from `source` to `target` on `port`.
    pub fn matches(&self, target: &Target, source: Ipv4Addr, port: u16) -> bool {
        self.active
            && self.covers_target(target)
            && !self.instance_sources_only
            && self.source_ranges.iter().any(|r| cidr_contains(*r, source))
            && (self.destination_ranges.is_empty()
                || target.ip.is_some_and(|ip| {
                    self.destination_ranges
                        .iter()
                        .any(|r| cidr_contains(*r, ip))
                }))
            && self
                .tcp_ports
                .as_ref()
                .is_some_and(|ps| ps.iter().any(|(lo, hi)| (*lo..=*hi).contains(&port)))
    }
}

/// Sorts rules into evaluation order: priority ascending, deny before allow at equal priority
/// (then by name, so the order is deterministic).
pub fn sort(rules: &mut [Rule]) {
    rules.sort_by(|a, b| (a.priority, a.allow, &a.name).cmp(&(b.priority, b.allow, &b.name)));
}

/// Evaluates a TCP connection from `source` to `target` on `port` against `rules` (already in
/// evaluation order, see [`sort`]).
pub fn evaluate(rules: &[Rule], target: &Target, source: Ipv4Addr, port: u16) -> Verdict {
    for r in rules {
        if r.matches(target, source, port) {
            return if r.allow {
                Verdict::Allowed {
                    rule: r.name.clone(),
                }
            } else {
                Verdict::Denied {
                    rule: Some(r.name.clone()),
                    priority: r.priority,
                }
            };
        }
    }
    Verdict::Denied {
        rule: None,
        priority: IMPLIED_PRIORITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: &[Value]) -> Vec<Rule> {
        let mut r: Vec<Rule> = v.iter().map(Rule::compile).collect();
        sort(&mut r);
        r
    }

    const GFE: Ipv4Addr = Ipv4Addr::new(130, 211, 0, 1);

    fn node(tags: &[&str]) -> Target {
        Target {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            service_accounts: vec!["sa@p.iam.gserviceaccount.com".into()],
            ip: Some(Ipv4Addr::new(127, 64, 1, 5)),
        }
    }

    #[test]
    fn implied_deny_without_rules() {
        let v = evaluate(&[], &node(&[]), GFE, 8080);
        assert_eq!(
            v,
            Verdict::Denied {
                rule: None,
                priority: 65535
            }
        );
    }

    #[test]
    fn allow_matches_ranges_ports_and_tags() {
        let r = rules(&[
            json!({"name": "l7", "allowed": [{"IPProtocol": "tcp", "ports": ["8080", "9000-9010"]}],
            "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"], "targetTags": ["node"]}),
        ]);
        assert!(evaluate(&r, &node(&["node"]), GFE, 8080).allowed());
        assert!(evaluate(&r, &node(&["node"]), GFE, 9005).allowed());
        assert!(!evaluate(&r, &node(&["node"]), GFE, 8081).allowed());
        assert!(!evaluate(&r, &node(&["other"]), GFE, 8080).allowed());
        assert!(!evaluate(&r, &node(&["node"]), Ipv4Addr::new(1, 2, 3, 4), 8080).allowed());
    }

    #[test]
    fn priority_then_deny_first() {
        let allow = json!({"name": "allow", "priority": 1000, "allowed": [{"IPProtocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]});
        let deny_hi = json!({"name": "deny", "priority": 900, "denied": [{"IPProtocol": "tcp", "ports": ["8080"]}], "sourceRanges": ["0.0.0.0/0"]});
        let r = rules(&[allow.clone(), deny_hi]);
        assert_eq!(
            evaluate(&r, &node(&[]), GFE, 8080),
            Verdict::Denied {
                rule: Some("deny".into()),
                priority: 900
            }
        );
        assert!(evaluate(&r, &node(&[]), GFE, 50000).allowed());
        // Equal priority: the deny wins whatever the names.
        let deny_eq = json!({"name": "a-deny", "priority": 1000, "denied": [{"IPProtocol": "all"}], "sourceRanges": ["0.0.0.0/0"]});
        let r = rules(&[allow.clone(), deny_eq]);
        assert!(!evaluate(&r, &node(&[]), GFE, 50000).allowed());
        // Lower priority deny loses.
        let deny_lo = json!({"name": "deny", "priority": 2000, "denied": [{"IPProtocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]});
        assert!(evaluate(&rules(&[allow, deny_lo]), &node(&[]), GFE, 80).allowed());
    }

    #[test]
    fn disabled_egress_service_accounts_and_sources() {
        let base = json!({"name": "r", "allowed": [{"IPProtocol": "6"}], "sourceRanges": ["130.211.0.0/22"]});
        let mut disabled = base.clone();
        disabled["disabled"] = json!(true);
        assert!(!evaluate(&rules(&[disabled]), &node(&[]), GFE, 80).allowed());
        let mut egress = base.clone();
        egress["direction"] = json!("EGRESS");
        assert!(!evaluate(&rules(&[egress]), &node(&[]), GFE, 80).allowed());
        let mut sa = base.clone();
        sa["targetServiceAccounts"] = json!(["sa@p.iam.gserviceaccount.com"]);
        assert!(evaluate(&rules(&[sa.clone()]), &node(&[]), GFE, 80).allowed());
        sa["targetServiceAccounts"] = json!(["other@p.iam.gserviceaccount.com"]);
        assert!(!evaluate(&rules(&[sa]), &node(&[]), GFE, 80).allowed());
        // sourceTags alone name instances; Google's front ends are not instances.
        let tags_only =
            json!({"name": "t", "allowed": [{"IPProtocol": "tcp"}], "sourceTags": ["web"]});
        assert!(!evaluate(&rules(&[tags_only]), &node(&[]), GFE, 80).allowed());
        // No source at all: 0.0.0.0/0.
        let anywhere = json!({"name": "any", "allowed": [{"IPProtocol": "tcp"}]});
        assert!(evaluate(&rules(&[anywhere]), &node(&[]), GFE, 80).allowed());
        // UDP and ICMP do not cover TCP.
        let udp = json!({"name": "u", "allowed": [{"IPProtocol": "udp"}, {"IPProtocol": "icmp"}], "sourceRanges": ["0.0.0.0/0"]});
        assert!(!evaluate(&rules(&[udp]), &node(&[]), GFE, 80).allowed());
        // destinationRanges must contain the endpoint.
        let mut dst = base;
        dst["destinationRanges"] = json!(["127.64.2.0/24"]);
        assert!(!evaluate(&rules(&[dst.clone()]), &node(&[]), GFE, 80).allowed());
        dst["destinationRanges"] = json!(["127.64.1.0/24"]);
        assert!(evaluate(&rules(&[dst]), &node(&[]), GFE, 80).allowed());
    }
}
