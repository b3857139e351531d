//! Which Pods a controller claims (kubernetes/kubernetes `pkg/controller/controller_ref_manager.go`
//! `ClaimPods`): its own (controller reference with its uid) whose labels still match its
//! selector; orphans (no controller reference) that match, which it adopts by adding its
//! controller reference; and not the Pods of another controller. An owned Pod whose labels
//! stopped matching is released (its reference removed). An owner being deleted adopts nothing
//! and releases nothing; terminating Pods are not adopted.
//!
//! Adoption and release are merge patches of `metadata.ownerReferences` carrying the Pod's
//! `resourceVersion`, so a concurrent change makes the write fail (409) and the controller
//! retries, as upstream's patch carrying the Pod's uid does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::owner_refs::controller_uid;

/// `metav1.LabelSelectorAsSelector(...).Matches`: every `matchLabels` pair and every
/// `matchExpressions` requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`) holds. An empty
/// selector matches everything (workload validation refuses empty ones before this is asked).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs && expressions
}

/// What [`plan`] decided for an owner's Pods.
#[derive(Debug, Default)]
pub struct Claims {
    /// Pods the owner controls and keeps.
    pub owned: Vec<Arc<Pod>>,
    /// Orphans to adopt.
    pub adopt: Vec<Arc<Pod>>,
    /// Owned Pods whose labels no longer match, to release.
    pub release: Vec<Arc<Pod>>,
}

/// Sorts the Pods of `namespace` for the owner of `uid` and `selector` (`owner_deleting`: it
/// has a `deletionTimestamp`, so it neither adopts nor releases).
pub fn plan(
    pods: &Store<Pod>,
    namespace: &str,
    uid: &str,
    selector: &LabelSelector,
    owner_deleting: bool,
) -> Claims {
    let mut claims = Claims::default();
    for pod in pods.state() {
        if pod.metadata.namespace.as_deref() != Some(namespace) {
            continue;
        }
        let matches = selector_matches(selector, pod.labels());
        match controller_uid(&pod.metadata) {
            Some(owner) if owner == uid => {
                if matches || owner_deleting {
                    claims.owned.push(pod);
                } else {
                    claims.release.push(pod);
                }
            }
            Some(_) => {}
            None => {
                if matches && !owner_deleting && pod.metadata.deletion_timestamp.is_none() {
                    claims.adopt.push(pod);
                }
            }
        }
    }
    claims
}

/// Adds `reference` (a controller reference) to `pod`, keeping its other references.
///
/// Errors: the API refused the patch (409 when the Pod changed since it was read).
pub async fn adopt(
    api: &Api<Pod>,
    pod: &Pod,
    reference: &OwnerReference,
    field_manager: &str,
) -> Result<Pod, kube::Error> {
    let mut refs = pod.owner_references().to_vec();
    refs.push(reference.clone());
    write_refs(api, pod, refs, field_manager).await
}

/// Removes the reference to owner `uid` from `pod`.
///
/// Errors: the API refused the patch (404 when the Pod is gone is the caller's to ignore).
pub async fn release(
    api: &Api<Pod>,
    pod: &Pod,
    uid: &str,
    field_manager: &str,
) -> Result<Pod, kube::Error> {
    let refs: Vec<OwnerReference> = pod
        .owner_references()
        .iter()
        .filter(|r| r.uid != uid)
        .cloned()
        .collect();
    write_refs(api, pod, refs, field_manager).await
}

async fn write_refs(
    api: &Api<Pod>,
    pod: &Pod,
    refs: Vec<OwnerReference>,
    field_manager: &str,
) -> Result<Pod, kube::Error> {
    let refs = if refs.is_empty() {
        json!(null)
    } else {
        json!(refs)
    };
    let patch = json!({"metadata": {
        "ownerReferences": refs,
        "resourceVersion": pod.metadata.resource_version,
    }});
    let params = PatchParams {
        field_manager: Some(field_manager.into()),
        ..PatchParams::default()
    };
    api.patch(&pod.name_any(), &params, &Patch::Merge(patch))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let selector: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "legacy", "operator": "DoesNotExist"}]}))
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(selector_matches(
            &selector,
            &labels(&[("app", "web"), ("tier", "a")])
        ));
        assert!(!selector_matches(
            &selector,
            &labels(&[("app", "web"), ("tier", "c")])
        ));
        assert!(!selector_matches(&selector, &labels(&[("app", "web")])));
        assert!(!selector_matches(
            &selector,
            &labels(&[("app", "web"), ("tier", "b"), ("legacy", "")])
        ));
        assert!(!selector_matches(&selector, &labels(&[("tier", "a")])));
    }
}
