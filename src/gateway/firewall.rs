//! The Gateway controller's firewall rule: Google's proxies and health checkers
//! ([`L7_SOURCE_RANGES`]) must reach the NEG endpoints of every Gateway backend, as for Ingress
//! (`translate/firewall.rs`); GKE's Gateway controller keeps one such rule per cluster and
//! network (`gkegw1-...-l7-...-global`). One rule for all Gateways of the cluster: TCP to every
//! target port of every backend, on the cluster network, with the configured target tags.
//! When no Gateway wants a backend the rule is deleted.

use std::collections::BTreeSet;

use google_cloud_compute_v1::model::{self, firewall::Allowed};

use super::desired::DesiredGateway;
use crate::translate::firewall::L7_SOURCE_RANGES;
use crate::translate::TranslateConfig;

/// Description of the rule.
pub const DESCRIPTION: &str = "gclb-operator Gateway L7 firewall rule";

/// Name of the cluster's Gateway firewall rule: `gkegw1-fw-<uid8>-l7-global`.
pub fn name(uid8: &str) -> String {
    format!("gkegw1-fw-{uid8}-l7-global")
}

/// The rule for `gateways`, `None` when no backend port is wanted (an empty `allowed.ports`
/// would open every port; the caller deletes the rule).
pub fn desired<'a>(
    gateways: impl IntoIterator<Item = &'a DesiredGateway>,
    config: &TranslateConfig,
) -> Option<model::Firewall> {
    let ports: BTreeSet<u16> = gateways
        .into_iter()
        .flat_map(|g| g.backends.values())
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
    let mut rule = model::Firewall::default();
    rule.name = Some(name(&config.cluster_uid));
    rule.description = Some(DESCRIPTION.to_owned());
    rule.network = Some(config.network_ref());
    rule.allowed = vec![allowed];
    rule.source_ranges = L7_SOURCE_RANGES.iter().map(|r| (*r).to_owned()).collect();
    rule.target_tags = tags;
    Some(rule)
}
