//! The Compute API seam: google-cloud-compute-v1 clients, retries, Operation waits, error classes.
//!
//! [`Compute`] holds one client per Compute service (the crate has one client per service) and
//! exposes typed, idempotency-friendly calls that `sync` uses: `get_*` returns `Ok(None)` for
//! 404, `delete_*` returns `Ok(false)` when the resource was already gone, and every mutation
//! waits for its Operation and turns a failed DONE Operation into an error (the crate's poller
//! would return `Ok`; `reference/gce-clients.md`, "Rust gotchas").
//!
//! Retries: 5xx and transport errors are retried with jittered exponential backoff
//! ([`RetrySettings`]); `rateLimitExceeded` (429, or 403 naming the quota) slows every call of
//! its kind down through one first-come-first-served [`pacing::Pacer`] and is retried in its
//! turn; 412 `conditionNotMet` is left to `sync`, which refetches the fingerprint first; a 401
//! builds the credentials again and retries the call once ([`RefreshableCredentials`]; a
//! second 401 is the call's error). The clients' own retry policy is switched off so that one
//! place decides.
//!
//! [`state`] is the cache of what exists that `sync` reads instead of one `get` per resource.

/// `User-Agent` of every request to the Kubernetes and Compute APIs: `gclb-operator/<version>`
/// (the workspace's version, which the operator shares), so cluster admins (audit log
/// `userAgent`) and cloud admins (Cloud Audit Logs `requestMetadata.callerSuppliedUserAgent`)
/// can attribute calls to this operator. gclb-operator re-exports it.
pub const USER_AGENT: &str = concat!("gclb-operator/", env!("CARGO_PKG_VERSION"));

pub mod credentials;
pub mod error;
pub mod metrics;
mod network_endpoint_groups;
pub mod observed;
pub mod pacing;
mod pages;
pub mod reference;
mod resources;
pub mod state;

use std::future::Future;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use google_cloud_compute_v1::client as gc;
use google_cloud_compute_v1::model;
use google_cloud_gax::options::RequestOptionsBuilder as _;
use google_cloud_gax::retry_policy::NeverRetry;

pub use credentials::{CredentialsMode, RefreshableCredentials};
pub use error::{ComputeError, ErrorKind, Result};
pub use metrics::ComputeMetrics;

/// What became of a mutation the API accepted, as far as the client knows: a mutation returns
/// an Operation at once, and the change happens, or fails, when the Operation is DONE
/// (Compute API v1 reference, "globalOperations"; `reference/gce-clients.md`, the Operation
/// every mutation returns and the ways to wait on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// The API answered the call with an Operation: the change is under way.
    Accepted,
    /// The Operation is DONE with an error: the change did not happen.
    Failed,
    /// Waiting on the Operation failed (refused, timed out): the change may or may not happen.
    Unknown,
}

/// Backoff for retryable errors (429, 5xx, transport).
#[derive(Clone, Debug)]
pub struct RetrySettings {
    /// First delay.
    pub min_delay: Duration,
    /// Cap on one delay.
    pub max_delay: Duration,
    /// Retries after the first attempt (5xx and transport errors).
    pub max_retries: usize,
    /// Retries of a call refused for the rate quota (each waits its turn in the pacer).
    pub max_rate_limited_retries: usize,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            max_retries: 6,
            max_rate_limited_retries: 30,
        }
    }
}

/// How to reach the Compute API.
#[derive(Clone, Debug)]
pub struct ComputeConfig {
    /// Project id all resources live in.
    pub project: String,
    /// Host root of the API (`http://127.0.0.1:PORT`, no `/compute/v1`: the crate adds it).
    /// `None` means the real API.
    pub endpoint: Option<String>,
    /// The credentials the clients send, whatever the endpoint (`--compute-credentials`).
    pub credentials: CredentialsMode,
    /// Delay between Operation polls when a wait returns before DONE.
    pub operation_poll_interval: Duration,
    /// Give up on an Operation after this long.
    pub operation_timeout: Duration,
    /// Retry policy.
    pub retry: RetrySettings,
    /// How long a collection's list is trusted by the state cache ([`state`]) before the next
    /// use lists it again.
    pub state_max_age: Duration,
}

