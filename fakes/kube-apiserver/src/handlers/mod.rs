//! HTTP routing: authentication, discovery, OpenAPI and the resource paths
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, with `namespaces/{ns}/` and `/status`).

mod app;
mod objects;
mod response;
mod scale;

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use crate::auth::audit::AuditRecord;
use crate::auth::RequestContext;
use crate::discovery;
use crate::status::ApiError;

pub use app::{parse_resource_path, App, Query, ResourcePath};
pub use response::{json_response, streaming};

fn parse_query(uri: &Uri) -> Query {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// Handles one request (after TLS): authentication, impersonation and authorization (see
/// [`crate::auth`]), then the route; the audit log gets one line. Never fails: errors become
/// `Status` responses.
pub async fn handle(
    app: Arc<App>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    peer: Option<std::net::SocketAddr>,
) -> Response {
    let path = uri.path().to_string();
    let started = std::time::Instant::now();
    let received = chrono::Utc::now();
    let (ctx, checked) = app.auth.check(&app.store, &method, &uri, &headers);
    let result = match (checked, &ctx) {
        (Ok(()), Some(ctx)) => route(&app, ctx, &method, &uri, &headers, body).await,
        (Err(e), _) => Err(e),
        (Ok(()), None) => Err(ApiError::Unauthorized),
    };
    let (response, error) = match result {
        Ok(r) => (r, None),
        Err(e) => (e.clone().into_response(), Some(e)),
    };
    if let Some(log) = &app.auth.audit {
        let method_lower = method.as_str().to_ascii_lowercase();
        log.write(&AuditRecord {
            ctx: ctx.as_ref(),
            request_uri: uri.path_and_query().map(|p| p.as_str()).unwrap_or(&path),
            method: &method_lower,
            source_ip: peer.map(|p| p.ip().to_string()),
            user_agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
            code: response.status().as_u16(),
            error: error.as_ref(),
            received,
            watch: ctx.as_ref().is_some_and(|c| c.info.verb == "watch"),
        });
    }
    tracing::debug!(%method, path, status = response.status().as_u16(), user = ctx.as_ref().map(|c| c.user().name.as_str()).unwrap_or(""), elapsed_ms = started.elapsed().as_millis() as u64, "request");
    response
}

async fn route(
    app: &Arc<App>,
    ctx: &RequestContext,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let path = uri.path();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let registry = &app.store.registry;
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if *method == Method::GET {
        let discovery_doc =
            |aggregated: Option<Value>, legacy: Option<Value>| -> Result<Response, ApiError> {
                if let (Some(doc), true) = (aggregated, discovery::wants_aggregated(accept)) {
                    let body = serde_json::to_vec(&doc).unwrap_or_default();
                    return Ok((
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)],
                        body,
                    )
                        .into_response());
                }
                legacy
                    .map(|l| json_response(StatusCode::OK, &l))
                    .ok_or(ApiError::NoRoute)
            };
        match segs.as_slice() {
            ["version"] => {
                return Ok((
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    discovery::VERSION,
                )
                    .into_response())
            }
            ["healthz"] | ["livez"] | ["readyz"] => {
                return Ok((StatusCode::OK, "ok").into_response())
            }
            ["api"] => {
                return discovery_doc(
                    Some(discovery::aggregated(registry, true)),
                    Some(discovery::api_versions(&app.server_address)),
                )
            }
            ["apis"] => {
                return discovery_doc(
                    Some(discovery::aggregated(registry, false)),
                    Some(discovery::api_group_list(registry)),
                )
            }
            ["api", v] => {
                return discovery_doc(None, discovery::api_resource_list(registry, "", v))
            }
            ["apis", g] => return discovery_doc(None, discovery::api_group(registry, g)),
            ["apis", g, v] => {
                return discovery_doc(None, discovery::api_resource_list(registry, g, v))
            }
            ["openapi", "v3"] => {
                return Ok(json_response(StatusCode::OK, &app.openapi.index(registry)))
            }
            ["openapi", "v3", rest @ ..] => {
                let doc = app
                    .openapi
                    .document(registry, &rest.join("/"))
                    .ok_or(ApiError::NoRoute)?;
                return Ok((
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    doc,
                )
                    .into_response());
            }
            ["openapi", "v2"] => {
                use crate::openapi_v2::{negotiate, V2Format};
                let format = negotiate(accept).ok_or_else(|| {
                    ApiError::NotAcceptable(format!(
                        "only the following media types are accepted: application/json, {}",
                        crate::openapi_v2::PROTOBUF
                    ))
                })?;
                let doc = app.openapi.v2.document(registry);
                if format == V2Format::Protobuf {
                    return Ok((
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, crate::openapi_v2::PROTOBUF)],
                        crate::openapi_v2::from_json::encode(&doc),
                    )
                        .into_response());
                }
                return Ok(json_response(StatusCode::OK, &doc));
            }
            _ => {}
        }
    }
    let rp = parse_resource_path(app, path).ok_or(ApiError::NoRoute)?;
    let query = parse_query(uri);
    let watch = rp.watch_prefix || query.get("watch").is_some_and(|w| w == "1" || w == "true");
    let response = objects::dispatch(app, ctx, method, &rp, &query, headers, accept, body).await?;
    // Objects and lists in protobuf when the client lists it first (watch streams stay JSON).
    if !watch && crate::protobuf::prefers_protobuf(accept) {
        return Ok(crate::protobuf::encode_response(response).await);
    }
    Ok(response)
}
