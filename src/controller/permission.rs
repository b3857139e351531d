//! What the user sees when IAM refuses a call: a Warning `PermissionDenied` Event on the
//! Ingress naming the permission, the resource, the operator's principal and the gcloud
//! command that grants the operator's role, as the `XPN` firewall hint names its command
//! (firewall.rs). The Compute API answers a missing permission with 403 `forbidden`:
//! "Required 'compute.backendServices.create' permission for
//! 'projects/p/global/backendServices/x'" (Compute Engine API, "Authorization"; IAM docs,
//! "Troubleshoot permission error messages").
//!
//! A refused sync is retried with a doubling delay ([`backoff`]): IAM does not change by
//! itself, so retrying every few seconds would only flood the API and the Events.

use std::time::Duration;

use crate::compute::ComputeError;

/// The role docs/install.md has the operator's account bound to, created from
/// deploy/iam/gclb-operator-role.yaml (`gcloud iam roles create gclbOperator --project=P
/// --file=deploy/iam/gclb-operator-role.yaml`).
pub const ROLE_ID: &str = "gclbOperator";

/// Event reason of the hint.
pub const REASON: &str = "PermissionDenied";

/// A refusal: the permission and the resource IAM named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// `compute.backendServices.create`.
    pub permission: String,
    /// `projects/p/global/backendServices/x`.
    pub resource: String,
}

/// The refusal in `error` or anywhere in its source chain: a [`ComputeError::Api`] with HTTP
/// 403 whose message is IAM's "Required 'PERMISSION' permission for 'RESOURCE'". A 403 for
/// the rate quota or anything else is `None`.
pub fn denied(error: &(dyn std::error::Error + 'static)) -> Option<Denied> {
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cur) = e {
        // SyncError holds its ComputeError boxed, and a Box is its own type behind `dyn Error`.
        let compute = cur
            .downcast_ref::<ComputeError>()
            .or_else(|| cur.downcast_ref::<Box<ComputeError>>().map(|b| &**b));
        if let Some(ComputeError::Api {
            status: 403,
            message,
            ..
        }) = compute
        {
            return parse(message);
        }
        e = cur.source();
    }
    None
}

/// Parses IAM's "Required 'P' permission for 'R'" (anywhere in `message`).
pub fn parse(message: &str) -> Option<Denied> {
    let rest = &message[message.find("Required '")? + "Required '".len()..];
    let (permission, rest) = rest.split_once("' permission for '")?;
    let (resource, _) = rest.split_once('\'')?;
    Some(Denied {
        permission: permission.to_string(),
        resource: resource.to_string(),
    })
}

/// The Event's text: what is missing, for whom, and the command that fixes it.
/// `principal` is `serviceAccount:EMAIL` when known ([`crate::compute::credentials::principal`]).
pub fn note(d: &Denied, principal: Option<&str>, project: &str) -> String {
    let who = principal.unwrap_or("the operator's Google service account");
    let member = principal.unwrap_or("serviceAccount:GSA_EMAIL");
    format!(
        "Permission denied: {who} lacks '{}' on '{}'. Grant the operator's role (created from deploy/iam/gclb-operator-role.yaml, docs/install.md): `gcloud projects add-iam-policy-binding {project} --member={member} --role=projects/{project}/roles/{ROLE_ID}`",
        d.permission, d.resource
    )
}

/// The delay before the `failures`-th consecutive refused sync is retried: 5 s doubling to
/// five minutes (1 -> 5 s, 2 -> 10 s, ..., 7 and more -> 300 s). A change to the Ingress
/// still triggers a sync at once.
pub fn backoff(failures: u32) -> Duration {
    let secs = 5u64.saturating_mul(1 << failures.saturating_sub(1).min(6));
    Duration::from_secs(secs.min(300))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::ErrorKind;

    #[test]
    fn a_refusal_names_permission_resource_principal_and_the_fix() {
        let api = ComputeError::Api {
            method: "compute.backendServices.insert",
            resource: "bs".into(),
            kind: ErrorKind::from_http(403, "x"),
            status: 403,
            message: "Required 'compute.backendServices.create' permission for 'projects/p1/global/backendServices/bs'".into(),
        };
        let d = denied(&api).unwrap();
        assert_eq!(d.permission, "compute.backendServices.create");
        assert_eq!(d.resource, "projects/p1/global/backendServices/bs");
        let n = note(
            &d,
            Some("serviceAccount:op@p1.iam.gserviceaccount.com"),
            "p1",
        );
        assert!(n.contains("serviceAccount:op@p1.iam.gserviceaccount.com lacks 'compute.backendServices.create' on 'projects/p1/global/backendServices/bs'"), "{n}");
        assert!(n.contains("`gcloud projects add-iam-policy-binding p1 --member=serviceAccount:op@p1.iam.gserviceaccount.com --role=projects/p1/roles/gclbOperator`"), "{n}");
        // Through a wrapping error's source chain.
        #[derive(Debug, thiserror::Error)]
        #[error("sync: {0}")]
        struct Wrap(#[source] ComputeError);
        assert_eq!(denied(&Wrap(api)), Some(d.clone()));
        // Boxed, as SyncError::Compute holds it.
        let boxed = crate::sync::SyncError::Compute {
            kind: "BackendService",
            name: "bs".into(),
            source: Box::new(ComputeError::Api {
                method: "compute.backendServices.insert",
                resource: "bs".into(),
                kind: ErrorKind::from_http(403, "x"),
                status: 403,
                message: "Required 'compute.backendServices.create' permission for 'projects/p1/global/backendServices/bs'".into(),
            }),
        };
        assert_eq!(denied(&boxed), Some(d));
        // Other 403s (the rate quota) and other statuses are not IAM refusals.
        let quota = ComputeError::Api {
            method: "compute.urlMaps.insert",
            resource: "u".into(),
            kind: ErrorKind::from_http(403, "Quota exceeded"),
            status: 403,
            message: "Quota exceeded for quota metric 'Queries'".into(),
        };
        assert_eq!(denied(&quota), None);
        assert_eq!(parse("Required 'a.b.c' permission"), None);
    }

    #[test]
    fn refused_syncs_back_off_to_five_minutes() {
        let d: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(d, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff(0).as_secs(), 5);
    }
}
