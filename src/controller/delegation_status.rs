//! Writes the status of TLSCertificateDelegations (Contour's `Valid` condition, computed by
//! [`crate::translate::delegation_status`]) as the Secrets they delegate are served or
//! refused. One task, fed the namespaces whose delegations may have changed: a
//! TLSCertificateDelegation or a TLS Secret changing there, or an Ingress naming a Secret there
//! through `spec.tls` (Contour's delegation forms) changing. Namespaces waiting are merged and
//! each is computed from the stores when its turn comes, so the last write follows the last
//! change. A status is written (merge patch of `/status`) only when it differs; other
//! controllers' conditions are kept.

use std::collections::BTreeSet;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::Stores;
use crate::crd::{DetailedCondition, TLSCertificateDelegation};
use crate::translate::delegation_status::{valid_condition, VALID};
use crate::translate::TranslateConfig;

/// Hands namespaces to the status task; cheap to clone.
#[derive(Clone)]
pub struct DelegationStatus {
    tx: mpsc::UnboundedSender<String>,
}

/// The queue of namespaces [`DelegationStatus::start`] works through.
pub type Queue = mpsc::UnboundedReceiver<String>;

impl DelegationStatus {
    /// A handle and its queue; nothing runs until [`DelegationStatus::start`].
    pub fn new() -> (Self, Queue) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Starts the task working through `queue`; it waits for the stores' first lists before
    /// writing anything.
    pub fn start(&self, queue: Queue, client: Client, stores: Stores, config: TranslateConfig) {
        tokio::spawn(run(client, stores, config, queue, self.tx.clone()));
    }

    /// The delegations of `namespace` may need a new status.
    pub fn changed(&self, namespace: Option<String>) {
        if let Some(ns) = namespace {
            // Fails only once the task has ended (shutdown).
            let _ = self.tx.send(ns);
        }
    }
}

async fn run(
    client: Client,
    stores: Stores,
    config: TranslateConfig,
    mut rx: mpsc::UnboundedReceiver<String>,
    retry: mpsc::UnboundedSender<String>,
) {
    stores.wait_until_ready().await;
    while let Some(first) = rx.recv().await {
        let mut namespaces = BTreeSet::from([first]);
        while let Ok(ns) = rx.try_recv() {
            namespaces.insert(ns);
        }
        for ns in namespaces {
            if let Err(e) = sync_namespace(&client, &stores, &config, &ns).await {
                warn!(namespace = %ns, error = %e, "writing TLSCertificateDelegation status failed; retrying");
                let retry = retry.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    let _ = retry.send(ns);
                });
            }
        }
    }
}

/// Computes and writes the status of every TLSCertificateDelegation of `namespace`.
async fn sync_namespace(
    client: &Client,
    stores: &Stores,
    config: &TranslateConfig,
    namespace: &str,
) -> Result<(), kube::Error> {
    let snapshot = stores.snapshot_for(&[namespace.to_owned()], false);
    let ingresses = stores.ingresses.state();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let api: Api<TLSCertificateDelegation> = Api::namespaced(client.clone(), namespace);
    for (key, delegation) in &snapshot.tls_certificate_delegations {
        if key.namespace != namespace {
            continue;
        }
        let conditions: &[DetailedCondition] = delegation
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let previous = conditions.iter().find(|c| c.type_ == VALID);
        let valid = valid_condition(
            &snapshot,
            config,
            delegation,
            ingresses.iter().map(|i| &**i),
            previous,
            &now,
        );
        if previous == Some(&valid) {
            continue;
        }
        let mut wanted: Vec<DetailedCondition> = conditions
            .iter()
            .filter(|c| c.type_ != VALID)
            .cloned()
            .collect();
        wanted.push(valid);
        debug!(delegation = %key, "writing TLSCertificateDelegation status");
        match api
            .patch_status(
                &delegation.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": wanted}})),
            )
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to write.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
