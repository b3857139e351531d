//! The Network Services API v1 surface of the emulator, served under `/networkservices/v1/`:
//! `projects.locations.tlsRoutes` (create, get, list, patch, delete) and
//! `projects.locations.operations` (get, delete). Point clients at it with an endpoint
//! override: `gcloud config set api_endpoint_overrides/networkservices
//! http://127.0.0.1:PORT/networkservices/`, or the Rust client
//! `google-cloud-networkservices-v1` built `.with_endpoint("http://127.0.0.1:PORT/networkservices")`.
//!
//! Mutations are applied at once and answer a `google.longrunning.Operation` that is not yet
//! `done` (no `response`, no `endTime`), as Google's do (a TLSRoute write takes seconds there,
//! so clients poll `operations.get`); the first `operations.get` answers it `done`, with the
//! resource (or `google.protobuf.Empty` for a delete) as its `response` and `OperationMetadata`
//! as the API documents it. `--operation-latency-ms` applies to Compute Operations only.
//! Validation is `resources::tls_routes`; the routes live in the same store as the Compute
//! resources, so the data plane sees them in its snapshots and a backend service or target TCP
//! proxy a route uses cannot be deleted (400 `resourceInUseByAnotherResource`).
//!
//! With `--iam`, each method needs the permission deploy/iam/method-permissions.yaml lists for
//! it (`networkservices.tlsRoutes.create` ...; its reference page's "Authorization requires the
//! following IAM permission"), on the route, the parent location for a list, the Operation for
//! its methods; a refusal is this API's 403 ([`permission_denied`]).

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde_json::{json, Value};

use crate::emulator::Emulator;
use crate::errors::ApiError;
use crate::methods;
use crate::resources::tls_routes;
use crate::validate;

/// One request to the Network Services API: method, the path after `/networkservices/v1/`,
/// the decoded query and the body.
#[derive(Clone, Debug)]
pub struct NetworkServicesRequest {
    /// HTTP method.
    pub method: Method,
    /// Path after `/networkservices/v1/` (`projects/p/locations/global/tlsRoutes/r`).
    pub path: String,
    /// Decoded query pairs.
    pub query: Vec<(String, String)>,
    /// Raw body.
    pub body: Bytes,
    /// The bearer token, if any (authenticated already; IAM's principal).
    pub token: Option<String>,
}

enum NsCall {
    List(String, String),
    Create(String, String),
    Get(String),
    Patch(String, String),
    Delete(String, String),
    OpGet(String),
    OpDelete(String),
}

fn query<'a>(req: &'a NetworkServicesRequest, name: &str) -> Option<&'a str> {
    req.query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn not_found_url(req: &NetworkServicesRequest) -> ApiError {
    ApiError::new(
        404,
        "notFound",
        format!(
            "The requested URL /networkservices/v1/{} (method {}) was not found on this server.",
            req.path, req.method
        ),
    )
}

fn route(req: &NetworkServicesRequest) -> Result<NsCall, ApiError> {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let m = &req.method;
    let location_ok = |l: &str| {
        if l == "global" {
            Ok(())
        } else {
            Err(ApiError::invalid_value(
                "parent",
                l,
                "Only the global location is emulated for tlsRoutes.",
            ))
        }
    };
    match segs.as_slice() {
        ["projects", p, "locations", l, "tlsRoutes"] => {
            location_ok(l)?;
            let parent = format!("projects/{p}/locations/{l}");
            match *m {
                Method::GET => Ok(NsCall::List(p.to_string(), parent)),
                Method::POST => {
                    let id = query(req, "tlsRouteId").unwrap_or_default();
                    validate::check_name("tls_route_id", id)?;
                    Ok(NsCall::Create(p.to_string(), tls_routes::key(p, l, id)))
                }
                _ => Err(not_found_url(req)),
            }
        }
        ["projects", p, "locations", l, "tlsRoutes", name] => {
            location_ok(l)?;
            let key = tls_routes::key(p, l, name);
            match *m {
                Method::GET => Ok(NsCall::Get(key)),
                Method::PATCH => Ok(NsCall::Patch(p.to_string(), key)),
                Method::DELETE => Ok(NsCall::Delete(p.to_string(), key)),
                _ => Err(not_found_url(req)),
            }
        }
        ["projects", p, "locations", l, "operations", op] => {
            let key = format!("projects/{p}/locations/{l}/operations/{op}");
            match *m {
                Method::GET => Ok(NsCall::OpGet(key)),
                Method::DELETE => Ok(NsCall::OpDelete(key)),
                _ => Err(not_found_url(req)),
            }
        }
        _ => Err(not_found_url(req)),
    }
}

