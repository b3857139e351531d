//! The emulator: routes an API request (from HTTP or from a batch part) to its method, applies
//! fault injection and call counting, commits mutations to the [`State`], records the
//! Operation, publishes a new [`Snapshot`] to the data plane and persists the state file.
//!
//! Submodules: [`route`] (path -> call, method ids), [`version`] (v1, beta and alpha views of
//! one store), `authorize` (IAM and `--iam-grant` at one point of the request path), `custom` (custom verbs), `projects` (projects and Shared VPC), `certs` (MANAGED
//! certificate provisioning).

mod authorize;
mod certs;
pub mod config;
mod custom;
pub mod network_services;
mod projects;
pub mod request;
pub(crate) mod route;
pub mod version;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::ca::LocalCa;
use crate::calls::Calls;
use crate::dataplane::DataPlane;
use crate::errors::ApiError;
use crate::faults::Faults;
use crate::health_state::HealthTable;
use crate::listing::ListParams;
use crate::methods::{self, Mutation};
use crate::operations::{Operations, Phases, WAIT_LIMIT};
use crate::resources::{zones, Collection, Scope};
use crate::slow_cloud::{self, SlowCloud};
use crate::snapshot::{ResourceKey, Snapshot};
use crate::store::State;

pub use self::config::Config;
pub use self::request::ApiRequest;
use self::route::{method_id, method_not_found, route, Call};
pub use self::version::ApiVersion;

/// How long the publisher waits after a mutation before taking the snapshot.
const PUBLISH_COALESCE: Duration = Duration::from_millis(1);

/// The emulator's shared state.
pub struct Emulator {
    /// Command-line settings.
    pub config: Config,
    /// Public API base: `http://127.0.0.1:PORT/compute/v1/`.
    pub base: String,
    pub(crate) state: Mutex<State>,
    ops: Mutex<Operations>,
    /// Fault rules.
    pub faults: Faults,
    /// Call counters.
    pub calls: Calls,
    /// The slow cloud: latency, Operation phases and the rate quota.
    pub slow_cloud: SlowCloud,
    /// Health states written by the data plane's health checker.
    pub health: Arc<HealthTable>,
    /// The local CA for MANAGED certificates (absent if it could not be created).
    pub ca: Option<LocalCa>,
    /// The data plane, once started.
    pub dataplane: OnceLock<DataPlane>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Wakes the publisher task; `None` publishes synchronously (no runtime at creation).
    publish_wanted: Option<Arc<tokio::sync::Notify>>,
    persisted: watch::Sender<u64>,
    pending_certs: Mutex<BTreeSet<ResourceKey>>,
    /// `project/requestId` -> key of the Operation it produced.
    request_ids: Mutex<std::collections::HashMap<String, String>>,
    scheduled_certs: Mutex<HashSet<ResourceKey>>,
    /// Network Services API Operations by name (`network_services`).
    ns_operations: Mutex<std::collections::HashMap<String, Value>>,
    /// Control-plane metrics.
    pub metrics: crate::metrics::Metrics,
    /// Tokens, roles and bindings (`--iam`).
    pub identity: crate::identity::Identity,
}

/// The schema the body of `call` must follow (schema.rs), if it has a body and a schema.
fn schema_check(call: &Call) -> Option<crate::schema::Check> {
    match call {
        Call::Insert(t) | Call::Update(t, _) => crate::schema::resource_check(t.coll.kind),
        Call::Custom(t, verb) => crate::schema::verb_check(t.coll.kind, verb),
        Call::ProjectVerb(_, verb) => crate::schema::verb_check("compute#project", verb),
        _ => None,
    }
}

