//! The verbs on resource paths: get, list, watch, create, update, patch, delete and
//! deletecollection, on objects and on their `status` subresource.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::response::Response;
use http::{header, HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::app::{App, Query, ResourcePath};
use super::response::{json_response, streaming};
use super::scale;
use crate::admission;
use crate::auth::{reviews, RequestContext};
use crate::patch::{self, apply, PatchType};
use crate::registry::ResourceInfo;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{DeleteOptions, ListOptions, Writer};
use crate::table;
use crate::validation;
use crate::watch::{self, WatchRequest};

/// Default watch timeout when the client gives none (the real server picks 30-60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

fn bool_param(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "1" || v == "true")
}

fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let parsed: Result<Value, String> = if ct.starts_with("application/yaml") {
        serde_yaml::from_slice(body).map_err(|e| e.to_string())
    } else if ct.starts_with("application/vnd.kubernetes.protobuf") {
        return crate::protobuf::decode(body);
    } else {
        serde_json::from_slice(body).map_err(|e| e.to_string())
    };
    parsed
        .map_err(|e| ApiError::BadRequest(format!("the request body is not valid JSON/YAML: {e}")))
}

/// Field manager: `fieldManager` or the first segment of the User-Agent, as the real server
/// defaults it.
fn manager(q: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    ua.split('/').next().unwrap_or("unknown").to_string()
}

