//! kubectl 1.32 against the server with the manifests of the GKE Ingress guide
//! (reference/000_8e2dd831946c5b72.txt): apply, get -o yaml, describe with Events, re-apply
//! with a change (strategic merge patch), get -w, wait, delete; the BackendConfig CRD and its
//! printer columns.

mod api_support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use api_support::{fixture, poll, start};

#[test]
fn apply_get_describe_reapply_watch_delete() {
    let server = start(&["--no-local-controllers"]);
    let out = server.kubectl_ok(&["apply", "-f", &fixture("gke-ingress.yaml")]);
    assert!(
        out.contains("ingress.networking.k8s.io/my-ingress created"),
        "{out}"
    );
    assert!(
        out.contains("service/my-products created")
            && out.contains("service/my-discounted-products created"),
        "{out}"
    );

    // `get -w` sees the later changes.
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "get",
            "ingress",
            "my-ingress",
            "-w",
            "--output-watch-events",
            "-o",
            "custom-columns=EVENT:.type,PATHS:.object.spec.rules[0].http.paths[*].path",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let mut stdout = watch.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    poll("the watch to list my-ingress", || {
        seen.lock().unwrap().contains("ADDED").then_some(())
    });

    let yaml = server.kubectl_ok(&["get", "ingress", "my-ingress", "-o", "yaml"]);
    assert!(
        yaml.contains("host: your-store.example") && yaml.contains("name: my-discounted-products"),
        "{yaml}"
    );
    assert!(
        yaml.contains("generation: 1")
            && yaml.contains("uid: ")
            && yaml.contains("creationTimestamp:"),
        "{yaml}"
    );
    let svc = server.kubectl_ok(&["get", "service", "my-products", "-o", "yaml"]);
    assert!(
        svc.contains("nodePort: ") && svc.contains("targetPort: 50000"),
        "{svc}"
    );

    // An Event about the Ingress shows in describe (core/v1, found with involvedObject.uid).
    let uid = server.kubectl_ok(&[
        "get",
        "ingress",
        "my-ingress",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let event = format!(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: my-ingress.sync\ninvolvedObject:\n  apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  name: my-ingress\n  namespace: default\n  uid: {uid}\nreason: Sync\nmessage: Scheduled for sync\ntype: Normal\nsource:\n  component: loadbalancer-controller\nfirstTimestamp: \"2026-01-01T00:00:00Z\"\nlastTimestamp: \"2026-01-01T00:00:00Z\"\ncount: 1\n"
    );
    let (ok, out, err) = server.kubectl_stdin(&["create", "-f", "-"], Some(&event));
    assert!(ok, "{out}{err}");
    let describe = server.kubectl_ok(&["describe", "ingress", "my-ingress"]);
    assert!(
        describe.contains("your-store.example") && describe.contains("/products"),
        "{describe}"
    );
    assert!(
        describe.contains("Sync")
            && describe.contains("Scheduled for sync")
            && describe.contains("loadbalancer-controller"),
        "{describe}"
    );

    // A hand-made annotation survives re-apply: kubectl apply sends a strategic merge patch.
    server.kubectl_ok(&[
        "annotate",
        "ingress",
        "my-ingress",
        "example.com/owner=team-a",
    ]);
    let changed = std::fs::read_to_string(fixture("gke-ingress.yaml"))
        .unwrap()
        .replace("/discounted", "/sale");
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(&changed));
    assert!(
        ok && out.contains("ingress.networking.k8s.io/my-ingress configured"),
        "{out}{err}"
    );
    let paths = server.kubectl_ok(&["get", "ingress", "my-ingress", "-o", "jsonpath={.spec.rules[0].http.paths[*].path} {.metadata.generation} {.metadata.annotations.example\\.com/owner}"]);
    assert_eq!(paths.trim(), "/products /sale 2 team-a");
    server.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.spec.rules[0].http.paths[1].path}=/sale",
        "ingress/my-ingress",
        "--timeout=30s",
    ]);
    poll("the watch to see the change", || {
        seen.lock()
            .unwrap()
            .contains("/products,/sale")
            .then_some(())
    });

    // kubectl's default server-side field validation rejects a typo, as a real server does.
    let typo = changed.replace("    http:\n", "    htp:\n");
    let (ok, _, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(&typo));
    assert!(
        !ok && err.contains("strict decoding error: unknown field \"spec.rules[0].htp\""),
        "{err}"
    );

    let out = server.kubectl_ok(&["delete", "ingress", "my-ingress"]);
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, err) = server.kubectl(&["get", "ingress", "my-ingress"]);
    assert!(
        !ok && err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    poll("the watch to see the deletion", || {
        seen.lock().unwrap().contains("DELETED").then_some(())
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let _ = reader.join();
}

#[test]
fn backendconfig_crd_is_served_with_printer_columns_until_deleted() {
    let server = start(&["--no-local-controllers"]);
    server.kubectl_ok(&["apply", "-f", &fixture("backendconfig-crd.yaml")]);
    server.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/backendconfigs.cloud.google.com",
        "--timeout=30s",
    ]);
    let out = server.kubectl_ok(&["apply", "-f", &fixture("backendconfig.yaml")]);
    assert!(
        out.contains("backendconfig.cloud.google.com/http-hc-config created"),
        "{out}"
    );
    let table = server.kubectl_ok(&["get", "bc"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, vec!["NAME", "TYPE", "PORT", "AGE"], "{table}");
    assert!(
        table.contains("http-hc-config") && table.contains("HTTPS") && table.contains("15020"),
        "{table}"
    );
    let check = server.kubectl_ok(&[
        "get",
        "backendconfig",
        "http-hc-config",
        "-o",
        "jsonpath={.spec.healthCheck.requestPath}",
    ]);
    assert_eq!(check, "/healthz");
    // Re-applying a changed custom resource goes through a JSON merge patch.
    let changed = std::fs::read_to_string(fixture("backendconfig.yaml"))
        .unwrap()
        .replace("checkIntervalSec: 15", "checkIntervalSec: 20");
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(&changed));
    assert!(ok && out.contains("configured"), "{out}{err}");
    let interval = server.kubectl_ok(&[
        "get",
        "bc",
        "http-hc-config",
        "-o",
        "jsonpath={.spec.healthCheck.checkIntervalSec} {.metadata.generation}",
    ]);
    assert_eq!(interval, "20 2");
    let resources = server.kubectl_ok(&["api-resources", "--api-group=cloud.google.com"]);
    assert!(
        resources.contains("backendconfigs") && resources.contains("bc"),
        "{resources}"
    );

    server.kubectl_ok(&["delete", "crd", "backendconfigs.cloud.google.com"]);
    poll("the BackendConfig kind to disappear", || {
        let (ok, _, err) = server.kubectl(&["get", "backendconfigs.cloud.google.com"]);
        (!ok && err.contains("the server doesn't have a resource type")).then_some(())
    });
}

#[test]
fn kubectl_create_generators_send_protobuf_bodies() {
    let server = start(&["--no-local-controllers"]);
    server.kubectl_ok(&["create", "namespace", "demo"]);
    server.kubectl_ok(&[
        "create",
        "configmap",
        "cfg",
        "-n",
        "demo",
        "--from-literal=a=b",
    ]);
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "demo",
        "--from-literal=pw=x",
    ]);
    let cfg = server.kubectl_ok(&[
        "get",
        "configmap",
        "cfg",
        "-n",
        "demo",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(cfg, "b");
    let secret = server.kubectl_ok(&[
        "get",
        "secret",
        "creds",
        "-n",
        "demo",
        "-o",
        "jsonpath={.type} {.data.pw}",
    ]);
    assert_eq!(secret, "Opaque eA==");
    // Every built-in kind is decoded: a Service (its int-or-string targetPort) too.
    server.kubectl_ok(&["create", "service", "clusterip", "s", "--tcp=80:8080"]);
    let ports = server.kubectl_ok(&[
        "get",
        "service",
        "s",
        "-o",
        "jsonpath={.spec.ports[0].port}->{.spec.ports[0].targetPort}",
    ]);
    assert_eq!(ports, "80->8080");
}
