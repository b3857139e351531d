//! The NEG health seam: which endpoints a NEG holds and how each backend service sees them.
//!
//! [`NegHealth`] is what the readiness controller needs from the Compute API; [`ComputeNegHealth`]
//! implements it with google-cloud-compute-v1:
//! - `networkEndpointGroups.listNetworkEndpoints` with body `{"healthStatus": "SHOW"}` (without it
//!   the API returns no `healths[]`; inventory section 7: GKE polls this, not
//!   `backendServices.getHealth`);
//! - `backendServices.list` to tell "no backend service health-checks this NEG" (rule 2) apart
//!   from "the health state has not arrived yet".
//!
//! A call refused with 401 builds the credentials again and is sent once more, as the Compute
//! seam does (`gclb_sync::compute::RefreshableCredentials`).

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use gclb_sync::compute::RefreshableCredentials;
use google_cloud_compute_v1::client as gc;
use google_cloud_compute_v1::model;
use google_cloud_compute_v1::model::network_endpoint_groups_list_endpoints_request::HealthStatus;
use google_cloud_gax::options::RequestOptionsBuilder as _;
use google_cloud_gax::retry_policy::NeverRetry;

/// The health state that opens the gate (Compute API `HealthStatusForNetworkEndpoint.healthState`).
pub const HEALTHY: &str = "HEALTHY";

/// A zonal NEG: `zones/{zone}/networkEndpointGroups/{name}`. Displays as its name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NegRef {
    /// Zone, e.g. `us-central1-a`.
    pub zone: String,
    /// NEG name (`k8s1-...`, from `translate::namer::backend`).
    pub name: String,
}

impl NegRef {
    /// A NEG reference.
    pub fn new(zone: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            zone: zone.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for NegRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One backend service's view of an endpoint (`healths[]` entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendHealth {
    /// Backend service name (last path segment of the reference; empty when absent).
    pub backend_service: String,
    /// `HEALTHY`, `UNHEALTHY`, `DRAINING`, `UNKNOWN` (empty when absent).
    pub health_state: String,
}

/// One network endpoint of a NEG and its health per backend service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointHealth {
    /// Endpoint IP (a Pod IP for `GCE_VM_IP_PORT` NEGs).
    pub ip_address: String,
    /// Endpoint port, when set.
    pub port: Option<i32>,
    /// Health per backend service; empty when no backend service health-checks the NEG, or the
    /// state has not arrived yet.
    pub healths: Vec<BackendHealth>,
}

/// Errors reading NEG health.
#[derive(Debug, thiserror::Error)]
pub enum NegHealthError {
    /// The client could not be built (credentials, endpoint).
    #[error("cannot build the Compute {service} client: {message}; check --compute-endpoint or Application Default Credentials")]
    ClientBuild {
        /// Which client.
        service: &'static str,
        /// Underlying error.
        message: String,
    },
    /// The API answered with an error or could not be reached.
    #[error("{method} on {resource} failed (HTTP {status:?}): {message}")]
    Api {
        /// Compute method id, e.g. `compute.networkEndpointGroups.listNetworkEndpoints`.
        method: &'static str,
        /// The resource the call was about.
        resource: String,
        /// HTTP status, `None` for transport errors.
        status: Option<u16>,
        /// Message from the API or the transport.
        message: String,
    },
}

/// What the readiness controller reads from the Compute API.
pub trait NegHealth: Send + Sync {
    /// Endpoints of one NEG with health (`listNetworkEndpoints`, `healthStatus: SHOW`), every
    /// page. `Ok(None)` when the NEG does not exist (404): not created yet in that zone.
    fn list_network_endpoints<'a>(
        &'a self,
        neg: &'a NegRef,
    ) -> BoxFuture<'a, Result<Option<Vec<EndpointHealth>>, NegHealthError>>;

    /// For each of `negs`: the names of backend services that have it as a backend and have a
    /// health check (`backendServices.list`, one call for all).
    fn backend_services_using<'a>(
        &'a self,
        negs: &'a [NegRef],
    ) -> BoxFuture<'a, Result<BTreeMap<NegRef, Vec<String>>, NegHealthError>>;
}

/// [`NegHealth`] over google-cloud-compute-v1.
pub struct ComputeNegHealth {
    project: String,
    credentials: RefreshableCredentials,
    negs: gc::NetworkEndpointGroups,
    backend_services: gc::BackendServices,
}

impl ComputeNegHealth {
    /// Builds the clients for `project`. `endpoint` is the API's host root (`http://127.0.0.1:PORT`,
    /// no `/compute/v1`; `None`: the real API; `reference/gce-clients.md`); `credentials` what
    /// they send, whatever the endpoint ([`gclb_sync::compute::CredentialsMode`]: Application
    /// Default Credentials unless anonymous is asked for). The clients' own retries are off:
    /// the controller backs off per poll.
    ///
    /// Errors: [`NegHealthError::ClientBuild`].
    pub async fn connect(
        project: &str,
        endpoint: Option<&str>,
        credentials: gclb_sync::compute::CredentialsMode,
    ) -> Result<Self, NegHealthError> {
        let refreshable = RefreshableCredentials::new(credentials).map_err(|message| {
            NegHealthError::ClientBuild {
                service: "credentials",
                message,
            }
        })?;
        let creds = refreshable.credentials();
        let mut negs = gc::NetworkEndpointGroups::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut backend_services = gc::BackendServices::builder()
            .with_credentials(creds)
            .with_retry_policy(NeverRetry);
        if let Some(endpoint) = endpoint {
            let root = endpoint.trim_end_matches('/');
            negs = negs.with_endpoint(root);
            backend_services = backend_services.with_endpoint(root);
        }
        Ok(Self {
            project: project.to_owned(),
            credentials: refreshable,
            negs: negs
                .build()
                .await
                .map_err(|e| NegHealthError::ClientBuild {
                    service: "NetworkEndpointGroups",
                    message: e.to_string(),
                })?,
            backend_services: backend_services.build().await.map_err(|e| {
                NegHealthError::ClientBuild {
                    service: "BackendServices",
                    message: e.to_string(),
                }
            })?,
        })
    }

