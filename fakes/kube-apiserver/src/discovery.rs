//! Discovery documents (`/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`), in
//! the legacy shapes and in aggregated discovery (`apidiscovery.k8s.io/v2`), which kubectl 1.32
//! asks for first. Built from the [`Registry`], so CRD kinds appear and disappear with their CRD.
//! Shapes follow the captured documents in `/work/shared/reference/kube-api-v1.36/discovery/`.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::registry::{Registry, ResourceInfo};

/// The media type of aggregated discovery responses.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `/version`, from the captured v1.36.2 server.
pub const VERSION: &str = include_str!("../openapi/discovery/version.json");

/// Whether an `Accept` header asks for aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("g=apidiscovery.k8s.io") && first.contains("v=v2"))
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first, then others
/// alphabetically (the ordering of `version.CompareKubeAwareVersionStrings`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = |s: &str| s.parse::<i64>().ok();
        if let Some(rest) = v.strip_prefix('v') {
            let (major, tail) = rest.split_at(
                rest.find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len()),
            );
            if let Some(major) = parse(major) {
                if tail.is_empty() {
                    return (0, -major, 0, String::new());
                }
                if let Some(minor) = tail.strip_prefix("beta").and_then(parse) {
                    return (1, -major, -minor, String::new());
                }
                if let Some(minor) = tail.strip_prefix("alpha").and_then(parse) {
                    return (2, -major, -minor, String::new());
                }
            }
        }
        (3, 0, 0, v.to_string())
    }
    key(a).cmp(&key(b))
}

/// Groups (excluding core) with their versions in priority order.
fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in registry.all() {
        if r.group.is_empty() {
            continue;
        }
        let versions = out.entry(r.group.clone()).or_default();
        if !versions.contains(&r.version) {
            versions.push(r.version.clone());
        }
    }
    for versions in out.values_mut() {
        versions.sort_by(|a, b| compare_versions(a, b));
    }
    out
}

/// `GET /api` (legacy `APIVersions`).
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `GET /apis` (legacy `APIGroupList`).
pub fn api_group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = groups(registry)
        .into_iter()
        .map(|(name, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": vs, "preferredVersion": vs[0].clone()})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}` (legacy `APIGroup`), or `None` when the group is not served.
pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let versions = groups(registry).remove(group)?;
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs, "preferredVersion": vs[0].clone()}),
    )
}

/// kube-apiserver's `storageVersionHash` (apiserver `discovery.StorageVersionHash`): the
/// base64 of the first 8 bytes of SHA-256 of `group/version/kind` of the storage version.
/// Resources that are not stored (reviews, bindings, component statuses) have none; nor do
/// custom resources here (a simplification: a real server hashes their storage version).
fn storage_version_hash(r: &ResourceInfo) -> Option<String> {
    use base64::Engine as _;
    use sha2::Digest as _;
    if r.crd_version.is_some()
        || !r.verbs.iter().any(|v| v == "list")
        || r.plural == "componentstatuses"
    {
        return None;
    }
    let storage_group = r.storage.split_once('/').map_or("", |(g, _)| g);
    let digest = sha2::Sha256::digest(format!("{storage_group}/{}/{}", r.version, r.kind));
    Some(base64::engine::general_purpose::STANDARD.encode(&digest[..8]))
}

fn legacy_entry(r: &ResourceInfo) -> Value {
    let mut e = json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": r.verbs,
    });
    if let Some(hash) = storage_version_hash(r) {
        e["storageVersionHash"] = json!(hash);
    }
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    e
}

/// `GET /api/v1` or `/apis/{group}/{version}` (legacy `APIResourceList`), or `None`.
pub fn api_resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(legacy_entry(r));
        // A resource's subresources follow it in name order, as kube-apiserver lists them
        // (`deployments/scale` before `deployments/status`).
        let mut subresources = r.subresources.clone();
        if r.status_subresource {
            subresources.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        subresources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        resources.extend(subresources);
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let kind = json!({"group": "", "version": "", "kind": r.kind});
    let mut e = json!({
        "resource": r.plural, "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular, "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    let mut subresources = Vec::new();
    if r.status_subresource {
        subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    for s in &r.subresources {
        let name = s["name"]
            .as_str()
            .and_then(|n| n.split_once('/'))
            .map(|(_, n)| n);
        subresources.push(json!({
            "subresource": name,
            "responseKind": {"group": s["group"].as_str().unwrap_or_default(),
                "version": s["version"].as_str().unwrap_or_default(), "kind": s["kind"]},
            "verbs": s["verbs"],
        }));
    }
    if !subresources.is_empty() {
        e["subresources"] = json!(subresources);
    }
    e
}

fn aggregated_group(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let all = registry.all();
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = all
                .iter()
                .filter(|r| r.group == group && &r.version == v)
                .map(|r| aggregated_resource(r))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({"metadata": metadata, "versions": vs})
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`.
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(registry, "", &["v1".to_string()])]
    } else {
        groups(registry)
            .iter()
            .map(|(g, vs)| aggregated_group(registry, g, vs))
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_matches_kubernetes() {
        let mut v = vec!["v1beta1", "foo", "v1", "v2alpha1", "v2", "v1beta2"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v2alpha1", "foo"]);
    }

    #[test]
    fn builtin_discovery_has_real_short_names() {
        let registry = Registry::new();
        let ing = registry
            .find("networking.k8s.io", "v1", "ingresses")
            .expect("ingresses served");
        assert_eq!(ing.short_names, vec!["ing"]);
        assert!(ing.status_subresource);
        let list = api_resource_list(&registry, "", "v1").expect("core served");
        assert!(list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods/status"));
    }
}