/// The resource a call's permission is checked on, and its project: the route, the parent
/// location (a list), the Operation.
fn iam_resource(call: &NsCall) -> (String, String) {
    let project = |key: &str| key.split('/').nth(1).unwrap_or_default().to_string();
    match call {
        NsCall::List(p, parent) => (p.clone(), parent.clone()),
        NsCall::Create(p, key) | NsCall::Patch(p, key) | NsCall::Delete(p, key) => {
            (p.clone(), key.clone())
        }
        NsCall::Get(key) | NsCall::OpGet(key) | NsCall::OpDelete(key) => {
            (project(key), key.clone())
        }
    }
}

/// The Network Services API's 403, a `google.rpc.Status` as Google's resource-oriented APIs
/// answer a missing permission (AIP-193; IAM docs, "Troubleshoot permission error messages"):
/// `PERMISSION_DENIED`, "Permission 'networkservices.tlsRoutes.create' denied on resource
/// '//networkservices.googleapis.com/projects/p/locations/global/tlsRoutes/r' (or it may not
/// exist).", and a `google.rpc.ErrorInfo` detail (reason `IAM_PERMISSION_DENIED`, domain
/// `iam.googleapis.com`, metadata `permission` and `resource`). No Compute-style `errors[]`.
pub fn permission_denied(permission: &str, resource: &str) -> ApiError {
    let mut e = ApiError::new(
        403,
        "IAM_PERMISSION_DENIED",
        format!("Permission '{permission}' denied on resource '//networkservices.googleapis.com/{resource}' (or it may not exist)."),
    );
    e.details = vec![json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "iam.googleapis.com",
        "metadata": {"permission": permission, "resource": resource},
    })];
    e
}

fn method_id(call: &NsCall) -> &'static str {
    match call {
        NsCall::List(..) => "networkservices.projects.locations.tlsRoutes.list",
        NsCall::Create(..) => "networkservices.projects.locations.tlsRoutes.create",
        NsCall::Get(..) => "networkservices.projects.locations.tlsRoutes.get",
        NsCall::Patch(..) => "networkservices.projects.locations.tlsRoutes.patch",
        NsCall::Delete(..) => "networkservices.projects.locations.tlsRoutes.delete",
        NsCall::OpGet(..) => "networkservices.projects.locations.operations.get",
        NsCall::OpDelete(..) => "networkservices.projects.locations.operations.delete",
    }
}

/// RFC 3339 in UTC with a `Z`, as `google.protobuf.Timestamp` is written in JSON.
fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn not_found(key: &str) -> ApiError {
    ApiError::new(404, "notFound", format!("Resource '{key}' was not found"))
}

