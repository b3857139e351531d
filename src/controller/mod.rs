//! The Ingress controller: watches, finalizer, reconcile, Events, status and annotations.
//!
//! Modelled on kube-rs/controller-rs: a [`Context`] carries the clients, stores and metrics;
//! [`reconcile`] runs per Ingress (up to `--workers` at once, no global lock) through
//! kube-runtime's `finalizer()` helper, which splits Apply from Cleanup around the mode's
//! finalizer ([`finalizer_for`]: GKE's `networking.gke.io/ingress-finalizer-V2` in takeover
//! mode, inventory §4; [`OWN_FINALIZER`] beside GKE's controller); [`error_policy`] requeues
//! failures.
//!
//! Apply (inventory §4 "Sync order", with GKE's pain points fixed):
//! 1. translate (pure); an error is a Warning `Translate` Event and nothing is touched;
//! 2. sync backends then the frontend ([`crate::sync::ingress`]); each mutation is a `Sync` Event;
//! 3. the shared L7 firewall rule over all owned Ingresses; a 403 is a Normal `XPN` Event with the
//!    gcloud command on every owned Ingress (unless suppressed);
//! 4. `status.loadBalancer.ingress[].ip` (Event `IPChanged`) and the `ingress.kubernetes.io/*`
//!    annotations, written only when they change;
//! 5. garbage collection of this cluster's resources no live Ingress wants.
//!
//! Steps 3 and 5 are whole-cluster jobs: they run only after a sync that changed something or
//! when due (once per resync period, after a failure, first thing after start), and reconciles
//! that ask for them together share one run ([`coalesce`]). Step 5 runs in the background,
//! [`GC_DEBOUNCE`] after it is asked for.
//!
//! Files: [`context`] (the shared [`Context`]: Events, the live set, garbage collection),
//! [`firewall`] (the shared L7 firewall rule and the `XPN` hint), [`reconcile`] (one Ingress),
//! [`watches`] (the watches that trigger reconciles: [`run`]), and here the command-line
//! settings, the finalizers and the error type.

pub mod coalesce;
pub mod context;
pub mod delegation_status;
#[cfg(test)]
mod events_tests;
pub mod firewall;
mod firewall_check;
#[cfg(test)]
mod gc_tests;
pub mod health;
mod internal;
pub mod last_desired;
pub mod leader_election;
pub mod mapping;
pub mod metrics;
pub mod ns_index;
#[cfg(test)]
mod panic_tests;
pub mod permission;
pub mod problems;
pub mod prune;
pub mod reconcile;
pub mod secrets;
#[cfg(test)]
mod snapshot_scope_tests;
pub mod status;
pub mod stores;
mod watches;

use std::time::Duration;

use futures::FutureExt;
use kube::runtime::finalizer;

use crate::sync::SyncError;
use crate::translate::{Mode, TranslateConfig};

pub use context::Context;
pub use metrics::ControllerMetrics;
pub use reconcile::{error_policy, reconcile};
pub use stores::Stores;
pub use watches::run;

/// The finalizer GKE's controller uses for v2-named load balancers (inventory §4); this
/// operator's in takeover mode, so an Ingress GKE's controller finalized is recognised.
pub const GKE_FINALIZER: &str = crate::translate::namer::GKE_FINALIZER_V2;
/// This operator's finalizer beside GKE's controller: never one GKE's controller removes.
pub const OWN_FINALIZER: &str = "gclb-operator.dev/ingress-finalizer";

/// The finalizer the operator puts on the Ingresses it serves in `mode`.
pub fn finalizer_for(mode: Mode) -> &'static str {
    match mode {
        Mode::Coexist => OWN_FINALIZER,
        Mode::Takeover => GKE_FINALIZER,
    }
}

