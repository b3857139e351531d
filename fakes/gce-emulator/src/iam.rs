//! Identities and the projects they may change, for Shared VPC: the credentials of a service
//! project may not write the host project's firewall, while the host project's admin may.
//!
//! `gce-emulator --iam-grant TOKEN=PROJECT[,PROJECT...]` (repeatable) says that requests whose
//! bearer token is `TOKEN` may change resources in those projects only. A mutating call such a
//! token makes elsewhere is refused as Google's IAM refuses it: 403 `forbidden`,
//! `Required 'compute.firewalls.create' permission for 'projects/host/global/firewalls/fw'`
//! (the permission is the method's, with `insert` read as `create` and `patch` as `update`, as
//! the Compute Engine IAM permission list names them). Reading is allowed everywhere (a
//! service project's identity holds Compute Network User on a Shared VPC host, which lets it
//! read the host's networks and firewall rules). Requests without a token count as the token
//! [`ANONYMOUS`]; a token without a grant is not restricted, so the emulator stays open unless
//! grants are configured.

use std::collections::BTreeMap;

use crate::errors::ApiError;

/// The token name that stands for requests without a bearer token (`--iam-grant
/// anonymous=PROJECT` restricts them, e.g. an operator run with anonymous credentials).
pub const ANONYMOUS: &str = "anonymous";

/// Errors in `--iam-grant` values.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--iam-grant {0:?}: expected TOKEN=PROJECT[,PROJECT...], e.g. host-admin-token=host-project"
)]
pub struct GrantError(pub String);

/// Which projects each restricted token may change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    by_token: BTreeMap<String, Vec<String>>,
}

impl Grants {
    /// Parses the `--iam-grant` values; a token named twice gets the union of its projects.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Grants, GrantError> {
        let mut g = Grants::default();
        for v in values {
            let v = v.as_ref();
            let (token, projects) = v.split_once('=').ok_or_else(|| GrantError(v.into()))?;
            let projects: Vec<String> = projects
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            if token.trim().is_empty() || projects.is_empty() {
                return Err(GrantError(v.into()));
            }
            g.by_token
                .entry(token.trim().to_string())
                .or_default()
                .extend(projects);
        }
        Ok(g)
    }

    /// Checks that `token` may call the mutating method `method` (`compute.firewalls.insert`)
    /// on `resource` (`projects/host/global/firewalls/fw`) in `project`.
    ///
    /// Errors: 403 `forbidden` naming the permission and the resource.
    pub fn check(
        &self,
        token: Option<&str>,
        method: &str,
        project: &str,
        resource: &str,
    ) -> Result<(), ApiError> {
        let Some(projects) = self.by_token.get(token.unwrap_or(ANONYMOUS)) else {
            return Ok(());
        };
        if projects.iter().any(|p| p == project) {
            return Ok(());
        }
        Err(ApiError::new(
            403,
            "forbidden",
            format!(
                "Required '{}' permission for '{resource}'",
                permission(method)
            ),
        ))
    }
}

/// The IAM permission a method needs: `compute.firewalls.insert` -> `compute.firewalls.create`,
/// `patch` -> `update`; project-level Shared VPC verbs are organization permissions
/// (`compute.projects.enableXpnHost` -> `compute.organizations.enableXpnHost`).
pub fn permission(method: &str) -> String {
    let (api, verb) = method.rsplit_once('.').unwrap_or((method, ""));
    let api = if api == "compute.projects" && verb.contains("Xpn") {
        "compute.organizations"
    } else {
        api
    };
    let verb = match verb {
        "insert" => "create",
        "patch" => "update",
        v => v,
    };
    format!("{api}.{verb}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_restrict_writes_to_their_projects() {
        let g = Grants::parse(&["svc-token=svc", "admin=host,svc", "svc-token=other"]).unwrap();
        let fw = "projects/host/global/firewalls/fw";
        let e = g
            .check(Some("svc-token"), "compute.firewalls.insert", "host", fw)
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (403, "forbidden"));
        assert_eq!(
            e.message,
            "Required 'compute.firewalls.create' permission for 'projects/host/global/firewalls/fw'"
        );
        assert!(g
            .check(Some("svc-token"), "compute.firewalls.insert", "other", fw)
            .is_ok());
        assert!(g
            .check(Some("admin"), "compute.firewalls.insert", "host", fw)
            .is_ok());
        // Unknown tokens and anonymous requests are not restricted.
        assert!(g
            .check(Some("x"), "compute.firewalls.insert", "host", fw)
            .is_ok());
        assert!(g
            .check(None, "compute.firewalls.delete", "host", fw)
            .is_ok());
        let anon = Grants::parse(&["anonymous=svc"]).unwrap();
        assert_eq!(
            anon.check(None, "compute.firewalls.delete", "host", fw)
                .unwrap_err()
                .code,
            403
        );
        assert!(anon
            .check(None, "compute.firewalls.delete", "svc", fw)
            .is_ok());
        assert!(Grants::parse(&["nope"]).is_err());
        assert!(Grants::parse(&["t="]).is_err());
    }

    #[test]
    fn permissions_follow_the_iam_names() {
        assert_eq!(
            permission("compute.firewalls.patch"),
            "compute.firewalls.update"
        );
        assert_eq!(
            permission("compute.globalForwardingRules.insert"),
            "compute.globalForwardingRules.create"
        );
        assert_eq!(
            permission("compute.projects.enableXpnResource"),
            "compute.organizations.enableXpnResource"
        );
        assert_eq!(
            permission("compute.networkEndpointGroups.attachNetworkEndpoints"),
            "compute.networkEndpointGroups.attachNetworkEndpoints"
        );
    }
}
