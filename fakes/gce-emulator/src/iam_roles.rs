//! IAM roles: the predefined Compute Engine roles docs/install.md recommends, and custom roles
//! loaded from the YAML `gcloud iam roles create ROLE_ID --project=P --file=FILE` reads
//! (`title`, `description`, `stage`, `includedPermissions`; IAM docs, "Create and manage
//! custom roles"), so deploy/iam/gclb-operator-role.yaml loads as it is.
//!
//! A role is a list of permission patterns; `compute.urlMaps.*` stands for every permission of
//! the collection, as Google's role reference groups them ("IAM roles and permissions index",
//! Compute Engine roles, cloud.google.com/iam/docs/roles-permissions/compute). The predefined
//! lists keep only the `compute.*` permissions the emulator's methods check (iam_permissions.rs):
//! Compute Load Balancer Admin (`roles/compute.loadBalancerAdmin`: load balancer resources,
//! NEGs, addresses, certificates, SSL policies; it may use but not create Cloud Armor
//! policies, and it holds no `compute.zones.*` or `compute.regions.*`), Compute Security Admin
//! (`roles/compute.securityAdmin`: firewall rules and policies, Cloud Armor policies, global
//! and regional SSL certificates and policies, and the lists of backend services, zones,
//! regions and subnetworks), Compute Network User
//! (`roles/compute.networkUser`: use a Shared VPC host's networks and subnetworks) and Compute
//! Viewer (`roles/compute.viewer`: every get and list). `roles/compute.admin` holds every
//! `compute.*` permission (the emulator's helpers, such as the local kubelet, run with it).
//! The Network Services API's TLSRoutes need the `networkservices.*` roles
//! (`roles/networkservices.admin`, `roles/networkservices.viewer`), which no Compute role holds.

use std::collections::BTreeSet;

/// The predefined roles: `(name, title, permission patterns)`.
pub const PREDEFINED: &[(&str, &str, &[&str])] = &[
    ("roles/compute.admin", "Compute Admin", &["compute.*"]),
    (
        "roles/compute.loadBalancerAdmin",
        "Compute Load Balancer Admin",
        &[
            "compute.addresses.*",
            "compute.backendBuckets.*",
            "compute.backendServices.*",
            "compute.forwardingRules.*",
            "compute.globalAddresses.*",
            "compute.globalForwardingRules.*",
            "compute.globalNetworkEndpointGroups.*",
            "compute.globalOperations.get",
            "compute.globalOperations.list",
            "compute.healthChecks.*",
            "compute.instances.get",
            "compute.instances.list",
            "compute.instances.use",
            "compute.networkEndpointGroups.*",
            "compute.networks.get",
            "compute.networks.list",
            "compute.networks.use",
            "compute.projects.get",
            "compute.regionBackendServices.*",
            "compute.regionHealthChecks.*",
            "compute.regionNetworkEndpointGroups.*",
            "compute.regionOperations.get",
            "compute.regionOperations.list",
            "compute.regionSslCertificates.*",
            "compute.regionTargetHttpProxies.*",
            "compute.regionTargetHttpsProxies.*",
            "compute.regionUrlMaps.*",
            "compute.securityPolicies.get",
            "compute.securityPolicies.list",
            "compute.securityPolicies.use",
            "compute.sslCertificates.*",
            "compute.sslPolicies.*",
            "compute.subnetworks.get",
            "compute.subnetworks.list",
            "compute.subnetworks.use",
            "compute.targetHttpProxies.*",
            "compute.targetHttpsProxies.*",
            "compute.targetSslProxies.*",
            "compute.targetTcpProxies.*",
            "compute.urlMaps.*",
            "compute.zoneOperations.get",
            "compute.zoneOperations.list",
            "compute.instances.useReadOnly",
            "compute.regionSecurityPolicies.get",
            "compute.regionSecurityPolicies.list",
            "compute.regionSecurityPolicies.use",
            "compute.regionSslPolicies.*",
            "compute.regionTargetTcpProxies.*",
        ],
    ),
    (
        "roles/compute.securityAdmin",
        "Compute Security Admin",
        &[
            "compute.backendServices.list",
            "compute.firewallPolicies.*",
            "compute.firewalls.*",
            "compute.globalOperations.get",
            "compute.globalOperations.list",
            "compute.instances.list",
            "compute.networks.get",
            "compute.networks.list",
            "compute.networks.updatePolicy",
            "compute.projects.get",
            "compute.regionBackendServices.list",
            "compute.regionFirewallPolicies.*",
            "compute.regionOperations.get",
            "compute.regionOperations.list",
            "compute.regionSecurityPolicies.*",
            "compute.regionSslCertificates.*",
            "compute.regionSslPolicies.*",
            "compute.regions.get",
            "compute.regions.list",
            "compute.routers.get",
            "compute.routers.list",
            "compute.routes.get",
            "compute.routes.list",
            "compute.securityPolicies.*",
            "compute.sslCertificates.*",
            "compute.sslPolicies.*",
            "compute.subnetworks.get",
            "compute.subnetworks.list",
            "compute.zoneOperations.get",
            "compute.zoneOperations.list",
            "compute.zones.get",
            "compute.zones.list",
        ],
    ),
    (
        "roles/compute.networkUser",
        "Compute Network User",
        &[
            "compute.addresses.get",
            "compute.addresses.list",
            "compute.firewalls.get",
            "compute.firewalls.list",
            "compute.networks.get",
            "compute.networks.list",
            "compute.networks.use",
            "compute.projects.get",
            "compute.regions.get",
            "compute.regions.list",
            "compute.routers.get",
            "compute.routers.list",
            "compute.routes.get",
            "compute.routes.list",
            "compute.subnetworks.get",
            "compute.subnetworks.list",
            "compute.subnetworks.use",
            "compute.zones.get",
            "compute.zones.list",
        ],
    ),
    (
        "roles/compute.viewer",
        "Compute Viewer",
        &["compute.*.get", "compute.*.list", "compute.*.getHealth"],
    ),
    // The Network Services API's own roles ("Network Services roles and permissions",
    // cloud.google.com/iam/docs/roles-permissions/networkservices): the admin holds every
    // `networkservices.*` permission, the viewer every get and list. None of the Compute roles
    // above holds a `networkservices.*` permission.
    (
        "roles/networkservices.admin",
        "Network Services Admin",
        &["networkservices.*"],
    ),
    (
        "roles/networkservices.viewer",
        "Network Services Viewer",
        &["networkservices.*.get", "networkservices.*.list"],
    ),
];

