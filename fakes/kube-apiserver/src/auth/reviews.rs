//! The create-only kinds whose answers are computed, never stored:
//!
//! - authorization.k8s.io/v1 `SelfSubjectAccessReview` (`kubectl auth can-i`), `SubjectAccessReview`,
//!   `LocalSubjectAccessReview`, `SelfSubjectRulesReview` (`kubectl auth can-i --list`): the RBAC
//!   decision for the given attributes, `status.allowed` and `status.reason`;
//! - authentication.k8s.io/v1 `TokenRequest` (`POST .../serviceaccounts/{name}/token`,
//!   `kubectl create token`), `TokenReview`, `SelfSubjectReview` (`kubectl auth whoami`).
//!
//! Validation and messages follow k8s.io/kubernetes `pkg/apis/authorization/validation`,
//! `pkg/apis/authentication/validation` and `pkg/registry/core/serviceaccount/storage/token.go`.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::authn::{self, service_account_user, MASTERS};
use super::rbac;
use super::request_info::RequestInfo;
use super::tokens::{self, BoundRef, Claims, KubernetesClaim, ServiceAccountRef};
use super::{Auth, UserInfo};
use crate::crd_validation::FieldError;
use crate::meta::timestamp;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::store::Store;

/// Default and bounds of `TokenRequest.spec.expirationSeconds` (seconds).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// Whether `res` is one of the computed kinds this module answers.
pub fn serves(res: &ResourceInfo) -> bool {
    matches!(
        (res.group.as_str(), res.plural.as_str()),
        ("authorization.k8s.io", _) | ("authentication.k8s.io", _)
    )
}

fn invalid(kind: &str, group: &str, name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::InvalidFields {
        kind: kind.into(),
        name: name.into(),
        group: group.into(),
        causes,
    }
}

