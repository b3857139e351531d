//! Backend services (`compute.backendServices`): one per Service port, shared by Ingresses.
//! Updates send the observed fingerprint (412 on a stale one; sync refetches and retries).

use google_cloud_compute_v1::model;

use std::sync::Mutex;

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
    fn take_fingerprint(&mut self, observed: &Self) {
        self.fingerprint = observed.fingerprint.clone();
    }
}

/// Inserts the backend service or updates it (PUT with fingerprint) when it differs.
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
    // Some(policy) once the service was seen existing (policy as observed).
    let seen: Mutex<Option<Option<String>>> = Mutex::new(None);
    let remember = |bs: &model::BackendService| {
        *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(bs.security_policy.clone());
    };
    let observed_policy = || {
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .flatten()
    };
    super::ensure(
        project,
        &body,
        || async {
            let found = compute.get_backend_service(name).await;
            if let Ok(Some(bs)) = &found {
                remember(bs);
            }
            found
        },
        |mut body| {
            body.security_policy = desired.security_policy.clone();
            async move { compute.insert_backend_service(&body).await }
        },
        |mut body| {
            body.security_policy = observed_policy();
            async move { compute.update_backend_service(name, &body).await }
        },
        changes,
    )
    .await?;
    let existed = seen.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    let have = observed_policy().map(|p| normalize(project, &p));
    let want = desired
        .security_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| normalize(project, p));
    if existed && have != want {
        let mut reference = model::SecurityPolicyReference::new();
        reference.security_policy = want;
        compute
            .set_backend_service_security_policy(name, &reference)
            .await
            .map_err(|e| SyncError::compute(KIND, name, e))?;
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// Deletes the backend service; gone already is fine. A `resourceInUseByAnotherResource`
/// error is returned for the caller to skip (another URL map still uses it).
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove(KIND, name, || compute.delete_backend_service(name), changes).await
}

/// Health of a backend service for the `ingress.kubernetes.io/backends` annotation: the first
/// `HEALTHY` seen across its backend groups, else the last state seen, else `Unknown` (no
/// backends, or an error) — inventory §1, ingress-gce `pkg/backends/backends.go` Health.
pub async fn health(compute: &Compute, name: &str) -> String {
    let Ok(Some(bs)) = compute.get_backend_service(name).await else {
        return "Unknown".to_string();
    };
    let mut last = None;
    for backend in &bs.backends {
        let Some(group) = backend.group.as_deref() else {
            continue;
        };
        let Ok(health) = compute.get_backend_service_health(name, group).await else {
            return "Unknown".to_string();
        };
        for status in &health.health_status {
            if let Some(state) = &status.health_state {
                let state = state.name().unwrap_or("UNKNOWN").to_string();
                if state == "HEALTHY" {
                    return state;
                }
                last = Some(state);
            }
        }
    }
    last.unwrap_or_else(|| "Unknown".to_string())
}
