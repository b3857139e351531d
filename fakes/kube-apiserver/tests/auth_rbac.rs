//! Authentication, RBAC, impersonation, ServiceAccount tokens and admission, against the real
//! binary with kubectl and raw HTTPS: a ServiceAccount without a binding gets real 403 Status
//! objects; Roles and ClusterRoles grant by verb, group, resource, subresource, resourceNames and
//! namespace; `kubectl create token`, `kubectl auth can-i` (with `--as`), `--list` and `whoami`
//! work; the audit log records every request.

mod api_support;

use api_support::{start, ApiServer};
use serde_json::{json, Value};

/// Sends one request with `token` (or none); returns (code, body as JSON).
async fn call(
    server: &ApiServer,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<(&str, Value)>,
) -> (u16, Value) {
    let mut req = server
        .http()
        .request(method, format!("{}{path}", server.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some((ct, b)) = body {
        req = req.header("content-type", ct).body(b.to_string());
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn get(server: &ApiServer, token: Option<&str>, path: &str) -> (u16, Value) {
    call(server, token, reqwest::Method::GET, path, None).await
}

fn apply(server: &ApiServer, yaml: &str) {
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply failed:\n{out}\n{err}");
}

fn create_token(server: &ApiServer, ns: &str, sa: &str) -> String {
    server
        .kubectl_ok(&["create", "token", sa, "-n", ns])
        .trim()
        .to_string()
}

const RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease-holder, namespace: default}
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["mine"]
  verbs: ["get", "update", "watch", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-lease, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease-holder}
subjects: [{kind: ServiceAccount, name: app}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ingress-status}
rules:
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses/status"]
  verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: app-ingress-status}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ingress-status}
subjects: [{kind: ServiceAccount, name: app, namespace: default}]
"#;

const USER: &str = "system:serviceaccount:default:app";

#[tokio::test]
async fn service_account_tokens_are_authorized_by_rbac() {
    let server = start(&["--no-local-controllers"]);
    // Without a binding: discovery and health are open to every authenticated user, nothing
    // else is.
    apply(
        &server,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: app, namespace: default}\n",
    );
    let token = create_token(&server, "default", "app");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let t = Some(token.as_str());
    for path in [
        "/api",
        "/apis",
        "/api/v1",
        "/version",
        "/healthz",
        "/openapi/v3",
    ] {
        let (code, _) = call(&server, t, reqwest::Method::GET, path, None).await;
        assert_eq!(code, 200, "GET {path}");
    }
    let (code, status) = call(
        &server,
        t,
        reqwest::Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!(r#"pods is forbidden: User "{USER}" cannot list resource "pods" in API group "" in the namespace "default""#),
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
    );
    let (code, status) = call(
        &server,
        t,
        reqwest::Method::PATCH,
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses/x/status",
        Some(("application/merge-patch+json", json!({}))),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            r#"ingresses.networking.k8s.io "x" is forbidden: User "{USER}" cannot patch resource "ingresses/status" in API group "networking.k8s.io" in the namespace "default""#
        )
    );
    assert_eq!(
        status["details"],
        json!({"name": "x", "group": "networking.k8s.io", "kind": "ingresses"})
    );
    let (code, status) = call(&server, t, reqwest::Method::GET, "/metrics", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(r#"forbidden: User "{USER}" cannot get path "/metrics""#)
    );

    // With the Role (resourceNames) and ClusterRole (subresource) bindings.
    apply(&server, RBAC);
    apply(
        &server,
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: mine, namespace: default}\n---\napiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: other, namespace: default}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x, namespace: default}\nspec: {defaultBackend: {service: {name: s, port: {number: 80}}}}\n",
    );
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    assert_eq!(get(&server, t, &format!("{leases}/mine")).await.0, 200);
    let (code, status) = get(&server, t, &format!("{leases}/other")).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            r#"leases.coordination.k8s.io "other" is forbidden: User "{USER}" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "default""#
        )
    );
    assert_eq!(get(&server, t, leases).await.0, 403, "list of all leases");
    assert_eq!(
        get(
            &server,
            t,
            &format!("{leases}?fieldSelector=metadata.name%3Dmine")
        )
        .await
        .0,
        200,
        "a list narrowed to the named lease is allowed by resourceNames"
    );
    assert_eq!(
        get(
            &server,
            t,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/mine"
        )
        .await
        .0,
        403,
        "a Role grants in its own namespace only"
    );
    let ingress = "/apis/networking.k8s.io/v1/namespaces/default/ingresses/x";
    let (code, _) = call(
        &server,
        t,
        reqwest::Method::PATCH,
        &format!("{ingress}/status"),
        Some((
            "application/merge-patch+json",
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}}),
        )),
    )
    .await;
    assert_eq!(code, 200, "ingresses/status patch is granted");
    let (code, _) = call(
        &server,
        t,
        reqwest::Method::PATCH,
        ingress,
        Some((
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"a": "b"}}}),
        )),
    )
    .await;
    assert_eq!(code, 403, "the ingress itself is not patchable");

    // kubectl with the token sees the same decisions.
    let (ok, _, err) = server.kubectl(&["--token", &token, "get", "pods"]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            r#"pods is forbidden: User "{USER}" cannot list resource "pods" in API group "" in the namespace "default""#
        )),
        "{err}"
    );
    assert!(server
        .kubectl_ok(&["--token", &token, "get", "ingress", "x"])
        .contains("x"));

    // A binding to a missing role names it in the reason.
    apply(
        &server,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: dangling, namespace: default}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: missing}\nsubjects: [{kind: ServiceAccount, name: app}]\n",
    );
    let (_, status) = get(&server, t, "/api/v1/namespaces/default/secrets").await;
    assert_eq!(
        status["message"],
        format!(
            r#"secrets is forbidden: User "{USER}" cannot list resource "secrets" in API group "" in the namespace "default": RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found"#
        )
    );

    // Deleting the ServiceAccount invalidates its tokens.
    server.kubectl_ok(&["delete", "serviceaccount", "app"]);
    let (code, status) = get(&server, t, &format!("{leases}/mine")).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (401, Some("Unauthorized"))
    );
}

