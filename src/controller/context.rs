//! The [`Context`] every reconcile shares: clients, stores, settings, Events, what is live,
//! and garbage collection (a whole-cluster job, coalesced and debounced, see the module docs
//! of [`super`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tracing::{info, warn};

use super::{coalesce, last_desired, Config, ControllerMetrics, Stores, GC_DEBOUNCE, GC_PATIENCE};
use crate::compute::Compute;
use crate::sync::firewalls;
use crate::sync::gc::{delete_garbage, list_candidates, Candidates, LiveSet};
use crate::sync::ingress::BackendLocks;
use crate::sync::{Changes, SyncError};
use crate::translate::namer::FrontendNamer;
use crate::translate::regional::is_regional;
use crate::translate::{owns_ingress, translate_ingress, ClusterSnapshot, ObjectKey};

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
    /// Posts Warning Events, folding repeats into one Event's series (see [`Context::event`]).
    pub recorder: Recorder,
    /// Names this controller in Events (`reportingController`, `reportingInstance`).
    reporter: Reporter,
    /// Metrics.
    pub metrics: ControllerMetrics,
    pub(crate) locks: BackendLocks,
    /// Syncs hold it shared; garbage collection exclusively while it decides and deletes (not
    /// while it lists, see [`Context::gc_now`]), so GC never deletes a backend a running sync
    /// has just created. A cleanup deletes its own Ingress's frontend without it.
    pub(crate) gc_lock: tokio::sync::RwLock<()>,
    /// Serialises firewall syncs.
    pub(crate) firewall_lock: tokio::sync::Mutex<firewalls::RuleState>,
    /// Shares one garbage collection run among the reconciles that ask for it together.
    pub(crate) gc_runs: coalesce::Coalesced,
    /// Shares one firewall sync among the reconciles that ask for it together.
    pub(crate) firewall_runs: coalesce::Coalesced,
    /// A background GC run is scheduled and has not started yet.
    pub(crate) gc_scheduled: std::sync::atomic::AtomicBool,
    /// Last successful translation per Ingress (firewall ports and GC survive a failing one).
    pub(crate) last_desired: last_desired::LastDesired,
    /// Ingress changes seen but not yet programmed: key -> (generation, first seen).
    pub(crate) pending: Mutex<HashMap<ObjectKey, (i64, Instant)>>,
    /// Backend health read by reconciles, shared while fresh ([`super::health`]).
    pub(crate) backend_health: super::health::BackendHealth,
    /// An internal Ingress was seen by this process: GC lists the regional collections too
    /// (see [`super::internal`]).
    pub(crate) regional_seen: std::sync::atomic::AtomicBool,
    /// Consecutive syncs IAM refused, per Ingress (the back-off of [`super::permission`]).
    pub(crate) denials: Mutex<HashMap<String, u32>>,
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
            recorder: Recorder::new(client.clone(), reporter.clone()),
            reporter,
            client,
            compute,
            stores,
            config,
            metrics,
            locks: BackendLocks::default(),
            gc_lock: tokio::sync::RwLock::new(()),
            firewall_lock: tokio::sync::Mutex::new(firewalls::RuleState::default()),
            gc_runs: coalesce::Coalesced::default(),
            firewall_runs: coalesce::Coalesced::default(),
            gc_scheduled: std::sync::atomic::AtomicBool::new(false),
            last_desired: last_desired::LastDesired::default(),
            pending: Mutex::new(HashMap::new()),
            backend_health: super::health::BackendHealth::new(super::health::FRESH),
            regional_seen: std::sync::atomic::AtomicBool::new(false),
            denials: Mutex::new(HashMap::new()),
        }
    }

    /// Posts an Event about `ingress` (`events.k8s.io/v1`): a Warning when `warning`, else
    /// Normal, with `reason` (e.g. `Sync`) and `note`. A Warning repeated within 6 minutes
    /// becomes the first one's series (kube's [`Recorder`]); a Normal Event is posted anew each
    /// time. A failure to post is logged, never returned: Events are advisory.
    pub(crate) async fn event(&self, ingress: &Ingress, warning: bool, reason: &str, note: String) {
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
        // kube's Recorder keeps every Event it posted for 6 minutes, to fold a repeat into the
        // first one's series. Warnings repeat (a failing sync is retried with backoff), so they
        // share one Recorder. A Normal Event names one Compute change and does not repeat: kept,
        // they were the largest item of the heap at 2000 Ingresses (36.6 MiB of 117,
        // docs/performance.md), so each goes through a Recorder that forgets it.
        let recorder = if warning {
            self.recorder.clone()
        } else {
            Recorder::new(self.client.clone(), self.reporter.clone())
        };
        if let Err(e) = recorder.publish(&event, &ingress.object_ref(&())).await {
            warn!(error = %e, reason, "cannot publish Event");
        }
    }

    pub(crate) fn observe_change(&self, key: &ObjectKey, ingress: &Ingress) {
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

    pub(crate) fn programmed(&self, key: &ObjectKey) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, since)) = pending.remove(key) {
            self.metrics
                .programming_seconds
                .observe(since.elapsed().as_secs_f64());
        }
        self.metrics.queue_depth.set(pending.len() as i64);
    }

    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.last_desired.forget(key);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(key);
        self.metrics.queue_depth.set(pending.len() as i64);
    }

    pub(crate) fn namer(&self, ingress: &Ingress) -> FrontendNamer {
        self.config.translate.ingress_namer(ingress)
    }

    /// Owned Ingresses that are not being deleted.
    pub(crate) fn live_ingresses<'a>(&self, snapshot: &'a ClusterSnapshot) -> Vec<&'a Ingress> {
        snapshot
            .ingresses
            .iter()
            .filter(|(_, i)| i.metadata.deletion_timestamp.is_none())
            .filter(|(_, i)| owns_ingress(snapshot, i, &self.config.translate))
            .map(|(_, i)| i.as_ref())
            .collect()
    }

    pub(crate) fn live_set(&self, snapshot: &ClusterSnapshot) -> LiveSet {
        let t = &self.config.translate;
        let mut live = LiveSet {
            scheme: t.mode.scheme(),
            cluster_uid: t.cluster_uid.clone(),
            gke_uid: t.gke_uid.clone(),
            security_policy_prefix: crate::translate::ncp::security_policy_prefix(t),
            ..LiveSet::default()
        };
        for ingress in self.live_ingresses(snapshot) {
            let namer = self.namer(ingress);
            // A regional Ingress's frontend and backend services are regional (its live set
            // is `regional_live_set`); its NEGs are zonal and shared, so they count here.
            let regional = is_regional(snapshot, ingress, t);
            if !regional {
                live.frontends.insert(namer.lb_name().to_string());
                if namer.version() == crate::translate::namer::FrontendVersion::V1 {
                    live.v1_names.extend(namer.resource_names());
                }
                live.certificate_prefixes
                    .push(namer.ssl_certificate_prefix());
            }
            if let Some(desired) = self
                .last_desired
                .last_or_resolve(&ObjectKey::of(ingress), || {
                    translate_ingress(snapshot, ingress, t)
                })
            {
                if desired.region.is_none() {
                    live.backends.extend(desired.backends.iter().cloned());
                }
                live.security_policies
                    .extend(desired.security_policy.iter().cloned());
                live.negs.extend(desired.negs.iter().cloned());
            }
        }
        live
    }

    /// Garbage collection; failures are a `GarbageCollection` Warning on `ingress`.
    /// Reconciles that ask at the same time share one run that starts after they asked
    /// ([`coalesce`]), cleanups included: the live set leaves out Ingresses being deleted or no
    /// longer ours ([`Self::live_ingresses`]), so a run that starts after a cleanup deleted its
    /// frontend collects the backends only it used. (Each cleanup used to run its own, listing
    /// the project and translating every Ingress: deleting 2000 Ingresses cost 100 reads and
    /// 0.5 CPU s per Ingress, docs/performance.md.)
    pub(crate) async fn gc(&self, ingress: &Ingress) -> Result<(), SyncError> {
        let mut changes = Changes::new();
        let result = self
            .gc_runs
            .run(|| self.gc_now(&mut changes))
            .await
            .map(|_| ());
        if let Err(e) = &result {
            self.event(
                ingress,
                true,
                "GarbageCollection",
                format!("Error during garbage collection: {e}"),
            )
            .await;
        }
        result
    }

    /// Whether a reconcile that changed nothing should still run the whole-cluster jobs
    /// (GC, firewall): none has succeeded yet in this process, the last run failed, or it is
    /// older than the resync period. Only a change can make garbage or new ports, so
    /// steady-state resyncs skip the project-wide listing; the periodic run still finds what
    /// a crash mid-sync left behind or what was changed behind our back.
    pub(crate) fn due(&self, runs: &coalesce::Coalesced) -> bool {
        !runs.succeeded_within(self.config.resync_period)
    }

    /// Garbage collection after a sync, in the background: the reconcile does not wait for it
    /// (it lists the whole project, then deletes under the exclusive lock), and everything
    /// asked within [`GC_DEBOUNCE`] shares one run. Failures are a `GarbageCollection` Warning on the
    /// `ingress` that scheduled the run, and make the next reconcile ask again.
    pub(crate) fn schedule_gc(self: &Arc<Self>, ingress: Arc<Ingress>) {
        use std::sync::atomic::Ordering;
        if self.gc_scheduled.swap(true, Ordering::SeqCst) {
            return; // the scheduled run has not started: it will see this sync too
        }
        let ctx = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(GC_DEBOUNCE).await;
            // Cleared before the run reads anything: a later request schedules another run.
            ctx.gc_scheduled.store(false, Ordering::SeqCst);
            let _ = ctx.gc(&ingress).await;
        });
    }

    /// One GC run: the project-wide lists first, holding no lock, so a sync that starts
    /// meanwhile goes ahead at once; then, under the exclusive lock (every sync out of the
    /// way), what is live is read from the stores and only listed resources that are stale
    /// now are deleted. The lock is held for that decision and the deletes alone.
    ///
    /// Why listing early is safe (issue 26): a resource created after the lists is not a
    /// candidate, so this run cannot delete it. A listed resource some sync re-used between
    /// the lists and the lock (a backend left by a deleted Ingress that a new Ingress now
    /// wants, say) is protected as it was when the lists ran under the lock: that sync's
    /// Ingress was in the stores before the sync started (the reconcile reads it from
    /// there), `apply` records its translation in `last_desired` before the sync, and the live
    /// set read here translates every live Ingress of the stores (`last_or_resolve`), so its
    /// resources are live. A sync still running holds the shared lock, which this run waits
    /// for; one starting later waits for this run. A resource deleted since the lists is
    /// skipped (the state cache knows it gone) or answers 404, which counts as done. So a run
    /// deletes a subset of what a run listing under the lock would delete.
    pub(crate) async fn gc_now(&self, changes: &mut Changes) -> Result<(), SyncError> {
        let result = match self.gc_candidates().await {
            Ok(candidates) => self.gc_locked(&candidates, changes).await,
            Err(e) => Err(e),
        };
        // Tests and operators wait for this line to know a run has looked at the project.
        info!(
            deleted = changes.len(),
            ok = result.is_ok(),
            "garbage collection run finished"
        );
        result
    }

    /// The first step of [`Context::gc_now`], holding no lock: every collection GC looks at,
    /// listed at once (the regional ones too once an internal Ingress was seen).
    pub(crate) async fn gc_candidates(&self) -> Result<GcCandidates, SyncError> {
        let prefix = crate::translate::ncp::security_policy_prefix(&self.config.translate);
        let (regional, global) = futures::try_join!(
            Box::pin(self.regional_candidates()),
            Box::pin(list_candidates(&self.compute, &prefix)),
        )?;
        Ok(GcCandidates { regional, global })
    }

    /// The second step of [`Context::gc_now`]: takes the exclusive lock, reads what is live
    /// (every live Ingress of the stores) and deletes the `candidates` that are stale.
    pub(crate) async fn gc_locked(
        &self,
        candidates: &GcCandidates,
        changes: &mut Changes,
    ) -> Result<(), SyncError> {
        // Reconciles starting meanwhile go first (see `write_when_idle`).
        let _exclusive = coalesce::write_when_idle(
            &self.gc_lock,
            GC_PATIENCE,
            std::time::Duration::from_millis(50),
        )
        .await;
        let snapshot = self.stores.snapshot();
        // Regional first: a regional backend service holds the NEGs the global run deletes.
        if let Some((region, regional)) = &candidates.regional {
            Box::pin(self.regional_gc(&snapshot, region, regional, changes)).await?;
        }
        let live = self.live_set(&snapshot);
        delete_garbage(&self.compute, &candidates.global, &live, changes).await
    }
}

/// What one GC run may delete ([`Candidates`]), listed before its exclusive lock.
pub(crate) struct GcCandidates {
    /// The region of internal load balancers and its collections, when GC looks there.
    regional: Option<(String, Candidates)>,
    /// The global collections and every zone's NEGs.
    global: Candidates,
}

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(crate) fn key_string(key: &ObjectKey) -> String {
    key.to_string()
}