fn field_invalid(field: &str, value: &str, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {value}: {detail}"),
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// The attributes a review asks about, for `user`.
fn attributes(spec: &Value) -> RequestInfo {
    let r = &spec["resourceAttributes"];
    if r.is_object() {
        RequestInfo {
            is_resource_request: true,
            verb: str_of(r, "verb"),
            api_group: str_of(r, "group"),
            api_version: str_of(r, "version"),
            namespace: str_of(r, "namespace"),
            resource: str_of(r, "resource"),
            subresource: str_of(r, "subresource"),
            name: str_of(r, "name"),
            path: String::new(),
        }
    } else {
        let n = &spec["nonResourceAttributes"];
        RequestInfo {
            verb: str_of(n, "verb"),
            path: str_of(n, "path"),
            ..Default::default()
        }
    }
}

/// `ValidateSelfSubjectAccessReviewSpec` (and the user/group rule of the other reviews).
fn validate_access_spec(spec: &Value, needs_subject: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let has_res = spec["resourceAttributes"].is_object();
    let has_non = spec["nonResourceAttributes"].is_object();
    if has_res && has_non {
        errs.push(field_invalid(
            "spec.nonResourceAttributes",
            "\"object\"",
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if !has_res && !has_non {
        errs.push(field_invalid(
            "spec.resourceAttributes",
            "\"null\"",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    if needs_subject
        && spec["user"].as_str().unwrap_or_default().is_empty()
        && spec["groups"].as_array().is_none_or(|g| g.is_empty())
    {
        errs.push(field_invalid(
            "spec.user",
            "\"\"",
            "at least one of user or group must be specified",
        ));
    }
    errs
}

fn review_response(mut body: Value, kind: &str, group: &str, status: Value) -> Value {
    body["kind"] = json!(kind);
    body["apiVersion"] = json!(format!("{group}/v1"));
    let md = body["metadata"].take();
    body["metadata"] = if md.is_object() { md } else { json!({}) };
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = status;
    body
}

fn access_status(store: &Store, user: &UserInfo, info: &RequestInfo) -> Value {
    let decision = rbac::authorize(store, user, info);
    let mut status = json!({"allowed": decision.allowed()});
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    status
}

/// `POST` of a review kind by `user` (after authorization of the `create` itself).
///
/// Errors: 422 `Invalid` for a spec the real server refuses; 400 for a rules review without a
/// namespace; 405 for kinds not handled here.
pub fn create(
    auth: &Auth,
    store: &Store,
    user: &UserInfo,
    res: &ResourceInfo,
    namespace: &str,
    body: Value,
) -> Result<Value, ApiError> {
    let spec = body["spec"].clone();
    let group = res.group.as_str();
    match res.kind.as_str() {
        "SelfSubjectAccessReview" => {
            let errs = validate_access_spec(&spec, false);
            if !errs.is_empty() {
                return Err(invalid(&res.kind, group, "", errs));
            }
            let status = access_status(store, user, &attributes(&spec));
            Ok(review_response(body, &res.kind, group, status))
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let mut errs = validate_access_spec(&spec, true);
            if res.kind == "LocalSubjectAccessReview" {
                let ns = spec["resourceAttributes"]["namespace"]
                    .as_str()
                    .unwrap_or_default();
                if spec["resourceAttributes"].is_object() && ns != namespace {
                    errs.push(field_invalid(
                        "spec.resourceAttributes.namespace",
                        &format!("{ns:?}"),
                        "must match metadata.namespace",
                    ));
                }
                if spec["nonResourceAttributes"].is_object() {
                    errs.push(field_invalid(
                        "spec.nonResourceAttributes",
                        "\"object\"",
                        "disallowed on this kind of request",
                    ));
                }
            }
            if !errs.is_empty() {
                return Err(invalid(&res.kind, group, "", errs));
            }
            let subject = UserInfo {
                name: str_of(&spec, "user"),
                uid: str_of(&spec, "uid"),
                groups: spec["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect(),
                ..Default::default()
            };
            let status = access_status(store, &subject, &attributes(&spec));
            Ok(review_response(body, &res.kind, group, status))
        }
        "SelfSubjectRulesReview" => {
            let ns = str_of(&spec, "namespace");
            if ns.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            Ok(review_response(
                body,
                &res.kind,
                group,
                rules_status(store, user, &ns),
            ))
        }
        "SelfSubjectReview" => {
            let mut info = json!({"username": user.name, "groups": user.groups});
            if !user.uid.is_empty() {
                info["uid"] = json!(user.uid);
            }
            if !user.extra.is_empty() {
                info["extra"] = json!(user.extra);
            }
            Ok(review_response(
                body,
                &res.kind,
                group,
                json!({"userInfo": info}),
            ))
        }
        "TokenReview" => {
            let token = str_of(&spec, "token");
            let status = if token == auth.admin_token {
                let a = authn::admin();
                json!({"authenticated": true, "user": {"username": a.name, "uid": a.uid, "groups": a.groups}, "audiences": [tokens::ISSUER]})
            } else {
                match service_account_user(&auth.tokens, store, &token) {
                    Ok(u) => {
                        json!({"authenticated": true, "user": {"username": u.name, "uid": u.uid, "groups": u.groups}, "audiences": [tokens::ISSUER]})
                    }
                    Err(e) => json!({"user": {}, "error": e.to_string()}),
                }
            };
            Ok(review_response(body, &res.kind, group, status))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// `SelfSubjectRulesReview` status: every rule that applies in `namespace`, split into resource
/// and non-resource rules (`system:masters` first gets `*` on everything, as the privileged
/// group authorizer's rules read).
fn rules_status(store: &Store, user: &UserInfo, namespace: &str) -> Value {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    if user.groups.iter().any(|g| g == MASTERS) {
        resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    let (rules, errors) = rbac::rules_for(store, user, namespace);
    for r in rules {
        let rule = &r.rule;
        if rule["nonResourceURLs"]
            .as_array()
            .is_some_and(|u| !u.is_empty())
        {
            non_resource_rules
                .push(json!({"verbs": rule["verbs"], "nonResourceURLs": rule["nonResourceURLs"]}));
        } else {
            let mut out = json!({"verbs": rule["verbs"], "apiGroups": rule["apiGroups"], "resources": rule["resources"]});
            if rule["resourceNames"]
                .as_array()
                .is_some_and(|n| !n.is_empty())
            {
                out["resourceNames"] = rule["resourceNames"].clone();
            }
            resource_rules.push(out);
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": !errors.is_empty()});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    status
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: a signed token for the
/// ServiceAccount, optionally bound to a Pod or Secret of the namespace.
///
/// Errors: 404 when the ServiceAccount (or the bound object) is missing; 422 for a name or
/// namespace in the body that differs from the URL, or `expirationSeconds` below 600 or above
/// 2^32; 400 for a bound object that is neither a Pod nor a Secret, or a Pod running as another
/// ServiceAccount; 409 when the bound object's uid differs.
pub fn token_request(
    auth: &Auth,
    store: &Store,
    namespace: &str,
    name: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let kind_invalid = |field: &str, value: &str, detail: &str| {
        invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            vec![field_invalid(field, &format!("{value:?}"), detail)],
        )
    };
    let body_name = body["metadata"]["name"].as_str().unwrap_or_default();
    if !body_name.is_empty() && body_name != name {
        return Err(kind_invalid(
            "metadata.name",
            body_name,
            "must match the service account name if specified",
        ));
    }
    let body_ns = body["metadata"]["namespace"].as_str().unwrap_or_default();
    if !body_ns.is_empty() && body_ns != namespace {
        return Err(kind_invalid(
            "metadata.namespace",
            body_ns,
            "must match the service account namespace if specified",
        ));
    }
    let sa = store
        .get_stored("/serviceaccounts", namespace, name)
        .ok_or_else(|| ApiError::NotFound {
            resource: "serviceaccounts".into(),
            name: name.into(),
            group: String::new(),
        })?;
    let spec = &mut body["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    if spec["audiences"].as_array().is_none_or(|a| a.is_empty()) {
        spec["audiences"] = json!([tokens::ISSUER]);
    }
    let expiration = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    spec["expirationSeconds"] = json!(expiration);
    if !(MIN_EXPIRATION_SECONDS..=1 << 32).contains(&expiration) {
        let detail = if expiration < MIN_EXPIRATION_SECONDS {
            "may not specify a duration less than 10 minutes"
        } else {
            "may not specify a duration larger than 2^32 seconds"
        };
        return Err(invalid(
            "TokenRequest",
            "authentication.k8s.io",
            "",
            vec![field_invalid(
                "spec.expirationSeconds",
                &expiration.to_string(),
                detail,
            )],
        ));
    }
    let (mut pod, mut secret) = (None, None);
    let bound = spec["boundObjectRef"].clone();
    if bound.is_object() {
        let kind = bound["kind"].as_str().unwrap_or_default();
        let bname = bound["name"].as_str().unwrap_or_default();
        let api_version = bound["apiVersion"].as_str().unwrap_or("v1");
        let storage = match (api_version, kind) {
            ("v1", "Pod") => "/pods",
            ("v1", "Secret") => "/secrets",
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token to object of type {}",
                    if api_version.contains('/') {
                        format!("{api_version}, Kind={kind}")
                    } else {
                        format!("/{api_version}, Kind={kind}")
                    }
                )))
            }
        };
        let obj =
            store
                .get_stored(storage, namespace, bname)
                .ok_or_else(|| ApiError::NotFound {
                    resource: storage.trim_start_matches('/').into(),
                    name: bname.into(),
                    group: String::new(),
                })?;
        if kind == "Pod" && obj["spec"]["serviceAccountName"].as_str() != Some(name) {
            return Err(ApiError::BadRequest(format!("cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name.")));
        }
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let want = bound["uid"].as_str().unwrap_or_default();
        if !want.is_empty() && want != uid {
            return Err(ApiError::Conflict {
                resource: kind.into(),
                name: bname.into(),
                group: String::new(),
                message: format!("the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"),
            });
        }
        let r = BoundRef {
            name: bname.into(),
            uid: uid.into(),
        };
        if kind == "Pod" {
            pod = Some(r);
        } else {
            secret = Some(r);
        }
    }
    let now = tokens::now_seconds();
    let exp = now + expiration as u64;
    let claims = Claims {
        iss: tokens::ISSUER.into(),
        sub: authn::service_account_username(namespace, name),
        aud: body["spec"]["audiences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        exp,
        iat: now,
        nbf: now,
        kubernetes: KubernetesClaim {
            namespace: namespace.into(),
            serviceaccount: ServiceAccountRef {
                name: name.into(),
                uid: sa["metadata"]["uid"].as_str().unwrap_or_default().into(),
            },
            pod,
            secret,
        },
    };
    let token = auth.tokens.issue(&claims);
    let expires = DateTime::<Utc>::from_timestamp(exp as i64, 0).unwrap_or_else(Utc::now);
    body["kind"] = json!("TokenRequest");
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["metadata"] =
        json!({"name": name, "namespace": namespace, "creationTimestamp": timestamp(Utc::now())});
    if body["spec"].get("boundObjectRef").is_none() {
        body["spec"]["boundObjectRef"] = Value::Null;
    }
    body["status"] = json!({"token": token, "expirationTimestamp": timestamp(expires)});
    Ok(body)
}
