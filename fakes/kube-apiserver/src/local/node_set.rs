//! The Nodes this local kubelet serves (registered at start or adopted later), each with its
//! Pod IP allocator, and the scheduler's choice of a Node for an unbound Pod: the Nodes whose
//! labels satisfy the Pod's `spec.nodeSelector` (so `topology.kubernetes.io/zone: us-central1-b`
//! pins a zone) and its required node affinity ([`node_fit::fits_node`]; a DaemonSet's Pods
//! name their Node so); among them the least loaded by the Pod's siblings (the scheduler's default
//! topology spread of a workload's replicas across zones, then Nodes), taken round-robin in
//! name order on ties. Preferred affinity, Pod affinity, taints and resources are not
//! considered (documented in docs/kube-apiserver-local.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::node_fit;
use super::nodes::NodeConfig;
use super::pod_ip::PodIpAllocator;

/// One served Node.
#[derive(Debug)]
pub struct LocalNode {
    /// Name, zone, Pod CIDR and InternalIP.
    pub config: NodeConfig,
    /// The Node's labels (for `nodeSelector`).
    pub labels: BTreeMap<String, String>,
    /// Pod IPs from the Node's `spec.podCIDR`.
    pub ips: PodIpAllocator,
}

impl LocalNode {
    /// A served Node with an allocator over its Pod CIDR. Errors: the CIDR is not a loopback
    /// range the allocator accepts.
    pub fn new(
        config: NodeConfig,
        labels: BTreeMap<String, String>,
    ) -> Result<LocalNode, super::pod_ip::PodIpError> {
        let ips = PodIpAllocator::new(&config.pod_cidr)?;
        Ok(LocalNode {
            config,
            labels,
            ips,
        })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.config.name
    }
}

/// The served Nodes; every change bumps a counter others can wait on.
#[derive(Debug)]
pub struct NodeSet {
    nodes: RwLock<BTreeMap<String, Arc<LocalNode>>>,
    /// Round-robin position per set of fitting Nodes (so Pods pinned to one zone do not
    /// disturb the rotation of Pods that fit anywhere).
    next: Mutex<HashMap<String, usize>>,
    changed: watch::Sender<u64>,
}

impl Default for NodeSet {
    fn default() -> Self {
        NodeSet {
            nodes: RwLock::default(),
            next: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl NodeSet {
    /// Adds (or replaces) a served Node.
    pub fn insert(&self, node: LocalNode) {
        if let Ok(mut nodes) = self.nodes.write() {
            nodes.insert(node.config.name.clone(), Arc::new(node));
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// Stops serving a Node; returns it when it was served.
    pub fn remove(&self, name: &str) -> Option<Arc<LocalNode>> {
        let removed = self.nodes.write().ok()?.remove(name);
        self.changed.send_modify(|n| *n += 1);
        removed
    }

    /// The served Node of this name.
    pub fn get(&self, name: &str) -> Option<Arc<LocalNode>> {
        self.nodes.read().ok()?.get(name).cloned()
    }

    /// Every served Node, in name order.
    pub fn all(&self) -> Vec<Arc<LocalNode>> {
        self.nodes
            .read()
            .map(|n| n.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A receiver that sees a new value after each change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The Node an unbound Pod goes to: round-robin over the Nodes matching its
    /// `spec.nodeSelector` and required node affinity. `Err` carries the scheduler's message for a `FailedScheduling`
    /// Event (`0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.`).
    pub fn schedule(&self, pod: &Pod) -> Result<Arc<LocalNode>, String> {
        self.schedule_spread(pod, |_| 0)
    }

    /// [`NodeSet::schedule`] among the fitting Nodes of least `load` (e.g. how many Pods of the
    /// same owner run in the Node's zone and on the Node), round-robin on ties.
    pub fn schedule_spread(
        &self,
        pod: &Pod,
        load: impl Fn(&LocalNode) -> usize,
    ) -> Result<Arc<LocalNode>, String> {
        let all = self.all();
        let fits: Vec<&Arc<LocalNode>> = all
            .iter()
            .filter(|n| {
                pod.spec
                    .as_ref()
                    .is_none_or(|s| node_fit::fits_node(n.name(), &n.labels, s))
            })
            .collect();
        if fits.is_empty() {
            let total = all.len();
            return Err(if total == 0 {
                "no nodes available to schedule pods".to_string()
            } else {
                format!("0/{total} nodes are available: {total} node(s) didn't match Pod's node affinity/selector.")
            });
        }
        let least = fits.iter().map(|n| load(n)).min().unwrap_or(0);
        let fits: Vec<&Arc<LocalNode>> = fits.into_iter().filter(|n| load(n) == least).collect();
        let key: Vec<&str> = fits.iter().map(|n| n.name()).collect();
        let turn = self
            .next
            .lock()
            .map(|mut next| {
                let slot = next.entry(key.join(",")).or_insert(0);
                let turn = *slot;
                *slot = turn.wrapping_add(1);
                turn
            })
            .unwrap_or(0);
        Ok(fits[turn % fits.len()].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::nodes;
    use std::net::Ipv4Addr;

    fn node(name: &str, zone: &str, third: u8) -> LocalNode {
        let config = NodeConfig {
            name: name.into(),
            zone: zone.into(),
            pod_cidr: format!("127.66.{third}.0/24"),
            internal_ip: Ipv4Addr::new(127, 32, 0, third),
        };
        let labels: BTreeMap<String, String> =
            serde_json::from_value(nodes::labels(&config)).unwrap();
        LocalNode::new(config, labels).unwrap()
    }

    fn pod(selector: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "nodeSelector": selector}
        }))
        .unwrap()
    }

    #[test]
    fn round_robin_over_matching_nodes_and_zone_pins() {
        let set = NodeSet::default();
        set.insert(node("n1", "us-central1-a", 1));
        set.insert(node("n2", "us-central1-b", 2));
        set.insert(node("n3", "us-central1-c", 3));
        let any = pod(serde_json::json!({}));
        let picks: Vec<String> = (0..6)
            .map(|_| set.schedule(&any).unwrap().name().to_string())
            .collect();
        assert_eq!(picks, ["n1", "n2", "n3", "n1", "n2", "n3"]);
        let zone_b = pod(serde_json::json!({nodes::ZONE_LABEL: "us-central1-b"}));
        for _ in 0..3 {
            assert_eq!(set.schedule(&zone_b).unwrap().name(), "n2");
        }
        assert_eq!(
            set.schedule(&any).unwrap().name(),
            "n1",
            "rotation undisturbed"
        );
        let nowhere = pod(serde_json::json!({nodes::ZONE_LABEL: "us-east1-b"}));
        let message = set.schedule(&nowhere).unwrap_err();
        assert!(message.starts_with("0/3 nodes are available"), "{message}");
        set.remove("n2");
        assert!(set.schedule(&zone_b).is_err());
    }

    #[test]
    fn spread_prefers_the_least_loaded_zone() {
        let set = NodeSet::default();
        set.insert(node("n1", "us-central1-a", 1));
        set.insert(node("n2", "us-central1-b", 2));
        set.insert(node("n3", "us-central1-c", 3));
        let any = pod(serde_json::json!({}));
        let load = |n: &LocalNode| usize::from(n.config.zone != "us-central1-c");
        for _ in 0..3 {
            assert_eq!(set.schedule_spread(&any, load).unwrap().name(), "n3");
        }
    }
}
