//! The `scale` subresource of Deployments, ReplicaSets and StatefulSets (`kubectl scale`,
//! HorizontalPodAutoscalers): an `autoscaling/v1` `Scale` read from and written to the object's
//! `spec.replicas`, as the real server's scale REST storage does
//! (kubernetes/pkg/registry/apps/deployment/storage `ScaleREST`; reference
//! kube-api-v1.36/v3/apis_apps_v1.json, `io.k8s.api.autoscaling.v1.Scale`).
//!
//! `GET` answers `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{name, namespace,
//! uid, resourceVersion, creationTimestamp},"spec":{"replicas":N},"status":{"replicas":M,
//! "selector":"app=web"}}`; `PUT` and `PATCH` (JSON, merge or strategic merge) change only
//! `spec.replicas`, with the object's resourceVersion as precondition when the body gives one.

use axum::body::Bytes;
use http::{header, HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::response::json_response;
use crate::patch::{self, PatchType};
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::store::{Store, Writer};
use crate::table::format_label_selector;

/// The Scale of a stored object (client form).
pub fn scale_of(obj: &Value) -> Value {
    let md = &obj["metadata"];
    let mut metadata = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = md.get(f) {
            metadata[f] = v.clone();
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {
            "replicas": obj["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector_string(&obj["spec"]["selector"]),
        },
    })
}

/// The Scale's `status.selector`: the label selector in its string form, empty when none.
fn selector_string(selector: &Value) -> String {
    match format_label_selector(selector).as_str() {
        "<none>" => String::new(),
        s => s.to_string(),
    }
}

/// Serves `GET|PUT|PATCH .../{name}/scale`.
///
/// Errors: 404 when the object is missing; 400 for a body that is not a Scale or a
/// `spec.replicas` that is not a non-negative integer (`Scale.spec.replicas: Invalid value:
/// -1: must be greater than or equal to 0`, as the real validation words it); 409 on a stale
/// `metadata.resourceVersion`; 405 for other methods.
#[allow(clippy::too_many_arguments)]
pub fn serve(
    store: &Store,
    res: &ResourceInfo,
    ns: &str,
    name: &str,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
    manager: String,
) -> Result<axum::response::Response, ApiError> {
    if *method == Method::GET {
        let obj = store.get(res, ns, name)?;
        return Ok(json_response(StatusCode::OK, &scale_of(&obj)));
    }
    let kind = match *method {
        Method::PUT => None,
        Method::PATCH => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            match PatchType::from_content_type(ct)? {
                PatchType::Apply => {
                    return Err(ApiError::BadRequest(
                        "server-side apply of the scale subresource is not supported by fake-kube-apiserver; use kubectl scale".into(),
                    ))
                }
                k => Some(k),
            }
        }
        _ => return Err(ApiError::MethodNotAllowed),
    };
    let writer = Writer::update(manager);
    let updated = store.modify(res, ns, name, false, &writer, |live| {
        let current = scale_of(live);
        let wanted = match kind {
            None => serde_json::from_slice::<Value>(body).map_err(|e| {
                ApiError::BadRequest(format!("the request body is not a valid Scale: {e}"))
            })?,
            Some(kind) => patch::apply_patch(kind, &current, body, None)?,
        };
        let rv = wanted["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let replicas = &wanted["spec"]["replicas"];
        let replicas = match replicas.as_i64() {
            Some(n) if n >= 0 => n,
            Some(n) => {
                return Err(ApiError::BadRequest(format!(
                    "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {n}: must be greater than or equal to 0"
                )))
            }
            None if replicas.is_null() => 0,
            None => {
                return Err(ApiError::BadRequest(format!(
                    "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be an integer"
                )))
            }
        };
        let mut next = live.clone();
        next["spec"]["replicas"] = json!(replicas);
        if !rv.is_empty() {
            next["metadata"]["resourceVersion"] = json!(rv);
        }
        Ok(next)
    })?;
    Ok(json_response(StatusCode::OK, &scale_of(&updated)))
}
