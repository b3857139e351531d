//! The Network Services API seam: `projects.locations.tlsRoutes` through Google's Rust client
//! `google-cloud-networkservices-v1`, with the same conventions as [`crate::compute::Compute`]:
//! `get` returns `Ok(None)` for 404, `delete` returns `Ok(false)` when already gone, mutations
//! wait for their long-running Operation and turn a failed one into an error. Errors are
//! [`ComputeError`]s so that sync treats both APIs alike.
//!
//! Endpoint: the real API, or `{endpoint}/networkservices` when the operator runs against the
//! emulator (`--compute-endpoint`), which serves the API under that prefix. Credentials:
//! `--compute-credentials` ([`crate::compute::CredentialsMode`]), whatever the endpoint. A call
//! refused with 401 (a revoked or forgotten token) builds the credentials again and is sent
//! once more, as the Compute seam does; a second 401 is the call's error
//! ([`RefreshableCredentials::retry_unauthenticated`]).

use std::time::{Duration, Instant};

use google_cloud_networkservices_v1::client::NetworkServices;
use google_cloud_networkservices_v1::model::TlsRoute;

use crate::compute::{ComputeError, ErrorKind, RefreshableCredentials};

/// Typed access to the tlsRoutes of one project's global location.
pub struct NetworkServicesApi {
    client: NetworkServices,
    credentials: RefreshableCredentials,
    project: String,
    poll: Duration,
    timeout: Duration,
}

type Result<T> = std::result::Result<T, ComputeError>;

fn op_error(
    method: &'static str,
    resource: &str,
    status: &google_cloud_rpc::model::Status,
) -> ComputeError {
    let http = match status.code {
        5 => 404,
        6 => 409,
        7 => 403,
        8 => 429,
        9 => 412,
        13 | 14 => 503,
        16 => 401,
        _ => 400,
    };
    ComputeError::Api {
        method,
        resource: resource.to_string(),
        kind: ErrorKind::from_http(http, &status.message),
        status: http,
        message: status.message.clone(),
    }
}

impl NetworkServicesApi {
    /// A client for `project`. `endpoint`: the emulator's host root (`http://127.0.0.1:PORT`),
    /// or `None` for the real API; `credentials`: what the client sends, whatever the endpoint.
    ///
    /// Errors: [`ComputeError::ClientBuild`] when credentials cannot be found.
    pub async fn new(
        project: &str,
        endpoint: Option<&str>,
        credentials: crate::compute::CredentialsMode,
    ) -> Result<Self> {
        let creds = RefreshableCredentials::new(credentials).map_err(|message| {
            ComputeError::ClientBuild {
                service: "credentials",
                message,
            }
        })?;
        Self::with_credentials(project, endpoint, creds).await
    }

    /// [`Self::new`] with credentials of the caller's (a test's counted builder, or the
    /// credentials the Compute client holds).
    ///
    /// Errors: [`ComputeError::ClientBuild`] when the client does not build.
    pub async fn with_credentials(
        project: &str,
        endpoint: Option<&str>,
        credentials: RefreshableCredentials,
    ) -> Result<Self> {
        let mut builder = NetworkServices::builder()
            .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
            .with_credentials(credentials.credentials());
        if let Some(e) = endpoint {
            builder = builder.with_endpoint(format!("{}/networkservices", e.trim_end_matches('/')));
        }
        let client = builder
            .build()
            .await
            .map_err(|e| ComputeError::ClientBuild {
                service: "NetworkServices",
                message: e.to_string(),
            })?;
        Ok(Self {
            client,
            credentials,
            project: project.to_owned(),
            poll: Duration::from_millis(200),
            timeout: Duration::from_secs(300),
        })
    }

    fn parent(&self) -> String {
        format!("projects/{}/locations/global", self.project)
    }

    /// The full name of route `id`.
    pub fn name(&self, id: &str) -> String {
        format!("{}/tlsRoutes/{id}", self.parent())
    }

