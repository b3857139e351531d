//! PURE: the Nodes the local kubelet registers, as a kubelet on a GKE node registers its Node
//! (kubelet `initialNode` / `setNodeStatus`; labels from the well-known labels reference
//! <https://kubernetes.io/docs/reference/labels-annotations-taints/>):
//! - labels `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` (and their
//!   `beta.kubernetes.io/` twins), `topology.kubernetes.io/zone` and `.../region` (and the
//!   `failure-domain.beta.kubernetes.io/` twins GKE still sets), `node.kubernetes.io/instance-type`;
//! - `spec.podCIDR`/`podCIDRs`: a /24 of the Pod range (on GKE the node IPAM controller assigns
//!   it; here the kubelet picks one at random, so parallel local clusters rarely meet);
//! - `spec.providerID`: `gce://PROJECT/ZONE/NAME`, as the GCE cloud provider sets it;
//! - `status.addresses` (InternalIP, Hostname), `nodeInfo`, `capacity`/`allocatable`, and the
//!   conditions a healthy kubelet reports (`Ready` True with reason `KubeletReady`; the
//!   pressure conditions False).
//!
//! Node IPs (InternalIP, the Pods' `hostIP`) are drawn at random from [`NODE_IP_RANGE`].

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{json, Value};

/// Zone label (GA).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Region label (GA).
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// Deprecated zone label, still set by GKE.
pub const BETA_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
/// Deprecated region label, still set by GKE.
pub const BETA_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";
/// Namespace of the node heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's default `nodeLeaseDurationSeconds`.
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// Loopback range node InternalIPs are drawn from (outside the default Pod range
/// 127.64.0.0/10 and the emulator's load balancer range 127.128.0.0/9).
pub const NODE_IP_RANGE: (Ipv4Addr, u32) = (Ipv4Addr::new(127, 32, 0, 0), 11);
/// The kubelet version the local Nodes report (the API version the local server mirrors).
pub const KUBELET_VERSION: &str = "v1.36.0";
/// The zone of the one Node registered when `--nodes` is not given.
pub const DEFAULT_ZONE: &str = "us-central1-a";

/// Errors of the Node configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeConfigError {
    /// A `--nodes` entry is not a zone name.
    #[error("--nodes {value:?}: {zone:?} is not a zone name like us-central1-a; give a comma-separated list of zones, one per Node")]
    BadZone {
        /// The whole flag value.
        value: String,
        /// The offending entry.
        zone: String,
    },
    /// The Pod range cannot hold a /24 per Node.
    #[error("--pod-ip-range {range}: {reason}; give a range of /24 or wider, e.g. 127.64.0.0/10")]
    PodRange {
        /// The configured range.
        range: String,
        /// What is wrong.
        reason: String,
    },
}

/// One Node of the local cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// `metadata.name`, e.g. `local-node-1`.
    pub name: String,
    /// Zone, e.g. `us-central1-a`.
    pub zone: String,
    /// `spec.podCIDR`, a /24, e.g. `127.77.12.0/24`.
    pub pod_cidr: String,
    /// InternalIP, the `hostIP` of its Pods.
    pub internal_ip: Ipv4Addr,
}

/// Parses `--nodes`: a comma-separated list of zones, one Node per entry (a zone may repeat).
/// Empty: one Node in [`DEFAULT_ZONE`]. Errors: [`NodeConfigError::BadZone`].
pub fn parse_zones(value: &str) -> Result<Vec<String>, NodeConfigError> {
    let zones: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect();
    for zone in &zones {
        let valid = region_of(zone).is_some()
            && zone
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(NodeConfigError::BadZone {
                value: value.to_string(),
                zone: zone.clone(),
            });
        }
    }
    Ok(if zones.is_empty() {
        vec![DEFAULT_ZONE.to_string()]
    } else {
        zones
    })
}

/// The region of a zone: the zone without its last `-x` part (`us-central1-a` -> `us-central1`).
pub fn region_of(zone: &str) -> Option<&str> {
    let (region, suffix) = zone.rsplit_once('-')?;
    (!region.is_empty() && !suffix.is_empty() && region.contains('-')).then_some(region)
}

/// The name of the `index`-th (1-based) Node: `local-node-<index>`.
pub fn node_name(index: usize) -> String {
    format!("local-node-{index}")
}

/// Picks /24 Pod CIDRs for Nodes at random inside `range` (`a.b.c.d/len`, len <= 24), avoiding
/// those in `taken`. Errors: [`NodeConfigError::PodRange`] when the range is narrower than /24
/// or has no free /24 left.
pub fn pick_pod_cidr(range: &str, taken: &BTreeSet<String>) -> Result<String, NodeConfigError> {
    let error = |reason: &str| NodeConfigError::PodRange {
        range: range.to_string(),
        reason: reason.to_string(),
    };
    let (addr, len) = range
        .split_once('/')
        .ok_or_else(|| error("missing /prefix-length"))?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| error("not an IPv4 address"))?;
    let len: u32 = len.parse().map_err(|_| error("bad prefix length"))?;
    if !(8..=24).contains(&len) {
        return Err(error(
            "a Node's Pod CIDR is a /24, so the range must be /24 or wider",
        ));
    }
    let base = u32::from(addr) & (u32::MAX << (32 - len));
    let slices = 1u32 << (24 - len);
    let cidr = |i: u32| format!("{}/24", Ipv4Addr::from(base + (i << 8)));
    let mut rng = rand::rng();
    for _ in 0..64 {
        let candidate = cidr(rng.random_range(0..slices));
        if !taken.contains(&candidate) {
            return Ok(candidate);
        }
    }
    (0..slices)
        .map(cidr)
        .find(|c| !taken.contains(c))
        .ok_or_else(|| error("every /24 is taken by a Node"))
}

