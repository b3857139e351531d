//! The Ingress controller: watches, finalizer, reconcile, Events, status and annotations.
//!
//! Modelled on kube-rs/controller-rs: a [`Context`] carries the clients, stores and metrics;
//! [`reconcile`] runs per Ingress (up to `--workers` at once, no global lock) through
//! kube-runtime's `finalizer()` helper, which splits Apply from Cleanup around the finalizer
//! `networking.gke.io/ingress-finalizer-V2` (inventory §4); [`error_policy`] requeues failures.
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

pub mod coalesce;
pub mod last_desired;
pub mod leader_election;
pub mod mapping;
pub mod metrics;
#[cfg(test)]
mod panic_tests;
pub mod status;
pub mod stores;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, instrument, warn};

use crate::compute::Compute;
use crate::sync::firewalls::FirewallOutcome;
use crate::sync::gc::{collect_garbage, LiveSet};
use crate::sync::ingress::{
    delete_frontend, sync_backends, sync_frontend, BackendLocks, FrontendStatus,
};
use crate::sync::{backend_services, firewalls, Changes, SyncError};
use crate::translate::namer::{self, FrontendNamer};
use crate::translate::{
    firewall_hint, owns_ingress, translate_firewall, translate_ingress, ClusterSnapshot,
    DesiredIngress, FirewallHintOp, ObjectKey, TranslateConfig,
};

pub use metrics::ControllerMetrics;
pub use stores::Stores;

/// The finalizer GKE's controller uses for v2-named load balancers (inventory §4).
pub const FINALIZER: &str = "networking.gke.io/ingress-finalizer-V2";
/// Ingress annotation that suppresses the `XPN` firewall Event (inventory §1).
pub const SUPPRESS_XPN_ANNOTATION: &str = "networking.gke.io/suppress-firewall-xpn-error";
/// Requeue delay while some backend is not HEALTHY yet, so the `backends` annotation follows.
pub const HEALTH_REFRESH: Duration = Duration::from_secs(10);
/// Requeue delay after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);
/// Pause between a sync asking for garbage collection and the background run, so that the
/// reconciles of a burst (many Ingresses applied or changed together) share one run.
pub const GC_DEBOUNCE: Duration = Duration::from_secs(2);

/// Operator settings from the command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// Translation settings (project, network, zones, cluster UID, class, default backend).
    pub translate: TranslateConfig,
    /// Full resync of every Ingress (`--resync-period`).
    pub resync_period: Duration,
    /// Concurrent reconciles (`--workers`).
    pub workers: u16,
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

/// Everything a reconcile needs; shared by all workers.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// Compute API.
    pub compute: Arc<Compute>,
    /// Stores of every kind translation reads.
    pub stores: Stores,
    /// Settings.
    pub config: Config,
    /// Event recorder.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: ControllerMetrics,
    locks: BackendLocks,
    /// Syncs hold it shared; garbage collection exclusively, so GC never deletes a backend a
    /// running sync has just created.
    gc_lock: tokio::sync::RwLock<()>,
    /// Serialises firewall syncs.
    firewall_lock: tokio::sync::Mutex<()>,
    /// Shares one garbage collection run among the reconciles that ask for it together.
    gc_runs: coalesce::Coalesced,
    /// Shares one firewall sync among the reconciles that ask for it together.
    firewall_runs: coalesce::Coalesced,
    /// A background GC run is scheduled and has not started yet.
    gc_scheduled: std::sync::atomic::AtomicBool,
    /// Last successful translation per Ingress (firewall ports and GC survive a failing one).
    last_desired: last_desired::LastDesired,
    /// Ingress changes seen but not yet programmed: key -> (generation, first seen).
    pending: Mutex<HashMap<ObjectKey, (i64, Instant)>>,
}

