//! The resource types the server serves: the built-in kinds (taken from the real v1.36
//! discovery documents in `openapi/discovery/`) and the kinds of established CRDs.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// One served group/version/resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in paths, e.g. `ingresses`.
    pub plural: String,
    /// Singular name, e.g. `ingress`.
    pub singular: String,
    /// Kind, e.g. `Ingress`.
    pub kind: String,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Verbs as discovery lists them.
    pub verbs: Vec<String>,
    /// Short names (`ing`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether the `status` subresource is served.
    pub status_subresource: bool,
    /// Other subresources (e.g. `serviceaccounts/token`), as their legacy discovery entries
    /// (`name`, `group`, `version`, `kind`, `verbs`).
    pub subresources: Vec<Value>,
    /// Storage key shared by every version (and by core/v1 and events.k8s.io/v1 Events).
    pub storage: String,
    /// For CRD kinds: the CRD version object (schema, additionalPrinterColumns).
    pub crd_version: Option<Value>,
    /// For CRD kinds: the CRD's name (`plural.group`).
    pub crd_name: Option<String>,
}

impl ResourceInfo {
    /// `apiVersion` string: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or just plural for core), as error messages name resources.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Path prefix of the group version: `/api/v1` or `/apis/{group}/{version}`.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// Whether the resource is served at `{name}/{sub}` besides `status`.
    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| {
            s["name"]
                .as_str()
                .and_then(|n| n.split_once('/'))
                .is_some_and(|(_, n)| n == sub)
        })
    }

    /// Whether objects of this resource are stored (false for the create-only review and
    /// token kinds, whose answers are computed).
    pub fn is_stored(&self) -> bool {
        self.verbs.iter().any(|v| v == "get")
    }

    /// True for events.k8s.io/v1 Events, stored as core/v1 Events and converted on the way.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }
}

/// The discovery documents of the built-in group versions, trimmed to the served resources.
pub const BUILTIN_DISCOVERY: &[&str] = &[
    include_str!("../openapi/discovery/api_v1.json"),
    include_str!("../openapi/discovery/apis_admissionregistration.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_apiextensions.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_apps_v1.json"),
    include_str!("../openapi/discovery/apis_authentication.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_authorization.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_coordination.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_discovery.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_events.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_networking.k8s.io_v1.json"),
    include_str!("../openapi/discovery/apis_policy_v1.json"),
    include_str!("../openapi/discovery/apis_rbac.authorization.k8s.io_v1.json"),
];

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Parses the built-in `APIResourceList` documents into resources.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    let mut out = Vec::new();
    for doc in BUILTIN_DISCOVERY {
        let list: Value = serde_json::from_str(doc).expect("embedded discovery JSON is valid");
        let gv = list["groupVersion"].as_str().unwrap_or_default();
        let (group, version) = gv.rsplit_once('/').unwrap_or(("", gv));
        let all = list["resources"].as_array().cloned().unwrap_or_default();
        for r in &all {
            let name = r["name"].as_str().unwrap_or_default();
            if name.contains('/') {
                continue;
            }
            let status = all
                .iter()
                .any(|s| s["name"].as_str() == Some(&format!("{name}/status")));
            let storage_group = if group == "events.k8s.io" { "" } else { group };
            let prefix = format!("{name}/");
            let subresources: Vec<Value> = all
                .iter()
                .filter(|s| {
                    s["name"]
                        .as_str()
                        .and_then(|n| n.strip_prefix(&prefix))
                        .is_some_and(|sub| sub != "status")
                })
                .cloned()
                .collect();
            out.push(ResourceInfo {
                group: group.to_string(),
                version: version.to_string(),
                plural: name.to_string(),
                singular: r["singularName"].as_str().unwrap_or_default().to_string(),
                kind: r["kind"].as_str().unwrap_or_default().to_string(),
                namespaced: r["namespaced"].as_bool().unwrap_or(false),
                verbs: strings(&r["verbs"]),
                short_names: strings(&r["shortNames"]),
                categories: strings(&r["categories"]),
                status_subresource: status,
                subresources,
                storage: format!("{storage_group}/{name}"),
                crd_version: None,
                crd_name: None,
            });
        }
    }
    out
}

/// Served resources, shared between the HTTP handlers and the CRD logic. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    builtin: Arc<Vec<Arc<ResourceInfo>>>,
    crds: Arc<RwLock<BTreeMap<String, Vec<Arc<ResourceInfo>>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with the built-in resources and no CRDs.
    pub fn new() -> Self {
        Registry {
            builtin: Arc::new(builtin_resources().into_iter().map(Arc::new).collect()),
            crds: Arc::default(),
        }
    }

    /// Every served resource, built-ins first, CRD kinds sorted by CRD name.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        let mut out: Vec<_> = self.builtin.iter().cloned().collect();
        out.extend(
            self.crds
                .read()
                .expect("registry lock")
                .values()
                .flatten()
                .cloned(),
        );
        out
    }

    /// Finds the resource served at `group`/`version`/`plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.all()
            .into_iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// Whether `group`/`version` is served at all.
    pub fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.all()
            .iter()
            .any(|r| r.group == group && r.version == version)
    }

    /// Replaces the kinds served for CRD `crd_name` (an empty list stops serving them).
    pub fn set_crd(&self, crd_name: &str, resources: Vec<ResourceInfo>) {
        let mut crds = self.crds.write().expect("registry lock");
        if resources.is_empty() {
            crds.remove(crd_name);
        } else {
            crds.insert(
                crd_name.to_string(),
                resources.into_iter().map(Arc::new).collect(),
            );
        }
    }

    /// Resources served under the storage key `storage` (all versions).
    pub fn by_storage(&self, storage: &str) -> Vec<Arc<ResourceInfo>> {
        self.all()
            .into_iter()
            .filter(|r| r.storage == storage)
            .collect()
    }
}