/// A random InternalIP in [`NODE_IP_RANGE`] not in `taken`.
pub fn pick_node_ip(taken: &BTreeSet<Ipv4Addr>) -> Ipv4Addr {
    let (base, len) = NODE_IP_RANGE;
    let count = (1u32 << (32 - len)) - 2;
    let mut rng = rand::rng();
    loop {
        let ip = Ipv4Addr::from(u32::from(base) + 1 + rng.random_range(0..count));
        if !taken.contains(&ip) {
            return ip;
        }
    }
}

/// The labels a kubelet and the GCE cloud provider put on the Node.
pub fn labels(node: &NodeConfig) -> Value {
    let region = region_of(&node.zone).unwrap_or_default();
    json!({
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "e2-medium",
        "beta.kubernetes.io/instance-type": "e2-medium",
        ZONE_LABEL: node.zone,
        REGION_LABEL: region,
        BETA_ZONE_LABEL: node.zone,
        BETA_REGION_LABEL: region,
    })
}

/// `gce://PROJECT/ZONE/NAME`.
pub fn provider_id(project: &str, node: &NodeConfig) -> String {
    format!("gce://{project}/{}/{}", node.zone, node.name)
}

/// The Node to create (metadata and spec; status is written through `nodes/status`).
pub fn node_object(project: &str, node: &NodeConfig) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels(node)},
        "spec": {
            "podCIDR": node.pod_cidr,
            "podCIDRs": [node.pod_cidr],
            "providerID": provider_id(project, node),
        },
    })
}

/// The status a healthy kubelet reports; `now` (RFC 3339) is the heartbeat time, and
/// `transition` the time the Node became Ready.
pub fn node_status(node: &NodeConfig, now: &str, transition: &str) -> Value {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": transition,
        })
    };
    let resources = json!({
        "cpu": "2", "memory": "4030184Ki", "pods": "110", "ephemeral-storage": "98831908Ki",
    });
    json!({
        "status": {
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": node.internal_ip.to_string()},
                {"type": "Hostname", "address": node.name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "",
                "kernelVersion": "local", "osImage": "gclb-operator local kubelet",
                "containerRuntimeVersion": "local://echo",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64",
            },
        }
    })
}

/// The node heartbeat Lease (`coordination.k8s.io/v1`, `kube-node-lease/<node>`), owned by the
/// Node as the kubelet makes it; `renew` is the MicroTime (RFC 3339 with microseconds).
pub fn lease_object(node_name: &str, node_uid: &str, renew: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": renew,
        },
    })
}

/// Whether a Node's labels satisfy a Pod's `spec.nodeSelector` (every pair equal).
pub fn matches_selector(
    node_labels: &std::collections::BTreeMap<String, String>,
    selector: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    selector.is_none_or(|s| s.iter().all(|(k, v)| node_labels.get(k) == Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_parse_and_regions_follow() {
        assert_eq!(parse_zones("").unwrap(), vec!["us-central1-a"]);
        assert_eq!(
            parse_zones("us-central1-a, europe-west1-b,us-central1-a").unwrap(),
            vec!["us-central1-a", "europe-west1-b", "us-central1-a"]
        );
        assert_eq!(region_of("europe-west1-b"), Some("europe-west1"));
        for bad in ["central", "us-central1-", "US-central1-a", "a b-c-d"] {
            assert!(parse_zones(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pod_cidrs_are_distinct_slash_24s_of_the_range() {
        let mut taken = BTreeSet::new();
        for _ in 0..20 {
            let cidr = pick_pod_cidr("127.64.0.0/10", &taken).unwrap();
            assert!(cidr.ends_with(".0/24"), "{cidr}");
            let second: u8 = cidr.split('.').nth(1).unwrap().parse().unwrap();
            assert!((64..128).contains(&second), "{cidr}");
            assert!(taken.insert(cidr));
        }
        let one = pick_pod_cidr("127.99.5.0/24", &BTreeSet::new()).unwrap();
        assert_eq!(one, "127.99.5.0/24");
        let full = BTreeSet::from([one]);
        assert!(pick_pod_cidr("127.99.5.0/24", &full).is_err());
        assert!(pick_pod_cidr("127.99.5.0/25", &BTreeSet::new()).is_err());
    }

    #[test]
    fn the_node_carries_zone_region_cidr_and_provider_id() {
        let node = NodeConfig {
            name: "local-node-2".into(),
            zone: "us-central1-b".into(),
            pod_cidr: "127.70.3.0/24".into(),
            internal_ip: Ipv4Addr::new(127, 40, 0, 9),
        };
        let obj = node_object("p1", &node);
        assert_eq!(obj["metadata"]["labels"][ZONE_LABEL], "us-central1-b");
        assert_eq!(obj["metadata"]["labels"][BETA_REGION_LABEL], "us-central1");
        assert_eq!(
            obj["spec"]["providerID"],
            "gce://p1/us-central1-b/local-node-2"
        );
        assert_eq!(obj["spec"]["podCIDRs"][0], "127.70.3.0/24");
        let status = node_status(&node, "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z");
        assert_eq!(status["status"]["addresses"][0]["address"], "127.40.0.9");
        assert_eq!(status["status"]["conditions"][3]["type"], "Ready");
        assert_eq!(status["status"]["conditions"][3]["status"], "True");
    }
}
