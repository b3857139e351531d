//! Authorization: `system:masters` is allowed everything (kube-apiserver's privileged-group
//! authorizer, first in its union); everyone else by RBAC, from the stored ClusterRoleBindings
//! (every namespace) and the RoleBindings of the request's namespace, each resolved to the rules
//! of its Role or ClusterRole. A rule allows a resource request when verb, API group, resource
//! (`resource/subresource`, `*`, `*/subresource`) and `resourceNames` (empty = any) match; a
//! non-resource request when verb and `nonResourceURLs` (exact, `*`, or a `prefix*`) match.
//! Aggregated ClusterRoles are nothing special: their stored `rules` count, as a real server's
//! aggregation controller would have filled them.
//!
//! Port of k8s.io/kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go`,
//! `pkg/apis/rbac/v1/evaluation_helpers.go` and `pkg/registry/rbac/validation/rule.go`,
//! including the texts of the reasons (`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole
//! "r" to ServiceAccount "sa/ns"`, and for denials the errors met on the way, e.g.
//! `RBAC: clusterrole.rbac.authorization.k8s.io "r" not found`).

use serde_json::Value;

use super::authn::MASTERS;
use super::request_info::RequestInfo;
use super::user::UserInfo;
use crate::status::ApiError;
use crate::store::Store;

const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";
const ROLES: &str = "rbac.authorization.k8s.io/roles";
const ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/rolebindings";

/// The outcome of an authorization check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with the reason (`""` for `system:masters`).
    Allow(String),
    /// No rule allows it; the reason lists errors met resolving bindings (often `""`).
    NoOpinion(String),
}

impl Decision {
    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason text.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::NoOpinion(r) => r,
        }
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn verb_matches(rule: &Value, verb: &str) -> bool {
    strings(&rule["verbs"])
        .iter()
        .any(|v| *v == "*" || *v == verb)
}

fn resource_matches(rule: &Value, combined: &str, subresource: &str) -> bool {
    strings(&rule["resources"]).iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

fn name_matches(rule: &Value, name: &str) -> bool {
    let names = strings(&rule["resourceNames"]);
    names.is_empty() || names.contains(&name)
}

fn url_matches(rule: &Value, path: &str) -> bool {
    strings(&rule["nonResourceURLs"]).iter().any(|u| {
        *u == "*" || *u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

/// `RuleAllows`: whether one PolicyRule (JSON) allows the request.
pub fn rule_allows(info: &RequestInfo, rule: &Value) -> bool {
    if info.is_resource_request {
        verb_matches(rule, &info.verb)
            && strings(&rule["apiGroups"])
                .iter()
                .any(|g| *g == "*" || *g == info.api_group)
            && resource_matches(rule, &info.combined_resource(), &info.subresource)
            && name_matches(rule, &info.name)
    } else {
        verb_matches(rule, &info.verb) && url_matches(rule, &info.path)
    }
}

fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let kind = subject["kind"].as_str().unwrap_or_default();
    let name = subject["name"].as_str().unwrap_or_default();
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        format!("{kind} {:?}", format!("{name}/{ns}"))
    } else {
        format!("{kind} {name:?}")
    }
}

fn applies_to(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str().unwrap_or_default() {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty() && user.name == super::authn::service_account_username(ns, name)
        }
        _ => false,
    }
}

/// Where a rule came from, and the rule.
pub struct SourcedRule {
    /// `ClusterRoleBinding "b" of ClusterRole "r" to User "u"` (the reason's wording).
    pub source: String,
    /// The PolicyRule (JSON).
    pub rule: Value,
}

/// The rules that apply to `user` in `namespace` (cluster-wide ones included), and the errors
/// met resolving role references (`clusterrole.rbac.authorization.k8s.io "x" not found`).
pub fn rules_for(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<SourcedRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    let mut visit = |binding: &Value, binding_ns: &str, describer: &dyn Fn(&Value) -> String| {
        let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, binding_ns)) else {
            return;
        };
        let role_ref = &binding["roleRef"];
        let role_name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str().unwrap_or_default() {
            "Role" => store
                .get_stored(ROLES, binding_ns, role_name)
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {role_name:?} not found")),
            "ClusterRole" => store
                .get_stored(CLUSTER_ROLES, "", role_name)
                .ok_or_else(|| {
                    format!("clusterrole.rbac.authorization.k8s.io {role_name:?} not found")
                }),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        };
        match role {
            Ok(role) => {
                let source = describer(subject);
                for rule in role["rules"].as_array().into_iter().flatten() {
                    rules.push(SourcedRule {
                        source: source.clone(),
                        rule: rule.clone(),
                    });
                }
            }
            Err(e) => errors.push(e),
        }
    };
    for binding in store.list_stored(CLUSTER_ROLE_BINDINGS, None) {
        let describer = |s: &Value| {
            format!(
                "ClusterRoleBinding {:?} of {} {:?} to {}",
                binding["metadata"]["name"].as_str().unwrap_or_default(),
                binding["roleRef"]["kind"].as_str().unwrap_or_default(),
                binding["roleRef"]["name"].as_str().unwrap_or_default(),
                describe_subject(s, "")
            )
        };
        visit(&binding, "", &describer);
    }
    if !namespace.is_empty() {
        for binding in store.list_stored(ROLE_BINDINGS, Some(namespace)) {
            let describer = |s: &Value| {
                format!(
                    "RoleBinding {:?} of {} {:?} to {}",
                    format!(
                        "{}/{namespace}",
                        binding["metadata"]["name"].as_str().unwrap_or_default()
                    ),
                    binding["roleRef"]["kind"].as_str().unwrap_or_default(),
                    binding["roleRef"]["name"].as_str().unwrap_or_default(),
                    describe_subject(s, namespace)
                )
            };
            visit(&binding, namespace, &describer);
        }
    }
    (rules, errors)
}

