//! kubectl 1.32 installs the operator from the repository's `deploy/` kustomization against the
//! server (issue 5 acceptance): the client-side dry run (which fetches OpenAPI v3 for every kind
//! it validates) and a real apply, then the stored Deployments, ServiceAccount and ClusterRole.

mod api_support;

use api_support::start;

fn deploy_dir() -> String {
    format!("{}/../../deploy/", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn kubectl_apply_k_deploy_dry_run_then_real_apply() {
    let server = start(&["--no-local-controllers"]);
    let deploy = deploy_dir();

    let (ok, out, err) = server.kubectl(&["apply", "-k", &deploy, "--dry-run=client"]);
    assert!(ok, "dry run failed:\n{out}\n{err}");
    for line in [
        "serviceaccount/gclb-operator created (dry run)",
        "clusterrole.rbac.authorization.k8s.io/gclb-operator created (dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/gclb-operator created (dry run)",
        "deployment.apps/gclb-operator created (dry run)",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!err.contains("openapi"), "kubectl complained: {err}");
    // A client-side dry run stores nothing.
    let out = server.kubectl_ok(&["get", "deploy", "-A", "-o", "name"]);
    assert_eq!(out.trim(), "", "dry run stored {out}");

    let out = server.kubectl_ok(&["apply", "-k", &deploy]);
    assert!(
        out.contains("deployment.apps/gclb-operator created"),
        "{out}"
    );
    let out = server.kubectl_ok(&[
        "get",
        "deploy,sa,clusterrole,clusterrolebinding",
        "-A",
        "-o",
        "name",
    ]);
    for name in [
        "deployment.apps/gclb-operator",
        "deployment.apps/gclb-default-backend",
        "serviceaccount/gclb-operator",
        "clusterrole.rbac.authorization.k8s.io/gclb-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/gclb-operator",
    ] {
        assert!(out.lines().any(|l| l == name), "missing {name} in:\n{out}");
    }
    let image = server.kubectl_ok(&[
        "get",
        "deploy",
        "gclb-operator",
        "-n",
        "gclb-operator",
        "-o",
        "jsonpath={.spec.template.spec.serviceAccountName}",
    ]);
    assert_eq!(image, "gclb-operator");

    // The real printers' columns.
    let out = server.kubectl_ok(&["get", "deploy", "-n", "gclb-operator", "-o", "wide"]);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("gclb-operator "))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["gclb-operator", "0/2", "0", "0"], "{out}");
    let out = server.kubectl_ok(&["get", "clusterrolebinding", "gclb-operator", "-o", "wide"]);
    assert!(out.contains("ClusterRole/gclb-operator"), "{out}");
    assert!(out.contains("gclb-operator:gclb-operator"), "{out}");
    let out = server.kubectl_ok(&["get", "sa", "gclb-operator", "-n", "gclb-operator"]);
    assert!(out.starts_with("NAME") && out.contains("SECRETS"), "{out}");

    // Re-applying the same install changes nothing.
    let out = server.kubectl_ok(&["apply", "-k", &deploy]);
    assert!(
        out.contains("deployment.apps/gclb-operator unchanged"),
        "{out}"
    );
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/gclb-operator unchanged"),
        "{out}"
    );
    // As on a real server (tests/real_api_tier.rs): the PodDisruptionBudget's `spec.selector`
    // has patch strategy `replace`, so kubectl's patch for it is never empty.
    assert!(
        out.contains("poddisruptionbudget.policy/gclb-operator configured"),
        "{out}"
    );
}

#[test]
fn rbac_and_webhook_kinds_are_stored_with_crud() {
    let server = start(&["--no-local-controllers"]);
    let manifest = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: default}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
- {kind: ServiceAccount, name: default, namespace: default}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: gates}
webhooks:
- name: gates.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {name: hook, namespace: default, path: /mutate}
"#;
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(manifest));
    assert!(ok, "{out}\n{err}");
    let out = server.kubectl_ok(&["get", "role,rolebinding", "-n", "default", "-o", "name"]);
    assert!(
        out.contains("role.rbac.authorization.k8s.io/reader"),
        "{out}"
    );
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io/reader"),
        "{out}"
    );
    let out = server.kubectl_ok(&[
        "get",
        "mutatingwebhookconfiguration",
        "gates",
        "-o",
        "jsonpath={.webhooks[0].clientConfig.service.path}",
    ]);
    assert_eq!(out, "/mutate");
    server.kubectl_ok(&["delete", "role", "reader", "-n", "default"]);
    let (ok, _, err) = server.kubectl(&["get", "role", "reader", "-n", "default"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
}