impl Emulator {
    /// Handles one Network Services API request: counts it (`networkservices.projects.
    /// locations.tlsRoutes.create` ...), applies injected faults, then runs it.
    pub async fn handle_network_services(
        self: &Arc<Self>,
        req: NetworkServicesRequest,
    ) -> Result<Value, ApiError> {
        let call = route(&req)?;
        let method = method_id(&call);
        self.calls.record(method);
        let fault = self.faults.check(method);
        if !fault.latency.is_zero() {
            tokio::time::sleep(fault.latency).await;
        }
        if let Some(e) = fault.error {
            return Err(e);
        }
        if self.identity.enforce {
            let principal = self.identity.authenticate(req.token.as_deref())?;
            let (project, resource) = iam_resource(&call);
            let needed = crate::iam_permissions::needed(method, &project, &resource, &Value::Null);
            if let Err(n) = self.identity.check(method, principal.as_deref(), &needed) {
                return Err(permission_denied(&n.permission, &n.resource));
            }
        }
        match call {
            NsCall::Get(key) => {
                let state = self.state.lock().expect("state poisoned");
                state
                    .resources
                    .get(&key)
                    .map(|v| v.as_ref().clone())
                    .ok_or_else(|| not_found(&key))
            }
            NsCall::List(project, parent) => self.list_tls_routes(&req, &project, &parent),
            NsCall::OpGet(key) => self
                .ns_operations
                .lock()
                .expect("poisoned")
                .get(&key)
                .cloned()
                .ok_or_else(|| not_found(&key)),
            NsCall::OpDelete(key) => self
                .ns_operations
                .lock()
                .expect("poisoned")
                .remove(&key)
                .map(|_| json!({}))
                .ok_or_else(|| not_found(&key)),
            NsCall::Create(project, key) => {
                let mut body = methods::parse_body(&req.body)?;
                self.commit_tls_route(&project, &key, "create", |state| {
                    if state.resources.contains_key(&key) {
                        return Err(ApiError::new(
                            409,
                            "alreadyExists",
                            format!("Resource '{key}' already exists"),
                        ));
                    }
                    tls_routes::prepare(state, &project, &key, &mut body)?;
                    let t = now();
                    body.insert("createTime".into(), json!(t));
                    body.insert("updateTime".into(), json!(t));
                    Ok(Some(Value::Object(body)))
                })
                .await
            }
            NsCall::Patch(project, key) => {
                let patch = methods::parse_body(&req.body)?;
                let mask: Option<Vec<String>> = query(&req, "updateMask").map(|m| {
                    m.split(',')
                        .map(|f| snake_to_camel(f.trim()))
                        .filter(|f| !f.is_empty())
                        .collect()
                });
                self.commit_tls_route(&project, &key, "update", |state| {
                    let old = state.resources.get(&key).ok_or_else(|| not_found(&key))?;
                    let mut body = old.as_object().cloned().unwrap_or_default();
                    let fields: Vec<String> = match &mask {
                        Some(m) => m.clone(),
                        None => patch.keys().cloned().collect(),
                    };
                    for f in fields {
                        match patch.get(&f) {
                            Some(v) => body.insert(f, v.clone()),
                            None => body.remove(&f),
                        };
                    }
                    let created = body.get("createTime").cloned();
                    tls_routes::prepare(state, &project, &key, &mut body)?;
                    if let Some(c) = created {
                        body.insert("createTime".into(), c);
                    }
                    body.insert("updateTime".into(), json!(now()));
                    Ok(Some(Value::Object(body)))
                })
                .await
            }
            NsCall::Delete(project, key) => {
                self.commit_tls_route(&project, &key, "delete", |state| {
                    if !state.resources.contains_key(&key) {
                        return Err(not_found(&key));
                    }
                    Ok(None)
                })
                .await
            }
        }
    }

    fn list_tls_routes(
        &self,
        req: &NetworkServicesRequest,
        project: &str,
        parent: &str,
    ) -> Result<Value, ApiError> {
        let size: usize = match query(req, "pageSize") {
            None | Some("") | Some("0") => 1000,
            Some(s) => s
                .parse()
                .map_err(|_| ApiError::invalid_value("page_size", s, "Expected a number."))?,
        };
        let offset: usize = match query(req, "pageToken") {
            None | Some("") => 0,
            Some(t) => t
                .parse()
                .map_err(|_| ApiError::invalid_value("page_token", t, "Invalid page token."))?,
        };
        self.ensure_project(project);
        let prefix = format!("{parent}/tlsRoutes/");
        let state = self.state.lock().expect("state poisoned");
        let all: Vec<Value> = state
            .scan(&prefix)
            .map(|(_, v)| v.as_ref().clone())
            .collect();
        let page: Vec<Value> = all.iter().skip(offset).take(size).cloned().collect();
        let mut out = json!({ "tlsRoutes": page });
        if offset + size < all.len() {
            out["nextPageToken"] = json!((offset + size).to_string());
        }
        Ok(out)
    }

