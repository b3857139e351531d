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
//! and here the command-line settings and the watches that trigger reconciles ([`run`]).

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

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::controller::{self, Controller};
use kube::runtime::finalizer;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tracing::info;

use crate::compute::Compute;
use crate::crd::{BackendConfig, FrontendConfig, ManagedCertificate, TLSCertificateDelegation};
use crate::sync::SyncError;
use crate::translate::pod::PodRecord;
use crate::translate::{secret_refs, Mode, TranslateConfig};

pub use context::Context;
pub use metrics::ControllerMetrics;
pub use reconcile::{error_policy, reconcile};
pub use stores::Stores;

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

/// Runs the controller until SIGINT/SIGTERM. `compute`, `config` and `metrics` are built by
/// `main`; the CRD watches are skipped when the CRDs are not installed. `on_ready` runs once
/// every store has its first full list (it starts the readiness-gate controller and webhook).
pub async fn run(
    client: Client,
    compute: Arc<Compute>,
    config: Config,
    metrics: ControllerMetrics,
    on_ready: impl FnOnce(Stores) + Send + 'static,
) {
    let (ingress_index, ingress_stream) = Stores::ingress_stream(&client);
    // TLSCertificateDelegation status (Contour's `Valid` condition): recomputed for a namespace
    // when a delegation or a TLS Secret there changes, or an Ingress naming its Secrets does.
    let (delegation_status, delegation_queue) = delegation_status::DelegationStatus::new();
    let ingress_stream = {
        let status = delegation_status.clone();
        ingress_stream.inspect(move |ingress| {
            if let Ok(ingress) = ingress {
                for ns in secret_refs::foreign_secret_namespaces(ingress) {
                    status.changed(Some(ns));
                }
            }
        })
    };
    let all = watcher::Config::default;
    // Pods are stored as compact records: one watch keeps them and triggers the Ingresses
    // whose Services select a changed Pod.
    let (pod_index, pod_stream) = Stores::trigger_stream(&client, all(), PodRecord::prune);
    let (service_index, service_stream) =
        Stores::trigger_stream::<Service>(&client, all(), prune::metadata);
    let (slice_index, slice_stream) =
        Stores::trigger_stream::<EndpointSlice>(&client, all(), prune::metadata);
    let (secret_index, secret_stream) =
        Stores::trigger_stream::<Secret>(&client, stores::secrets_watch(), prune::secret);
    let (class_index, class_stream) =
        Stores::trigger_stream::<IngressClass>(&client, all(), prune::metadata);
    let (bc_store, bc_stream) = Stores::optional_trigger_stream::<BackendConfig>(&client).await;
    let (fc_store, fc_stream) = Stores::optional_trigger_stream::<FrontendConfig>(&client).await;
    let (mc_store, mc_stream) =
        Stores::optional_trigger_stream::<ManagedCertificate>(&client).await;
    let (td_store, td_stream) =
        Stores::optional_trigger_stream::<TLSCertificateDelegation>(&client).await;
    let controller = Controller::for_stream(ingress_stream, ingress_index.store()).with_config(
        controller::Config::default()
            .concurrency(config.workers)
            // Requests for an object are merged while they wait and held while its reconcile
            // runs; the debounce only merges a burst that lands before the reconcile starts,
            // and every new Ingress waits for it before its first Compute call (issue 26: it
            // was 100 ms, a sixth of the 0.6 s chain of an Ingress on an existing Service).
            .debounce(Duration::from_millis(20)),
    );
    let stores = Stores::start(
        &client,
        stores::Triggered {
            ingresses: ingress_index,
            pods: pod_index,
            services: service_index,
            endpoint_slices: slice_index,
            secrets: secret_index,
            ingress_classes: class_index.store(),
            backend_configs: bc_store,
            frontend_configs: fc_store,
            managed_certificates: mc_store,
            tls_certificate_delegations: td_store,
        },
    );
    {
        // `on_ready` starts tasks that read the stores (readiness gates, webhook); starting them
        // only after the first lists means none of them waits on a store's single-waker
        // `DelayedInit` concurrently with us (see `stores`).
        let stores = stores.clone();
        tokio::spawn(async move {
            stores.wait_until_ready().await;
            info!("stores synced");
            on_ready(stores);
        });
    }
    let default_backend = config
        .translate
        .default_backend
        .as_ref()
        .map(|(ns, name, _)| (ns.clone(), name.clone()));

    let to_refs = |ingresses: Vec<&Ingress>| -> Vec<ObjectRef<Ingress>> {
        ingresses.into_iter().map(ObjectRef::from_obj).collect()
    };
    let for_service = {
        let stores = stores.clone();
        let default_backend = default_backend.clone();
        move |namespace: &str, name: &str| -> Vec<ObjectRef<Ingress>> {
            let all = stores.ingresses.state();
            let db = default_backend
                .as_ref()
                .map(|(n, s)| (n.as_str(), s.as_str()));
            to_refs(mapping::ingresses_for_service(
                all.iter().map(|i| &**i),
                namespace,
                name,
                db,
            ))
        }
    };
    let all_in = {
        let stores = stores.clone();
        move |namespace: Option<String>| -> Vec<ObjectRef<Ingress>> {
            stores
                .ingresses
                .state()
                .iter()
                .filter(|i| namespace.is_none() || i.namespace() == namespace)
                .map(|i| ObjectRef::from_obj(&**i))
                .collect()
        }
    };

    let svc_map = for_service.clone();
    let slice_map = for_service.clone();
    let pod_map = for_service.clone();
    let pod_stores = stores.clone();
    let (secret_all, class_all, bc_all) = (all_in.clone(), all_in.clone(), all_in.clone());
    let (fc_all, mc_all) = (all_in.clone(), all_in.clone());
    // Ingresses that name a Secret of namespace `ns` through `spec.tls` from another namespace
    // (TLS certificate delegation): a Secret or a TLSCertificateDelegation changing there may
    // give them a certificate or take it away (revocation).
    let using_secrets_of = {
        let stores = stores.clone();
        move |ns: Option<String>| -> Vec<ObjectRef<Ingress>> {
            let Some(ns) = ns else { return Vec::new() };
            stores
                .ingresses
                .state()
                .iter()
                .filter(|i| secret_refs::foreign_secret_namespaces(i).contains(&ns))
                .map(|i| ObjectRef::from_obj(&**i))
                .collect()
        }
    };
    let (secret_foreign, td_foreign) = (using_secrets_of.clone(), using_secrets_of);
    delegation_status.start(
        delegation_queue,
        client.clone(),
        stores.clone(),
        config.translate.clone(),
    );
    let (td_status, secret_status) = (delegation_status.clone(), delegation_status.clone());
    // Every kind triggers from the watch that keeps its store ([`Stores::trigger_stream`]), so
    // a reconcile never reads an older store than its trigger.
    let mut controller = controller
        .watches_stream(service_stream, move |svc: Service| {
            svc_map(&svc.namespace().unwrap_or_default(), &svc.name_any())
        })
        .watches_stream(slice_stream, move |slice: EndpointSlice| {
            match slice.labels().get(mapping::SERVICE_NAME_LABEL) {
                Some(service) => slice_map(&slice.namespace().unwrap_or_default(), service),
                None => Vec::new(),
            }
        })
        .watches_stream(pod_stream, move |pod: PodRecord| {
            let services = pod_stores.services.state();
            let names = mapping::services_selecting(services.iter().map(|s| &**s), &pod);
            let ns = pod.namespace().unwrap_or_default();
            names
                .iter()
                .flat_map(|s| pod_map(&ns, s))
                .collect::<Vec<_>>()
        })
        .watches_stream(secret_stream, move |secret: Secret| {
            secret_status.changed(secret.namespace());
            let mut refs = secret_all(secret.namespace());
            refs.extend(secret_foreign(secret.namespace()));
            refs
        })
        .watches_stream(class_stream, move |_: IngressClass| class_all(None));
    // A CRD object change requeues every Ingress of its namespace (they reference them by name
    // from annotations; a ManagedCertificate's status.certificateName is what translation
    // attaches, so its Provisioning -> Active transition must reach the Ingress). No stream
    // when the CRD is not installed.
    if let Some(s) = bc_stream {
        controller = controller.watches_stream(s, move |bc: BackendConfig| bc_all(bc.namespace()));
    }
    if let Some(s) = fc_stream {
        controller = controller.watches_stream(s, move |fc: FrontendConfig| fc_all(fc.namespace()));
    }
    if let Some(s) = mc_stream {
        controller =
            controller.watches_stream(s, move |mc: ManagedCertificate| mc_all(mc.namespace()));
    }
    if let Some(s) = td_stream {
        controller = controller.watches_stream(s, move |td: TLSCertificateDelegation| {
            td_status.changed(td.namespace());
            td_foreign(td.namespace())
        });
    }

    // A zone gaining its first Node or losing its last changes every backend's NEGs (unless
    // `--zone` pins them): every Ingress is reconciled again.
    if config.translate.zones.is_empty() {
        let zones = stores.zones.clone();
        let changes = futures::stream::unfold(zones, |mut zones| async move {
            zones.changed().await.ok()?;
            Some(((), zones))
        });
        controller = controller.reconcile_all_on(changes);
    }
    let ctx = Arc::new(Context::new(client, compute, stores, config, metrics));
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(ingress = %object, "reconciled"),
                // A trigger watch failing (RBAC, the API server gone) is retried with backoff;
                // say so, since no reconcile runs for what it would have seen.
                Err(controller::Error::QueueError(e)) => {
                    tracing::warn!(error = %e, "watch error; retrying")
                }
                Err(e) => tracing::debug!(error = %e, "reconcile error"),
            }
        })
        .await;
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
