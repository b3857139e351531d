//! CustomResourceDefinitions (apiextensions.k8s.io/v1): validation of the parts the server
//! relies on, the `status` the real apiextensions controller writes (`Established`,
//! `NamesAccepted`, `acceptedNames`, `storedVersions`), and the resources a CRD serves.

use chrono::Utc;
use serde_json::{json, Value};

use crate::meta::timestamp;
use crate::registry::ResourceInfo;

/// A CRD the server cannot serve.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CrdError {
    /// A required field is empty.
    #[error("Required value: {0} must be set")]
    Required(&'static str),
    /// `metadata.name` is not `<spec.names.plural>.<spec.group>`.
    #[error("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({expected:?})")]
    Name {
        /// The name given.
        name: String,
        /// The name expected.
        expected: String,
    },
    /// Not exactly one version has `storage: true`.
    #[error("Invalid value: must have exactly one version marked as storage version")]
    StorageVersion,
}

impl CrdError {
    /// The field path the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            CrdError::Required(f) => f,
            CrdError::Name { .. } => "metadata.name",
            CrdError::StorageVersion => "spec.versions",
        }
    }
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |cur, p| &cur[*p])
        .as_str()
        .unwrap_or_default()
}

/// Validates the CRD and writes the status the apiextensions controllers would.
///
/// Errors: [`CrdError`] for a missing group/plural/kind, a name mismatch or storage versions.
pub fn establish(crd: &mut Value) -> Result<(), CrdError> {
    let group = s(crd, &["spec", "group"]).to_string();
    let plural = s(crd, &["spec", "names", "plural"]).to_string();
    if group.is_empty() {
        return Err(CrdError::Required("spec.group"));
    }
    if plural.is_empty() {
        return Err(CrdError::Required("spec.names.plural"));
    }
    if s(crd, &["spec", "names", "kind"]).is_empty() {
        return Err(CrdError::Required("spec.names.kind"));
    }
    let expected = format!("{plural}.{group}");
    let name = s(crd, &["metadata", "name"]).to_string();
    if name != expected {
        return Err(CrdError::Name { name, expected });
    }
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(CrdError::Required("spec.versions"));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .collect();
    if storage.len() != 1 {
        return Err(CrdError::StorageVersion);
    }
    let storage_version = storage[0]["name"].clone();
    let mut names = crd["spec"]["names"].clone();
    if names["singular"].as_str().unwrap_or_default().is_empty() {
        names["singular"] = json!(s(crd, &["spec", "names", "kind"]).to_lowercase());
    }
    if names["listKind"].as_str().unwrap_or_default().is_empty() {
        names["listKind"] = json!(format!("{}List", s(crd, &["spec", "names", "kind"])));
    }
    crd["spec"]["names"] = names.clone();
    let now = timestamp(Utc::now());
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    let mut stored = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&storage_version) {
        stored.push(storage_version);
    }
    let old_conditions = crd["status"]["conditions"].clone();
    let conditions = if old_conditions.as_array().is_some_and(|c| c.len() == 2) {
        old_conditions
    } else {
        json!([
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition(
                "Established",
                "InitialNamesAccepted",
                "the initial names have been accepted"
            ),
        ])
    };
    crd["status"] =
        json!({"acceptedNames": names, "conditions": conditions, "storedVersions": stored});
    Ok(())
}

/// Storage key of the custom resources of a CRD (`group/plural`).
pub fn storage_key(crd: &Value) -> Option<String> {
    let group = s(crd, &["spec", "group"]);
    let plural = s(crd, &["spec", "names", "plural"]);
    (!group.is_empty() && !plural.is_empty()).then(|| format!("{group}/{plural}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The resources an established CRD serves: one per version with `served: true`.
pub fn served_resources(crd: &Value) -> Vec<ResourceInfo> {
    let Some(storage) = storage_key(crd) else {
        return Vec::new();
    };
    let names = &crd["spec"]["names"];
    let crd_name = s(crd, &["metadata", "name"]).to_string();
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .map(|v| ResourceInfo {
            group: s(crd, &["spec", "group"]).to_string(),
            version: v["name"].as_str().unwrap_or_default().to_string(),
            plural: names["plural"].as_str().unwrap_or_default().to_string(),
            singular: names["singular"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| names["kind"].as_str().unwrap_or_default().to_lowercase()),
            kind: names["kind"].as_str().unwrap_or_default().to_string(),
            namespaced: crd["spec"]["scope"].as_str() != Some("Cluster"),
            verbs: [
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ]
            .map(String::from)
            .to_vec(),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            status_subresource: v["subresources"].get("status").is_some(),
            subresources: Vec::new(),
            storage: storage.clone(),
            crd_version: Some(v.clone()),
            crd_name: Some(crd_name.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "backendconfigs.cloud.google.com"},
            "spec": {"group": "cloud.google.com", "scope": "Namespaced",
                "names": {"plural": "backendconfigs", "kind": "BackendConfig", "shortNames": ["bc"]},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}
        })
    }

    #[test]
    fn establish_sets_conditions_and_serves_versions() {
        let mut c = crd();
        establish(&mut c).unwrap();
        assert_eq!(c["status"]["conditions"][1]["type"], "Established");
        assert_eq!(c["status"]["storedVersions"], json!(["v1"]));
        let served = served_resources(&c);
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].short_names, vec!["bc"]);
        assert!(served[0].status_subresource && served[0].namespaced);
    }

    #[test]
    fn name_must_match_plural_and_group() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        assert!(matches!(establish(&mut c), Err(CrdError::Name { .. })));
    }
}
