//! The network behind the load balancer, as a pure model the data plane asks "may this source
//! reach this endpoint ip:port?": networks, the instances on them (their interfaces, tags and
//! service accounts) and the VPC firewall rules of each network. No I/O: it is compiled from a
//! [`Snapshot`] and answers from memory.
//!
//! Sources (Google Cloud "Load balancing: firewall rules"): the global external Application
//! Load Balancer's health checkers and Google Front End proxies reach backends only from
//! 35.191.0.0/16 and 130.211.0.0/22. Loopback traffic cannot carry those addresses, so the
//! emulator evaluates every health-check probe as if it came from [`PROBE_SOURCE`]
//! (35.191.0.1) and every proxied connection as if it came from [`PROXY_SOURCE`]
//! (130.211.0.1), then lets the real (loopback) connection through or not.
//!
//! An endpoint's network is its NEG's `network`; its target is the instance its `instance`
//! names in the NEG's project and zone (tags, service accounts). An endpoint whose instance
//! does not exist (possible only with `--validate-neg-endpoints=false`) is a target with no
//! tags and no service accounts: only rules without targets can admit it.

pub mod firewall;
pub mod interfaces;
pub mod ranges;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::snapshot::{key_from_url, NetworkEndpoint, ResourceKey, Snapshot};

pub use firewall::{Target, Verdict};

/// The address health-check probes are evaluated from (inside 35.191.0.0/16).
pub const PROBE_SOURCE: Ipv4Addr = Ipv4Addr::new(35, 191, 0, 1);
/// The address proxied connections are evaluated from (inside 130.211.0.0/22).
pub const PROXY_SOURCE: Ipv4Addr = Ipv4Addr::new(130, 211, 0, 1);
/// Google's documented source ranges of health checkers and front ends.
pub const GOOGLE_RANGES: [&str; 2] = ["130.211.0.0/22", "35.191.0.0/16"];

/// Networks, instances and firewall rules of every project, compiled from one snapshot.
#[derive(Debug, Default)]
pub struct NetworkModel {
    /// Firewall rules per network key, in evaluation order.
    rules: HashMap<ResourceKey, Vec<firewall::Rule>>,
    /// Instance key -> (tags, service accounts).
    instances: HashMap<ResourceKey, (Vec<String>, Vec<String>)>,
}

impl NetworkModel {
    /// Compiles the firewall rules and instances of `snap`.
    pub fn compile(snap: &Snapshot) -> NetworkModel {
        let mut model = NetworkModel::default();
        for (key, v) in &snap.resources {
            if key.contains("/global/firewalls/") {
                let network = v
                    .get("network")
                    .and_then(Value::as_str)
                    .and_then(key_from_url)
                    .unwrap_or_else(|| default_network(key));
                model
                    .rules
                    .entry(network)
                    .or_default()
                    .push(firewall::Rule::compile(v));
            } else if key.contains("/instances/") {
                model.instances.insert(
                    key.clone(),
                    (interfaces::tags(v), interfaces::service_accounts(v)),
                );
            }
        }
        for rules in model.rules.values_mut() {
            firewall::sort(rules);
        }
        model
    }

    /// The network (key) of NEG `neg_key`, as stored in `snap` (its `network`, else the
    /// project's `default`).
    pub fn neg_network(snap: &Snapshot, neg_key: &str) -> ResourceKey {
        snap.get(neg_key)
            .and_then(|n| n.get("network"))
            .and_then(Value::as_str)
            .and_then(key_from_url)
            .unwrap_or_else(|| default_network(neg_key))
    }

    /// Evaluates a TCP connection from `source` to endpoint `ep` of the NEG `neg_key` whose
    /// network is `network`.
    pub fn admits(
        &self,
        network: &str,
        neg_key: &str,
        ep: &NetworkEndpoint,
        source: Ipv4Addr,
    ) -> Verdict {
        let mut target = Target {
            ip: ep.ip_address.parse().ok(),
            ..Target::default()
        };
        if let Some(name) = &ep.instance {
            let zone_prefix = neg_key
                .rsplit_once("/networkEndpointGroups/")
                .map_or(neg_key, |(z, _)| z);
            if let Some((tags, sas)) = self
                .instances
                .get(&format!("{zone_prefix}/instances/{name}"))
            {
                target.tags = tags.clone();
                target.service_accounts = sas.clone();
            }
        }
        let rules = self.rules.get(network).map(Vec::as_slice).unwrap_or(&[]);
        firewall::evaluate(rules, &target, source, ep.port)
    }
}

/// `projects/{p}/global/networks/default` for any key of project `p`.
fn default_network(key: &str) -> ResourceKey {
    let project = key.split('/').nth(1).unwrap_or_default();
    format!("projects/{project}/global/networks/default")
}