impl Emulator {
    /// A new emulator serving at `base` (`http://127.0.0.1:PORT/compute/v1/`), starting from
    /// `initial` (the state file's content, or empty).
    pub fn new(
        config: Config,
        base: String,
        mut initial: State,
        ca: Option<LocalCa>,
    ) -> Arc<Emulator> {
        initial.private_ranges = config.private_ranges.clone();
        let snapshot = Arc::new(initial.snapshot());
        let version = initial.version;
        let pending: BTreeSet<ResourceKey> = initial
            .resources
            .iter()
            .filter(|(k, v)| {
                k.contains("/global/sslCertificates/") && v["managed"]["status"] == "PROVISIONING"
            })
            .map(|(k, _)| k.clone())
            .collect();
        let slow_cloud = SlowCloud::new(config.slow_cloud.clone());
        let token_uri = format!("{}token", base.trim_end_matches("compute/v1/"));
        let identity = crate::identity::Identity::new(config.iam, config.token_lifetime, token_uri);
        let emu = Arc::new(Emulator {
            identity,
            slow_cloud,
            config,
            base,
            state: Mutex::new(initial),
            ops: Mutex::new(Operations::default()),
            faults: Faults::default(),
            calls: Calls::default(),
            health: Arc::new(HealthTable::default()),
            ca,
            dataplane: OnceLock::new(),
            snapshots: watch::Sender::new(snapshot),
            publish_wanted: tokio::runtime::Handle::try_current()
                .ok()
                .map(|_| Arc::new(tokio::sync::Notify::new())),
            persisted: watch::Sender::new(version),
            pending_certs: Mutex::new(pending),
            request_ids: Mutex::new(std::collections::HashMap::new()),
            scheduled_certs: Mutex::new(HashSet::new()),
            ns_operations: Mutex::new(std::collections::HashMap::new()),
            metrics: crate::metrics::Metrics::default(),
        });
        if let Some(wanted) = emu.publish_wanted.clone() {
            tokio::spawn(Self::publisher(Arc::downgrade(&emu), wanted));
        }
        if !emu.pending_certs.lock().expect("poisoned").is_empty() {
            let state = emu.state.lock().expect("state poisoned");
            emu.schedule_certs(&state);
        }
        emu
    }

    /// Publishes the latest state whenever woken. A burst of mutations yields one snapshot
    /// (copying the resource index is O(resources), and the data plane recompiles each one),
    /// and the snapshot always carries every mutation committed before it was taken.
    async fn publisher(emu: std::sync::Weak<Emulator>, wanted: Arc<tokio::sync::Notify>) {
        loop {
            wanted.notified().await;
            // Let the mutations of a burst land first: one snapshot per millisecond at most.
            tokio::time::sleep(PUBLISH_COALESCE).await;
            let Some(emu) = emu.upgrade() else { return };
            let snap = Arc::new(emu.state.lock().expect("state poisoned").snapshot());
            if snap.version != emu.snapshots.borrow().version {
                emu.snapshots.send_replace(snap);
            }
        }
    }

