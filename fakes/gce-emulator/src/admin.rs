//! The admin API under `/_emulator/` (see docs/emulator.md):
//! `POST reset`; `GET state`; `GET|POST|DELETE faults`, `DELETE faults/{id}`;
//! `GET|DELETE calls`; `GET|PUT|DELETE slow-cloud`; `GET listeners`; `GET ca.pem`;
//! `GET health`; `GET metrics`; `GET|DELETE logs` (request logs, `logging_api`); `GET|PUT
//! regions` (Cloud Armor's `origin.region_code`); `GET|PUT iap/accessors`,
//! `GET iap/public_key-jwk` (IAP); `POST explain`
//! (dataplane/explain.rs); `GET dashboard` (dashboard/).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use http::StatusCode;
use serde_json::{json, Value};

use crate::emulator::Emulator;
use crate::faults::FaultRule;

/// Routes of the admin API (nested under `/_emulator`).
pub fn router() -> Router<Arc<Emulator>> {
    crate::identity_api::admin_routes(crate::dashboard::routes(Router::new()))
        .route("/reset", post(reset))
        .route("/state", get(state))
        .route(
            "/faults",
            get(list_faults).post(add_faults).delete(clear_faults),
        )
        .route("/faults/{id}", delete(remove_fault))
        .route("/calls", get(calls).delete(reset_calls))
        .route(
            "/slow-cloud",
            get(slow_cloud).put(set_slow_cloud).delete(clear_slow_cloud),
        )
        .route("/listeners", get(listeners))
        .route("/ca.pem", get(ca_pem))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/regions", get(regions).put(set_regions))
        .route("/iap/accessors", get(iap_accessors).put(set_iap_accessors))
        .route("/iap/public_key-jwk", get(iap_jwks))
        .route(
            "/logs",
            get(crate::logging_api::admin_list).delete(crate::logging_api::admin_clear),
        )
        .route("/explain", post(explain))
}

/// `POST /_emulator/explain` with an [`ExplainRequest`](crate::dataplane::explain::ExplainRequest):
/// the data plane's path for that request; 400 naming the field at fault.
async fn explain(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let req: crate::dataplane::explain::ExplainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(&format!("explain request: {e}")),
    };
    let Some(dp) = emu.dataplane.get() else {
        return bad("the data plane is not running");
    };
    let snap = emu.subscribe().borrow().clone();
    match crate::dataplane::explain::explain(&dp.frontends(), &snap, &emu.health, &dp.armor(), &req)
    {
        Ok(ex) => Json(ex).into_response(),
        Err(e) => bad(&e.to_string()),
    }
}

async fn reset(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    emu.reset();
    Json(json!({"reset": true}))
}

async fn state(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(emu.dump())
}

async fn list_faults(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(json!({"faults": emu.faults.list()}))
}

/// Accepts one rule or a list of rules.
async fn add_faults(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let rules: Vec<FaultRule> = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(a)) => match a
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
        {
            Ok(r) => r,
            Err(e) => return bad(&e.to_string()),
        },
        Ok(v) => match serde_json::from_value(v) {
            Ok(r) => vec![r],
            Err(e) => return bad(&e.to_string()),
        },
        Err(e) => return bad(&e.to_string()),
    };
    let mut added = Vec::new();
    for r in rules {
        match emu.faults.add(r) {
            Ok(r) => added.push(r),
            Err(e) => return bad(&e.to_string()),
        }
    }
    Json(json!({"faults": added})).into_response()
}

fn bad(msg: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

async fn clear_faults(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(json!({"removed": emu.faults.remove(None)}))
}

async fn remove_fault(State(emu): State<Arc<Emulator>>, Path(id): Path<u64>) -> Response {
    match emu.faults.remove(Some(id)) {
        0 => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no fault rule {id}")})),
        )
            .into_response(),
        n => Json(json!({"removed": n})).into_response(),
    }
}

async fn calls(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(emu.calls.to_json())
}

async fn reset_calls(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    emu.calls.reset();
    Json(emu.calls.to_json())
}

async fn slow_cloud(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(emu.slow_cloud.to_json())
}

/// Replaces the slow-cloud profile with the body (`{"preset": "realistic", ...overrides}`, see
/// [`crate::slow_cloud::Profile::parse`]); answers the new state.
async fn set_slow_cloud(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    if text.trim_start().starts_with('@') {
        return bad("a file name is not accepted here; send the profile itself");
    }
    match crate::slow_cloud::Profile::parse(&text) {
        Ok(p) => {
            emu.slow_cloud.set(p);
            Json(emu.slow_cloud.to_json()).into_response()
        }
        Err(e) => bad(&e.to_string()),
    }
}

async fn clear_slow_cloud(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    emu.slow_cloud.set(crate::slow_cloud::Profile::default());
    Json(emu.slow_cloud.to_json())
}

