//! The Gateway controller's firewall rule: Google's proxies and health checkers
//! ([`crate::translate::firewall::L7_SOURCE_RANGES`]) must reach the NEG endpoints of every
//! Gateway backend, as for Ingress (`translate/firewall.rs`, whose rule shape this one reuses);
//! GKE's Gateway controller keeps one such rule per cluster and network
//! (`gkegw1-...-l7-...-global`). One rule for all Gateways of the cluster: TCP to every target
//! port of every backend, on the cluster network, with the configured target tags. When no
//! Gateway wants a backend the rule is deleted.

use std::collections::BTreeSet;

use google_cloud_compute_v1::model;

use super::desired::DesiredGateway;
use crate::translate::firewall::l7_firewall;
use crate::translate::TranslateConfig;

/// Description of the rule.
pub const DESCRIPTION: &str = "gclb-operator Gateway L7 firewall rule";

/// Name of the cluster's Gateway firewall rule: `gkegw1-fw-<uid8>-l7-global`.
pub fn name(uid8: &str) -> String {
    format!("gkegw1-fw-{uid8}-l7-global")
}

/// The rule for `gateways` (the Ingress rule's shape, [`l7_firewall`]), `None` when no backend
/// port is wanted (an empty `allowed.ports` would open every port; the caller deletes the rule).
pub fn desired<'a>(
    gateways: impl IntoIterator<Item = &'a DesiredGateway>,
    config: &TranslateConfig,
) -> Option<model::Firewall> {
    let ports: BTreeSet<u16> = gateways
        .into_iter()
        .flat_map(|g| g.backends.values())
        .flat_map(|b| b.firewall_ports.iter().copied())
        .collect();
    l7_firewall(name(&config.cluster_uid), DESCRIPTION, &ports, config)
}