#[tokio::test]
async fn anonymous_and_bad_tokens() {
    let server = start(&["--no-local-controllers"]);
    for path in ["/version", "/healthz", "/readyz", "/livez"] {
        let (code, _) = call(&server, None, reqwest::Method::GET, path, None).await;
        assert_eq!(
            code, 200,
            "anonymous GET {path} (system:public-info-viewer)"
        );
    }
    let (code, status) = call(&server, None, reqwest::Method::GET, "/api", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"forbidden: User "system:anonymous" cannot get path "/api""#
    );
    let (code, _) = call(
        &server,
        Some("x.y.z"),
        reqwest::Method::GET,
        "/version",
        None,
    )
    .await;
    assert_eq!(
        code, 401,
        "a bad token is refused even where anonymous is allowed"
    );
}

#[test]
fn kubectl_auth_can_i_and_impersonation() {
    let server = start(&["--no-local-controllers"]);
    apply(&server, RBAC);
    let can_i = |args: &[&str]| -> String {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        let (_, out, err) = server.kubectl(&all);
        format!("{}{}", out.trim(), err.trim())
    };
    assert_eq!(can_i(&["create", "pods"]), "yes");
    let as_app = format!("--as={USER}");
    assert_eq!(
        can_i(&["patch", "ingresses", "--subresource=status", &as_app]),
        "yes",
        "subresource granted"
    );
    assert_eq!(can_i(&["patch", "ingresses", &as_app]), "no");
    assert_eq!(
        can_i(&["update", "leases/mine", "-n", "default", &as_app]),
        "yes"
    );
    assert_eq!(
        can_i(&["update", "leases/other", "-n", "default", &as_app]),
        "no"
    );
    assert_eq!(can_i(&["get", "/healthz", &as_app]), "yes");
    assert_eq!(can_i(&["get", "/metrics", &as_app]), "no");
    let list = server.kubectl_ok(&["auth", "can-i", "--list", &as_app]);
    assert!(
        list.contains("ingresses.networking.k8s.io/status") && list.contains("[mine]"),
        "{list}"
    );
    let whoami = server.kubectl_ok(&["auth", "whoami", &as_app]);
    assert!(
        whoami.contains(USER) && whoami.contains("system:serviceaccounts:default"),
        "{whoami}"
    );

    // A ServiceAccount may not impersonate without the `impersonate` verb.
    let token = create_token(&server, "default", "app");
    let (ok, _, err) = server.kubectl(&[
        "--token",
        &token,
        "auth",
        "can-i",
        "get",
        "pods",
        "--as=admin",
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            r#"users "admin" is forbidden: User "{USER}" cannot impersonate resource "users" in API group "" at the cluster scope"#
        )),
        "{err}"
    );
    apply(
        &server,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: impersonator}\nrules: [{apiGroups: [''], resources: [users], verbs: [impersonate], resourceNames: [admin]}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: app-impersonator}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonator}\nsubjects: [{kind: ServiceAccount, name: app, namespace: default}]\n",
    );
    let (ok, out, err) = server.kubectl(&[
        "--token",
        &token,
        "auth",
        "can-i",
        "get",
        "pods",
        "--as=admin",
    ]);
    // `admin` without system:masters (impersonation sets only system:authenticated) has no
    // rule for pods.
    assert_eq!((ok, out.trim()), (false, "no"), "{err}");
    let (ok, _, err) = server.kubectl(&[
        "--token",
        &token,
        "get",
        "pods",
        "--as=admin",
        "--as-group=system:masters",
    ]);
    assert!(!ok, "groups need their own impersonate grant");
    assert!(
        err.contains(r#"groups "system:masters" is forbidden"#),
        "{err}"
    );
}

