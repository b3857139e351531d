//! The HTTP surface of the emulator's identity provider and IAM ([`crate::identity`]): the
//! OAuth token endpoint, Resource Manager's project policy (for `gcloud projects
//! add-iam-policy-binding`) and the admin API under `/_emulator/iam` (the list is in
//! identity.rs's module docs; docs/emulator.md, "Credentials and IAM").

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::emulator::Emulator;
use crate::errors::ApiError;
use crate::iam_permissions::Needed;
use crate::iam_roles::Role;

/// Routes at the emulator's root: the token endpoint and Resource Manager's project policy.
pub fn root_routes(r: Router<Arc<Emulator>>) -> Router<Arc<Emulator>> {
    r.route("/token", post(token))
        .route("/v1/projects/{resource}", post(resource_manager))
}

/// Routes under `/_emulator/iam`.
pub fn admin_routes(r: Router<Arc<Emulator>>) -> Router<Arc<Emulator>> {
    r.route("/iam", get(summary))
        .route("/iam/projects/{project}/roles/{id}", put(define_role))
        .route(
            "/iam/projects/{project}/bindings",
            get(list_bindings).post(grant).delete(revoke),
        )
        .route("/iam/usage", axum::routing::delete(reset_usage))
        .route("/iam/tokens:revokeAll", post(revoke_all_tokens))
        .route("/iam/serviceAccounts/{email}/keys", post(create_key))
        .route("/iam/serviceAccounts/{email}/tokens", post(create_token))
}

fn bad(status: StatusCode, e: impl std::fmt::Display) -> Response {
    (status, Json(json!({"error": e.to_string()}))).into_response()
}

/// `POST /token` (form: `grant_type`, `assertion`): RFC 7523's JWT bearer grant; errors in
/// RFC 6749 section 5.2's shape (`invalid_grant`, `unsupported_grant_type`).
async fn token(State(emu): State<Arc<Emulator>>, body: axum::body::Bytes) -> Response {
    let form: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(&body).into_owned().collect();
    if form.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unsupported_grant_type", "error_description": "only urn:ietf:params:oauth:grant-type:jwt-bearer is served"})),
        )
            .into_response();
    }
    let assertion = form.get("assertion").map_or("", String::as_str);
    match emu.identity.tokens().exchange(assertion) {
        Ok(v) => Json(v).into_response(),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant", "error_description": e.to_string()})),
        )
            .into_response(),
    }
}

/// `POST /v1/projects/{p}:getIamPolicy|:setIamPolicy` (Resource Manager v1, as `gcloud
/// projects add-iam-policy-binding` calls them). With `--iam` the caller needs
/// `compute.projects.get` / `compute.projects.setIamPolicy` there (`roles/compute.admin`: the
/// emulator's stand-in for `resourcemanager.projects.getIamPolicy` / `setIamPolicy`).
async fn resource_manager(
    State(emu): State<Arc<Emulator>>,
    Path(resource): Path<String>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some((project, verb)) = resource.split_once(':') else {
        return bad(StatusCode::NOT_FOUND, format!("no such method: {resource}"));
    };
    let id = &emu.identity;
    let principal = match id.authenticate(crate::identity::bearer_token(&headers)) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let need = |permission: &str| Needed {
        permission: permission.into(),
        resource: format!("projects/{project}"),
        project: project.into(),
    };
    match verb {
        "getIamPolicy" => {
            if let Err(e) = id.authorize(
                "cloudresourcemanager.projects.getIamPolicy",
                principal.as_deref(),
                &[need("compute.projects.get")],
            ) {
                return e.into_response();
            }
            Json(id.policy().policy_json(project)).into_response()
        }
        "setIamPolicy" => {
            if let Err(e) = id.authorize(
                "cloudresourcemanager.projects.setIamPolicy",
                principal.as_deref(),
                &[need("compute.projects.setIamPolicy")],
            ) {
                return e.into_response();
            }
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let bindings: Vec<(String, Vec<String>)> = v["policy"]["bindings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    let members = b["members"].as_array().into_iter().flatten();
                    (
                        b["role"].as_str().unwrap_or_default().to_string(),
                        members
                            .filter_map(|m| m.as_str().map(str::to_string))
                            .collect(),
                    )
                })
                .collect();
            let mut policy = id.policy();
            match policy.set_bindings(project, &bindings) {
                Ok(()) => Json(policy.policy_json(project)).into_response(),
                Err(e) => ApiError::new(400, "badRequest", e.to_string()).into_response(),
            }
        }
        _ => bad(StatusCode::NOT_FOUND, format!("no such method: {verb}")),
    }
}

