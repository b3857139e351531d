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
//! turn; 412 `conditionNotMet` is left to `sync`, which refetches the fingerprint first. The
//! clients' own retry policy is switched off so that one place decides.
//!
//! [`state`] is the cache of what exists that `sync` reads instead of one `get` per resource.

pub mod error;
pub mod metrics;
pub mod pacing;
pub mod reference;
mod regional;
mod resources;
pub mod state;

use std::future::Future;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use google_cloud_compute_v1::client as gc;
use google_cloud_compute_v1::model;
use google_cloud_gax::options::RequestOptionsBuilder as _;
use google_cloud_gax::retry_policy::NeverRetry;

pub use error::{ComputeError, ErrorKind};
pub use metrics::ComputeMetrics;

/// Result of a Compute call.
pub type Result<T, E = ComputeError> = std::result::Result<T, E>;

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
    /// `None` means the real API with Application Default Credentials.
    pub endpoint: Option<String>,
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
            operation_poll_interval: Duration::from_millis(500),
            operation_timeout: Duration::from_secs(300),
            retry: RetrySettings::default(),
            state_max_age: Duration::from_secs(300),
        }
    }
}

struct Clients {
    url_maps: gc::UrlMaps,
    backend_services: gc::BackendServices,
    health_checks: gc::HealthChecks,
    network_endpoint_groups: gc::NetworkEndpointGroups,
    firewalls: gc::Firewalls,
    global_forwarding_rules: gc::GlobalForwardingRules,
    target_http_proxies: gc::TargetHttpProxies,
    target_https_proxies: gc::TargetHttpsProxies,
    target_tcp_proxies: gc::TargetTcpProxies,
    target_ssl_proxies: gc::TargetSslProxies,
    ssl_certificates: gc::SslCertificates,
    security_policies: gc::SecurityPolicies,
    global_addresses: gc::GlobalAddresses,
    global_operations: gc::GlobalOperations,
    zone_operations: gc::ZoneOperations,
    region_url_maps: gc::RegionUrlMaps,
    region_backend_services: gc::RegionBackendServices,
    region_health_checks: gc::RegionHealthChecks,
    region_target_http_proxies: gc::RegionTargetHttpProxies,
    region_target_https_proxies: gc::RegionTargetHttpsProxies,
    region_ssl_certificates: gc::RegionSslCertificates,
    forwarding_rules: gc::ForwardingRules,
    addresses: gc::Addresses,
    subnetworks: gc::Subnetworks,
    region_operations: gc::RegionOperations,
}

/// Typed access to the Compute API for one project. Cheap to share behind an `Arc`.
pub struct Compute {
    project: String,
    clients: Clients,
    poll_interval: Duration,
    operation_timeout: Duration,
    retry: RetrySettings,
    metrics: ComputeMetrics,
    state: state::ComputeState,
    reads: pacing::Pacer,
    writes: pacing::Pacer,
}

macro_rules! build_client {
    ($ty:ident, $config:expr, $creds:expr) => {{
        let mut builder = gc::$ty::builder()
            .with_credentials($creds.clone())
            .with_retry_policy(NeverRetry);
        if let Some(endpoint) = &$config.endpoint {
            builder = builder.with_endpoint(endpoint.trim_end_matches('/'));
        }
        builder
            .build()
            .await
            .map_err(|e| ComputeError::ClientBuild {
                service: stringify!($ty),
                message: e.to_string(),
            })?
    }};
}