impl Context {
    /// A context; `reporter` names the controller in Events (`reportingController`).
    pub fn new(
        client: Client,
        compute: Arc<Compute>,
        stores: Stores,
        config: Config,
        metrics: ControllerMetrics,
    ) -> Self {
        let reporter = Reporter {
            controller: "gclb-operator".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            compute,
            stores,
            config,
            metrics,
            locks: BackendLocks::default(),
            gc_lock: tokio::sync::RwLock::new(()),
            firewall_lock: tokio::sync::Mutex::new(()),
            gc_runs: coalesce::Coalesced::default(),
            firewall_runs: coalesce::Coalesced::default(),
            gc_scheduled: std::sync::atomic::AtomicBool::new(false),
            last_desired: last_desired::LastDesired::default(),
            pending: Mutex::new(HashMap::new()),
        }
    }

    async fn event(&self, ingress: &Ingress, warning: bool, reason: &str, note: String) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            // kube's Recorder folds Events with the same (type, reason, action) into one series,
            // so the action carries the message (at most 128 bytes) to keep distinct messages.
            action: truncate(&note, 128).to_string(),
            note: Some(note),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &ingress.object_ref(&()))
            .await
        {
            warn!(error = %e, reason, "cannot publish Event");
        }
    }

    fn observe_change(&self, key: &ObjectKey, ingress: &Ingress) {
        let generation = ingress.metadata.generation.unwrap_or(0);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let entry = pending
            .entry(key.clone())
            .or_insert((generation, Instant::now()));
        if entry.0 != generation {
            *entry = (generation, Instant::now());
        }
        self.metrics.queue_depth.set(pending.len() as i64);
    }

    fn programmed(&self, key: &ObjectKey) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, since)) = pending.remove(key) {
            self.metrics
                .programming_seconds
                .observe(since.elapsed().as_secs_f64());
        }
        self.metrics.queue_depth.set(pending.len() as i64);
    }

    fn forget(&self, key: &ObjectKey) {
        self.last_desired.forget(key);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(key);
        self.metrics.queue_depth.set(pending.len() as i64);
    }

    fn namer(&self, key: &ObjectKey) -> FrontendNamer {
        let t = &self.config.translate;
        FrontendNamer::new(
            &t.cluster_uid,
            &t.kube_system_uid,
            &key.namespace,
            &key.name,
        )
    }

    /// Owned Ingresses that are not being deleted, except `exclude`.
    fn live_ingresses<'a>(
        &self,
        snapshot: &'a ClusterSnapshot,
        exclude: Option<&ObjectKey>,
    ) -> Vec<&'a Ingress> {
        snapshot
            .ingresses
            .iter()
            .filter(|(k, _)| Some(*k) != exclude)
            .filter(|(_, i)| i.metadata.deletion_timestamp.is_none())
            .filter(|(_, i)| owns_ingress(snapshot, i, &self.config.translate))
            .map(|(_, i)| i.as_ref())
            .collect()
    }

    fn live_set(&self, snapshot: &ClusterSnapshot, exclude: Option<&ObjectKey>) -> LiveSet {
        let t = &self.config.translate;
        let mut live = LiveSet {
            cluster_uid: t.cluster_uid.clone(),
            zones: t.zones.clone(),
            ..LiveSet::default()
        };
        for ingress in self.live_ingresses(snapshot, exclude) {
            let namer = self.namer(&ObjectKey::of(ingress));
            live.frontends.insert(namer.lb_name().to_string());
            live.certificate_prefixes
                .push(namer.ssl_certificate_prefix());
            if let Some(desired) = self
                .last_desired
                .last_or_resolve(&ObjectKey::of(ingress), || {
                    translate_ingress(snapshot, ingress, t)
                })
            {
                live.backends.extend(desired.backends.keys().cloned());
            }
        }
        live
    }

    /// Syncs the shared firewall rule for all live owned Ingresses; on 403 posts the `XPN`
    /// hint on each of them. Reconciles that ask at the same time share one run
    /// ([`coalesce`]); a deleting Ingress (`exclude`) runs its own, without itself.
    async fn sync_firewall(&self, exclude: Option<&ObjectKey>) -> Result<(), SyncError> {
        match exclude {
            None => self
                .firewall_runs
                .run(|| self.sync_firewall_now(None))
                .await
                .map(|_| ()),
            Some(_) => self.sync_firewall_now(exclude).await,
        }
    }

    /// One firewall sync, serialised, over a snapshot taken under the lock, so concurrent
    /// reconciles cannot write an older port set over a newer one.
    async fn sync_firewall_now(&self, exclude: Option<&ObjectKey>) -> Result<(), SyncError> {
        let _serial = self.firewall_lock.lock().await;
        let snapshot = &self.stores.snapshot();
        let t = &self.config.translate;
        let live = self.live_ingresses(snapshot, exclude);
        let desired: Vec<Arc<DesiredIngress>> = live
            .iter()
            .filter_map(|i| {
                self.last_desired
                    .last_or_resolve(&ObjectKey::of(*i), || translate_ingress(snapshot, i, t))
            })
            .collect();
        let refs: Vec<&DesiredIngress> = desired.iter().map(Arc::as_ref).collect();
        let mut changes = Changes::new();
        match translate_firewall(&refs, t) {
            None if live.is_empty() => {
                firewalls::delete(
                    &self.compute,
                    &namer::l7_firewall(&t.cluster_uid),
                    &mut changes,
                )
                .await
            }
            None => Ok(()),
            Some(rule) => match firewalls::ensure(&self.compute, &rule, &mut changes).await? {
                FirewallOutcome::InSync => Ok(()),
                FirewallOutcome::Forbidden { exists } => {
                    let op = if exists {
                        FirewallHintOp::Update
                    } else {
                        FirewallHintOp::Create
                    };
                    let cmd = firewall_hint(op, &rule, &t.network, &t.project);
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

    /// Garbage collection; failures are a `GarbageCollection` Warning on `ingress`.
    /// Reconciles that ask at the same time share one run ([`coalesce`]); a deleting Ingress
    /// (`exclude`) runs its own, without itself.
    async fn gc(&self, ingress: &Ingress, exclude: Option<&ObjectKey>) -> Result<(), SyncError> {
        let mut changes = Changes::new();
        let result = match exclude {
            None => self
                .gc_runs
                .run(|| self.gc_now(None, &mut changes))
                .await
                .map(|_| ()),
            Some(_) => self.gc_now(exclude, &mut changes).await,
        };
        if let Err(e) = &result {
            self.event(
                ingress,
                true,
                "GarbageCollection",
                format!("Error during garbage collection: {e}"),
            )
            .await;
        }
        if !changes.is_empty() {
            info!(deleted = changes.len(), "garbage collected");
        }
        result
    }

    /// Whether a reconcile that changed nothing should still run the whole-cluster jobs
    /// (GC, firewall): none has succeeded yet in this process, the last run failed, or it is
    /// older than the resync period. Only a change can make garbage or new ports, so
    /// steady-state resyncs skip the project-wide listing; the periodic run still finds what
    /// a crash mid-sync left behind or what was changed behind our back.
    fn due(&self, runs: &coalesce::Coalesced) -> bool {
        !runs.succeeded_within(self.config.resync_period)
    }

    /// Garbage collection after a sync, in the background: the reconcile does not wait for it
    /// (it holds the exclusive lock and lists the whole project), and everything asked within
    /// [`GC_DEBOUNCE`] shares one run. Failures are a `GarbageCollection` Warning on the
    /// `ingress` that scheduled the run, and make the next reconcile ask again.
    fn schedule_gc(self: &Arc<Self>, ingress: Arc<Ingress>) {
        use std::sync::atomic::Ordering;
        if self.gc_scheduled.swap(true, Ordering::SeqCst) {
            return; // the scheduled run has not started: it will see this sync too
        }
        let ctx = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(GC_DEBOUNCE).await;
            // Cleared before the run reads anything: a later request schedules another run.
            ctx.gc_scheduled.store(false, Ordering::SeqCst);
            let _ = ctx.gc(&ingress, None).await;
        });
    }

    /// One GC run under the exclusive lock. What is live is read from the stores *after*
    /// taking the lock, so an Ingress whose sync finished meanwhile is seen as live.
    async fn gc_now(
        &self,
        exclude: Option<&ObjectKey>,
        changes: &mut Changes,
    ) -> Result<(), SyncError> {
        let _exclusive = self.gc_lock.write().await;
        let live = self.live_set(&self.stores.snapshot(), exclude);
        collect_garbage(&self.compute, &live, changes).await
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn key_string(key: &ObjectKey) -> String {
    key.to_string()
}

/// Reconciles one Ingress (see the module docs for the steps).
#[instrument(skip_all, fields(ingress = %ObjectKey::of(&*ingress)))]
pub async fn reconcile(ingress: Arc<Ingress>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.wait_until_ready().await;
    ctx.metrics.in_flight.inc();
    let key = ObjectKey::of(&*ingress).to_string();
    let result = catch_panic(&key, &ctx.metrics, reconcile_inner(ingress, &ctx)).await;
    ctx.metrics.in_flight.dec();
    result
}

/// Runs one reconcile; a panic in it becomes [`Error::Panicked`], logged with the Ingress `key`
/// and counted, instead of unwinding into the controller's stream and ending the process
/// (kube-runtime polls reconciles inside that stream, not in tasks of their own).
async fn catch_panic(
    key: &str,
    metrics: &ControllerMetrics,
    run: impl std::future::Future<Output = Result<Action, Error>>,
) -> Result<Action, Error> {
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

async fn reconcile_inner(ingress: Arc<Ingress>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let key = ObjectKey::of(&*ingress);
    let snapshot = ctx.stores.snapshot();
    let owned = owns_ingress(&snapshot, &ingress, &ctx.config.translate);
    let has_finalizer = ingress.finalizers().iter().any(|f| f == FINALIZER);
    let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &key.namespace);
    if !owned {
        if has_finalizer && ingress.metadata.deletion_timestamp.is_none() {
            // The class moved away from us: tear our load balancer down, then let go.
            info!("Ingress is no longer ours; removing its load balancer");
            cleanup(&ingress, ctx).await?;
            let rest: Vec<String> = ingress
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect();
            let patch = serde_json::json!({"metadata": {"finalizers": rest}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|source| Error::Kube {
                    ingress: key_string(&key),
                    source,
                })?;
            ctx.forget(&key);
            return Ok(Action::await_change());
        } else if !has_finalizer {
            ctx.forget(&key);
            return Ok(Action::await_change());
        }
    }
    let ctx2 = ctx.clone();
    finalizer(&api, FINALIZER, ingress, |event| async move {
        match event {
            finalizer::Event::Apply(ingress) => apply(ingress, &ctx2, snapshot).await,
            finalizer::Event::Cleanup(ingress) => {
                cleanup(&ingress, &ctx2).await?;
                ctx2.forget(&ObjectKey::of(&*ingress));
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(
    ingress: Arc<Ingress>,
    ctx: &Arc<Context>,
    snapshot: ClusterSnapshot,
) -> Result<Action, Error> {
    let key = ObjectKey::of(&*ingress);
    ctx.observe_change(&key, &ingress);
    let t = &ctx.config.translate;
    let desired = match translate_ingress(&snapshot, &ingress, t) {
        Ok(d) => {
            ctx.last_desired.resolve::<()>(&key, Ok(d.clone()));
            d
        }
        // Nothing is touched; the last good translation keeps its firewall ports and backends.
        Err(e) => {
            warn!(error = %e, "translation failed; leaving the load balancer as it is");
            ctx.event(
                &ingress,
                true,
                "Translate",
                format!("Translation failed: invalid ingress spec: {e}"),
            )
            .await;
            ctx.metrics.sync("translate");
            return Ok(Action::requeue(ctx.config.resync_period));
        }
    };
    for finding in &desired.findings {
        ctx.event(
            &ingress,
            finding.warning,
            &finding.reason,
            finding.message.clone(),
        )
        .await;
    }

    let namer = ctx.namer(&key);
    let mut changes = Changes::new();
    let synced = sync_load_balancer(ctx, &key, &namer, &desired, &mut changes).await;
    for change in &changes {
        ctx.event(&ingress, false, "Sync", change.to_string()).await;
    }
    let status = match synced {
        Ok(status) => status,
        Err(e) => {
            let note = match &e {
                Error::Sync {
                    source: SyncError::SslPolicyNotFound { policy, .. },
                    ..
                } => ssl_policy_note(&ingress, policy),
                Error::Sync { source, .. } => format!("Error syncing to GCP: {source}"),
                other => other.to_string(),
            };
            ctx.event(&ingress, true, "Sync", note).await;
            ctx.metrics.sync("compute");
            return Err(e);
        }
    };
    // The firewall's ports change only with a change to some Ingress's backends.
    let firewall = if !changes.is_empty() || ctx.due(&ctx.firewall_runs) {
        ctx.sync_firewall(None).await
    } else {
        Ok(())
    };
    if let Err(source) = firewall {
        ctx.event(
            &ingress,
            true,
            "Sync",
            format!("Error syncing to GCP: {source}"),
        )
        .await;
        ctx.metrics.sync("compute");
        return Err(Error::Sync {
            ingress: key_string(&key),
            source,
        });
    }

    let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let kube_err = |source| Error::Kube {
        ingress: key_string(&key),
        source,
    };
    if let Some(ip) = &status.ip {
        if let Some(patch) = status::status_patch(&ingress, ip) {
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(kube_err)?;
            ctx.event(&ingress, false, "IPChanged", format!("IP is now {ip}"))
                .await;
        }
    }
    let mut health = BTreeMap::new();
    for name in desired.backends.keys() {
        health.insert(
            name.clone(),
            backend_services::health(&ctx.compute, name).await,
        );
    }
    let static_ip = desired
        .frontend
        .static_ip_name
        .as_deref()
        .or(status.managed_address.as_deref());
    let wanted = status::wanted_annotations(&desired.frontend, static_ip, &health);
    if let Some(patch) = status::annotation_patch(&ingress, &wanted) {
        api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_err)?;
    }
    // Only a change makes garbage (a backend or certificate no longer used); otherwise GC runs
    // when due. It runs in the background; the Ingress itself is fine either way.
    if !changes.is_empty() || ctx.due(&ctx.gc_runs) {
        ctx.schedule_gc(ingress.clone());
    }

    ctx.programmed(&key);
    ctx.metrics.sync("ok");
    let all_healthy = health.values().all(|h| h == "HEALTHY");
    Ok(Action::requeue(if all_healthy {
        ctx.config.resync_period
    } else {
        HEALTH_REFRESH.min(ctx.config.resync_period)
    }))
}

async fn sync_load_balancer(
    ctx: &Context,
    key: &ObjectKey,
    namer: &FrontendNamer,
    desired: &DesiredIngress,
    changes: &mut Changes,
) -> Result<FrontendStatus, Error> {
    let sync_err = |source| Error::Sync {
        ingress: key_string(key),
        source,
    };
    let static_ip = match &desired.frontend.static_ip_name {
        Some(name) => {
            let address = ctx
                .compute
                .get_global_address(name)
                .await
                .map_err(|e| sync_err(SyncError::compute("Address", name, e)))?;
            match address.and_then(|a| a.address) {
                Some(ip) => Some(ip),
                None => {
                    return Err(Error::StaticIpNotFound {
                        ingress: key_string(key),
                        name: name.clone(),
                    })
                }
            }
        }
        None => None,
    };
    let _shared = ctx.gc_lock.read().await;
    sync_backends(&ctx.compute, &ctx.locks, &desired.backends, changes)
        .await
        .map_err(sync_err)?;
    sync_frontend(
        &ctx.compute,
        namer,
        &desired.frontend,
        static_ip.as_deref(),
        changes,
    )
    .await
    .map_err(sync_err)
}

/// Deletes the Ingress's frontend, then garbage-collects backends and the firewall rule that no
/// other Ingress uses.
async fn cleanup(ingress: &Ingress, ctx: &Context) -> Result<(), Error> {
    let key = ObjectKey::of(ingress);
    let sync_err = |source| Error::Sync {
        ingress: key_string(&key),
        source,
    };
    let namer = ctx.namer(&key);
    let mut changes = Changes::new();
    {
        let _exclusive = ctx.gc_lock.write().await;
        delete_frontend(&ctx.compute, &namer, &mut changes)
            .await
            .map_err(sync_err)?;
    }
    for change in &changes {
        ctx.event(ingress, false, "Sync", change.to_string()).await;
    }
    ctx.gc(ingress, Some(&key)).await.map_err(sync_err)?;
    ctx.sync_firewall(Some(&key)).await.map_err(sync_err)?;
    info!("load balancer deleted");
    Ok(())
}

/// The Event for an SSL policy that does not exist, naming the FrontendConfig whose
/// `spec.sslPolicy` asks for it (the sync step only knows the policy).
fn ssl_policy_note(ingress: &Ingress, policy: &str) -> String {
    let name = crate::compute::reference::last_segment(policy);
    let fc = ingress
        .annotations()
        .get(crate::translate::annotations::FRONTEND_CONFIG)
        .map_or_else(
            || "(annotation networking.gke.io/v1beta1.FrontendConfig)".to_string(),
            |fc| format!("{}/{fc}", ingress.namespace().unwrap_or_default()),
        );
    format!(
        "FrontendConfig {fc}: spec.sslPolicy names SSL policy {name:?}, which does not exist in the project; create it (`gcloud compute ssl-policies create {name} --profile MODERN --min-tls-version 1.2`) or fix spec.sslPolicy"
    )
}

/// Requeues a failed reconcile after [`ERROR_REQUEUE`].
pub fn error_policy(_ingress: Arc<Ingress>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(error = %error, "reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
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
    let ingresses: Api<Ingress> = Api::all(client.clone());
    let controller = Controller::new(ingresses, watcher::Config::default()).with_config(
        controller::Config::default()
            .concurrency(config.workers)
            .debounce(Duration::from_millis(100)),
    );
    let stores = Stores::start(&client, controller.store()).await;
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
    let mut controller = controller
        .watches(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
            move |svc| svc_map(&svc.namespace().unwrap_or_default(), &svc.name_any()),
        )
        .watches(
            Api::<EndpointSlice>::all(client.clone()),
            watcher::Config::default(),
            move |slice| match slice.labels().get(mapping::SERVICE_NAME_LABEL) {
                Some(service) => slice_map(&slice.namespace().unwrap_or_default(), service),
                None => Vec::new(),
            },
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            move |pod| {
                let services = pod_stores.services.state();
                let names = mapping::services_selecting(services.iter().map(|s| &**s), &pod);
                let ns = pod.namespace().unwrap_or_default();
                names
                    .iter()
                    .flat_map(|s| pod_map(&ns, s))
                    .collect::<Vec<_>>()
            },
        )
        .watches(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default(),
            move |secret| secret_all(secret.namespace()),
        )
        .watches(
            Api::<IngressClass>::all(client.clone()),
            watcher::Config::default(),
            move |_| class_all(None),
        );
    // A CRD object change requeues every Ingress of its namespace (they reference them by name
    // from annotations; a ManagedCertificate's status.certificateName is what translation
    // attaches, so its Provisioning -> Active transition must reach the Ingress).
    if served_crd::<crate::crd::BackendConfig>(&client).await {
        controller = controller.watches(
            Api::<crate::crd::BackendConfig>::all(client.clone()),
            watcher::Config::default(),
            move |bc| bc_all(bc.namespace()),
        );
    }
    if served_crd::<crate::crd::FrontendConfig>(&client).await {
        controller = controller.watches(
            Api::<crate::crd::FrontendConfig>::all(client.clone()),
            watcher::Config::default(),
            move |fc| fc_all(fc.namespace()),
        );
    }
    if served_crd::<crate::crd::ManagedCertificate>(&client).await {
        controller = controller.watches(
            Api::<crate::crd::ManagedCertificate>::all(client.clone()),
            watcher::Config::default(),
            move |mc| mc_all(mc.namespace()),
        );
    }

    let ctx = Arc::new(Context::new(client, compute, stores, config, metrics));
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(ingress = %object, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "reconcile error"),
            }
        })
        .await;
}

/// Whether the API serves `K` (its CRD is installed).
async fn served_crd<K>(client: &Client) -> bool
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    api.list(&kube::api::ListParams::default().limit(1))
        .await
        .is_ok()
}