/// Errors loading a custom role.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// The file is not the YAML `gcloud iam roles create --file` reads.
    #[error("custom role {role}: {message}; expected YAML with title, description, stage and includedPermissions (as deploy/iam/gclb-operator-role.yaml)")]
    Parse {
        /// The role's name.
        role: String,
        /// What was wrong.
        message: String,
    },
}

/// A custom role file (`gcloud iam roles create --file`).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleFile {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    included_permissions: Vec<String>,
}

/// A role: its title and permission patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// Human title.
    pub title: String,
    /// Permission patterns (exact names, or with `*` for one dotted segment or, last, the rest).
    pub permissions: BTreeSet<String>,
}

impl Role {
    /// Parses a custom role named `name` (`projects/P/roles/ID`) from the YAML
    /// `gcloud iam roles create --file` reads.
    ///
    /// Errors: [`RoleError::Parse`] for bad YAML, no permissions, or a permission that is not
    /// `service.resource.verb`.
    pub fn from_yaml(name: &str, yaml: &str) -> Result<Role, RoleError> {
        let err = |message: String| RoleError::Parse {
            role: name.into(),
            message,
        };
        let f: RoleFile = serde_yaml::from_str(yaml).map_err(|e| err(e.to_string()))?;
        if f.included_permissions.is_empty() {
            return Err(err("includedPermissions is empty".into()));
        }
        if let Some(bad) = f
            .included_permissions
            .iter()
            .find(|p| p.split('.').count() != 3 || p.contains('*'))
        {
            return Err(err(format!(
                "includedPermissions: {bad:?} is not a permission (service.resource.verb)"
            )));
        }
        Ok(Role {
            title: f.title.unwrap_or_else(|| name.into()),
            permissions: f.included_permissions.into_iter().collect(),
        })
    }

