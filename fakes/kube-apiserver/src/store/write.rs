//! Writes: create, update (whole object or `status` only) and read-modify-write for patches,
//! with the API conventions' rules (names, generateName, uid, generation, creationTimestamp,
//! optimistic concurrency, status subresource separation, finalizers on objects being deleted),
//! the namespace checks, defaulting, custom resource validation, and CRD registration.

use chrono::Utc;
use serde_json::{json, Value};
use std::sync::MutexGuard;

use super::deletion::ready_to_remove;
use super::names::{new_uid, random_suffix};
use super::{invalid, not_found, ChangeType, Inner, Store, Writer};
use crate::crd_validation::FieldError;
use crate::crds;
use crate::managed_fields;
use crate::meta::{self, finalizers, metadata_mut, timestamp};
use crate::registry::ResourceInfo;
use crate::status::ApiError;

/// Structural defaulting of a custom resource from its CRD version's schema `default`s.
fn default_custom(res: &ResourceInfo, obj: &mut Value) {
    if let Some(schema) = res
        .crd_version
        .as_ref()
        .and_then(|v| v["schema"].get("openAPIV3Schema"))
    {
        crate::crd_validation::apply_defaults(obj, schema);
    }
}

/// `Ok` when `causes` is empty, else 422 `Invalid` naming `Kind.group "name"` with one cause
/// per field error.
fn refuse(kind: &str, group: &str, name: &str, causes: Vec<FieldError>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::InvalidFields {
        kind: kind.to_string(),
        name: name.to_string(),
        group: group.to_string(),
        causes,
    })
}

/// Schema validation of a custom resource against its CRD version's `openAPIV3Schema`
/// (see [`crate::crd_validation`]), then its transition rules against the stored object `old`
/// (`None` on create; see [`crate::crd_transition_rules`]).
///
/// Errors: 422 `Invalid` with one cause per field error.
fn validate_custom(
    res: &ResourceInfo,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(schema) = res
        .crd_version
        .as_ref()
        .and_then(|v| v["schema"].get("openAPIV3Schema"))
    else {
        return Ok(());
    };
    let mut causes = crate::crd_validation::validate(obj, schema);
    causes.extend(crate::crd_transition_rules::validate(obj, old, schema));
    refuse(&res.kind, &res.group, name, causes)
}

/// Value validation of every kind's metadata and of a built-in kind's contents and update rules
/// (see [`crate::validation::builtin`]): a create when `old` is `None`.
///
/// Errors: 422 `Invalid` with one cause per field error.
fn validate_builtin(
    res: &ResourceInfo,
    ns: &str,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
    status_only: bool,
) -> Result<(), ApiError> {
    let spec_changed = old.is_none_or(|old| {
        spec_part(obj) != spec_part(old) || obj.get("status") != old.get("status")
    });
    let causes = crate::validation::builtin::validate(res, ns, obj, old, status_only, spec_changed);
    // events.k8s.io Events are stored as core Events: the real server names them `Event`.
    let group = if res.is_events_v1() { "" } else { &res.group };
    refuse(&res.kind, group, name, causes)
}

/// A CRD's schema `default`s (see [`crate::crd_defaults`]).
///
/// Errors: 422 `Invalid` naming each bad default.
fn crd_defaults(res: &ResourceInfo, name: &str, crd: &Value) -> Result<(), ApiError> {
    refuse(
        &res.kind,
        &res.group,
        name,
        crate::crd_defaults::errors(crd),
    )
}

/// Everything but `metadata` and `status`: a change here bumps `metadata.generation`.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// The object a `/status` write stores, as each kind's status strategy `PrepareForUpdate`
/// makes it (k8s v1.28 `pkg/registry/*/strategy.go`). Built-in kinds keep the written
/// `metadata` (labels, annotations, finalizers: glbc sends its finalizer and annotations this
/// way) and reset everything else but `status` to the stored object (`Spec = oldSpec`); Pods
/// also keep their stored `ownerReferences`, Deployments their stored labels. Custom resources
/// keep only the written `status` (apiextensions' `customresource/status_strategy.go` copies
/// the old object). The fields no write may change (uid, creationTimestamp, deletionTimestamp,
/// generation, ...) are restored by the caller for every write.
fn status_write(res: &ResourceInfo, old: &Value, new: Value) -> Value {
    let mut r = old.clone();
    let status = new.get("status").cloned().unwrap_or(Value::Null);
    if res.crd_name.is_none() {
        if let Some(md) = new.get("metadata") {
            r["metadata"] = md.clone();
        }
        let md = metadata_mut(&mut r);
        match res.kind.as_str() {
            "Pod" => match old["metadata"].get("ownerReferences") {
                Some(v) => md.insert("ownerReferences".into(), v.clone()),
                None => md.remove("ownerReferences"),
            },
            "Deployment" => match old["metadata"].get("labels") {
                Some(v) => md.insert("labels".into(), v.clone()),
                None => md.remove("labels"),
            },
            _ => None,
        };
    }
    r["status"] = status;
    if r["status"].is_null() {
        r.as_object_mut().expect("object").remove("status");
    }
    r
}

