//! The ManagedCertificate controller (`networking.gke.io/v1`, inventory §3c; gke-managed-certs
//! `pkg/controller/sync/sync.go`).
//!
//! Per ManagedCertificate it keeps one global MANAGED `sslCertificate` named by
//! [`namer::managed_certificate`] (deterministic, so no ConfigMap state is needed) and writes
//! the Compute status back to `status` (mapped 1:1 by [`certificate`]). Because the name
//! includes a hash of the domains, a domain change creates the new certificate first, records
//! its name in `status.certificateName` (the Ingress controller attaches that name to the
//! target HTTPS proxy, `translate::certificates`), then deletes the old certificate once no
//! proxy uses it. The finalizer [`FINALIZER`] deletes the certificate when the
//! ManagedCertificate is deleted. While the certificate is `Provisioning` the status is polled
//! every [`Config::provisioning_poll`].
//!
//! Events (as GKE's `managed-certificate-controller`): Normal `Create` "Create SslCertificate X",
//! Normal `Delete` "Delete SslCertificate X", Warning `BackendError` for a failed Compute call.

pub mod certificate;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, instrument, warn};

use crate::compute::{Compute, ComputeError, ErrorKind};
use crate::crd::ManagedCertificate;
use crate::translate::namer;

use certificate::{
    certificate_prefix, desired_certificate, domains_match, is_provisioning,
    status_from_certificate, StatusError,
};

/// Shortest delay before retrying a failed reconcile (each failure posts a Warning Event).
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);

/// Finalizer that keeps a ManagedCertificate until its sslCertificate is deleted.
pub const FINALIZER: &str = "networking.gke.io/managed-certificate-finalizer";

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// UID of Namespace `kube-system`: part of every certificate name (cluster identity).
    pub kube_system_uid: String,
    /// Delay between status polls while a certificate is provisioning (GKE polls on its
    /// resync; locally certificates turn ACTIVE in seconds).
    pub provisioning_poll: Duration,
    /// Full resync of every ManagedCertificate (GKE: `--resync-interval`, 10 min).
    pub resync_period: Duration,
    /// Concurrent reconciles.
    pub workers: u16,
}

impl Config {
    /// Settings with GKE-like defaults: 2 s provisioning poll, 10 min resync, 2 workers.
    pub fn new(kube_system_uid: impl Into<String>) -> Self {
        Self {
            kube_system_uid: kube_system_uid.into(),
            provisioning_poll: Duration::from_secs(2),
            resync_period: Duration::from_secs(600),
            workers: 2,
        }
    }
}

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Compute call failed (reported as a Warning `BackendError` Event).
    #[error("ManagedCertificate {object}: sslCertificate {certificate}: {source}")]
    Compute {
        /// `namespace/name`.
        object: String,
        /// Compute certificate name.
        certificate: String,
        /// The Compute error.
        #[source]
        source: ComputeError,
    },
    /// The Compute certificate has a status this controller cannot map.
    #[error("ManagedCertificate {object}: {source}")]
    Status {
        /// `namespace/name`.
        object: String,
        /// What could not be mapped.
        #[source]
        source: StatusError,
    },
    /// Writing the status failed.
    #[error("ManagedCertificate {object}: writing status: {source}")]
    Kube {
        /// `namespace/name`.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

/// Shared state of the controller.
pub struct Context {
    client: Client,
    compute: Arc<Compute>,
    config: Config,
    recorder: Recorder,
}

impl Context {
    /// A context; Events are reported as `managed-certificate-controller`.
    pub fn new(client: Client, compute: Arc<Compute>, config: Config) -> Self {
        let reporter = Reporter {
            controller: "managed-certificate-controller".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            compute,
            config,
        }
    }

    async fn event(&self, mcrt: &ManagedCertificate, warning: bool, reason: &str, note: String) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            // The Recorder folds Events with the same (type, reason, action): keep the
            // certificate name in the action so distinct certificates get distinct Events.
            action: note.chars().take(128).collect(),
            note: Some(note),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &mcrt.object_ref(&())).await {
            warn!(error = %e, reason, "cannot publish Event");
        }
    }

    /// Reports a failed Compute call as a Warning `BackendError` and returns the error.
    async fn backend_error(
        &self,
        mcrt: &ManagedCertificate,
        certificate: &str,
        source: ComputeError,
    ) -> Error {
        let object = object_key(mcrt);
        self.event(
            mcrt,
            true,
            "BackendError",
            format!("sslCertificate {certificate}: {source}"),
        )
        .await;
        Error::Compute {
            object,
            certificate: certificate.to_string(),
            source,
        }
    }
}

