//! PURE: what GKE's `whereami` sample image answers (kubernetes-engine-samples
//! `quickstarts/whereami`, used by GKE's multi-cluster and Gateway tutorials): on every path but
//! `/healthz` a JSON object naming where the request landed, with the fields the image fills
//! from the downward API and the metadata server: `cluster_name`, `host_header`, `metadata`
//! (its `METADATA` variable), `node_name`, `pod_ip`, `pod_name`, `pod_name_emoji`,
//! `pod_namespace`, `pod_service_account`, `project_id`, `timestamp`, `zone`. `/healthz`
//! answers `200` `OK`.

use serde_json::{json, Value};

/// Where a whereami Pod runs.
#[derive(Clone, Debug, Default)]
pub struct Whereabouts {
    /// `pod_name`.
    pub pod_name: String,
    /// `pod_namespace`.
    pub pod_namespace: String,
    /// `pod_ip`.
    pub pod_ip: String,
    /// `node_name`.
    pub node_name: String,
    /// `zone`, e.g. `us-central1-a`.
    pub zone: String,
    /// `pod_service_account`.
    pub service_account: String,
    /// `project_id`.
    pub project_id: String,
    /// The container's `METADATA` variable.
    pub metadata: String,
}

const EMOJI: &[&str] = &["🐳", "🚀", "🌵", "🍩", "🦄", "🐙", "🎈", "🌈"];

/// The JSON body for a request whose `Host` header is `host`, at `timestamp` (RFC 3339).
pub fn body(at: &Whereabouts, host: &str, timestamp: &str) -> Value {
    let emoji = EMOJI[at.pod_name.bytes().map(usize::from).sum::<usize>() % EMOJI.len()];
    json!({
        "cluster_name": "local",
        "host_header": host,
        "metadata": at.metadata,
        "node_name": at.node_name,
        "pod_ip": at.pod_ip,
        "pod_name": at.pod_name,
        "pod_name_emoji": emoji,
        "pod_namespace": at.pod_namespace,
        "pod_service_account": at.service_account,
        "project_id": at.project_id,
        "timestamp": timestamp,
        "zone": at.zone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_pod_node_and_zone() {
        let at = Whereabouts {
            pod_name: "whereami-abc".into(),
            pod_namespace: "default".into(),
            node_name: "local-node-b".into(),
            zone: "us-central1-b".into(),
            metadata: "frontend".into(),
            ..Whereabouts::default()
        };
        let b = body(&at, "34.1.2.3", "2026-01-01T00:00:00");
        assert_eq!(b["pod_name"], "whereami-abc");
        assert_eq!(b["pod_namespace"], "default");
        assert_eq!(b["node_name"], "local-node-b");
        assert_eq!(b["zone"], "us-central1-b");
        assert_eq!(b["metadata"], "frontend");
        assert_eq!(b["host_header"], "34.1.2.3");
    }
}
