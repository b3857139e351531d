//! The permissions each Compute (and Network Services) method needs, from ONE table: deploy/iam/method-permissions.yaml,
//! the same file tests/iam_role.rs generates deploy/iam/gclb-operator-role.yaml from (Compute
//! Engine API v1 reference, each method's "IAM Permissions").
//!
//! A method's table line lists its own permissions (`compute.backendServices.create`, and for
//! firewall rules `compute.networks.updatePolicy`) and the `use` permissions of the resources
//! its request may reference (`compute.healthChecks.useReadOnly` for a backend service's
//! `healthChecks[]`). A call needs all of its own, and a `use` permission only for a resource
//! the request body does reference (any string naming `projects/P/{global|regions/R|zones/Z}/
//! COLLECTION/NAME`, or a NEG endpoint's `instance`), checked on that resource's project: a
//! Shared VPC subnetwork's `compute.subnetworks.use` is the host project's. A method without a
//! line (one the operator never calls, e.g. the local kubelet's `compute.instances.insert`)
//! needs the permission its name gives ([`crate::iam::permission`]; an Operation's `wait`
//! is its `get`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

/// The shared table, as it is in the repository.
pub const TABLE_YAML: &str = include_str!("../../../deploy/iam/method-permissions.yaml");

/// One permission a call needs: on which resource, in which project's policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needed {
    /// `compute.backendServices.create`.
    pub permission: String,
    /// `projects/p/global/backendServices/x` (the project, `projects/p`, for a list).
    pub resource: String,
    /// Whose policy decides.
    pub project: String,
}

/// Method id -> permissions, parsed once from [`TABLE_YAML`].
pub fn table() -> &'static BTreeMap<String, Vec<String>> {
    static TABLE: OnceLock<BTreeMap<String, Vec<String>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_yaml::from_str(TABLE_YAML)
            .expect("deploy/iam/method-permissions.yaml is a map of method to permissions")
    })
}

fn is_use(permission: &str) -> bool {
    permission.ends_with(".use") || permission.ends_with(".useReadOnly")
}

/// The IAM collection a resource path names: `projects/p/regions/r/healthChecks/h` ->
/// `("p", "regionHealthChecks")`, `projects/p/global/addresses/a` -> `("p", "globalAddresses")`
/// (the permission names of the Compute Engine IAM reference).
pub fn iam_collection(path: &str) -> Option<(String, String)> {
    let at = path.find("projects/")?;
    let segs: Vec<&str> = path[at..].split('/').collect();
    let project = segs.get(1)?.to_string();
    let (scope, coll) = match *segs.get(2)? {
        "global" => ("global", *segs.get(3)?),
        "regions" => ("regions", *segs.get(4)?),
        "zones" => ("zones", *segs.get(4)?),
        _ => return None,
    };
    segs.get(if scope == "global" { 4 } else { 5 })?;
    let cap = |c: &str| {
        let mut s = c.to_string();
        s[..1].make_ascii_uppercase();
        s
    };
    let name = match (scope, coll) {
        ("global", "addresses" | "forwardingRules" | "networkEndpointGroups" | "operations") => {
            format!("global{}", cap(coll))
        }
        ("global", c) => c.to_string(),
        ("regions", "addresses" | "forwardingRules" | "subnetworks") => coll.to_string(),
        ("regions", c) => format!("region{}", cap(c)),
        ("zones", "operations") => "zoneOperations".to_string(),
        (_, c) => c.to_string(),
    };
    Some((project, name))
}

/// Every resource path a request body names, with its IAM collection: `(project, collection,
/// path)`. `zone_of_target` resolves a NEG endpoint's bare `instance` name.
fn references(body: &Value, project: &str, zone: Option<&str>) -> Vec<(String, String, String)> {
    fn walk(v: &Value, key: &str, out: &mut Vec<String>, instances: &mut Vec<String>) {
        match v {
            Value::String(s) if key == "instance" && !s.contains('/') => instances.push(s.clone()),
            Value::String(s) if s.contains("projects/") => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, key, out, instances)),
            Value::Object(o) => o
                .iter()
                .filter(|(k, _)| k.as_str() != "selfLink")
                .for_each(|(k, x)| walk(x, k, out, instances)),
            _ => {}
        }
    }
    let (mut paths, mut instances) = (Vec::new(), Vec::new());
    walk(body, "", &mut paths, &mut instances);
    if let Some(z) = zone {
        paths.extend(
            instances
                .into_iter()
                .map(|i| format!("projects/{project}/zones/{z}/instances/{i}")),
        );
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let (proj, coll) = iam_collection(&p)?;
            let at = p.find("projects/").unwrap_or(0);
            Some((proj, coll, p[at..].to_string()))
        })
        .collect()
}