/// The finalizer the operator keeps on `ingress` in `mode`: in takeover mode GKE's v1
/// finalizer on an Ingress that carries only that one (its resources keep GKE's v1 names, and
/// GKE's controller would find them again by it), else [`finalizer_for`].
pub fn finalizer_for_ingress(
    mode: Mode,
    ingress: &k8s_openapi::api::networking::v1::Ingress,
) -> &'static str {
    match mode {
        Mode::Coexist => OWN_FINALIZER,
        Mode::Takeover => crate::translate::namer::FrontendVersion::of_finalizers(
            ingress
                .metadata
                .finalizers
                .iter()
                .flatten()
                .map(String::as_str),
        )
        .finalizer(),
    }
}
/// Ingress annotation that suppresses the `XPN` firewall Event (inventory §1).
pub const SUPPRESS_XPN_ANNOTATION: &str = "networking.gke.io/suppress-firewall-xpn-error";
/// Requeue delay while some backend is not HEALTHY yet, so the `backends` annotation follows.
pub const HEALTH_REFRESH: Duration = Duration::from_secs(10);
/// Requeue delay after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);
/// Pause between a sync asking for garbage collection and the background run, so that the
/// reconciles of a burst (many Ingresses applied or changed together) share one run.
pub const GC_DEBOUNCE: Duration = Duration::from_secs(2);
/// How long garbage collection lets reconciles that start while it waits go first before it
/// queues for the exclusive lock ([`coalesce::write_when_idle`]).
pub const GC_PATIENCE: Duration = Duration::from_secs(60);

/// Operator settings from the command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// Translation settings (project, network, zones, cluster UID, class, default backend).
    pub translate: TranslateConfig,
    /// Full resync of every Ingress (`--resync-period`).
    pub resync_period: Duration,
    /// Concurrent reconciles (`--workers`).
    pub workers: u16,
    /// `--ingress-status-address`: published in every Ingress's `status.loadBalancer` instead
    /// of the forwarding rules' IP (an IP as `ip`, a DNS name as `hostname`; Contour's flag of
    /// the same name, reference 004 "Status").
    pub status_address: Option<String>,
    /// Who the operator is to IAM (`serviceAccount:EMAIL`), named in the `PermissionDenied`
    /// Event's hint ([`permission`]); `None` when unknown.
    pub principal: Option<String>,
}

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Compute step failed (already reported as a Warning `Sync` Event).
    #[error("Ingress {ingress}: {source}")]
    Sync {
        /// `namespace/name`.
        ingress: String,
        /// What failed.
        #[source]
        source: SyncError,
    },
    /// A Kubernetes API call failed.
    #[error("Ingress {ingress}: Kubernetes API: {source}")]
    Kube {
        /// `namespace/name`.
        ingress: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A Secret the Ingress references could not be read (other than "not found"): retried
    /// after [`ERROR_REQUEUE`] like any API error; nothing is touched meanwhile.
    #[error("Ingress {ingress}: reading Secret {secret} (Kubernetes API): {source}; retrying")]
    SecretRead {
        /// `namespace/name` of the Ingress.
        ingress: String,
        /// `namespace/name` of the Secret.
        secret: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The reserved address named by `kubernetes.io/ingress.global-static-ip-name` is missing.
    #[error("Ingress {ingress}: annotation kubernetes.io/ingress.global-static-ip-name names global address {name:?}, which does not exist; reserve it with `gcloud compute addresses create {name} --global` or fix the annotation")]
    StaticIpNotFound {
        /// `namespace/name`.
        ingress: String,
        /// The address name.
        name: String,
    },
    /// The reconcile panicked (a bug): caught, so one Ingress never takes the process down;
    /// logged with the key, counted as `gclb_ingress_sync_errors{result="panic"}`, retried.
    #[error("Ingress {ingress}: reconcile panicked: {message}")]
    Panicked {
        /// `namespace/name`.
        ingress: String,
        /// The panic's message.
        message: String,
    },
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

/// Runs one reconcile; a panic in it becomes [`Error::Panicked`], logged with the Ingress `key`
/// and counted, instead of unwinding into the controller's stream and ending the process
/// (kube-runtime polls reconciles inside that stream, not in tasks of their own).
pub(crate) async fn catch_panic(
    key: &str,
    metrics: &ControllerMetrics,
    run: impl std::future::Future<Output = Result<kube::runtime::controller::Action, Error>>,
) -> Result<kube::runtime::controller::Action, Error> {
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_else(|| "(no message)".into());
            tracing::error!(ingress = %key, panic = %message, "reconcile panicked; retrying later");
            metrics.sync("panic");
            Err(Error::Panicked {
                ingress: key.to_string(),
                message,
            })
        }
    }
}