    /// A receiver of the published snapshots (for the data plane and the state file writer).
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.subscribe()
    }

    /// Marks `version` as written to the state file (unblocks waiting mutations).
    pub fn mark_persisted(&self, version: u64) {
        self.persisted.send_if_modified(|v| {
            let changed = version > *v;
            if changed {
                *v = version;
            }
            changed
        });
    }

    /// Handles one API request. Counts it, applies injected faults, then runs the method and
    /// answers in the request's API version ([`ApiVersion::view`]).
    pub async fn handle(self: &Arc<Self>, req: ApiRequest) -> Result<Value, ApiError> {
        let started = Instant::now();
        let call = route(&req)?;
        let method = method_id(&call);
        self.calls.record(&method);
        let admitted = self
            .slow_cloud
            .admit(slow_cloud::project_of(&req.path), &method)
            .await;
        let fault = self.faults.check(&method);
        if !fault.latency.is_zero() {
            tokio::time::sleep(fault.latency).await;
        }
        let result = match (admitted, fault.error) {
            (Err(e), _) => Err(e),
            (_, Some(e)) if !fault.after_effect => Err(e),
            (_, lost) => {
                let r = async {
                    // The v1 model's fields (google-cloud-compute-v1); beta and alpha requests
                    // are checked against their version's fields in `execute`.
                    if req.version == ApiVersion::V1 {
                        if let Some(check) = schema_check(&call) {
                            crate::schema::check_body(check, &req.body)?;
                        }
                    }
                    self.authorize(&call, &method, &req)?;
                    let run = self.execute(call, &req);
                    let v = crate::faults::OPERATION_LATENCY
                        .scope(fault.operation_latency, run)
                        .await?;
                    Ok(req.version.view(&self.base, v))
                }
                .await;
                // With `lostResponse` the server acted; the client gets the fault instead.
                lost.map_or(r, Err)
            }
        };
        let code = result.as_ref().map_or_else(|e| e.code, |_| 200);
        self.metrics.observe(&method, code, started.elapsed());
        if let Err(e) = &result {
            tracing::debug!(method = %method, code = e.code, reason = %e.reason, message = %e.message, "API error");
        }
        result
    }

    async fn execute(self: &Arc<Self>, call: Call, req: &ApiRequest) -> Result<Value, ApiError> {
        if let Call::Insert(t) | Call::Delete(t) | Call::Update(t, _) | Call::Custom(t, _) = &call {
            if !t.coll.writable {
                return Err(crate::resources::refuse_write(t.coll));
            }
        }
        if let Call::Insert(t) | Call::Update(t, _) = &call {
            req.version.check_body(t.coll.kind, &req.body)?;
        }
        match call {
            Call::OpWait(p, z, name) => self.wait_operation(&op_key(&p, z.as_deref(), &name)).await,
            Call::OpGet(p, z, name) => {
                let key = op_key(&p, z.as_deref(), &name);
                let ops = self.ops.lock().expect("ops poisoned");
                ops.get(&key)
                    .map(|r| r.view(Instant::now()))
                    .ok_or_else(|| ApiError::not_found(&key))
            }
            Call::OpDelete(p, z, name) => {
                let key = op_key(&p, z.as_deref(), &name);
                if self.ops.lock().expect("ops poisoned").delete(&key) {
                    Ok(json!({}))
                } else {
                    Err(ApiError::not_found(&key))
                }
            }
            Call::OpList(p, z) => {
                let params = ListParams::from_query(&req.query)?;
                let prefix = op_key(&p, z.as_deref(), "");
                let items = self.ops.lock().expect("ops poisoned").list(&prefix);
                Ok(params.response(
                    "compute#operationList",
                    &format!("{}{}", self.base, prefix.trim_end_matches('/')),
                    &items,
                ))
            }
            Call::ZoneList(p) => {
                let params = ListParams::from_query(&req.query)?;
                let items: Vec<Value> = zones::ZONES
                    .iter()
                    .map(|z| zones::zone_json(&self.base, &p, z))
                    .collect();
                Ok(params.response(
                    "compute#zoneList",
                    &format!("{}projects/{p}/zones", self.base),
                    &items,
                ))
            }
            Call::ZoneGet(p, z) => {
                if zones::exists(&z) {
                    Ok(zones::zone_json(&self.base, &p, &z))
                } else {
                    Err(ApiError::not_found(&format!("projects/{p}/zones/{z}")))
                }
            }
            Call::ProjectGet(p) => self.project_get(&p),
            Call::ProjectVerb(p, verb) => self.project_verb(&p, verb, req).await,
            Call::Get(t) => {
                self.ensure_project(&t.project);
                methods::get(&self.state.lock().expect("state poisoned"), &t)
            }
            Call::List(t) => {
                self.ensure_project(&t.project);
                let params = ListParams::from_query(&req.query)?;
                let prefix = t.prefix();
                // Only the Arcs are cloned under the lock; filtering and paging happen outside.
                let items: Vec<Arc<Value>> = self
                    .state
                    .lock()
                    .expect("state poisoned")
                    .scan(&prefix)
                    .map(|(_, v)| Arc::clone(v))
                    .collect();
                Ok(params.response(
                    t.coll.list_kind,
                    &format!("{}{}", self.base, prefix.trim_end_matches('/')),
                    items.iter().map(|v| v.as_ref()),
                ))
            }
            Call::Aggregated(coll, project) => {
                self.ensure_project(&project);
                self.aggregated(coll, &project, &req.query)
            }
            Call::Insert(t) => {
                let range = self.config.address_range;
                self.mutate(&t.project, req, |s| {
                    methods::insert(s, &t, &req.body, range)
                })
                .await
            }
            Call::Delete(t) => {
                self.mutate(&t.project, req, |s| methods::delete(s, &t))
                    .await
            }
            Call::Update(t, patch) => {
                if !t.coll.updatable {
                    return Err(method_not_found(req));
                }
                let range = self.config.address_range;
                self.mutate(&t.project, req, |s| {
                    // A PUT through a version keeps the fields that version cannot see.
                    let kept = (!patch)
                        .then(|| {
                            let stored = s.resources.get(&t.key()).map(|v| v.as_ref());
                            req.version.keep_hidden(stored, &req.body)
                        })
                        .flatten();
                    let body = kept.as_deref().unwrap_or(&req.body);
                    methods::update(s, &t, body, patch, range)
                })
                .await
            }
            Call::Custom(t, verb) => self.custom(t, &verb, req).await,
        }
    }

    pub(crate) fn ensure_project(&self, project: &str) {
        let mut state = self.state.lock().expect("state poisoned");
        if crate::resources::projects::ensure(&mut state, project) {
            state.version += 1;
            self.publish(&state);
        }
    }

    fn aggregated(
        &self,
        coll: &'static Collection,
        project: &str,
        query: &[(String, String)],
    ) -> Result<Value, ApiError> {
        let params = ListParams::from_query(query)?;
        let state = self.state.lock().expect("state poisoned");
        let mut items = serde_json::Map::new();
        let warning = |scope: &str| json!({"warning": {"code": "NO_RESULTS_ON_PAGE", "message": format!("There are no results for scope '{scope}' on this page."), "data": [{"key": "scope", "value": scope}]}});
        let mut scopes: Vec<(String, String)> = Vec::new();
        match coll.scope {
            Scope::Zonal => {
                for z in zones::ZONES {
                    scopes.push((
                        format!("zones/{z}"),
                        format!("projects/{project}/zones/{z}/{}/", coll.segment),
                    ));
                }
            }
            Scope::Global | Scope::Project => scopes.push((
                "global".into(),
                format!("projects/{project}/global/{}/", coll.segment),
            )),
            Scope::Regional => {}
        }
        // Regional scopes: the regional twin's resources (or the regional-only collection's).
        let regional = crate::resources::collection(Scope::Regional, coll.segment).is_some();
        if regional {
            for r in zones::regions() {
                scopes.push((
                    format!("regions/{r}"),
                    format!("projects/{project}/regions/{r}/{}/", coll.segment),
                ));
            }
        }
        for (scope, prefix) in scopes {
            let (page, _) = ListParams {
                offset: 0,
                max_results: usize::MAX,
                ..params.clone()
            }
            .page(state.scan(&prefix).map(|(_, v)| v.as_ref()));
            if page.is_empty() {
                items.insert(scope.clone(), warning(&scope));
            } else {
                items.insert(scope, json!({ coll.segment: page }));
            }
        }
        if coll.scope == Scope::Global && !regional {
            for r in zones::regions() {
                let scope = format!("regions/{r}");
                items.insert(scope.clone(), warning(&scope));
            }
        }
        Ok(json!({
            "kind": coll.aggregated_kind,
            "id": format!("projects/{project}/aggregated/{}", coll.segment),
            "items": items,
            "selfLink": format!("{}projects/{project}/aggregated/{}", self.base, coll.segment),
        }))
    }

    /// Runs `f` on the state; on success commits: bumps the version, publishes the snapshot,
    /// records the Operation and waits for the state file. On error nothing changed.
    ///
    /// A `requestId` query parameter makes the call idempotent, as in the real API: a repeated
    /// id returns the first call's Operation without running `f` again.
    pub(crate) async fn mutate(
        self: &Arc<Self>,
        project: &str,
        req: &ApiRequest,
        f: impl FnOnce(&mut State) -> Result<Mutation, ApiError>,
    ) -> Result<Value, ApiError> {
        let request_id = req
            .query
            .iter()
            .find(|(k, v)| k == "requestId" && !v.is_empty())
            .map(|(_, v)| format!("{project}/{v}"));
        let (op, version) = {
            let mut state = self.state.lock().expect("state poisoned");
            if let Some(id) = &request_id {
                let ops = self.ops.lock().expect("ops poisoned");
                let seen = self.request_ids.lock().expect("poisoned").get(id).cloned();
                if let Some(rec) = seen.and_then(|key| ops.get(&key)) {
                    return Ok(rec.view(Instant::now()));
                }
            }
            if crate::resources::projects::ensure(&mut state, project) {
                state.version += 1;
                self.publish(&state);
            }
            let mut m = f(&mut state)?;
            if m.target_id.is_none() {
                m.target_id = state
                    .resources
                    .get(&m.target)
                    .and_then(|v| v["id"].as_str())
                    .map(str::to_string);
            }
            state.version += 1;
            if m.target.contains("/global/sslCertificates/")
                && state
                    .resources
                    .get(&m.target)
                    .is_some_and(|v| v["managed"]["status"] == "PROVISIONING")
            {
                self.pending_certs
                    .lock()
                    .expect("poisoned")
                    .insert(m.target.clone());
            }
            self.schedule_certs(&state);
            self.publish(&state);
            let mut phases = self.operation_phases(m.zone.is_some());
            if let Some(latency) = crate::faults::OPERATION_LATENCY
                .try_with(|l| *l)
                .ok()
                .flatten()
            {
                phases.running = latency;
            }
            let op = self
                .ops
                .lock()
                .expect("ops poisoned")
                .create(&self.base, project, &m, phases);
            tracing::info!(operation = %op["name"].as_str().unwrap_or_default(), op_type = %m.op_type, target = %m.target, "committed");
            if let Some(id) = request_id {
                let key = op["selfLink"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_start_matches(self.base.as_str())
                    .to_string();
                self.request_ids.lock().expect("poisoned").insert(id, key);
            }
            (op, state.version)
        };
        self.wait_persisted(version).await;
        Ok(op)
    }

    fn publish(&self, state: &State) {
        match &self.publish_wanted {
            Some(wanted) => wanted.notify_one(),
            None => {
                self.snapshots.send_replace(Arc::new(state.snapshot()));
            }
        }
    }

    async fn wait_persisted(&self, version: u64) {
        if self.config.state_file.is_none() {
            return;
        }
        let mut rx = self.persisted.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|v| *v >= version)).await;
    }

    /// How long a new Operation stays PENDING and RUNNING: the slow cloud's figures for its
    /// scope, else `--operation-latency-ms` of RUNNING.
    fn operation_phases(&self, zonal: bool) -> Phases {
        match self.slow_cloud.operation_phases(zonal) {
            Some((pending, running)) => Phases { pending, running },
            None => Phases {
                pending: Duration::ZERO,
                running: self.config.operation_latency,
            },
        }
    }

    async fn wait_operation(&self, key: &str) -> Result<Value, ApiError> {
        // Like the real API: answer when DONE or after at most two minutes.
        let done_at = {
            let ops = self.ops.lock().expect("ops poisoned");
            ops.get(key)
                .ok_or_else(|| ApiError::not_found(key))?
                .done_at
        };
        let limit = Instant::now() + WAIT_LIMIT;
        tokio::time::sleep_until(done_at.min(limit).into()).await;
        let ops = self.ops.lock().expect("ops poisoned");
        ops.get(key)
            .map(|r| r.view(Instant::now()))
            .ok_or_else(|| ApiError::not_found(key))
    }

    /// Admin reset: forgets every resource, operation, fault rule and counter.
    pub fn reset(&self) {
        let mut state = self.state.lock().expect("state poisoned");
        state.clear();
        self.ops.lock().expect("ops poisoned").clear();
        self.request_ids.lock().expect("poisoned").clear();
        self.pending_certs.lock().expect("poisoned").clear();
        self.faults.remove(None);
        self.calls.reset();
        self.health.retain(|_| false);
        self.publish(&state);
    }

    /// Admin state dump: `{"version", "resources": {key: resource}, "negEndpoints": {key: [...]}}`
    /// (private keys are never included).
    pub fn dump(&self) -> Value {
        let state = self.state.lock().expect("state poisoned");
        let resources: serde_json::Map<String, Value> = state
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), v.as_ref().clone()))
            .collect();
        let negs: serde_json::Map<String, Value> = state
            .neg_endpoints
            .iter()
            .map(|(k, eps)| (k.clone(), json!(eps.iter().map(|e| json!({"ipAddress": e.ip_address, "port": e.port, "instance": e.instance})).collect::<Vec<_>>())))
            .collect();
        json!({"version": state.version, "resources": resources, "negEndpoints": negs})
    }
}

/// The key of operation `name` at `location` (`zones/Z`, `regions/R`, or global for `None`).
fn op_key(project: &str, location: Option<&str>, name: &str) -> String {
    match location {
        Some(l) => format!("projects/{project}/{l}/operations/{name}"),
        None => format!("projects/{project}/global/operations/{name}"),
    }
}