async fn listeners(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    let l = emu
        .dataplane
        .get()
        .map(|d| d.listeners())
        .unwrap_or_default();
    Json(json!({"listeners": l}))
}

async fn ca_pem(State(emu): State<Arc<Emulator>>) -> Response {
    match &emu.ca {
        Some(ca) => (
            [(http::header::CONTENT_TYPE, "application/x-pem-file")],
            ca.ca_pem(),
        )
            .into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no local CA\n").into_response(),
    }
}

async fn health(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    let entries: Vec<Value> = emu
        .health
        .entries()
        .into_iter()
        .map(|(k, s)| json!({"backendService": k.backend_service, "networkEndpointGroup": k.neg, "ipAddress": k.ip_address, "port": k.port, "healthState": s.as_str()}))
        .collect();
    Json(json!({"health": entries}))
}

async fn metrics(State(emu): State<Arc<Emulator>>) -> Response {
    let mut text = emu.metrics.text().trim_end_matches("# EOF\n").to_string();
    if let Some(dp) = emu.dataplane.get() {
        text.push_str(dp.metrics_text().trim_end_matches("# EOF\n"));
    }
    text.push_str("# EOF\n");
    (
        [(
            http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /_emulator/regions`: `{"regions": {"CIDR": "CC", ...}}`.
async fn regions(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    let m: serde_json::Map<String, Value> = emu
        .dataplane
        .get()
        .map(|d| d.armor().regions())
        .unwrap_or_default()
        .into_iter()
        .map(|(n, c)| (n.to_string(), json!(c)))
        .collect();
    Json(json!({"regions": m}))
}

/// `PUT /_emulator/regions` with `{"regions": {"127.44.0.0/16": "DE", ...}}`: the local mapping
/// from client address ranges to Cloud Armor's `origin.region_code` (most specific range wins).
async fn set_regions(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(&e.to_string()),
    };
    let Some(m) = v.get("regions").and_then(Value::as_object) else {
        return bad("expected {\"regions\": {\"CIDR\": \"REGION_CODE\"}}");
    };
    let mut map = Vec::new();
    for (cidr, code) in m {
        let Ok(net) = cidr.parse::<ipnet::IpNet>() else {
            return bad(&format!("regions: {cidr:?} is not a CIDR range"));
        };
        let Some(code) = code
            .as_str()
            .filter(|c| c.len() == 2 && c.chars().all(|x| x.is_ascii_uppercase()))
        else {
            return bad(&format!(
                "regions[{cidr:?}]: expected a two-letter ISO 3166-1 code such as \"DE\""
            ));
        };
        map.push((net, code.to_string()));
    }
    if let Some(d) = emu.dataplane.get() {
        d.armor().set_regions(map);
    }
    regions(State(emu)).await.into_response()
}

/// `GET /_emulator/iap/accessors`: `{"bindings": [{"member": "user:EMAIL", "backendService"}]}`.
async fn iap_accessors(State(emu): State<Arc<Emulator>>) -> Json<Value> {
    Json(
        emu.dataplane
            .get()
            .map(|d| d.iap().accessors())
            .unwrap_or_else(|| json!({"bindings": []})),
    )
}

/// `PUT /_emulator/iap/accessors` with `{"bindings": [{"member": "user:alice@example.com",
/// "backendService": "projects/p/global/backendServices/bs"}]}` (`backendService` absent or
/// `*`: every IAP-enabled backend service): who IAP lets through, as granting
/// `roles/iap.httpsResourceAccessor` does. Replaces the previous bindings.
async fn set_iap_accessors(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(&e.to_string()),
    };
    let mut out = Vec::new();
    for b in v
        .get("bindings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(member) = b
            .get("member")
            .and_then(Value::as_str)
            .filter(|m| m.contains('@'))
        else {
            return bad("bindings[].member: expected user:EMAIL");
        };
        let service = match b.get("backendService").and_then(Value::as_str) {
            None | Some("*") => "*".to_string(),
            Some(s) => match crate::snapshot::key_from_url(s) {
                Some(k) => k,
                None => return bad(&format!("bindings[].backendService {s:?}: expected projects/P/global/backendServices/NAME")),
            },
        };
        out.push((member.to_string(), service));
    }
    if let Some(d) = emu.dataplane.get() {
        d.iap().set_accessors(out);
    }
    iap_accessors(State(emu)).await.into_response()
}

/// `GET /_emulator/iap/public_key-jwk`: the JWK set that verifies `x-goog-iap-jwt-assertion`.
async fn iap_jwks(State(emu): State<Arc<Emulator>>) -> Response {
    match emu.dataplane.get() {
        Some(d) => Json(d.iap().jwks()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no data plane\n").into_response(),
    }
}
