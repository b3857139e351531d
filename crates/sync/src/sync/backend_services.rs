//! Backend services (`compute.backendServices`): one per Service port, shared by Ingresses.
//! Updates send the observed fingerprint (412 on a stale one; sync refetches and retries).
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional BackendServices (`compute.regionBackendServices`) of internal load balancers: the global file's
//! get -> compare -> insert/update, in a region, without the global state cache (an internal
//! Ingress reads its few regional resources once per sync).

use std::borrow::Cow;

use google_cloud_compute_v1::model;
use sha2::{Digest as _, Sha256};

use super::{record, Action, Changes, Managed, SyncError};
use crate::compute::reference::normalize;
use crate::compute::Compute;

/// Event kind.
pub const KIND: &str = "BackendService";

impl Managed for model::BackendService {
    const KIND: &'static str = KIND;
    const CLEARABLE: &'static [&'static str] = &["backends", "healthChecks"];
    fn resource_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    /// The fingerprint, and the observed security policy too: an update (PUT) must not drop a
    /// policy behind `setSecurityPolicy`'s back.
    fn take_fingerprint(&mut self, observed: &Self) {
        self.fingerprint = observed.fingerprint.clone();
        self.security_policy = observed.security_policy.clone();
    }
    const FINGERPRINTED: bool = true;
    fn has_fingerprint(&self) -> bool {
        self.fingerprint.as_ref().is_some_and(|f| !f.is_empty())
    }
    fn clear_fingerprint(&mut self) {
        self.fingerprint = None;
    }
    /// `iap.oauth2ClientSecret` is input only: Compute Engine never returns it and serves
    /// `iap.oauth2ClientSecretSha256`, the SHA-256 of the secret in lowercase hex, instead
    /// (Compute API v1 reference, `BackendServiceIAP`). GKE compares that hash to tell whether
    /// the credentials changed (ingress-gce `pkg/backends/features/iap.go`); so do we.
    fn as_served(&self) -> Cow<'_, Self> {
        let Some(secret) = self
            .iap
            .as_ref()
            .and_then(|i| i.oauth_2_client_secret.as_ref())
        else {
            return Cow::Borrowed(self);
        };
        let hash = hex::encode(Sha256::digest(secret));
        let mut served = self.clone();
        if let Some(iap) = served.iap.as_mut() {
            iap.oauth_2_client_secret = None;
            iap.oauth_2_client_secret_sha_256 = Some(hash);
        }
        Cow::Owned(served)
    }
}

/// Inserts the backend service or updates it (PUT with fingerprint) when it differs (observed
/// from the state cache; see [`super::ensure_observed`]).
///
/// `securityPolicy` is managed apart, as GKE does, through `setSecurityPolicy`: `None` means
/// no policy (an attached one is removed), a name attaches that policy. An update carries the
/// observed policy so a PUT never drops it behind our back; a new service gets it on insert.
pub async fn ensure(
    compute: &Compute,
    desired: &model::BackendService,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    let project = compute.project();
    let mut body = desired.clone();
    body.security_policy = None;
    super::ensure_observed(
        compute,
        &body,
        |mut body| async move {
            body.security_policy = desired.security_policy.clone();
            compute.insert_backend_service(&body).await.map(|()| body)
        },
        |body| async move {
            compute
                .update_backend_service(name, &body)
                .await
                .map(|()| body)
        },
        changes,
    )
    .await?;
    let err = |e| SyncError::compute(KIND, name, e);
    let Some(observed) = compute
        .observed::<model::BackendService>(name)
        .await
        .map_err(err)?
    else {
        return Ok(());
    };
    let have = observed
        .security_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| normalize(project, p));
    let want = desired
        .security_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| normalize(project, p));
    if have != want {
        let mut reference = model::SecurityPolicyReference::new();
        reference.security_policy = want.clone();
        compute
            .set_backend_service_security_policy(name, &reference)
            .await
            .map_err(err)?;
        let mut now = (*observed).clone();
        now.security_policy = want;
        now.clear_fingerprint();
        compute.record(name, Some(now));
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// Deletes the backend service when it is known to exist; gone already is fine. A
/// `resourceInUseByAnotherResource` error is returned for the caller to skip (another URL map
/// still uses it).
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::BackendService, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_backend_service(name),
        changes,
    )
    .await
}

/// Health of a backend service for the `ingress.kubernetes.io/backends` annotation: the first
/// `HEALTHY` seen across its backend groups, else the last state seen, else `Unknown` (no
/// backends, or an error) — inventory §1, ingress-gce `pkg/backends/backends.go` Health.
/// The backend service comes from the state cache; only `getHealth` is read, per group.
pub async fn health(compute: &Compute, name: &str) -> String {
    let Ok(Some(bs)) = compute.observed::<model::BackendService>(name).await else {
        return "Unknown".to_string();
    };
    health_of(&bs, |group| async move {
        compute.get_backend_service_health(name, &group).await
    })
    .await
}

/// What [`health`] and [`health_regional`] answer for the backend service `bs`, whose groups'
/// health `get_health` reads (one `getHealth` call per backend group).
async fn health_of<F, Fut>(bs: &model::BackendService, get_health: F) -> String
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = crate::compute::Result<model::BackendServiceGroupHealth>>,
{
    let mut last = None;
    for group in bs.backends.iter().filter_map(|b| b.group.as_deref()) {
        let Ok(health) = get_health(group.to_string()).await else {
            return "Unknown".to_string();
        };
        for state in health
            .health_status
            .iter()
            .filter_map(|s| s.health_state.as_ref())
        {
            let state = state.name().unwrap_or("UNKNOWN").to_string();
            if state == "HEALTHY" {
                return state;
            }
            last = Some(state);
        }
    }
    last.unwrap_or_else(|| "Unknown".to_string())
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the resource in `region` or updates it when a managed field differs.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::BackendService,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure(
        compute.project(),
        desired,
        || compute.get_region_backend_service(region, name),
        |body| async move { compute.insert_region_backend_service(region, &body).await },
        |body| async move {
            compute
                .update_region_backend_service(region, name, &body)
                .await
        },
        changes,
    )
    .await
}

/// Deletes the resource from `region`; a 404 counts as done.
pub async fn delete_regional(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_backend_service(region, name),
        changes,
    )
    .await
}

/// Health of the regional backend service `name` of `region`, as [`health`] (read with `get`,
/// not from the state cache; `compute.regionBackendServices.getHealth` per group).
pub async fn health_regional(compute: &Compute, region: &str, name: &str) -> String {
    let Ok(Some(bs)) = compute.get_region_backend_service(region, name).await else {
        return "Unknown".to_string();
    };
    health_of(&bs, |group| async move {
        compute
            .get_region_backend_service_health(region, name, &group)
            .await
    })
    .await
}
