//! The default RBAC objects a real kube-apiserver creates at start (labelled
//! `kubernetes.io/bootstrapping: rbac-defaults`), those that decide what authenticated and
//! anonymous users may read: `cluster-admin` (everything; bound to `system:masters`),
//! `system:discovery` (discovery, `/openapi`, health and `/version`; bound to
//! `system:authenticated`), `system:basic-user` (SelfSubjectAccessReview and
//! SelfSubjectRulesReview; `system:authenticated`) and `system:public-info-viewer` (health and
//! `/version`; `system:authenticated` and `system:unauthenticated`). Source: k8s.io/kubernetes
//! v1.26 `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`. The many controller roles
//! and the aggregated `admin`/`edit`/`view` roles are not created.

use serde_json::{json, Value};

use crate::store::{Store, Writer};

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let role = |name: &str, rules: Value| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name), "rules": rules});
    vec![
        role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                // Since v1.28 (SelfSubjectReview GA; `kubectl auth whoami`).
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
        ),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                "verbs": ["get"]}]),
        ),
    ]
}

/// The default ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects})
    };
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

/// Creates the default objects that are missing (at start, and after a state file was loaded).
pub fn ensure(store: &Store) {
    let writer = Writer::update("kube-apiserver");
    for (plural, objects) in [
        ("clusterroles", cluster_roles()),
        ("clusterrolebindings", cluster_role_bindings()),
    ] {
        let Some(res) = store
            .registry
            .find("rbac.authorization.k8s.io", "v1", plural)
        else {
            continue;
        };
        for obj in objects {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            if store.get_stored(&res.storage, "", name).is_none() {
                if let Err(e) = store.create(&res, "", obj.clone(), &writer) {
                    tracing::warn!(error = %e, name, "creating a default RBAC object");
                }
            }
        }
    }
}