/// The permissions `method` (`compute.backendServices.insert`) needs on `resource` in
/// `project`, given its request `body` (JSON, `Null` without one).
pub fn needed(method: &str, project: &str, resource: &str, body: &Value) -> Vec<Needed> {
    let own = |permission: String| Needed {
        permission,
        resource: resource.to_string(),
        project: project.to_string(),
    };
    let Some(line) = table().get(method) else {
        let p = crate::iam::permission(method);
        let p = p
            .strip_suffix(".wait")
            .map_or(p.clone(), |b| format!("{b}.get"));
        return vec![own(p)];
    };
    let zone = iam_collection(resource)
        .filter(|_| resource.contains("/zones/"))
        .and_then(|_| {
            resource
                .split("/zones/")
                .nth(1)?
                .split('/')
                .next()
                .map(str::to_string)
        });
    let refs = references(body, project, zone.as_deref());
    let mut out = Vec::new();
    for p in line {
        if !is_use(p) {
            out.push(own(p.clone()));
            continue;
        }
        let coll = p.split('.').nth(1).unwrap_or_default();
        for (proj, c, path) in &refs {
            let n = Needed {
                permission: p.clone(),
                resource: path.clone(),
                project: proj.clone(),
            };
            if c == coll && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_shared_table_parses_and_names_iam_permissions() {
        let t = table();
        assert_eq!(
            t["compute.backendServices.insert"][0],
            "compute.backendServices.create"
        );
        assert!(t
            .values()
            .flatten()
            .all(|p| p.starts_with("compute.") || p.starts_with("networkservices.")));
        assert_eq!(
            t["networkservices.projects.locations.tlsRoutes.patch"],
            ["networkservices.tlsRoutes.update"]
        );
    }

    #[test]
    fn collections_follow_the_iam_names() {
        let c = |p: &str| iam_collection(p).map(|(_, c)| c);
        assert_eq!(
            c("projects/p/global/healthChecks/h").as_deref(),
            Some("healthChecks")
        );
        assert_eq!(
            c("https://compute.googleapis.com/compute/v1/projects/p/regions/r/healthChecks/h")
                .as_deref(),
            Some("regionHealthChecks")
        );
        assert_eq!(
            c("projects/p/global/addresses/a").as_deref(),
            Some("globalAddresses")
        );
        assert_eq!(
            c("projects/p/regions/r/addresses/a").as_deref(),
            Some("addresses")
        );
        assert_eq!(
            c("projects/host/regions/r/subnetworks/s"),
            Some("subnetworks".into())
        );
        assert_eq!(
            c("projects/p/zones/z/networkEndpointGroups/n").as_deref(),
            Some("networkEndpointGroups")
        );
        assert_eq!(
            c("projects/p/global/operations/o").as_deref(),
            Some("globalOperations")
        );
        assert_eq!(c("projects/p/global/networks"), None);
        assert_eq!(c("not a path"), None);
    }

    #[test]
    fn a_call_needs_its_own_permissions_and_use_of_what_it_references() {
        let bs = "projects/p1/global/backendServices/bs";
        let body = json!({
            "name": "bs",
            "selfLink": "projects/p1/global/backendServices/bs",
            "healthChecks": ["https://x/compute/v1/projects/p1/global/healthChecks/hc"],
            "backends": [{"group": "projects/p1/zones/z1/networkEndpointGroups/neg"}],
        });
        let n = needed("compute.backendServices.insert", "p1", bs, &body);
        let perms: Vec<(&str, &str)> = n
            .iter()
            .map(|n| (n.permission.as_str(), n.resource.as_str()))
            .collect();
        assert_eq!(
            perms,
            [
                ("compute.backendServices.create", bs),
                (
                    "compute.healthChecks.useReadOnly",
                    "projects/p1/global/healthChecks/hc"
                ),
                (
                    "compute.networkEndpointGroups.use",
                    "projects/p1/zones/z1/networkEndpointGroups/neg"
                ),
            ]
        );
        // Without references, only its own.
        assert_eq!(
            needed(
                "compute.backendServices.insert",
                "p1",
                bs,
                &json!({"name": "bs"})
            )
            .len(),
            1
        );
        // A Shared VPC subnetwork is used in the host project.
        let fr = needed(
            "compute.forwardingRules.insert",
            "p1",
            "projects/p1/regions/r/forwardingRules/f",
            &json!({"subnetwork": "projects/host/regions/r/subnetworks/s", "target": "projects/p1/regions/r/targetHttpProxies/t"}),
        );
        assert!(fr
            .iter()
            .any(|n| n.permission == "compute.subnetworks.use" && n.project == "host"));
        assert!(fr
            .iter()
            .any(|n| n.permission == "compute.regionTargetHttpProxies.use"));
        assert!(!fr.iter().any(|n| n.permission == "compute.addresses.use"));
        // A NEG endpoint's bare instance name is that zone's instance.
        let at = needed(
            "compute.networkEndpointGroups.attachNetworkEndpoints",
            "p1",
            "projects/p1/zones/z1/networkEndpointGroups/neg",
            &json!({"networkEndpoints": [{"instance": "node-1", "ipAddress": "127.64.0.2", "port": 80}]}),
        );
        assert_eq!(at[1].permission, "compute.instances.use");
        assert_eq!(at[1].resource, "projects/p1/zones/z1/instances/node-1");
        // Methods outside the table need their own permission by name.
        assert_eq!(
            needed(
                "compute.instances.insert",
                "p1",
                "projects/p1/zones/z/instances/i",
                &Value::Null
            )[0]
            .permission,
            "compute.instances.create"
        );
        assert_eq!(
            needed(
                "compute.zoneOperations.wait",
                "p1",
                "projects/p1/zones/z/operations/o",
                &Value::Null
            )[0]
            .permission,
            "compute.zoneOperations.get"
        );
    }
}
