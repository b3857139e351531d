//! NEG zones from the cluster (issue 15, "Zones from the cluster"): NEGs in the zones of the
//! Nodes, endpoints in the zone of their slice entry or Node, never in another zone's NEG.

use std::collections::BTreeMap;

use super::test_support::{config, snapshot_from_yaml};
use super::*;

/// Service `web`; one slice with an endpoint naming its zone, one whose Node has a zone, and
/// one whose Node is unknown; an Ingress to it.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.0.1"]
  conditions: {ready: true}
  nodeName: node-a
  zone: us-central1-a
  targetRef: {kind: Pod, name: web-a}
- addresses: ["10.0.0.2"]
  conditions: {ready: true}
  nodeName: node-b
  targetRef: {kind: Pod, name: web-b}
- addresses: ["10.0.0.3"]
  conditions: {ready: true}
  nodeName: node-gone
  targetRef: {kind: Pod, name: web-x}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
"#;

fn snapshot(nodes: &[(&str, &str)]) -> ClusterSnapshot {
    let mut s = snapshot_from_yaml(CLUSTER);
    s.node_zones = nodes
        .iter()
        .map(|(n, z)| ((*n).to_owned(), (*z).to_owned()))
        .collect();
    s
}

/// The web backend's NEGs: zone -> endpoint IPs; and the Warnings of the translation.
fn web_negs(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
) -> (BTreeMap<String, Vec<String>>, Vec<Finding>) {
    let ingress = &snapshot.ingresses[&ObjectKey::new("default", "web")];
    let desired = translate_ingress(snapshot, ingress, config).unwrap();
    let web = desired
        .backends
        .values()
        .find(|b| b.key.service == "web")
        .unwrap();
    let negs = web
        .negs
        .iter()
        .map(|n| {
            let ips = n.endpoints.iter().map(|e| e.ip_address.clone()).collect();
            (n.zone.clone(), ips)
        })
        .collect();
    // The backend service has one backend per NEG, each in its zone.
    let groups: Vec<String> = web
        .backend_service
        .backends
        .iter()
        .map(|b| b.group.clone().unwrap())
        .collect();
    let expected: Vec<String> = web
        .negs
        .iter()
        .map(|n| {
            config.zonal_ref(
                &n.zone,
                "networkEndpointGroups",
                n.neg.name.as_ref().unwrap(),
            )
        })
        .collect();
    assert_eq!(groups, expected);
    (negs, desired.findings)
}

fn ips(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn negs_follow_the_zones_of_the_nodes() {
    let mut config = config();
    config.zones.clear();
    let three = snapshot(&[
        ("node-a", "us-central1-a"),
        ("node-b", "us-central1-b"),
        ("node-c", "us-central1-c"),
    ]);
    let (negs, findings) = web_negs(&three, &config);
    assert_eq!(
        negs,
        BTreeMap::from([
            ("us-central1-a".to_owned(), ips(&["10.0.0.1"])),
            // No zone in the slice entry: its Node's.
            ("us-central1-b".to_owned(), ips(&["10.0.0.2"])),
            // A zone with a Node and no endpoint still has its NEG, ready for them.
            ("us-central1-c".to_owned(), ips(&[])),
        ])
    );
    // The endpoint on an unknown Node is in no NEG, and said so.
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].warning);
    assert_eq!(findings[0].reason, "EndpointZone");
    assert!(
        findings[0]
            .message
            .contains("endpoint 10.0.0.3 (Pod default/web-x) has no zone"),
        "{}",
        findings[0].message
    );

    // A fourth zone appears; zone c loses its last Node.
    let changed = snapshot(&[
        ("node-a", "us-central1-a"),
        ("node-b", "us-central1-b"),
        ("node-d", "us-central1-f"),
    ]);
    let (negs, _) = web_negs(&changed, &config);
    let zones: Vec<&String> = negs.keys().collect();
    assert_eq!(zones, ["us-central1-a", "us-central1-b", "us-central1-f"]);
}

#[test]
fn the_zone_override_pins_the_negs_and_refuses_other_zones() {
    let mut config = config();
    config.zones = vec!["us-central1-a".to_owned()];
    let s = snapshot(&[("node-a", "us-central1-a"), ("node-b", "us-central1-b")]);
    let (negs, findings) = web_negs(&s, &config);
    assert_eq!(
        negs,
        BTreeMap::from([("us-central1-a".to_owned(), ips(&["10.0.0.1"]))])
    );
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("10.0.0.2 (Pod default/web-b) is in zone us-central1-b, which is not one of the operator's --zone list"),
        "{messages:?}"
    );
    assert!(messages[1].contains("10.0.0.3 (Pod default/web-x) has no zone"));
}

/// A Node's zone: `topology.kubernetes.io/zone`, else the deprecated
/// `failure-domain.beta.kubernetes.io/zone` (older GKE Nodes carry both); an empty label is no
/// zone.
#[test]
fn a_nodes_zone_comes_from_the_zone_label_then_the_legacy_one() {
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let current = labels(&[(endpoints::ZONE_LABEL, "us-central1-a")]);
    assert_eq!(endpoints::node_zone(&current), Some("us-central1-a"));
    let both = labels(&[
        (endpoints::ZONE_LABEL, "us-central1-a"),
        (endpoints::LEGACY_ZONE_LABEL, "us-central1-f"),
    ]);
    assert_eq!(endpoints::node_zone(&both), Some("us-central1-a"));
    let legacy = labels(&[(endpoints::LEGACY_ZONE_LABEL, "us-central1-f")]);
    assert_eq!(endpoints::node_zone(&legacy), Some("us-central1-f"));
    assert_eq!(
        endpoints::node_zone(&labels(&[(endpoints::ZONE_LABEL, "")])),
        None
    );
    assert_eq!(
        endpoints::node_zone(&labels(&[("kubernetes.io/os", "linux")])),
        None
    );
}
