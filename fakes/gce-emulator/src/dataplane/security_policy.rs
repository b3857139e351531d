//! Cloud Armor security policies attached to backend services (`backendService.securityPolicy`),
//! reduced to what a local proxy can decide: rules matching the client IP
//! (`match.versionedExpr: SRC_IPS_V1`, `match.config.srcIpRanges`) evaluated in ascending
//! `priority`, with actions `allow` and `deny(STATUS)` (Compute API v1 reference,
//! `securityPolicies`). Rules with other matchers (`match.expr`) or actions (throttle,
//! rate_based_ban, redirect) are not emulated and are skipped.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

/// What a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `allow`.
    Allow,
    /// `deny(STATUS)`: answer with STATUS (403, 404 or 502).
    Deny(u16),
}

#[derive(Debug)]
struct Rule {
    priority: i64,
    ranges: Vec<IpNet>,
    any: bool,
    verdict: Verdict,
}

/// A compiled security policy.
#[derive(Debug)]
pub struct SecurityPolicy {
    rules: Vec<Rule>,
}

fn verdict(action: &str) -> Option<Verdict> {
    match action {
        "allow" => Some(Verdict::Allow),
        "deny" => Some(Verdict::Deny(403)),
        a => a
            .strip_prefix("deny(")?
            .strip_suffix(')')?
            .parse()
            .ok()
            .map(Verdict::Deny),
    }
}

impl SecurityPolicy {
    /// Compiles the wire JSON of a `compute#securityPolicy`.
    pub fn compile(v: &Value) -> SecurityPolicy {
        let mut rules = Vec::new();
        for r in v
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(verdict) = r.get("action").and_then(Value::as_str).and_then(verdict) else {
                continue;
            };
            let m = r.get("match");
            if m.and_then(|m| m.get("versionedExpr"))
                .and_then(Value::as_str)
                != Some("SRC_IPS_V1")
            {
                continue;
            }
            let srcs: Vec<&str> = m
                .and_then(|m| m.pointer("/config/srcIpRanges"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let any = srcs.contains(&"*");
            let ranges = srcs
                .iter()
                .filter_map(|s| {
                    s.parse::<IpNet>()
                        .ok()
                        .or_else(|| s.parse::<IpAddr>().ok().map(IpNet::from))
                })
                .collect();
            let priority = r
                .get("priority")
                .and_then(|p| p.as_i64().or_else(|| p.as_str()?.parse().ok()))
                .unwrap_or(i64::MAX);
            rules.push(Rule {
                priority,
                ranges,
                any,
                verdict,
            });
        }
        rules.sort_by_key(|r| r.priority);
        SecurityPolicy { rules }
    }

    /// The verdict for a client address: the first matching rule by priority, else allow.
    pub fn evaluate(&self, client: IpAddr) -> Verdict {
        self.rules
            .iter()
            .find(|r| r.any || r.ranges.iter().any(|n| n.contains(&client)))
            .map(|r| r.verdict)
            .unwrap_or(Verdict::Allow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_by_priority() {
        let p = SecurityPolicy::compile(&json!({"rules": [
            {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
            {"priority": 100, "action": "deny(404)", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.0.0.2/32"]}}},
            {"priority": 50, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.0.0.2"]}}},
            {"priority": 200, "action": "deny(403)", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.1.0.0/16"]}}},
        ]}));
        assert_eq!(p.evaluate("127.0.0.2".parse().unwrap()), Verdict::Allow);
        assert_eq!(p.evaluate("127.1.2.3".parse().unwrap()), Verdict::Deny(403));
        assert_eq!(p.evaluate("127.0.0.9".parse().unwrap()), Verdict::Allow);
    }
}
