//! The shared L7 firewall rule that lets Google's proxies and health checkers reach the NEG
//! endpoints, and the Shared VPC (XPN) hint (inventory §8; reference 000 "Shared VPC").

use std::collections::BTreeSet;

use google_cloud_compute_v1::model::{self, firewall::Allowed};

use super::{DesiredIngress, TranslateConfig};

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
    if ports.is_empty() {
        return None;
    }
    let mut tags = config.firewall_target_tags.clone();
    tags.sort();
    tags.dedup();
    let mut allowed = Allowed::default();
    allowed.ip_protocol = Some("tcp".to_owned());
    allowed.ports = ports.iter().map(u16::to_string).collect();
    let mut firewall = model::Firewall::default();
    firewall.name = Some(config.l7_firewall_name());
    firewall.description = Some(L7_FIREWALL_DESCRIPTION.to_owned());
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
/// left out when there are none. `project` is the network's (host) project.
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
    cmd.push_str(&format!(" --project {project}"));
    cmd
}