impl Compute {
    /// Builds every client. With `config.endpoint` set the clients send no credentials
    /// (the emulator needs none); without it they use Application Default Credentials.
    ///
    /// Errors: [`ComputeError::ClientBuild`] when credentials cannot be found or a client fails
    /// to build.
    pub async fn new(config: ComputeConfig, metrics: ComputeMetrics) -> Result<Self> {
        let creds = if config.endpoint.is_some() {
            google_cloud_auth::credentials::anonymous::Builder::new().build()
        } else {
            google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| ComputeError::ClientBuild {
                    service: "credentials",
                    message: format!("Application Default Credentials: {e}"),
                })?
        };
        let clients = Clients {
            url_maps: build_client!(UrlMaps, config, creds),
            backend_services: build_client!(BackendServices, config, creds),
            health_checks: build_client!(HealthChecks, config, creds),
            network_endpoint_groups: build_client!(NetworkEndpointGroups, config, creds),
            firewalls: build_client!(Firewalls, config, creds),
            global_forwarding_rules: build_client!(GlobalForwardingRules, config, creds),
            target_http_proxies: build_client!(TargetHttpProxies, config, creds),
            target_https_proxies: build_client!(TargetHttpsProxies, config, creds),
            target_tcp_proxies: build_client!(TargetTcpProxies, config, creds),
            target_ssl_proxies: build_client!(TargetSslProxies, config, creds),
            ssl_certificates: build_client!(SslCertificates, config, creds),
            security_policies: build_client!(SecurityPolicies, config, creds),
            global_addresses: build_client!(GlobalAddresses, config, creds),
            global_operations: build_client!(GlobalOperations, config, creds),
            zone_operations: build_client!(ZoneOperations, config, creds),
            region_url_maps: build_client!(RegionUrlMaps, config, creds),
            region_backend_services: build_client!(RegionBackendServices, config, creds),
            region_health_checks: build_client!(RegionHealthChecks, config, creds),
            region_target_http_proxies: build_client!(RegionTargetHttpProxies, config, creds),
            region_target_https_proxies: build_client!(RegionTargetHttpsProxies, config, creds),
            region_ssl_certificates: build_client!(RegionSslCertificates, config, creds),
            forwarding_rules: build_client!(ForwardingRules, config, creds),
            addresses: build_client!(Addresses, config, creds),
            subnetworks: build_client!(Subnetworks, config, creds),
            region_operations: build_client!(RegionOperations, config, creds),
        };
        Ok(Self {
            project: config.project,
            clients,
            poll_interval: config.operation_poll_interval,
            operation_timeout: config.operation_timeout,
            retry: config.retry,
            metrics,
            state: state::ComputeState::new(config.state_max_age),
            reads: pacing::Pacer::default(),
            writes: pacing::Pacer::default(),
        })
    }

    /// The project every call targets.
    pub fn project(&self) -> &str {
        &self.project
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
    /// pacer slows down), after a jittered backoff on 5xx and transport errors.
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
        loop {
            pacer.wait_turn().await;
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
        let mut backoff = self.backoff().build();
        loop {
            let op = self
                .paced(&self.writes, method, resource, || {
                    self.attempt(method, resource, f())
                })
                .await?;
            let op = self.wait(method, resource, zone, op).await?;
            let Some(err) = ComputeError::from_operation(method, resource, &op) else {
                return Ok(op);
            };
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
                    self.read("compute.regionOperations.wait", &name, || {
                        self.clients
                            .region_operations
                            .wait()
                            .set_project(&op_project)
                            .set_region(r)
                            .set_operation(&name)
                            .with_user_agent(crate::USER_AGENT)
                            .send()
                    })
                    .await?
                }
                (Some(z), _) => {
                    self.read("compute.zoneOperations.wait", &name, || {
                        self.clients
                            .zone_operations
                            .wait()
                            .set_project(&op_project)
                            .set_zone(z)
                            .set_operation(&name)
                            .with_user_agent(crate::USER_AGENT)
                            .send()
                    })
                    .await?
                }
                (None, None) => {
                    self.read("compute.globalOperations.wait", &name, || {
                        self.clients
                            .global_operations
                            .wait()
                            .set_project(&op_project)
                            .set_operation(&name)
                            .with_user_agent(crate::USER_AGENT)
                            .send()
                    })
                    .await?
                }
            };
        }
        Ok(op)
    }
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;
