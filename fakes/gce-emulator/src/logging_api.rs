//! A Cloud Logging API v2 `entries.list` (`POST /v2/entries:list`) over the data plane's request
//! logs (`dataplane/logging/`), so `gcloud logging read` reads them with
//! `CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING=http://127.0.0.1:PORT/`; and the same entries on the
//! admin API (`GET /_emulator/logs?filter=...`, `DELETE /_emulator/logs`) for clients without
//! gcloud.
//!
//! Request (Cloud Logging API v2 reference, `entries.list`): `resourceNames` (`projects/P`;
//! the deprecated `projectIds` too), `filter`, `orderBy` (`timestamp asc`, the default, or
//! `timestamp desc`), `pageSize` (default and maximum 1000), `pageToken`. Response: `entries`
//! and `nextPageToken` when more remain. Errors: 400 `INVALID_ARGUMENT` for a filter the
//! emulator does not understand, in Google's JSON error shape.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::emulator::Emulator;

fn error(code: u16, status: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        Json(json!({"error": {"code": code, "message": message, "status": status}})),
    )
        .into_response()
}

fn store(emu: &Emulator) -> Option<Arc<crate::dataplane::logging::Store>> {
    emu.dataplane.get().map(|d| d.logs())
}

/// `POST /v2/entries:list`.
pub async fn entries_list(
    State(emu): State<Arc<Emulator>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(e) = crate::api_request::check_auth(&emu, &headers) {
        return e.into_response();
    }
    let req: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    &format!("Invalid JSON payload: {e}"),
                )
            }
        }
    };
    let mut projects: Vec<String> = req["resourceNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    projects.extend(
        req["projectIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| format!("projects/{p}")),
    );
    if projects.is_empty() {
        return error(
            400,
            "INVALID_ARGUMENT",
            "resourceNames: at least one resource name is required, e.g. projects/PROJECT_ID",
        );
    }
    if let Some(bad) = projects.iter().find(|p| !p.starts_with("projects/")) {
        return error(
            400,
            "INVALID_ARGUMENT",
            &format!("resourceNames: {bad:?}: the emulator serves projects/PROJECT_ID only"),
        );
    }
    let desc = match req["orderBy"].as_str().map(str::trim) {
        None | Some("") | Some("timestamp") | Some("timestamp asc") => false,
        Some("timestamp desc") => true,
        Some(o) => {
            return error(
                400,
                "INVALID_ARGUMENT",
                &format!("orderBy {o:?}: expected \"timestamp asc\" or \"timestamp desc\""),
            )
        }
    };
    let page_size = req["pageSize"].as_u64().unwrap_or(1000).clamp(1, 1000) as usize;
    let offset: usize = match req["pageToken"].as_str() {
        None | Some("") => 0,
        Some(t) => match t.parse() {
            Ok(n) => n,
            Err(_) => {
                return error(
                    400,
                    "INVALID_ARGUMENT",
                    &format!("pageToken {t:?} is not one this server gave"),
                )
            }
        },
    };
    let filter = req["filter"].as_str().unwrap_or("");
    let Some(store) = store(&emu) else {
        return Json(json!({})).into_response();
    };
    let entries = match store.query(&projects, filter, desc) {
        Ok(e) => e,
        Err(e) => return error(400, "INVALID_ARGUMENT", &format!("Invalid filter: {e}")),
    };
    let page: Vec<Value> = entries
        .iter()
        .skip(offset)
        .take(page_size)
        .cloned()
        .collect();
    let mut out = json!({});
    if !page.is_empty() {
        out["entries"] = json!(page);
    }
    if offset + page_size < entries.len() {
        out["nextPageToken"] = json!((offset + page_size).to_string());
    }
    Json(out).into_response()
}

/// `GET /_emulator/logs?project=P&filter=F`: `{"entries": [...]}`, oldest first.
pub async fn admin_list(
    State(emu): State<Arc<Emulator>>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let project = q.get("project").cloned().unwrap_or_else(|| "p1".into());
    let Some(store) = store(&emu) else {
        return Json(json!({"entries": []})).into_response();
    };
    match store.query(
        &[format!("projects/{project}")],
        q.get("filter").map(String::as_str).unwrap_or(""),
        false,
    ) {
        Ok(e) => Json(json!({"entries": e})).into_response(),
        Err(e) => error(400, "INVALID_ARGUMENT", &format!("Invalid filter: {e}")),
    }
}

/// `DELETE /_emulator/logs`: forgets every entry.
pub async fn admin_clear(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    if let Some(s) = store(&emu) {
        s.clear();
    }
    Json(json!({"cleared": true}))
}