fn object_key(mcrt: &ManagedCertificate) -> String {
    format!(
        "{}/{}",
        mcrt.namespace().unwrap_or_default(),
        mcrt.name_any()
    )
}

fn certificate_name(mcrt: &ManagedCertificate, config: &Config) -> String {
    namer::managed_certificate(
        &config.kube_system_uid,
        &mcrt.namespace().unwrap_or_default(),
        &mcrt.name_any(),
        &mcrt.spec.domains,
    )
}

/// Reconciles one ManagedCertificate through the finalizer helper.
#[instrument(skip_all, fields(mcrt = %object_key(&mcrt)))]
pub async fn reconcile(mcrt: Arc<ManagedCertificate>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<ManagedCertificate> =
        Api::namespaced(ctx.client.clone(), &mcrt.namespace().unwrap_or_default());
    let ctx2 = ctx.clone();
    finalizer(&api, FINALIZER, mcrt, |event| async move {
        match event {
            finalizer::Event::Apply(mcrt) => apply(&mcrt, &ctx2).await,
            finalizer::Event::Cleanup(mcrt) => cleanup(&mcrt, &ctx2).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(mcrt: &ManagedCertificate, ctx: &Context) -> Result<Action, Error> {
    let name = certificate_name(mcrt, &ctx.config);
    let compute = &ctx.compute;
    let mut observed = match compute.get_ssl_certificate(&name).await {
        Ok(c) => c,
        Err(e) => return Err(ctx.backend_error(mcrt, &name, e).await),
    };
    // Someone changed the certificate behind our back: GKE deletes and recreates it.
    if observed
        .as_ref()
        .is_some_and(|c| !domains_match(c, &mcrt.spec.domains))
    {
        delete_certificate(mcrt, ctx, &name).await?;
        observed = None;
    }
    let cert = match observed {
        Some(c) => c,
        None => {
            let desired = desired_certificate(
                &name,
                &mcrt.namespace().unwrap_or_default(),
                &mcrt.name_any(),
                &mcrt.spec.domains,
            );
            match compute.insert_ssl_certificate(&desired).await {
                Ok(()) => {
                    info!(certificate = %name, "created sslCertificate");
                    ctx.event(
                        mcrt,
                        false,
                        "Create",
                        format!("Create SslCertificate {name}"),
                    )
                    .await;
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(ctx.backend_error(mcrt, &name, e).await),
            }
            match compute.get_ssl_certificate(&name).await {
                Ok(Some(c)) => c,
                Ok(None) => return Ok(Action::requeue(ctx.config.provisioning_poll)),
                Err(e) => return Err(ctx.backend_error(mcrt, &name, e).await),
            }
        }
    };
    let status = status_from_certificate(&cert).map_err(|source| Error::Status {
        object: object_key(mcrt),
        source,
    })?;
    if mcrt.status.as_ref() != Some(&status) {
        let api: Api<ManagedCertificate> =
            Api::namespaced(ctx.client.clone(), &mcrt.namespace().unwrap_or_default());
        let patch = serde_json::json!({ "status": status });
        api.patch_status(
            &mcrt.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(|source| Error::Kube {
            object: object_key(mcrt),
            source,
        })?;
    }
    let old_pending = delete_old_certificates(mcrt, ctx, &name).await?;
    if is_provisioning(&status) || old_pending {
        Ok(Action::requeue(ctx.config.provisioning_poll))
    } else {
        Ok(Action::requeue(ctx.config.resync_period))
    }
}

/// Deletes certificates this ManagedCertificate had for earlier domain sets. Returns whether
/// one is still attached to a proxy (the Ingress has not switched yet; retry later).
async fn delete_old_certificates(
    mcrt: &ManagedCertificate,
    ctx: &Context,
    current: &str,
) -> Result<bool, Error> {
    let prefix = certificate_prefix(current);
    let all = match ctx.compute.list_ssl_certificates().await {
        Ok(all) => all,
        Err(e) => return Err(ctx.backend_error(mcrt, prefix, e).await),
    };
    let mut pending = false;
    for old in all
        .iter()
        .filter_map(|c| c.name.as_deref())
        .filter(|n| n.starts_with(prefix) && *n != current)
    {
        match ctx.compute.delete_ssl_certificate(old).await {
            Ok(true) => {
                ctx.event(
                    mcrt,
                    false,
                    "Delete",
                    format!("Delete SslCertificate {old}"),
                )
                .await;
            }
            Ok(false) => {}
            Err(e) if e.kind() == ErrorKind::ResourceInUse => {
                info!(certificate = %old, "old certificate still in use; will retry");
                pending = true;
            }
            Err(e) => return Err(ctx.backend_error(mcrt, old, e).await),
        }
    }
    Ok(pending)
}

async fn delete_certificate(
    mcrt: &ManagedCertificate,
    ctx: &Context,
    name: &str,
) -> Result<(), Error> {
    match ctx.compute.delete_ssl_certificate(name).await {
        Ok(deleted) => {
            if deleted {
                ctx.event(
                    mcrt,
                    false,
                    "Delete",
                    format!("Delete SslCertificate {name}"),
                )
                .await;
            }
            Ok(())
        }
        Err(e) => Err(ctx.backend_error(mcrt, name, e).await),
    }
}

/// Deletes every certificate of the ManagedCertificate; a certificate still attached to a
/// proxy fails the cleanup (the finalizer stays and the cleanup is retried).
async fn cleanup(mcrt: &ManagedCertificate, ctx: &Context) -> Result<Action, Error> {
    let name = certificate_name(mcrt, &ctx.config);
    let prefix = certificate_prefix(&name).to_string();
    let all = match ctx.compute.list_ssl_certificates().await {
        Ok(all) => all,
        Err(e) => return Err(ctx.backend_error(mcrt, &prefix, e).await),
    };
    for cert in all
        .iter()
        .filter_map(|c| c.name.as_deref())
        .filter(|n| n.starts_with(&prefix))
    {
        delete_certificate(mcrt, ctx, cert).await?;
    }
    Ok(Action::await_change())
}

/// Requeues a failed reconcile after [`ERROR_REQUEUE`] (or the provisioning poll if longer).
pub fn error_policy(_mcrt: Arc<ManagedCertificate>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %error, "ManagedCertificate reconcile failed; retrying");
    Action::requeue(ctx.config.provisioning_poll.max(ERROR_REQUEUE))
}

/// Runs the controller until SIGINT/SIGTERM. Returns at once (logging a warning) when the
/// ManagedCertificate CRD is not installed.
pub async fn run(client: Client, compute: Arc<Compute>, config: Config) {
    let api: Api<ManagedCertificate> = Api::all(client.clone());
    if let Err(e) = api.list(&kube::api::ListParams::default().limit(1)).await {
        warn!(error = %e, "ManagedCertificate CRD not served; the ManagedCertificate controller is off");
        return;
    }
    let workers = config.workers.max(1);
    let ctx = Arc::new(Context::new(client, compute, config));
    Controller::new(api, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(mcrt = %object, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "ManagedCertificate reconcile error"),
            }
        })
        .await;
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
