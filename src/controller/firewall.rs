//! The shared L7 firewall rule over every live owned Ingress, and the `XPN` hint when the
//! project refuses firewall writes (Shared VPC).

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::{Context, SUPPRESS_XPN_ANNOTATION};
use crate::sync::firewalls::{self, FirewallOutcome};
use crate::sync::{Changes, SyncError};
use crate::translate::{
    firewall::firewall_for_ports, firewall_hint, translate_ingress, DesiredIngress, FirewallHintOp,
    ObjectKey,
};

impl Context {
    /// Syncs the shared firewall rule for all live owned Ingresses; on 403 posts the `XPN`
    /// hint on each of them. Reconciles that ask at the same time share one run
    /// ([`coalesce`]), cleanups included (the live Ingresses leave out those being deleted or
    /// no longer ours, as for [`Self::gc`]).
    pub(crate) async fn sync_firewall(&self) -> Result<(), SyncError> {
        self.firewall_runs
            .run(|| self.sync_firewall_now())
            .await
            .map(|_| ())
    }

    /// Whether `desired` needs a firewall port that the rule this process last synced does not
    /// allow (or no rule was synced yet). A Service's targetPort reaches the rule through the
    /// EndpointSlices' ports, which can change in a reconcile that changes no other Compute
    /// resource (only NEG endpoints), so "something changed" alone would miss it.
    pub(crate) async fn firewall_lacks_ports(&self, desired: &DesiredIngress) -> bool {
        let needed: Vec<String> = desired
            .backends
            .values()
            .flat_map(|b| b.firewall_ports.iter().map(|p| p.to_string()))
            .collect();
        if needed.is_empty() {
            return false;
        }
        let state = self.firewall_lock.lock().await;
        let Some((rule, _)) = state.last() else {
            return true;
        };
        needed
            .iter()
            .any(|p| !rule.allowed.iter().any(|a| a.ports.contains(p)))
    }

    /// One firewall sync, serialised, over a snapshot taken under the lock, so concurrent
    /// reconciles cannot write an older port set over a newer one.
    pub(crate) async fn sync_firewall_now(&self) -> Result<(), SyncError> {
        let mut rule_state = self.firewall_lock.lock().await;
        let snapshot = &self.stores.snapshot();
        let t = &self.config.translate;
        let live = self.live_ingresses(snapshot);
        let ports: BTreeSet<u16> = live
            .iter()
            .filter_map(|i| {
                self.last_desired
                    .last_or_resolve(&ObjectKey::of(*i), || translate_ingress(snapshot, i, t))
            })
            .flat_map(|summary| summary.firewall_ports.clone())
            .collect();
        let mut changes = Changes::new();
        match firewall_for_ports(&ports, t) {
            None if live.is_empty() => {
                firewalls::delete(
                    &self.compute,
                    &t.network_project,
                    &t.l7_firewall_name(),
                    &mut rule_state,
                    &mut changes,
                )
                .await
            }
            None => Ok(()),
            Some(rule) => match firewalls::ensure(
                &self.compute,
                &t.network_project,
                &rule,
                &mut rule_state,
                &mut changes,
            )
            .await?
            {
                FirewallOutcome::InSync => Ok(()),
                FirewallOutcome::Forbidden { exists } => {
                    let op = if exists {
                        FirewallHintOp::Update
                    } else {
                        FirewallHintOp::Create
                    };
                    let cmd = firewall_hint(op, &rule, &t.network, &t.network_project);
                    let note = format!("Firewall change required by security admin: `{cmd}`");
                    for ingress in live {
                        let suppressed = ingress
                            .annotations()
                            .get(SUPPRESS_XPN_ANNOTATION)
                            .is_some_and(|v| v == "true");
                        if !suppressed {
                            self.event(ingress, false, "XPN", note.clone()).await;
                        }
                    }
                    Ok(())
                }
            },
        }
    }
}