impl ComputeConfig {
    /// A config for `project` at `endpoint` with default timings.
    pub fn new(project: impl Into<String>, endpoint: Option<String>) -> Self {
        Self {
            project: project.into(),
            endpoint,
            credentials: CredentialsMode::Adc,
            operation_poll_interval: Duration::from_millis(500),
            operation_timeout: Duration::from_secs(300),
            retry: RetrySettings::default(),
            state_max_age: Duration::from_secs(300),
        }
    }
}

/// One client per Compute collection the operator calls, each built on first use: building a
/// client loads the system's root certificates (about 150 files), so building all 25 at once
/// cost every operator start, and every test that makes a [`Compute`], 0.7-1 s of CPU in a
/// debug build, while a reconcile or a test touches a few collections.
macro_rules! clients {
    ($($field:ident: $ty:ident),* $(,)?) => {
        #[derive(Default)]
        struct Clients {
            $($field: tokio::sync::OnceCell<gc::$ty>,)*
        }

        impl Compute {
            $(
                #[doc = concat!("The `", stringify!($ty), "` client, built on first use.")]
                async fn $field(&self) -> Result<&gc::$ty> {
                    self.clients
                        .$field
                        // Boxed: the builder's future type (reqwest, h2) would otherwise be
                        // part of every call's future, past the compiler's recursion limit.
                        .get_or_try_init(|| -> futures::future::BoxFuture<'_, Result<gc::$ty>> {
                            Box::pin(async {
                                let mut builder = gc::$ty::builder()
                                    .with_credentials(self.credentials.credentials())
                                    .with_retry_policy(NeverRetry);
                                if let Some(endpoint) = &self.endpoint {
                                    builder = builder.with_endpoint(endpoint.trim_end_matches('/'));
                                }
                                builder.build().await.map_err(|e| ComputeError::ClientBuild {
                                    service: stringify!($ty),
                                    message: e.to_string(),
                                })
                            })
                        })
                        .await
                }
            )*
        }
    };
}

clients! {
    url_maps: UrlMaps,
    backend_services: BackendServices,
    health_checks: HealthChecks,
    network_endpoint_groups: NetworkEndpointGroups,
    firewalls: Firewalls,
    global_forwarding_rules: GlobalForwardingRules,
    target_http_proxies: TargetHttpProxies,
    target_https_proxies: TargetHttpsProxies,
    target_tcp_proxies: TargetTcpProxies,
    target_ssl_proxies: TargetSslProxies,
    ssl_certificates: SslCertificates,
    security_policies: SecurityPolicies,
    global_addresses: GlobalAddresses,
    global_operations: GlobalOperations,
    zone_operations: ZoneOperations,
    region_url_maps: RegionUrlMaps,
    region_backend_services: RegionBackendServices,
    region_health_checks: RegionHealthChecks,
    region_target_http_proxies: RegionTargetHttpProxies,
    region_target_https_proxies: RegionTargetHttpsProxies,
    region_ssl_certificates: RegionSslCertificates,
    forwarding_rules: ForwardingRules,
    addresses: Addresses,
    subnetworks: Subnetworks,
    region_operations: RegionOperations,
}

/// Typed access to the Compute API for one project. Cheap to share behind an `Arc`.
pub struct Compute {
    project: String,
    /// Where the clients send their calls (`None`: the Compute API itself).
    endpoint: Option<String>,
    credentials: RefreshableCredentials,
    clients: Clients,
    poll_interval: Duration,
    operation_timeout: Duration,
    retry: RetrySettings,
    metrics: ComputeMetrics,
    state: state::ComputeState,
    reads: pacing::Pacer,
    writes: pacing::Pacer,
}

impl Compute {
    /// A client of the Compute API for `config.project`; the client of each collection is
    /// built on its first call. The clients send `config.credentials` ([`CredentialsMode`]:
    /// Application Default Credentials unless anonymous is asked for), whatever the endpoint.
    ///
    /// Errors: [`ComputeError::ClientBuild`] when credentials cannot be found. A client that
    /// fails to build fails its first call with the same error (and is tried again on the next).
    pub async fn new(config: ComputeConfig, metrics: ComputeMetrics) -> Result<Self> {
        let creds = RefreshableCredentials::new(config.credentials).map_err(|message| {
            ComputeError::ClientBuild {
                service: "credentials",
                message,
            }
        })?;
        Ok(Self::with_credentials(config, creds, metrics))
    }