/// Authorizes one request for `user`.
pub fn authorize(store: &Store, user: &UserInfo, info: &RequestInfo) -> Decision {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Decision::Allow(String::new());
    }
    let (rules, errors) = rules_for(store, user, &info.namespace);
    if let Some(r) = rules.iter().find(|r| rule_allows(info, &r.rule)) {
        return Decision::Allow(format!("RBAC: allowed by {}", r.source));
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision::NoOpinion(reason)
}

/// The message of a denial, as `responsewriters.forbiddenMessage` words it:
/// `User "u" cannot patch resource "ingresses/status" in API group "networking.k8s.io" in the
/// namespace "default"` (or `at the cluster scope`), or `User "u" cannot get path "/x"`.
pub fn forbidden_message(user: &str, info: &RequestInfo) -> String {
    if !info.is_resource_request {
        return format!("User {user:?} cannot {} path {:?}", info.verb, info.path);
    }
    let resource = info.combined_resource();
    if info.namespace.is_empty() {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            info.verb, info.api_group
        )
    } else {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            info.verb, info.api_group, info.namespace
        )
    }
}

/// A 403 for `user` asking `info`, with the authorizer's `reason` appended as `: reason`, in
/// `responsewriters.Forbidden`'s format.
pub fn forbidden(user: &str, info: &RequestInfo, reason: &str) -> ApiError {
    let mut message = forbidden_message(user, info);
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    ApiError::ForbiddenResource {
        group: info.api_group.clone(),
        resource: info.resource.clone(),
        name: info.name.clone(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            ..Default::default()
        }
    }

    #[test]
    fn rule_matching_follows_the_evaluation_helpers() {
        let r = json!({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "patch"]});
        assert!(rule_allows(
            &info("get", "networking.k8s.io", "ingresses", "", "x"),
            &r
        ));
        assert!(!rule_allows(
            &info("patch", "networking.k8s.io", "ingresses", "status", "x"),
            &r
        ));
        assert!(!rule_allows(
            &info("delete", "networking.k8s.io", "ingresses", "", "x"),
            &r
        ));
        assert!(!rule_allows(&info("get", "", "ingresses", "", "x"), &r));
        let star_sub = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(
            &info("update", "", "pods", "status", "p"),
            &star_sub
        ));
        assert!(!rule_allows(
            &info("update", "", "pods", "", "p"),
            &star_sub
        ));
        let named = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["l"], "verbs": ["get"]});
        assert!(rule_allows(
            &info("get", "coordination.k8s.io", "leases", "", "l"),
            &named
        ));
        assert!(!rule_allows(
            &info("get", "coordination.k8s.io", "leases", "", "m"),
            &named
        ));
        assert!(!rule_allows(
            &info("get", "coordination.k8s.io", "leases", "", ""),
            &named
        ));
        let urls = json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]});
        let path = |p: &str| RequestInfo {
            path: p.into(),
            verb: "get".into(),
            ..Default::default()
        };
        assert!(rule_allows(&path("/healthz"), &urls));
        assert!(rule_allows(&path("/apis/apps/v1"), &urls));
        assert!(!rule_allows(&path("/metrics"), &urls));
    }

    #[test]
    fn forbidden_messages_use_the_real_wording() {
        assert_eq!(
            forbidden_message(
                "system:serviceaccount:ns:sa",
                &info("patch", "networking.k8s.io", "ingresses", "status", "x")
            ),
            r#"User "system:serviceaccount:ns:sa" cannot patch resource "ingresses/status" in API group "networking.k8s.io" in the namespace "ns""#
        );
        let mut cluster = info("list", "", "nodes", "", "");
        cluster.namespace.clear();
        assert_eq!(
            forbidden_message("u", &cluster),
            r#"User "u" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
    }
}
