//! Who may do what: each project's IAM policy (bindings of members to roles, IAM docs
//! "Understanding allow policies") and the custom roles defined in projects.
//!
//! Members are written as IAM writes them: `serviceAccount:EMAIL`, `user:EMAIL`, `allUsers`
//! (everyone, with or without a token) and `allAuthenticatedUsers`. Roles are predefined
//! (`roles/compute.loadBalancerAdmin`, iam_roles.rs) or custom (`projects/P/roles/ID`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::iam_roles::Role;

/// Errors of policy changes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// A binding names a role that is neither predefined nor defined in a project.
    #[error("role {0:?} does not exist: use a predefined role (roles/compute.loadBalancerAdmin, roles/compute.securityAdmin, roles/compute.networkUser, roles/compute.viewer, roles/compute.admin, roles/networkservices.admin, roles/networkservices.viewer) or define projects/P/roles/ID first (PUT /_emulator/iam/projects/P/roles/ID with the role's YAML)")]
    UnknownRole(String),
    /// A member that is not `serviceAccount:`, `user:`, `allUsers` or `allAuthenticatedUsers`.
    #[error("member {0:?}: expected serviceAccount:EMAIL, user:EMAIL, allUsers or allAuthenticatedUsers")]
    BadMember(String),
}

/// Custom roles and each project's bindings.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    custom: BTreeMap<String, Role>,
    /// project -> role -> members.
    bindings: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Policy {
    /// Defines (or replaces) custom role `name` (`projects/P/roles/ID`).
    pub fn define_role(&mut self, name: &str, role: Role) {
        self.custom.insert(name.to_string(), role);
    }

    /// The role `name`, predefined or custom.
    pub fn role(&self, name: &str) -> Option<Role> {
        Role::predefined(name).or_else(|| self.custom.get(name).cloned())
    }

    /// Binds `member` to `role` in `project` (`gcloud projects add-iam-policy-binding`).
    ///
    /// Errors: [`PolicyError`] for an unknown role or a malformed member.
    pub fn grant(&mut self, project: &str, member: &str, role: &str) -> Result<(), PolicyError> {
        if self.role(role).is_none() {
            return Err(PolicyError::UnknownRole(role.into()));
        }
        let ok = matches!(member, "allUsers" | "allAuthenticatedUsers")
            || ["serviceAccount:", "user:", "group:"]
                .iter()
                .any(|p| member.strip_prefix(p).is_some_and(|e| e.contains('@')));
        if !ok {
            return Err(PolicyError::BadMember(member.into()));
        }
        self.bindings
            .entry(project.into())
            .or_default()
            .entry(role.into())
            .or_default()
            .insert(member.into());
        Ok(())
    }

    /// Removes the binding; `true` if it existed (`remove-iam-policy-binding`).
    pub fn revoke(&mut self, project: &str, member: &str, role: &str) -> bool {
        let Some(roles) = self.bindings.get_mut(project) else {
            return false;
        };
        let removed = roles.get_mut(role).is_some_and(|m| m.remove(member));
        roles.retain(|_, m| !m.is_empty());
        removed
    }

    /// Replaces a project's bindings (`setIamPolicy`).
    ///
    /// Errors: the first bad binding's [`PolicyError`]; nothing changes then.
    pub fn set_bindings(
        &mut self,
        project: &str,
        bindings: &[(String, Vec<String>)],
    ) -> Result<(), PolicyError> {
        let mut next = self.clone();
        next.bindings.remove(project);
        for (role, members) in bindings {
            for m in members {
                next.grant(project, m, role)?;
            }
        }
        *self = next;
        Ok(())
    }

    /// The project's policy in the Resource Manager shape:
    /// `{"bindings": [{"role", "members": [...]}], "etag", "version": 1}`.
    pub fn policy_json(&self, project: &str) -> Value {
        let bindings: Vec<Value> = self
            .bindings
            .get(project)
            .into_iter()
            .flatten()
            .map(|(role, members)| json!({"role": role, "members": members}))
            .collect();
        // The etag changes with the bindings (read-modify-write clients send it back).
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&Value::Array(bindings.clone()).to_string(), &mut h);
        let etag = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            std::hash::Hasher::finish(&h).to_be_bytes(),
        );
        json!({"version": 1, "etag": etag, "bindings": bindings})
    }

    /// Whether `member` (`serviceAccount:EMAIL`, or `None` for a request without a token)
    /// holds `permission` in `project` through any binding.
    pub fn allows(&self, project: &str, member: Option<&str>, permission: &str) -> bool {
        let Some(roles) = self.bindings.get(project) else {
            return false;
        };
        roles.iter().any(|(role, members)| {
            let applies = members.contains("allUsers")
                || member.is_some_and(|m| {
                    members.contains(m) || members.contains("allAuthenticatedUsers")
                });
            applies && self.role(role).is_some_and(|r| r.grants(permission))
        })
    }

    /// The projects that have bindings.
    pub fn projects(&self) -> Vec<String> {
        self.bindings.keys().cloned().collect()
    }

    /// The roles `member` holds in `project`, each with the binding member that gives it
    /// (`member` itself, `allUsers` or `allAuthenticatedUsers`): `(role, via)`.
    pub fn roles_of(&self, project: &str, member: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (role, members) in self.bindings.get(project).into_iter().flatten() {
            let via = [member, "allAuthenticatedUsers", "allUsers"]
                .into_iter()
                .filter(|m| *m != "allAuthenticatedUsers" || member != "allUsers")
                .find(|m| members.contains(*m));
            if let Some(via) = via {
                out.push((role.clone(), via.to_string()));
            }
        }
        out
    }

    /// The permissions `member` holds in `project` through its roles ([`Self::roles_of`]),
    /// each role's patterns expanded against `known` (every permission the emulator checks:
    /// `compute.*` lists each compute permission of `known`); a pattern that matches none of
    /// `known` is listed as it is.
    pub fn permissions_of(
        &self,
        project: &str,
        member: &str,
        known: &BTreeSet<String>,
    ) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (role, _) in self.roles_of(project, member) {
            let Some(role) = self.role(&role) else {
                continue;
            };
            for pattern in &role.permissions {
                let hits: Vec<&String> = known
                    .iter()
                    .filter(|k| crate::iam_roles::matches(pattern, k))
                    .collect();
                match hits.is_empty() {
                    true => {
                        out.insert(pattern.clone());
                    }
                    false => out.extend(hits.into_iter().cloned()),
                }
            }
        }
        out
    }

    /// Every permission a custom role names (for [`Self::permissions_of`]'s `known`).
    pub fn custom_permissions(&self) -> BTreeSet<String> {
        self.custom
            .values()
            .flat_map(|r| r.permissions.iter().cloned())
            .collect()
    }

    /// Who may do what, for the dashboard and `GET /_emulator/iam`: custom roles with their
    /// permissions, and each project's bindings.
    pub fn summary(&self) -> Value {
        let roles: BTreeMap<&String, Value> = self
            .custom
            .iter()
            .map(|(n, r)| {
                (
                    n,
                    json!({"title": r.title, "includedPermissions": r.permissions}),
                )
            })
            .collect();
        let projects: BTreeMap<&String, Value> = self
            .bindings
            .keys()
            .map(|p| (p, self.policy_json(p)["bindings"].clone()))
            .collect();
        json!({"customRoles": roles, "projects": projects})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_grant_by_role_per_project() {
        let mut p = Policy::default();
        let sa = "serviceAccount:op@p1.iam.gserviceaccount.com";
        assert!(!p.allows("p1", Some(sa), "compute.urlMaps.get"));
        assert_eq!(
            p.grant("p1", sa, "projects/p1/roles/gclbOperator"),
            Err(PolicyError::UnknownRole(
                "projects/p1/roles/gclbOperator".into()
            ))
        );
        let role = Role::from_yaml("r", "includedPermissions: [compute.urlMaps.get]").unwrap();
        p.define_role("projects/p1/roles/gclbOperator", role);
        p.grant("p1", sa, "projects/p1/roles/gclbOperator").unwrap();
        assert!(p.allows("p1", Some(sa), "compute.urlMaps.get"));
        assert!(!p.allows("p1", Some(sa), "compute.urlMaps.create"));
        assert!(!p.allows("host", Some(sa), "compute.urlMaps.get"));
        assert!(!p.allows("p1", Some("serviceAccount:x@y"), "compute.urlMaps.get"));
        assert!(!p.allows("p1", None, "compute.urlMaps.get"));
        p.grant("p1", sa, "roles/compute.loadBalancerAdmin")
            .unwrap();
        assert!(p.allows("p1", Some(sa), "compute.urlMaps.create"));
        assert!(p.revoke("p1", sa, "roles/compute.loadBalancerAdmin"));
        assert!(!p.revoke("p1", sa, "roles/compute.loadBalancerAdmin"));
        assert!(!p.allows("p1", Some(sa), "compute.urlMaps.create"));
        assert_eq!(
            p.grant("p1", "op@x", "roles/compute.viewer"),
            Err(PolicyError::BadMember("op@x".into()))
        );
        p.grant("p1", "allUsers", "roles/compute.viewer").unwrap();
        assert!(p.allows("p1", None, "compute.firewalls.list"));
        let json = p.policy_json("p1");
        assert_eq!(json["bindings"].as_array().unwrap().len(), 2);
        p.set_bindings("p1", &[("roles/compute.viewer".into(), vec![sa.into()])])
            .unwrap();
        assert!(!p.allows("p1", None, "compute.firewalls.list"));
        assert!(p.allows("p1", Some(sa), "compute.firewalls.list"));
        assert!(p
            .set_bindings("p1", &[("roles/nope".into(), vec![sa.into()])])
            .is_err());
        assert!(p.allows("p1", Some(sa), "compute.firewalls.list"));
    }

    #[test]
    fn a_members_permissions_expand_its_roles() {
        let mut p = Policy::default();
        let sa = "serviceAccount:op@p1.iam.gserviceaccount.com";
        let role = Role::from_yaml("r", "includedPermissions: [compute.urlMaps.get]").unwrap();
        p.define_role("projects/p1/roles/r", role);
        p.grant("p1", sa, "projects/p1/roles/r").unwrap();
        p.grant("p1", "allUsers", "roles/networkservices.viewer")
            .unwrap();
        let known: BTreeSet<String> = [
            "compute.urlMaps.get",
            "compute.urlMaps.create",
            "networkservices.tlsRoutes.get",
            "networkservices.tlsRoutes.create",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            p.roles_of("p1", sa),
            [
                ("projects/p1/roles/r".to_string(), sa.to_string()),
                ("roles/networkservices.viewer".into(), "allUsers".into())
            ]
        );
        let got = p.permissions_of("p1", sa, &known);
        assert_eq!(
            got.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "compute.urlMaps.get",
                "networkservices.*.list",
                "networkservices.tlsRoutes.get"
            ]
        );
        assert!(p.revoke("p1", sa, "projects/p1/roles/r"));
        assert!(!p
            .permissions_of("p1", sa, &known)
            .contains("compute.urlMaps.get"));
        assert!(p.roles_of("p2", sa).is_empty());
    }
}