impl Store {
    /// `POST`: creates `obj` (client form) in `ns`.
    ///
    /// Errors: 422 for a missing/invalid name, 404 for a missing namespace, 409 AlreadyExists,
    /// 400 when the body's namespace differs from the URL's.
    pub fn create(
        &self,
        res: &ResourceInfo,
        ns: &str,
        obj: Value,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        let mut obj = Self::to_storage(res, obj);
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} create must be a JSON object",
                res.kind
            )));
        }
        let now = Utc::now();
        let md = metadata_mut(&mut obj);
        let body_ns = md
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if res.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest("the namespace of the provided object does not match the namespace sent on the request".into()));
        }
        let mut name = md
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            let prefix = md
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if prefix.is_empty() {
                return Err(invalid(
                    res,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", random_suffix());
        }
        let name_errors = crate::validation::names::check(res, &name, false);
        if !name_errors.is_empty() {
            // As `ValidateObjectMetaAccessor`: the `generateName` errors, then the name's.
            let generate = md
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut causes: Vec<FieldError> = Vec::new();
            if !generate.is_empty() {
                for m in crate::validation::names::check(res, &generate, true) {
                    causes.push(FieldError {
                        reason: "FieldValueInvalid",
                        field: "metadata.generateName".into(),
                        message: format!("Invalid value: {generate:?}: {m}"),
                    });
                }
            }
            causes.extend(name_errors.into_iter().map(|m| FieldError {
                reason: "FieldValueInvalid",
                field: "metadata.name".into(),
                message: format!("Invalid value: {name:?}: {m}"),
            }));
            return Err(ApiError::InvalidFields {
                kind: res.kind.clone(),
                name: name.clone(),
                group: res.group.clone(),
                causes,
            });
        }
        md.insert("name".into(), json!(name));
        if res.namespaced {
            md.insert("namespace".into(), json!(ns));
        } else {
            md.remove("namespace");
        }
        md.insert("uid".into(), json!(new_uid()));
        md.insert("creationTimestamp".into(), json!(timestamp(now)));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "resourceVersion",
        ] {
            md.remove(f);
        }
        if obj.get("spec").is_some() || res.crd_name.is_some() {
            metadata_mut(&mut obj).insert("generation".into(), json!(1));
        } else {
            metadata_mut(&mut obj).remove("generation");
        }
        if res.status_subresource && res.storage != "/namespaces" {
            obj.as_object_mut().expect("object").remove("status");
        }
        crate::defaults::apply(res, &mut obj, None);
        default_custom(res, &mut obj);
        validate_custom(res, &name, &obj, None)?;
        validate_builtin(res, ns, &name, &obj, None, false)?;
        let api_version = res.api_version();
        let write = managed_fields::Write {
            writer,
            api_version: &api_version,
            subresource: None,
            schema: writer.openapi.as_deref().and_then(|o| o.schema_of(res)),
            skip_status: res.status_subresource,
            builtin: res.crd_version.is_none(),
        };
        managed_fields::record(&mut obj, None, &write, now);
        let mut inner = self.lock();
        self.check_namespace(&inner, res, ns)?;
        let key = (res.storage.clone(), ns.to_string(), name.clone());
        if inner.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                resource: res.qualified(),
                name,
                group: res.group.clone(),
            });
        }
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" {
            crd_defaults(res, &name, &obj)?;
            crds::establish(&mut obj).map_err(|e| invalid(res, &name, e.field(), e.to_string()))?;
        }
        let stored = self.commit(&mut inner, ChangeType::Added, res, ns, &name, obj, None);
        self.attempt_to_delete(&mut inner, &key, false);
        self.sync_crd(&inner, res, &stored);
        if res.storage == "/namespaces" {
            self.namespace_created(&mut inner, &name);
        }
        Ok(Self::present(res, &stored))
    }

    /// `PUT` (or the result of a patch): replaces the object, or only its status when
    /// `status_only` (the `/status` subresource).
    ///
    /// Errors: 404, 409 Conflict on a stale `metadata.resourceVersion`, 400 on a name mismatch,
    /// 422 when adding finalizers to an object being deleted.
    pub fn update(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        obj: Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        let new = Self::to_storage(res, obj);
        let mut inner = self.lock();
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, name))?;
        self.update_locked(&mut inner, res, ns, name, old, new, status_only, writer)
    }

    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        old: Value,
        mut new: Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} update must be a JSON object",
                res.kind
            )));
        }
        let body_rv = meta::str_field(&new, "resourceVersion").to_string();
        if !body_rv.is_empty() && body_rv != meta::str_field(&old, "resourceVersion") {
            return Err(ApiError::Conflict {
                resource: res.qualified(),
                name: name.to_string(),
                group: res.group.clone(),
                message: "the object has been modified; please apply your changes to the latest version and try again".into(),
            });
        }
        let body_name = meta::name(&new);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut result = if status_only {
            status_write(res, &old, new)
        } else {
            if res.status_subresource {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        new.as_object_mut().expect("object").remove("status");
                    }
                }
            }
            new
        };
        {
            let old_md = &old["metadata"];
            let md = metadata_mut(&mut result);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "generateName",
            ] {
                match old_md.get(f) {
                    Some(v) => md.insert(f.into(), v.clone()),
                    None => md.remove(f),
                };
            }
            md.insert("resourceVersion".into(), old_md["resourceVersion"].clone());
            md.insert(
                "managedFields".into(),
                old_md.get("managedFields").cloned().unwrap_or(json!([])),
            );
        }
        if old["metadata"]["deletionTimestamp"].is_string() {
            let before = finalizers(&old);
            let added: Vec<String> = finalizers(&result)
                .into_iter()
                .filter(|f| !before.contains(f))
                .map(|f| format!("{f:?}"))
                .collect();
            if !added.is_empty() {
                // Reported twice, as the real server's generic update and the strategy's
                // ValidateUpdate both run ValidateObjectMetaUpdate (the message shows it once).
                let cause = FieldError {
                    reason: "FieldValueForbidden",
                    field: "metadata.finalizers".into(),
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added.join(", ")
                    ),
                };
                return Err(ApiError::InvalidFields {
                    kind: res.kind.clone(),
                    name: name.to_string(),
                    group: res.group.clone(),
                    causes: vec![cause.clone(), cause],
                });
            }
        }
        crate::defaults::apply(res, &mut result, Some(&old));
        default_custom(res, &mut result);
        // Metadata-only writes (finalizer removal, labels) never fail on stored contents, like
        // the real server's validation ratcheting of unchanged fields; metadata is always
        // validated.
        if spec_part(&result) != spec_part(&old) || result.get("status") != old.get("status") {
            validate_custom(res, name, &result, Some(&old))?;
        }
        validate_builtin(res, ns, name, &result, Some(&old), status_only)?;
        if spec_part(&result) != spec_part(&old) && old["metadata"].get("generation").is_some() {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            metadata_mut(&mut result).insert("generation".into(), json!(g));
        }
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" && !status_only {
            crd_defaults(res, name, &result)?;
            crds::establish(&mut result)
                .map_err(|e| invalid(res, name, e.field(), e.to_string()))?;
        }
        if result == old {
            return Ok(Self::present(res, &old));
        }
        let api_version = res.api_version();
        let write = managed_fields::Write {
            writer,
            api_version: &api_version,
            subresource: status_only.then_some("status"),
            schema: writer.openapi.as_deref().and_then(|o| o.schema_of(res)),
            skip_status: res.status_subresource && !status_only,
            builtin: res.crd_version.is_none(),
        };
        managed_fields::record(&mut result, Some(&old), &write, Utc::now());
        let remove = ready_to_remove(&result, chrono::Duration::zero());
        let stored = self.commit(
            inner,
            ChangeType::Modified,
            res,
            ns,
            name,
            result,
            Some(old),
        );
        let stored = if remove {
            self.remove_locked(inner, res, ns, name, stored)
        } else {
            stored
        };
        self.sync_crd(inner, res, &stored);
        Ok(Self::present(res, &stored))
    }

    /// Read-modify-write used by patches: `f` gets the current object (client form) and returns
    /// the new one, which is then written like an update with the current resourceVersion
    /// unless the patch set one.
    ///
    /// Errors: 404 when missing (unless `create` gives an object to create), and whatever `f`
    /// or the update returns.
    pub fn modify<F>(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        status_only: bool,
        writer: &Writer,
        f: F,
    ) -> Result<Value, ApiError>
    where
        F: FnOnce(&Value) -> Result<Value, ApiError>,
    {
        let mut inner = self.lock();
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, name))?;
        let new = Self::to_storage(res, f(&Self::present(res, &old))?);
        self.update_locked(&mut inner, res, ns, name, old, new, status_only, writer)
    }

    /// Keeps the registry in step with CRDs after a CRD write.
    pub(super) fn sync_crd(&self, inner: &Inner, res: &ResourceInfo, obj: &Value) {
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" {
            let exists = inner.objects.contains_key(&(
                res.storage.clone(),
                String::new(),
                meta::name(obj).to_string(),
            ));
            let served = if exists {
                crds::served_resources(obj)
            } else {
                Vec::new()
            };
            self.registry.set_crd(meta::name(obj), served);
        }
    }
}