async fn summary(State(emu): State<Arc<Emulator>>) -> Response {
    let mut v = emu.identity.policy().summary();
    v["enforced"] = json!(emu.identity.enforce);
    v["tokensIssued"] = json!(emu.identity.issued_count());
    v["tokensIssuedBy"] = json!(emu.identity.tokens().issued_by());
    v["usage"] = usage_json(emu.identity.usage(false));
    let (refusals, unauthenticated) = emu.identity.refusals();
    v["refusals"] = json!(refusals);
    v["unauthenticated"] = json!(unauthenticated);
    Json(v).into_response()
}

/// `POST /_emulator/iam/tokens:revokeAll`: forgets every issued access token (a client's next
/// call with one is 401); answers `{"revoked": N}`, the live tokens forgotten.
async fn revoke_all_tokens(State(emu): State<Arc<Emulator>>) -> Response {
    Json(json!({"revoked": emu.identity.revoke_all_tokens()})).into_response()
}

/// `{principal: {permission: {"granted": n, "denied": m}}}`.
fn usage_json(u: crate::identity::Usage) -> Value {
    let by: serde_json::Map<String, Value> = u
        .into_iter()
        .map(|(who, perms)| {
            let p: serde_json::Map<String, Value> = perms
                .into_iter()
                .map(|(perm, (g, d))| (perm, json!({"granted": g, "denied": d})))
                .collect();
            (who, Value::Object(p))
        })
        .collect();
    Value::Object(by)
}

/// `DELETE /_emulator/iam/usage`: forgets the checks made (answers them).
async fn reset_usage(State(emu): State<Arc<Emulator>>) -> Response {
    Json(usage_json(emu.identity.usage(true))).into_response()
}

async fn define_role(
    State(emu): State<Arc<Emulator>>,
    Path((project, id)): Path<(String, String)>,
    body: String,
) -> Response {
    let name = format!("projects/{project}/roles/{id}");
    match Role::from_yaml(&name, &body) {
        Ok(role) => {
            let n = role.permissions.len();
            emu.identity.policy().define_role(&name, role);
            Json(json!({"name": name, "includedPermissions": n})).into_response()
        }
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

#[derive(serde::Deserialize)]
struct Binding {
    member: String,
    role: String,
}

async fn list_bindings(State(emu): State<Arc<Emulator>>, Path(project): Path<String>) -> Response {
    Json(emu.identity.policy().policy_json(&project)).into_response()
}

async fn grant(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    Json(b): Json<Binding>,
) -> Response {
    let mut policy = emu.identity.policy();
    match policy.grant(&project, &b.member, &b.role) {
        Ok(()) => Json(policy.policy_json(&project)).into_response(),
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

async fn revoke(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    Json(b): Json<Binding>,
) -> Response {
    let mut policy = emu.identity.policy();
    if policy.revoke(&project, &b.member, &b.role) {
        Json(policy.policy_json(&project)).into_response()
    } else {
        bad(
            StatusCode::NOT_FOUND,
            format!("{} holds no {} in {project}", b.member, b.role),
        )
    }
}

fn project_of_email(email: &str) -> String {
    email
        .split('@')
        .nth(1)
        .and_then(|d| d.strip_suffix(".iam.gserviceaccount.com"))
        .unwrap_or("p1")
        .to_string()
}

async fn create_key(State(emu): State<Arc<Emulator>>, Path(email): Path<String>) -> Response {
    let project = project_of_email(&email);
    let key = emu.identity.tokens().create_key(&email, &project);
    match key {
        Ok(k) => {
            tracing::info!(%email, key_id = %k["private_key_id"], "service account key created");
            Json(k).into_response()
        }
        Err(e) => bad(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn create_token(
    State(emu): State<Arc<Emulator>>,
    Path(email): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut tokens = emu.identity.tokens();
    let (token, expires_in) = match v["lifetimeSec"].as_u64() {
        Some(s) => tokens.issue_for(&email, Duration::from_secs(s)),
        None => tokens.issue(&email),
    };
    Json(json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}))
        .into_response()
}