#[tokio::test]
async fn token_requests_are_validated() {
    let server = start(&["--no-local-controllers"]);
    let admin = server.token();
    let path = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let (code, status) = call(
        &server,
        Some(&admin),
        reqwest::Method::POST,
        path,
        Some((
            "application/json",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 60}}),
        )),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"#
    );
    let (code, tr) = call(
        &server,
        Some(&admin),
        reqwest::Method::POST,
        path,
        Some((
            "application/json",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    let token = tr["status"]["token"].as_str().unwrap();
    let (code, review) = call(
        &server,
        Some(&admin),
        reqwest::Method::POST,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some((
            "application/json",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
        )),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:default:default"
    );
    let (code, _) = call(
        &server,
        Some(&admin),
        reqwest::Method::POST,
        "/api/v1/namespaces/default/serviceaccounts/missing/token",
        Some(("application/json", json!({"spec": {}}))),
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = call(
        &server,
        Some(&admin),
        reqwest::Method::GET,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        None,
    )
    .await;
    assert_eq!(code, 405, "reviews are create-only");
}

#[tokio::test]
async fn service_account_and_default_ingress_class_admission() {
    let server = start(&["--no-local-controllers"]);
    server.kubectl_ok(&["create", "namespace", "team"]);
    let sa = server.kubectl_ok(&[
        "get",
        "serviceaccount",
        "default",
        "-n",
        "team",
        "-o",
        "name",
    ]);
    assert_eq!(
        sa.trim(),
        "serviceaccount/default",
        "each namespace gets one"
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\nspec: {containers: [{name: c, image: i}]}\n";
    apply(&server, pod);
    let p: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "pod", "p", "-n", "team", "-o", "json"]))
            .unwrap();
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    let volume = p["spec"]["volumes"][0]["name"].as_str().unwrap();
    assert!(volume.starts_with("kube-api-access-"), "{p}");
    assert_eq!(
        p["spec"]["containers"][0]["volumeMounts"][0],
        json!({"name": volume, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    );

    server.kubectl_ok(&["delete", "serviceaccount", "default", "-n", "team"]);
    let (code, status) = call(
        &server,
        Some(&server.token()),
        reqwest::Method::POST,
        "/api/v1/namespaces/team/pods",
        Some((
            "application/json",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        )),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"pods "q" is forbidden: error looking up service account team/default: serviceaccount "default" not found"#
    );

    let ing = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: NAME, namespace: team}\nspec: {defaultBackend: {service: {name: s, port: {number: 80}}}}\n";
    apply(&server, &ing.replace("NAME", "before"));
    apply(
        &server,
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gce, annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}}\nspec: {controller: k8s.io/ingress-gce}\n",
    );
    apply(&server, &ing.replace("NAME", "after"));
    let class = |name: &str| {
        server.kubectl_ok(&[
            "get",
            "ingress",
            name,
            "-n",
            "team",
            "-o",
            "jsonpath={.spec.ingressClassName}",
        ])
    };
    assert_eq!(class("before"), "", "no default class when it was created");
    assert_eq!(
        class("after"),
        "gce",
        "the default class is filled in on create"
    );
}

#[tokio::test]
async fn the_audit_log_records_each_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let server = start(&[
        "--no-local-controllers",
        "--audit-log",
        log.to_str().unwrap(),
    ]);
    apply(&server, RBAC);
    let token = create_token(&server, "default", "app");
    let (code, _) = call(
        &server,
        Some(&token),
        reqwest::Method::PATCH,
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses/web/status?fieldManager=x",
        Some(("application/merge-patch+json", json!({}))),
    )
    .await;
    assert_eq!(code, 404, "allowed, but there is no such Ingress");
    let (code, _) = call(
        &server,
        Some(&token),
        reqwest::Method::DELETE,
        "/api/v1/namespaces/default/pods",
        None,
    )
    .await;
    assert_eq!(code, 403);
    let text = std::fs::read_to_string(&log).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let by_app: Vec<&Value> = events
        .iter()
        .filter(|e| e["user"]["username"] == USER)
        .collect();
    assert_eq!(by_app.len(), 2, "{text}");
    let patch = by_app[0];
    assert_eq!(patch["kind"], "Event");
    assert_eq!(patch["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(patch["verb"], "patch");
    assert_eq!(
        patch["requestURI"],
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses/web/status?fieldManager=x"
    );
    assert_eq!(
        patch["objectRef"],
        json!({"resource": "ingresses", "namespace": "default", "name": "web",
            "apiGroup": "networking.k8s.io", "apiVersion": "v1", "subresource": "status"})
    );
    assert_eq!(patch["responseStatus"]["code"], 404);
    assert_eq!(
        patch["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert_eq!(
        patch["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    let delete = by_app[1];
    assert_eq!(delete["verb"], "deletecollection");
    assert_eq!(delete["responseStatus"]["code"], 403);
    assert_eq!(delete["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        delete["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    // kubectl's own requests (admin) are there too, with the token request.
    assert!(events.iter().any(|e| e["user"]["username"] == "admin"
        && e["objectRef"]["subresource"] == "token"
        && e["verb"] == "create"));
}