    /// The predefined role `name` (`roles/compute.loadBalancerAdmin`), if the emulator knows it.
    pub fn predefined(name: &str) -> Option<Role> {
        PREDEFINED
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, title, perms)| Role {
                title: (*title).into(),
                permissions: perms.iter().map(|p| p.to_string()).collect(),
            })
    }

    /// Whether the role grants `permission` (`compute.urlMaps.create`).
    pub fn grants(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| matches(p, permission))
    }
}

/// Whether pattern `p` matches `permission`: segment by segment, `*` matching any one segment,
/// and a last `*` any rest (`compute.*` matches every compute permission).
pub fn matches(p: &str, permission: &str) -> bool {
    let pat: Vec<&str> = p.split('.').collect();
    let per: Vec<&str> = permission.split('.').collect();
    for (i, seg) in pat.iter().enumerate() {
        if *seg == "*" && i == pat.len() - 1 {
            return per.len() > i;
        }
        match per.get(i) {
            Some(s) if *seg == "*" || seg == s => {}
            _ => return false,
        }
    }
    pat.len() == per.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_iam_role_loads_as_it_is() {
        let yaml = include_str!("../../../deploy/iam/gclb-operator-role.yaml");
        let role = Role::from_yaml("projects/p1/roles/gclbOperator", yaml).unwrap();
        assert_eq!(role.title, "gclb-operator");
        assert!(role.grants("compute.urlMaps.create"));
        assert!(!role.grants("compute.instances.create"));
        assert!(role.permissions.len() > 100, "{}", role.permissions.len());
        assert!(Role::from_yaml("r", "title: x\n").is_err());
        assert!(Role::from_yaml("r", "includedPermissions: [compute.*]\n").is_err());
        assert!(Role::from_yaml("r", "- not a mapping\n").is_err());
    }

    #[test]
    fn patterns_and_predefined_roles() {
        assert!(matches("compute.*", "compute.urlMaps.create"));
        assert!(matches("compute.urlMaps.*", "compute.urlMaps.create"));
        assert!(matches("compute.*.get", "compute.firewalls.get"));
        assert!(!matches("compute.*.get", "compute.firewalls.create"));
        assert!(!matches(
            "compute.urlMaps.*",
            "compute.regionUrlMaps.create"
        ));
        assert!(!matches("compute.urlMaps.get", "compute.urlMaps.get.x"));
        let lb = Role::predefined("roles/compute.loadBalancerAdmin").unwrap();
        assert!(lb.grants("compute.backendServices.create"));
        assert!(lb.grants("compute.healthChecks.useReadOnly"));
        assert!(!lb.grants("compute.firewalls.create"));
        assert!(!lb.grants("compute.securityPolicies.create"));
        // As Google's role reference lists them (checked 2026-11 against
        // cloud.google.com/iam/docs/roles-permissions/compute): no zones or regions in the
        // load balancer admin; regional certificates in the security admin.
        assert!(!lb.grants("compute.zones.list"));
        assert!(!lb.grants("compute.regions.get"));
        assert!(lb.grants("compute.securityPolicies.use"));
        let sec = Role::predefined("roles/compute.securityAdmin").unwrap();
        assert!(sec.grants("compute.regionSslCertificates.create"));
        assert!(sec.grants("compute.zones.list"));
        assert!(!sec.grants("compute.backendServices.create"));
        assert!(sec.grants("compute.firewalls.create"));
        assert!(sec.grants("compute.networks.updatePolicy"));
        let viewer = Role::predefined("roles/compute.viewer").unwrap();
        assert!(viewer.grants("compute.urlMaps.list"));
        assert!(!viewer.grants("compute.urlMaps.create"));
        assert!(Role::predefined("roles/owner").is_none());
        // TLSRoutes are the Network Services API's: its roles, not Compute's.
        assert!(!lb.grants("networkservices.tlsRoutes.create"));
        assert!(!Role::predefined("roles/compute.admin")
            .unwrap()
            .grants("networkservices.tlsRoutes.get"));
        let ns = Role::predefined("roles/networkservices.admin").unwrap();
        assert!(ns.grants("networkservices.tlsRoutes.create"));
        assert!(ns.grants("networkservices.operations.get"));
        let nsv = Role::predefined("roles/networkservices.viewer").unwrap();
        assert!(nsv.grants("networkservices.tlsRoutes.list"));
        assert!(!nsv.grants("networkservices.tlsRoutes.delete"));
    }
}