    /// Runs `f` under the state lock; `Some(resource)` stores it under `key`, `None` deletes
    /// `key`. Commits like a Compute mutation (version, snapshot, state file) and returns the
    /// Operation as running ([`running`]); `operations.get` answers the stored, done one.
    async fn commit_tls_route(
        self: &Arc<Self>,
        project: &str,
        key: &str,
        verb: &str,
        f: impl FnOnce(&mut crate::store::State) -> Result<Option<Value>, ApiError>,
    ) -> Result<Value, ApiError> {
        let host = self.base.trim_end_matches("compute/v1/");
        let (op, version) = {
            let mut state = self.state.lock().expect("state poisoned");
            if crate::resources::projects::ensure(&mut state, project) {
                state.version += 1;
            }
            let response = match f(&mut state)? {
                Some(mut v) => {
                    v["selfLink"] = json!(format!("{host}networkservices/v1/{key}"));
                    state.put(key.to_string(), v.clone());
                    v["@type"] =
                        json!("type.googleapis.com/google.cloud.networkservices.v1.TlsRoute");
                    v
                }
                None => {
                    state.remove(key);
                    json!({"@type": "type.googleapis.com/google.protobuf.Empty"})
                }
            };
            state.version += 1;
            self.publish(&state);
            let location = key.split('/').nth(3).unwrap_or("global");
            let name = format!(
                "projects/{project}/locations/{location}/operations/operation-{}",
                crate::store::new_id()
            );
            let t = now();
            let op = json!({
                "name": name,
                "metadata": {
                    "@type": "type.googleapis.com/google.cloud.networkservices.v1.OperationMetadata",
                    "createTime": t,
                    "endTime": t,
                    "target": key,
                    "verb": verb,
                    "requestedCancellation": false,
                    "apiVersion": "v1",
                },
                "done": true,
                "response": response,
            });
            let answer = running(&op);
            self.ns_operations
                .lock()
                .expect("poisoned")
                .insert(name, op);
            tracing::info!(target = %key, verb, "committed");
            (answer, state.version)
        };
        self.wait_persisted(version).await;
        Ok(op)
    }
}

/// The Operation `done` as the mutation's first answer: not done, without `response` or
/// `metadata.endTime` (google.longrunning.Operation: `response` is set only when `done`).
fn running(done: &Value) -> Value {
    let mut op = done.clone();
    op["done"] = json!(false);
    if let Some(o) = op.as_object_mut() {
        o.remove("response");
    }
    if let Some(m) = op["metadata"].as_object_mut() {
        m.remove("endTime");
    }
    op
}

/// `sni_host` -> `sniHost` (update masks may use either form).
fn snake_to_camel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut up = false;
    for c in s.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_is_the_operation_running_without_its_response() {
        let done = json!({
            "name": "projects/p/locations/global/operations/operation-1",
            "metadata": {"createTime": "t0", "endTime": "t0", "verb": "create"},
            "done": true,
            "response": {"name": "r"},
        });
        let first = running(&done);
        assert_eq!(first["done"], json!(false));
        assert!(first.get("response").is_none());
        assert!(first["metadata"].get("endTime").is_none());
        assert_eq!(first["metadata"]["createTime"], json!("t0"));
        assert_eq!(first["name"], done["name"]);
    }

    #[test]
    fn masks_in_either_case() {
        assert_eq!(snake_to_camel("target_proxies"), "targetProxies");
        assert_eq!(snake_to_camel("rules"), "rules");
    }
}