    /// `tlsRoutes.get`; `None` on 404.
    pub async fn get(&self, id: &str) -> Result<Option<TlsRoute>> {
        let name = self.name(id);
        let got = self
            .credentials
            .retry_unauthenticated(|| self.client.get_tls_route().set_name(&name).send())
            .await;
        match got {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                let e = ComputeError::from_gax(
                    "networkservices.projects.locations.tlsRoutes.get",
                    id,
                    e,
                );
                if e.is_not_found() {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// `tlsRoutes.list`, every page.
    pub async fn list(&self) -> Result<Vec<TlsRoute>> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .credentials
                .retry_unauthenticated(|| {
                    self.client
                        .list_tls_routes()
                        .set_parent(self.parent())
                        .set_page_token(token.clone())
                        .send()
                })
                .await
                .map_err(|e| {
                    ComputeError::from_gax(
                        "networkservices.projects.locations.tlsRoutes.list",
                        "",
                        e,
                    )
                })?;
            out.extend(page.tls_routes);
            if page.next_page_token.is_empty() {
                return Ok(out);
            }
            token = page.next_page_token;
        }
    }

    /// `tlsRoutes.create` with id `id`, waiting for the Operation.
    pub async fn create(&self, id: &str, route: &TlsRoute) -> Result<()> {
        let method = "networkservices.projects.locations.tlsRoutes.create";
        let op = self
            .credentials
            .retry_unauthenticated(|| {
                self.client
                    .create_tls_route()
                    .set_parent(self.parent())
                    .set_tls_route_id(id)
                    .set_tls_route(route.clone())
                    .send()
            })
            .await
            .map_err(|e| ComputeError::from_gax(method, id, e))?;
        self.wait(method, id, op).await
    }

    /// `tlsRoutes.patch` of the rules, target proxies and description of route `id`.
    pub async fn update(&self, id: &str, route: &TlsRoute) -> Result<()> {
        let method = "networkservices.projects.locations.tlsRoutes.patch";
        let mut body = route.clone();
        body.name = self.name(id);
        let mask = google_cloud_wkt::FieldMask::default().set_paths([
            "rules",
            "target_proxies",
            "description",
        ]);
        let op = self
            .credentials
            .retry_unauthenticated(|| {
                self.client
                    .update_tls_route()
                    .set_tls_route(body.clone())
                    .set_update_mask(mask.clone())
                    .send()
            })
            .await
            .map_err(|e| ComputeError::from_gax(method, id, e))?;
        self.wait(method, id, op).await
    }

    /// `tlsRoutes.delete`; `Ok(false)` when it was already gone.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        let method = "networkservices.projects.locations.tlsRoutes.delete";
        let sent = self
            .credentials
            .retry_unauthenticated(|| {
                self.client
                    .delete_tls_route()
                    .set_name(self.name(id))
                    .send()
            })
            .await
            .map_err(|e| ComputeError::from_gax(method, id, e));
        match sent {
            Ok(op) => self.wait(method, id, op).await.map(|()| true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn wait(
        &self,
        method: &'static str,
        id: &str,
        mut op: google_cloud_longrunning::model::Operation,
    ) -> Result<()> {
        let started = Instant::now();
        while !op.done {
            if started.elapsed() > self.timeout {
                return Err(ComputeError::OperationTimeout {
                    method,
                    resource: id.to_string(),
                    operation: op.name.clone(),
                    seconds: self.timeout.as_secs(),
                });
            }
            tokio::time::sleep(self.poll).await;
            let name = op.name.clone();
            op = self
                .credentials
                .retry_unauthenticated(|| self.client.get_operation().set_name(&name).send())
                .await
                .map_err(|e| {
                    ComputeError::from_gax(
                        "networkservices.projects.locations.operations.get",
                        id,
                        e,
                    )
                })?;
        }
        match &op.result {
            Some(google_cloud_longrunning::model::operation::Result::Error(status)) => {
                Err(op_error(method, id, status))
            }
            _ => Ok(()),
        }
    }
}