/// Whether the firewall currently admits health-check probes and proxied connections to one
/// endpoint; written by the data plane on every snapshot, read on every probe and request.
#[derive(Debug, Default)]
pub struct Admission {
    probes: Gate,
    traffic: Gate,
}

/// One verdict: whether it passes, and why it is refused. The reason is written before the
/// flag is lowered (Release/Acquire), so a reader that finds the flag down always finds its
/// reason, never an empty one (a request racing a new snapshot once reported an empty reason).
#[derive(Debug)]
struct Gate {
    open: AtomicBool,
    refusal: Mutex<Arc<str>>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            open: AtomicBool::new(true),
            refusal: Mutex::new(Arc::from("")),
        }
    }
}

impl Gate {
    fn set(&self, open: bool, why: impl FnOnce() -> String) {
        if !open {
            let why = why();
            if let Ok(mut r) = self.refusal.lock() {
                if **r != *why {
                    *r = Arc::from(why);
                }
            }
        }
        self.open.store(open, Ordering::Release);
    }

    fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn refusal(&self) -> Arc<str> {
        self.refusal
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|_| Arc::from(""))
    }
}

impl Admission {
    /// Records the verdicts for probes and proxied connections; `network` names the network
    /// in the reasons refusals report.
    pub fn set(&self, network: &str, probes: &Verdict, traffic: &Verdict) {
        self.traffic.set(traffic.allowed(), || {
            format!("firewall of network {network}: connection from {PROXY_SOURCE} {traffic}")
        });
        self.probes.set(probes.allowed(), || {
            format!("firewall of network {network}: probe from {PROBE_SOURCE} {probes}")
        });
    }

    /// Admits everything (enforcement off).
    pub fn open(&self) {
        self.probes.set(true, String::new);
        self.traffic.set(true, String::new);
    }

    /// Whether health-check probes pass.
    pub fn probes(&self) -> bool {
        self.probes.is_open()
    }

    /// Whether proxied connections pass.
    pub fn traffic(&self) -> bool {
        self.traffic.is_open()
    }

    /// Why probes are refused (for the health state's reason), once [`Admission::probes`] has
    /// returned `false`.
    pub fn probe_refusal(&self) -> Arc<str> {
        self.probes.refusal()
    }

    /// Why proxied connections are refused (for 502 bodies and the access log), once
    /// [`Admission::traffic`] has returned `false`.
    pub fn traffic_refusal(&self) -> Arc<str> {
        self.traffic.refusal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoint_targets_come_from_the_instance() {
        let mut snap = Snapshot::default();
        let b = "http://h/compute/v1/";
        snap.resources.insert(
            "projects/p/global/firewalls/l7".into(),
            Arc::new(json!({"name": "l7", "network": format!("{b}projects/h/global/networks/shared"),
                "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}], "sourceRanges": GOOGLE_RANGES, "targetTags": ["node"]})),
        );
        snap.resources.insert(
            "projects/s/zones/z/instances/n1".into(),
            Arc::new(json!({"tags": {"items": ["node"]}})),
        );
        let m = NetworkModel::compile(&snap);
        let ep = |inst: Option<&str>| NetworkEndpoint {
            ip_address: "127.64.1.2".into(),
            port: 8080,
            instance: inst.map(str::to_string),
        };
        let neg = "projects/s/zones/z/networkEndpointGroups/neg";
        let net = "projects/h/global/networks/shared";
        assert!(m.admits(net, neg, &ep(Some("n1")), PROBE_SOURCE).allowed());
        assert!(m.admits(net, neg, &ep(Some("n1")), PROXY_SOURCE).allowed());
        assert!(!m.admits(net, neg, &ep(None), PROBE_SOURCE).allowed());
        assert!(!m
            .admits(
                "projects/s/global/networks/default",
                neg,
                &ep(Some("n1")),
                PROBE_SOURCE
            )
            .allowed());
    }

    #[test]
    fn each_refusal_keeps_its_own_reason() {
        let a = Admission::default();
        let deny = |rule: &str| Verdict::Denied {
            rule: Some(rule.into()),
            priority: 900,
        };
        let allow = Verdict::Allowed { rule: "l7".into() };
        // Both refused: the probe's reason names the probe source, the connection's the proxy.
        a.set("net", &deny("no-probes"), &deny("no-proxy"));
        assert!(!a.probes() && !a.traffic());
        assert!(a.probe_refusal().contains(&PROBE_SOURCE.to_string()));
        assert!(a.probe_refusal().contains("no-probes"));
        assert!(a.traffic_refusal().contains(&PROXY_SOURCE.to_string()));
        assert!(a.traffic_refusal().contains("no-proxy"));
        // Connections allowed again, probes still refused: the probe's reason is unchanged.
        a.set("net", &deny("no-probes"), &allow);
        assert!(!a.probes() && a.traffic());
        assert!(a.probe_refusal().contains("no-probes"));
        a.open();
        assert!(a.probes() && a.traffic());
    }
}
