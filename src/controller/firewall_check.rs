//! Telling users when the firewall blocks their load balancer: the most common reason for
//! backends that stay UNHEALTHY on GKE is a VPC firewall that does not admit Google's health
//! checkers and proxies (130.211.0.0/22, 35.191.0.0/16) on the Pods' port (Google Cloud "Load
//! balancing: firewall rules"). GKE only says so on a Shared VPC (its `XPN` Event, when its own
//! write is refused); here, whenever a backend service has no HEALTHY endpoint and the
//! network's rules do not let those ranges through on a port it serves, a Warning `Firewall`
//! Event names the Service port and gives the gcloud command that fixes it, in the project
//! that owns the network (the Shared VPC host).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;
use tracing::warn;

use super::Context;
use crate::sync::firewalls;
use crate::translate::{
    firewall_hint, translate_firewall, DesiredIngress, FirewallBlock, FirewallHintOp,
};

impl Context {
    /// Posts a Warning `Firewall` Event on `ingress` for each of its backend services whose
    /// `health` is UNHEALTHY while the firewall blocks Google's ranges on one of its ports.
    /// A failed listing of the rules is only logged: the check is advice, not part of the sync.
    pub(super) async fn warn_if_firewall_blocks(
        &self,
        ingress: &Ingress,
        desired: &DesiredIngress,
        health: &BTreeMap<String, String>,
    ) {
        let unhealthy: Vec<_> = desired
            .backends
            .iter()
            .filter(|(name, _)| health.get(*name).is_some_and(|h| h == "UNHEALTHY"))
            .collect();
        if unhealthy.is_empty() {
            return;
        }
        let t = &self.config.translate;
        let network = t.network_ref();
        let ports = unhealthy
            .iter()
            .flat_map(|(_, b)| b.firewall_ports.iter().copied());
        let name = t.l7_firewall_name();
        let (blocked, last, listed) = {
            let mut state = self.firewall_lock.lock().await;
            let blocked = firewalls::blocked_ports(
                &self.compute,
                &network,
                ports,
                &t.firewall_target_tags,
                &mut state,
            )
            .await;
            (blocked, state.last().cloned(), state.listed(&name))
        };
        let blocked = match blocked {
            Ok(b) => b,
            Err(e) => {
                warn!(error = %e, "cannot list the network's firewall rules");
                return;
            }
        };
        for (bs_name, backend) in unhealthy {
            for port in &backend.firewall_ports {
                let Some(block) = blocked.get(port) else {
                    continue;
                };
                let (why, cmd) = match block {
                    FirewallBlock::NoAllowRule => {
                        // The shared rule as last synced; created or updated as it is now.
                        let (rule, synced) = last.clone().unwrap_or_else(|| {
                            let rule = translate_firewall(&[desired], t).unwrap_or_default();
                            (rule, false)
                        });
                        let op = if listed.unwrap_or(synced) {
                            FirewallHintOp::Update
                        } else {
                            FirewallHintOp::Create
                        };
                        (
                            "No firewall rule allows Google's health checkers and proxies"
                                .to_string(),
                            firewall_hint(op, &rule, &t.network, &t.network_project),
                        )
                    }
                    FirewallBlock::Denied { rule, priority } => {
                        // A rule of its own, one priority step ahead of the deny.
                        let mut allow = translate_firewall(&[desired], t).unwrap_or_default();
                        allow.name = Some(format!("{name}-{port}"));
                        allow.priority = Some((*priority - 1).max(0));
                        if let Some(a) = allow.allowed.first_mut() {
                            a.ports = vec![port.to_string()];
                        }
                        (
                            format!("Firewall rule {rule} (priority {priority}) denies Google's health checkers and proxies"),
                            firewall_hint(
                                FirewallHintOp::Create,
                                &allow,
                                &t.network,
                                &t.network_project,
                            ),
                        )
                    }
                };
                let key = &backend.key;
                // What differs comes first: Events are folded by their first 128 characters.
                let note = format!(
                    "{why} (130.211.0.0/22, 35.191.0.0/16) on tcp:{port}, so Service {}/{} port {} (backend service {bs_name}) has no HEALTHY endpoint in network {network}. Fix: `{cmd}`",
                    key.namespace, key.service, key.port
                );
                self.event(ingress, true, "Firewall", note).await;
            }
        }
    }
}