    async fn list_endpoints(
        &self,
        neg: &NegRef,
    ) -> Result<Option<Vec<EndpointHealth>>, NegHealthError> {
        const METHOD: &str = "compute.networkEndpointGroups.listNetworkEndpoints";
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let body = model::NetworkEndpointGroupsListEndpointsRequest::new()
                .set_health_status(HealthStatus::Show);
            let page = self
                .credentials
                .retry_unauthenticated(|| {
                    self.negs
                        .list_network_endpoints()
                        .set_project(&self.project)
                        .set_zone(&neg.zone)
                        .set_network_endpoint_group(&neg.name)
                        .set_page_token(token.clone())
                        .set_body(body.clone())
                        .with_user_agent(crate::USER_AGENT)
                        .send()
                })
                .await;
            let page = match page {
                Ok(page) => page,
                Err(e) if e.http_status_code() == Some(404) => return Ok(None),
                Err(e) => return Err(api_error(METHOD, &format!("{}/{}", neg.zone, neg.name), e)),
            };
            out.extend(page.items.iter().map(endpoint_health));
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(Some(out)),
            }
        }
    }

    async fn list_backend_services(&self) -> Result<Vec<model::BackendService>, NegHealthError> {
        const METHOD: &str = "compute.backendServices.list";
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .credentials
                .retry_unauthenticated(|| {
                    self.backend_services
                        .list()
                        .set_project(&self.project)
                        .set_page_token(token.clone())
                        .with_user_agent(crate::USER_AGENT)
                        .send()
                })
                .await
                .map_err(|e| api_error(METHOD, &self.project, e))?;
            out.extend(page.items);
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(out),
            }
        }
    }
}

impl NegHealth for ComputeNegHealth {
    fn list_network_endpoints<'a>(
        &'a self,
        neg: &'a NegRef,
    ) -> BoxFuture<'a, Result<Option<Vec<EndpointHealth>>, NegHealthError>> {
        Box::pin(self.list_endpoints(neg))
    }

    fn backend_services_using<'a>(
        &'a self,
        negs: &'a [NegRef],
    ) -> BoxFuture<'a, Result<BTreeMap<NegRef, Vec<String>>, NegHealthError>> {
        Box::pin(async move {
            let services = self.list_backend_services().await?;
            Ok(health_checked_by(&services, negs))
        })
    }
}

/// PURE: for each NEG, the backend services (names) that list it in `backends[].group` and have
/// at least one health check. Groups are matched on the `zones/{zone}/networkEndpointGroups/{name}`
/// suffix, so full URLs and project paths both match.
pub fn health_checked_by(
    services: &[model::BackendService],
    negs: &[NegRef],
) -> BTreeMap<NegRef, Vec<String>> {
    negs.iter()
        .map(|neg| {
            let suffix = format!("zones/{}/networkEndpointGroups/{}", neg.zone, neg.name);
            let users = services
                .iter()
                .filter(|bs| !bs.health_checks.is_empty())
                .filter(|bs| {
                    bs.backends
                        .iter()
                        .filter_map(|b| b.group.as_deref())
                        .any(|g| g.trim_end_matches('/').ends_with(&suffix))
                })
                .map(|bs| bs.name.clone().unwrap_or_default())
                .collect();
            (neg.clone(), users)
        })
        .collect()
}

/// PURE: the wire endpoint to our shape.
pub fn endpoint_health(item: &model::NetworkEndpointWithHealthStatus) -> EndpointHealth {
    let endpoint = item.network_endpoint.as_ref();
    EndpointHealth {
        ip_address: endpoint
            .and_then(|e| e.ip_address.clone())
            .unwrap_or_default(),
        port: endpoint.and_then(|e| e.port),
        healths: item
            .healths
            .iter()
            .map(|h| BackendHealth {
                backend_service: h
                    .backend_service
                    .as_ref()
                    .and_then(|r| r.backend_service.as_deref())
                    .map(last_segment)
                    .unwrap_or_default()
                    .to_owned(),
                health_state: h
                    .health_state
                    .as_ref()
                    .and_then(|s| s.name())
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect(),
    }
}

fn last_segment(reference: &str) -> &str {
    reference
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(reference)
}

fn api_error(
    method: &'static str,
    resource: &str,
    err: google_cloud_gax::error::Error,
) -> NegHealthError {
    let message = err
        .status()
        .map(|s| s.message.clone())
        .unwrap_or_else(|| err.to_string());
    NegHealthError::Api {
        method,
        resource: resource.to_owned(),
        status: err.http_status_code(),
        message,
    }
}

#[cfg(test)]
#[path = "neg_tests.rs"]
mod tests;