fn labels_fields(q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let l = LabelSelector::parse(
        q.get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let f = FieldSelector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok((l, f))
}

fn list_kind(res: &ResourceInfo) -> String {
    format!("{}List", res.kind)
}

fn created_or_ok(
    code: StatusCode,
    obj: &Value,
    res: &ResourceInfo,
    accept: &str,
    q: &Query,
) -> Response {
    if table::wants_table(accept) {
        let rv = obj["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        return json_response(
            code,
            &table::table(
                res,
                std::slice::from_ref(obj),
                rv,
                None,
                q.get("includeObject")
                    .map(String::as_str)
                    .unwrap_or("Metadata"),
            ),
        );
    }
    json_response(code, obj)
}

fn delete_options(q: &Query, headers: &HeaderMap, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::default();
    if !body.is_empty() {
        let v = decode_body(headers, body)?;
        opts.grace_period_seconds = v["gracePeriodSeconds"].as_i64();
        opts.uid = v["preconditions"]["uid"].as_str().map(str::to_string);
        opts.resource_version = v["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        opts.propagation_policy = v["propagationPolicy"].as_str().map(str::to_string);
    }
    if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(p) = q.get("propagationPolicy") {
        opts.propagation_policy = Some(p.clone());
    }
    Ok(opts)
}

/// Runs the verb for `method` on the resource path.
#[allow(clippy::too_many_arguments)]
pub async fn dispatch(
    app: &Arc<App>,
    ctx: &RequestContext,
    method: &Method,
    rp: &ResourcePath,
    q: &Query,
    headers: &HeaderMap,
    accept: &str,
    body: Bytes,
) -> Result<Response, ApiError> {
    let registry = &app.store.registry;
    let res = registry
        .find(&rp.group, &rp.version, &rp.plural)
        .ok_or(ApiError::NoRoute)?;
    let store = &app.store;
    if !res.verbs.contains(&ctx.info.verb) && rp.subresource.is_none() {
        return Err(ApiError::MethodNotAllowed);
    }
    if reviews::serves(&res) {
        if *method != Method::POST || rp.name.is_some() {
            return Err(ApiError::MethodNotAllowed);
        }
        let ns = rp.namespace.clone().unwrap_or_default();
        let created = reviews::create(
            &app.auth,
            store,
            ctx.user(),
            &res,
            &ns,
            decode_body(headers, &body)?,
        )?;
        return Ok(json_response(StatusCode::CREATED, &created));
    }
    if let (Some("token"), Some(name)) = (rp.subresource.as_deref(), rp.name.as_deref()) {
        if !res.has_subresource("token") {
            return Err(ApiError::NoRoute);
        }
        if *method != Method::POST {
            return Err(ApiError::MethodNotAllowed);
        }
        let ns = rp.namespace.clone().unwrap_or_default();
        let token =
            reviews::token_request(&app.auth, store, &ns, name, decode_body(headers, &body)?)?;
        return Ok(json_response(StatusCode::CREATED, &token));
    }
    if let (Some("scale"), Some(name)) = (rp.subresource.as_deref(), rp.name.as_deref()) {
        if !res.has_subresource("scale") || rp.namespace.is_none() {
            return Err(ApiError::NoRoute);
        }
        let ns = rp.namespace.clone().unwrap_or_default();
        let manager = manager(q, headers);
        return scale::serve(store, &res, &ns, name, method, headers, &body, manager);
    }
    if q.get("dryRun").is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::BadRequest("dryRun is not supported by fake-kube-apiserver; run the request without --dry-run=server".into()));
    }
    let status_only = match rp.subresource.as_deref() {
        None => false,
        Some("status") if res.status_subresource || res.storage == "/namespaces" => true,
        Some(_) => return Err(ApiError::NoRoute),
    };
    if res.namespaced && rp.name.is_some() && rp.namespace.is_none() {
        return Err(ApiError::NoRoute);
    }
    let ns = if res.namespaced {
        rp.namespace.clone().unwrap_or_default()
    } else {
        String::new()
    };
    let strict = q.get("fieldValidation").is_some_and(|v| v == "Strict");
    let include = q
        .get("includeObject")
        .map(String::as_str)
        .unwrap_or("Metadata")
        .to_string();
    match (method.clone(), rp.name.as_deref()) {
        (Method::GET, name) if name.is_none() || rp.watch_prefix || bool_param(q, "watch") => {
            let (labels, mut fields) = labels_fields(q)?;
            // A watch of one object (`/watch/.../{name}`, `.../{name}?watch=1`) is a watch of the
            // collection with a metadata.name field selector, as on a real server.
            if let Some(name) = name {
                fields
                    .0
                    .push(("metadata.name".into(), true, name.to_string()));
            }
            let namespace = rp.namespace.clone().filter(|_| res.namespaced);
            if rp.watch_prefix || bool_param(q, "watch") {
                let timeout = q
                    .get("timeoutSeconds")
                    .and_then(|t| t.parse().ok())
                    .map(Duration::from_secs)
                    .unwrap_or(DEFAULT_WATCH_TIMEOUT);
                let req = WatchRequest {
                    res: res.clone(),
                    namespace,
                    labels,
                    fields,
                    resource_version: q.get("resourceVersion").cloned().unwrap_or_default(),
                    send_initial_events: bool_param(q, "sendInitialEvents"),
                    allow_bookmarks: bool_param(q, "allowWatchBookmarks"),
                    timeout,
                    table: table::wants_table(accept).then_some(include),
                };
                return Ok(streaming(watch::stream(store.clone(), req)));
            }
            let opts = ListOptions {
                namespace,
                labels,
                fields,
                limit: q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
                continue_token: q.get("continue").cloned(),
            };
            let page = store.list(&res, &opts)?;
            let rv = page.resource_version.to_string();
            if table::wants_table(accept) {
                return Ok(json_response(
                    StatusCode::OK,
                    &table::table(
                        &res,
                        &page.items,
                        &rv,
                        page.continue_token.as_deref(),
                        &include,
                    ),
                ));
            }
            let mut md = json!({"resourceVersion": rv});
            if let Some(c) = &page.continue_token {
                md["continue"] = json!(c);
                if let Some(remaining) = page.remaining {
                    md["remainingItemCount"] = json!(remaining);
                }
            }
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": list_kind(&res), "apiVersion": res.api_version(), "metadata": md, "items": page.items}),
            ))
        }
        (Method::GET, Some(name)) => {
            let obj = store.get(&res, &ns, name)?;
            Ok(created_or_ok(StatusCode::OK, &obj, &res, accept, q))
        }
        (Method::POST, None) => {
            if res.namespaced && rp.namespace.is_none() {
                return Err(ApiError::MethodNotAllowed);
            }
            let mut obj = decode_body(headers, &body)?;
            validation::decoding::check(&res, &obj, &body, app.openapi.schema_of(&res))?;
            if strict {
                validation::strict(&res, &obj, app.openapi.schema_of(&res))?;
            }
            admission::admit_create(store, &res, &ns, &mut obj)?;
            let writer = Writer::update(manager(q, headers)).with_openapi(app.openapi.clone());
            let created = store.create(&res, &ns, obj, &writer)?;
            Ok(created_or_ok(
                StatusCode::CREATED,
                &created,
                &res,
                accept,
                q,
            ))
        }
        (Method::PUT, Some(name)) => {
            let obj = decode_body(headers, &body)?;
            validation::decoding::check(&res, &obj, &body, app.openapi.schema_of(&res))?;
            if strict {
                validation::strict(&res, &obj, app.openapi.schema_of(&res))?;
            }
            let updated = store.update(
                &res,
                &ns,
                name,
                obj,
                status_only,
                &Writer::update(manager(q, headers)).with_openapi(app.openapi.clone()),
            )?;
            Ok(created_or_ok(StatusCode::OK, &updated, &res, accept, q))
        }
        (Method::PATCH, Some(name)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let kind = PatchType::from_content_type(ct)?;
            let schema = if res.crd_version.is_some() && kind == PatchType::Strategic {
                None
            } else {
                app.openapi.schema_of(&res)
            };
            if kind == PatchType::Apply {
                let manager = apply::field_manager(q)?;
                let config = apply::parse(&body, schema)?;
                if res.crd_version.is_none() {
                    apply::check_convertible(&config, schema)?;
                }
                if strict {
                    validation::strict(&res, &config, schema)?;
                }
                let sub = status_only.then_some("status");
                let writer = Writer {
                    manager: manager.clone(),
                    operation: "Apply",
                    applied: Some(config.clone()),
                    openapi: Some(app.openapi.clone()),
                };
                let force = q.get("force").map(String::as_str) == Some("true");
                let skip_status = res.status_subresource && !status_only;
                let result = store.modify(&res, &ns, name, status_only, &writer, |live| {
                    let merged = apply::merge(live, &config, &manager, sub, schema);
                    if !force {
                        crate::managed_fields::conflicts::check(
                            live,
                            &merged,
                            &manager,
                            sub,
                            schema,
                            skip_status,
                            res.crd_version.is_none(),
                        )?;
                    }
                    // Decoded into its type before defaulting, as the real server does.
                    validation::decoding::check(&res, &merged, &body, app.openapi.schema_of(&res))?;
                    Ok(merged)
                });
                return match result {
                    Err(ApiError::NotFound { .. }) if !status_only => {
                        let mut obj = config.clone();
                        crate::meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
                        admission::admit_create(store, &res, &ns, &mut obj)?;
                        let created = store.create(&res, &ns, obj, &writer)?;
                        Ok(created_or_ok(
                            StatusCode::CREATED,
                            &created,
                            &res,
                            accept,
                            q,
                        ))
                    }
                    other => Ok(created_or_ok(StatusCode::OK, &other?, &res, accept, q)),
                };
            }
            let writer = Writer::update(manager(q, headers)).with_openapi(app.openapi.clone());
            let patched = store.modify(&res, &ns, name, status_only, &writer, |live| {
                let patched = patch::apply_patch(kind, live, &body, schema)?;
                // Decoded into its type before defaulting, as the real server does: a patch
                // that makes `spec` a string is a 400, not a panic in defaulting.
                validation::decoding::check(&res, &patched, &body, app.openapi.schema_of(&res))?;
                if strict {
                    validation::strict(&res, &patched, app.openapi.schema_of(&res))?;
                }
                Ok(patched)
            })?;
            Ok(created_or_ok(StatusCode::OK, &patched, &res, accept, q))
        }
        (Method::DELETE, Some(name)) => {
            let opts = delete_options(q, headers, &body)?;
            let deleted = store.delete(&res, &ns, name, &opts)?;
            Ok(json_response(StatusCode::OK, &deleted))
        }
        (Method::DELETE, None) => {
            let (labels, fields) = labels_fields(q)?;
            let opts = delete_options(q, headers, &body)?;
            let page = store.list(
                &res,
                &ListOptions {
                    namespace: rp.namespace.clone(),
                    labels,
                    fields,
                    ..Default::default()
                },
            )?;
            let mut deleted = Vec::new();
            for item in page.items {
                let item_ns = crate::meta::str_field(&item, "namespace").to_string();
                if let Ok(d) = store.delete(&res, &item_ns, crate::meta::name(&item), &opts) {
                    deleted.push(d);
                }
            }
            let rv = store.resource_version().to_string();
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": list_kind(&res), "apiVersion": res.api_version(), "metadata": {"resourceVersion": rv}, "items": deleted}),
            ))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}
