//! ControllerRevisions of StatefulSets and DaemonSets (kubernetes/kubernetes
//! `pkg/controller/history`, and each controller's `getPatch`/`ApplyRevision`): one revision
//! per Pod template an owner has had, named `<owner>-<hash>`, owned by it (`controller: true`),
//! with the template's labels, `data` = `{"spec":{"template":{..., "$patch":"replace"}}}` and a
//! `revision` number; a template equal to an older revision's (a rollback) renumbers that
//! revision as the newest instead of creating one. `kubectl rollout history` reads them.
//!
//! Simplified: the hash is [`pod_template_hash`] of the template (FNV-1a, not upstream's hash of
//! the serialized patch), so the names differ from a real cluster's; hash collisions are not
//! resolved with `collisionCount` (a different template under an existing name reuses it).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::deployment_util::pod_template_hash;
use super::owner_refs::{controller_ref, controller_uid};

/// The label naming a Pod's revision: the ControllerRevision's name on StatefulSet Pods, its
/// hash on DaemonSet Pods (as upstream labels them).
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// One revision of an owner's Pod template.
#[derive(Clone, Debug, PartialEq)]
pub struct Revision {
    /// `<owner>-<hash>`.
    pub name: String,
    /// The hash alone.
    pub hash: String,
    /// The revision number (1 for the first template).
    pub number: i64,
    /// The template it records.
    pub template: PodTemplateSpec,
}

/// The revision of a ControllerRevision (`None` when its data holds no template).
pub fn revision_of(cr: &ControllerRevision) -> Option<Revision> {
    let mut template = cr.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    let name = cr.name_any();
    let hash = cr
        .labels()
        .get(CONTROLLER_REVISION_HASH)
        .cloned()
        .unwrap_or_else(|| name.rsplit('-').next().unwrap_or_default().to_string());
    Some(Revision {
        name,
        hash,
        number: cr.revision,
        template: serde_json::from_value(template).ok()?,
    })
}

/// The ControllerRevisions owned (as controller) by the owner of `uid` in `namespace`, oldest
/// revision first.
pub fn owned_revisions(
    store: &Store<ControllerRevision>,
    namespace: &str,
    uid: &str,
) -> Vec<Arc<ControllerRevision>> {
    let mut owned: Vec<Arc<ControllerRevision>> = store
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace))
        .filter(|r| controller_uid(&r.metadata) == Some(uid))
        .collect();
    owned.sort_by_key(|r| r.revision);
    owned
}

/// The revision of `template` for `owner`: the owned one of the same name, renumbered as the
/// newest when it is not (a rollback), or a new ControllerRevision numbered after the newest.
///
/// Errors: the API refused the create or patch (409 on create is resolved by reading it).
pub async fn ensure_revision<K>(
    api: &Api<ControllerRevision>,
    owner: &K,
    owned: &[Arc<ControllerRevision>],
    template: &PodTemplateSpec,
    field_manager: &str,
) -> Result<Revision, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let hash = pod_template_hash(template, None);
    let name = format!(
        "{}-{hash}",
        owner.meta().name.as_deref().unwrap_or_default()
    );
    let newest = owned.iter().map(|r| r.revision).max().unwrap_or(0);
    let revision = Revision {
        name: name.clone(),
        hash: hash.clone(),
        number: newest + 1,
        template: template.clone(),
    };
    if let Some(existing) = owned.iter().find(|r| r.name_any() == name) {
        if existing.revision == newest {
            return Ok(Revision {
                number: newest,
                ..revision
            });
        }
        let params = PatchParams {
            field_manager: Some(field_manager.into()),
            ..PatchParams::default()
        };
        let patched = api
            .patch(
                &name,
                &params,
                &Patch::Merge(json!({"revision": newest + 1})),
            )
            .await?;
        return Ok(Revision {
            number: patched.revision,
            ..revision
        });
    }
    let mut data = json!({"spec": {"template": template}});
    data["spec"]["template"]["$patch"] = json!("replace");
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), hash);
    let cr = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: owner.meta().namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![controller_ref(owner)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision: newest + 1,
    };
    let params = PostParams {
        field_manager: Some(field_manager.into()),
        ..PostParams::default()
    };
    match api.create(&params, &cr).await {
        Ok(created) => Ok(Revision {
            number: created.revision,
            ..revision
        }),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let found = api.get(&name).await?;
            Ok(Revision {
                number: found.revision,
                ..revision
            })
        }
        Err(e) => Err(e),
    }
}

/// Deletes the oldest owned revisions beyond `limit` (`revisionHistoryLimit`) that are not
/// in `live` (the current and update revisions and those of live Pods), as upstream's
/// `truncateHistory` does. Errors are logged, not returned: history is best effort.
pub async fn truncate_history(
    api: &Api<ControllerRevision>,
    owned: &[Arc<ControllerRevision>],
    live: &[&str],
    limit: i32,
) {
    let old: Vec<&Arc<ControllerRevision>> = owned
        .iter()
        .filter(|r| !live.contains(&r.name_any().as_str()))
        .collect();
    let surplus = old
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    for cr in old.into_iter().take(surplus) {
        if let Err(error) = api.delete(&cr.name_any(), &DeleteParams::default()).await {
            tracing::debug!(%error, revision = %cr.name_any(), "cannot delete old ControllerRevision");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_reads_back_the_template_it_recorded() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "agnhost:2.52"}]}}))
        .unwrap();
        let mut data = json!({"spec": {"template": template}});
        data["spec"]["template"]["$patch"] = json!("replace");
        let cr = ControllerRevision {
            metadata: ObjectMeta {
                name: Some("db-7b9f".into()),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(data)),
            revision: 3,
        };
        let r = revision_of(&cr).unwrap();
        assert_eq!(
            (r.name.as_str(), r.hash.as_str(), r.number),
            ("db-7b9f", "7b9f", 3)
        );
        assert_eq!(r.template, template);
    }
}