    /// [`Self::new`] with credentials of the caller's (`config.credentials` is not read): a
    /// test's scripted tokens, or credentials shared with another client.
    pub fn with_credentials(
        config: ComputeConfig,
        credentials: RefreshableCredentials,
        metrics: ComputeMetrics,
    ) -> Self {
        Self {
            project: config.project,
            endpoint: config.endpoint,
            credentials,
            clients: Clients::default(),
            poll_interval: config.operation_poll_interval,
            operation_timeout: config.operation_timeout,
            retry: config.retry,
            metrics,
            state: state::ComputeState::new(config.state_max_age),
            reads: pacing::Pacer::default(),
            writes: pacing::Pacer::default(),
        }
    }

    /// The project every call targets.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The credentials this client sends (cheap to clone), for another Google client of the
    /// operator's to share: one rebuild after a 401 then serves both.
    pub fn credentials(&self) -> &RefreshableCredentials {
        &self.credentials
    }

    /// The call metrics this client records into.
    pub fn metrics(&self) -> &ComputeMetrics {
        &self.metrics
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.retry.min_delay)
            .with_max_delay(self.retry.max_delay)
            .with_max_times(self.retry.max_retries)
            .with_jitter()
    }

    /// One call without retries, recorded in metrics.
    async fn attempt<T, Fut>(&self, method: &'static str, resource: &str, fut: Fut) -> Result<T>
    where
        Fut: Future<Output = std::result::Result<T, google_cloud_gax::error::Error>>,
    {
        let start = Instant::now();
        let result = fut
            .await
            .map_err(|e| ComputeError::from_gax(method, resource, e));
        let label = match &result {
            Ok(_) => "ok",
            Err(e) => e.kind().as_str(),
        };
        self.metrics
            .record(method, label, start.elapsed().as_secs_f64());
        // Every call with its duration: the timeline of a sync (docs/performance.md profiles).
        tracing::debug!(
            method,
            resource,
            label,
            ms = start.elapsed().as_millis() as u64,
            "compute call"
        );
        result
    }

    /// One call in its pacer's turn, retried: in a later turn when refused for the quota (the
    /// pacer slows down), after a jittered backoff on 5xx and transport errors, and once at
    /// once after a 401, with credentials built again ([`RefreshableCredentials::refresh`]).
    async fn paced<T, F, Fut>(
        &self,
        pacer: &pacing::Pacer,
        method: &'static str,
        resource: &str,
        f: F,
    ) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = self.backoff().build();
        let mut refusals = 0;
        let mut reauthenticated = false;
        loop {
            pacer.wait_turn().await;
            let generation = self.credentials.generation();
            match f().await {
                Ok(v) => {
                    pacer.succeeded();
                    return Ok(v);
                }
                Err(e)
                    if e.kind() == ErrorKind::RateLimited
                        && refusals < self.retry.max_rate_limited_retries =>
                {
                    refusals += 1;
                    pacer.refused(Instant::now());
                    tracing::debug!(method, resource, error = %e, refusals, "rate limited; retrying in turn");
                }
                Err(e) if e.is_unauthenticated() && !reauthenticated => {
                    reauthenticated = true;
                    let rebuilt = self.credentials.refresh(generation).map_err(|message| {
                        ComputeError::ClientBuild {
                            service: "credentials",
                            message,
                        }
                    })?;
                    tracing::info!(method, resource, error = %e, rebuilt, "credentials refused; retrying once with a fresh token");
                }
                Err(e) if e.kind().is_retryable() => match backoff.next() {
                    Some(delay) => {
                        tracing::debug!(method, resource, error = %e, ?delay, "retrying Compute call");
                        tokio::time::sleep(delay).await;
                    }
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// A read (get, list, getHealth, Operation wait), paced and retried.
    async fn read<T, F, Fut>(&self, method: &'static str, resource: &str, f: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = std::result::Result<T, google_cloud_gax::error::Error>>,
    {
        self.paced(&self.reads, method, resource, || {
            self.attempt(method, resource, f())
        })
        .await
    }

    /// A mutation: send (paced and retried as [`Self::paced`]), wait for its Operation to be
    /// DONE with `operations.wait`, surface the Operation's error. A retryable Operation error
    /// (the change failed server side) sends the mutation again, up to the retry limit; `zone`
    /// is where zonal Operations live.
    async fn mutate<F, Fut>(
        &self,
        method: &'static str,
        resource: &str,
        zone: Option<&str>,
        f: F,
    ) -> Result<model::Operation>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = std::result::Result<model::Operation, google_cloud_gax::error::Error>>,
    {
        self.mutate_tracked(method, resource, zone, |_| {}, f).await
    }

    /// [`Self::mutate`], telling `fate` what became of the change as soon as it is known
    /// ([`Fate`]): an insert's caller records the resource in the state cache the moment the
    /// API accepts it, so that a failed wait on its Operation (`compute.globalOperations.get`
    /// refused, a timeout) cannot make the operator forget a resource that exists (issue 43).
    async fn mutate_tracked<F, Fut>(
        &self,
        method: &'static str,
        resource: &str,
        zone: Option<&str>,
        fate: impl Fn(Fate),
        f: F,
    ) -> Result<model::Operation>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = std::result::Result<model::Operation, google_cloud_gax::error::Error>>,
    {
        let mut backoff = self.backoff().build();
        loop {
            let op = self
                .paced(&self.writes, method, resource, || {
                    self.attempt(method, resource, f())
                })
                .await?;
            fate(Fate::Accepted);
            let op = match self.wait(method, resource, zone, op).await {
                Ok(op) => op,
                Err(e) => {
                    fate(Fate::Unknown);
                    return Err(e);
                }
            };
            let Some(err) = ComputeError::from_operation(method, resource, &op) else {
                return Ok(op);
            };
            fate(Fate::Failed);
            match backoff.next() {
                Some(delay) if err.kind().is_retryable() => {
                    tracing::debug!(method, resource, error = %err, ?delay, "operation failed; sending the mutation again");
                    tokio::time::sleep(delay).await;
                }
                _ => return Err(err),
            }
        }
    }

    /// Waits until `op` is DONE with `operations.wait` (which blocks server side for a while),
    /// pausing `poll_interval` between calls that return early.
    async fn wait(
        &self,
        method: &'static str,
        resource: &str,
        zone: Option<&str>,
        mut op: model::Operation,
    ) -> Result<model::Operation> {
        let started = Instant::now();
        // An Operation lives in the project of the resource it changes (the Shared VPC host's
        // for its firewall rules): its selfLink says which.
        let op_project = op
            .self_link
            .as_deref()
            .and_then(|l| l.find("/projects/").map(|i| &l[i + "/projects/".len()..]))
            .and_then(|rest| rest.split('/').next())
            .filter(|p| !p.is_empty())
            .unwrap_or(&self.project)
            .to_string();
        let op_zone = op
            .zone
            .as_deref()
            .map(reference::last_segment)
            .map(str::to_string)
            .or_else(|| zone.map(str::to_string));
        // Regional resources' Operations live in their region (`regionOperations`).
        let op_region = op
            .region
            .as_deref()
            .map(reference::last_segment)
            .map(str::to_string)
            .filter(|_| op_zone.is_none());
        let mut first = true;
        while op.status != Some(model::operation::Status::Done) {
            let Some(name) = op.name.clone() else {
                return Err(ComputeError::OperationTimeout {
                    method,
                    resource: resource.to_string(),
                    operation: String::new(),
                    seconds: 0,
                });
            };
            if started.elapsed() > self.operation_timeout {
                return Err(ComputeError::OperationTimeout {
                    method,
                    resource: resource.to_string(),
                    operation: name,
                    seconds: self.operation_timeout.as_secs(),
                });
            }
            if !first {
                tokio::time::sleep(self.poll_interval).await;
            }
            first = false;
            op = match (&op_zone, &op_region) {
                (None, Some(r)) => {
                    let client = self.region_operations().await?;
                    self.read("compute.regionOperations.wait", &name, || {
                        client
                            .wait()
                            .set_project(&op_project)
                            .set_region(r)
                            .set_operation(&name)
                            .with_user_agent(USER_AGENT)
                            .send()
                    })
                    .await?
                }
                (Some(z), _) => {
                    let client = self.zone_operations().await?;
                    self.read("compute.zoneOperations.wait", &name, || {
                        client
                            .wait()
                            .set_project(&op_project)
                            .set_zone(z)
                            .set_operation(&name)
                            .with_user_agent(USER_AGENT)
                            .send()
                    })
                    .await?
                }
                (None, None) => {
                    let client = self.global_operations().await?;
                    self.read("compute.globalOperations.wait", &name, || {
                        client
                            .wait()
                            .set_project(&op_project)
                            .set_operation(&name)
                            .with_user_agent(USER_AGENT)
                            .send()
                    })
                    .await?
                }
            };
        }
        Ok(op)
    }
}

#[cfg(test)]
mod insert_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;
