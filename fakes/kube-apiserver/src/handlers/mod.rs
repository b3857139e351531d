//! HTTP routing: authentication, discovery, OpenAPI and the resource paths
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, with `namespaces/{ns}/` and `/status`).

mod objects;
mod scale;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use crate::auth::audit::AuditRecord;
use crate::auth::{Auth, RequestContext};
use crate::discovery;
use crate::openapi::OpenApi;
use crate::status::ApiError;
use crate::store::Store;

/// Shared state of the HTTP handlers.
pub struct App {
    /// The object store (with the registry of served resources).
    pub store: Arc<Store>,
    /// OpenAPI documents and schemas.
    pub openapi: Arc<OpenApi>,
    /// Authentication, authorization and audit.
    pub auth: Arc<Auth>,
    /// `host:port` the server listens on, for `/api`.
    pub server_address: String,
}

/// A parsed resource path.
#[derive(Debug, Clone)]
pub struct ResourcePath {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Plural resource.
    pub plural: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
    /// Legacy `/watch/` path prefix.
    pub watch_prefix: bool,
}

/// Parsed query parameters (last value wins).
pub type Query = HashMap<String, String>;

fn parse_query(uri: &Uri) -> Query {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// JSON response with a status code.
pub fn json_response(code: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Splits `/api/v1/...` or `/apis/{group}/{version}/...` into a [`ResourcePath`]; `None` for
/// discovery paths and anything else.
pub fn parse_resource_path(app: &App, path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, mut rest) = match segs.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return None,
    };
    let mut watch_prefix = false;
    if rest.first() == Some(&"watch") {
        watch_prefix = true;
        rest = &rest[1..];
    }
    let registry = &app.store.registry;
    let namespaced_child = rest.len() >= 3
        && rest[0] == "namespaces"
        && registry
            .find(group, version, rest[2])
            .is_some_and(|r| r.namespaced);
    let (namespace, rest) = if namespaced_child {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return None;
    }
    Some(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: rest[0].to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        watch_prefix,
    })
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

/// A response body from a stream, for watches.
pub fn streaming(
    stream: impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
