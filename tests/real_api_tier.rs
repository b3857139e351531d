//! The real-API tier (issue 30, `make test-real-api`): the operator against a real
//! kube-apiserver + etcd found the envtest way (`KUBEBUILDER_ASSETS`, see
//! tests/real_api/harness.rs), skipped with a message without them.
//!
//! As root the test re-runs itself in a private network namespace whose `lo` holds
//! 10.244.0.1/24, so the Pod IPs it writes (a real server refuses loopback ones) are local: the
//! backends listen there and real HTTP flows client -> emulated load balancer -> Pod. Without
//! root it runs the control-plane checks only and says so. There is no kubelet or
//! controller-manager: the test writes the Pods, their status and the EndpointSlices itself.
//!
//! Covered: install from `kubectl apply -k deploy/` (kustomize, with the CRDs), RBAC of deploy/'s
//! ServiceAccount (allowed verbs, denials as real 403s), the operator running as that
//! ServiceAccount: Ingress -> Compute resources -> status IP, the finalizer, Events, leader
//! election (its Lease), a BackendConfig's timeout on the backend service, a FrontendConfig and a
//! ManagedCertificate and a TLSCertificateDelegation accepted by the real server's CRD validation
//! (and a TLSCertificateDelegation without target namespaces and an Ingress v1 `secretName` of
//! the `namespace/name` form refused), the readiness gate turning
//! True, traffic through the load balancer, adding TLS without an IP change, and deletion.

#[path = "real_api/harness.rs"]
mod harness;
#[path = "real_api/stack.rs"]
mod stack;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const NS: &str = "shop";
const DEADLINE: Duration = Duration::from_secs(120);

fn kubectl_ok(kc: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out, err) = harness::kubectl(kc, args, stdin);
    assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
    out
}

fn get_json(kc: &Path, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&kubectl_ok(kc, &all, None)).expect("kubectl JSON")
}

fn poll<T>(what: &str, logs: &dyn Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for {what}{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A tiny HTTP server on `addr` answering every request with `status` and `body` (the Pod).
fn backend(addr: &str, status: u16, body: &'static str) {
    let listener = TcpListener::bind(addr).expect("bind the backend in the Pod range");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = conn.read(&mut buf);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes());
            });
        }
    });
}

fn workload(ip: &str, netns: bool) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {NS}
  annotations:
    cloud.google.com/neg: '{{"ingress": true}}'
    cloud.google.com/backend-config: '{{"default": "web"}}'
spec:
  selector: {{app: web}}
  ports:
  - {{name: http, port: 80, targetPort: 8080, protocol: TCP}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: {NS}
  labels: {{app: web}}
spec:
  nodeName: node-1
  readinessGates:
  - conditionType: cloud.google.com/load-balancer-neg-ready
  containers:
  - name: web
    image: example/web
    ports: [{{containerPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: {NS}
  labels: {{kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- addresses: ["{ip}"]
  conditions: {{ready: {netns}}}
  zone: us-central1-a
  nodeName: node-1
  targetRef: {{kind: Pod, name: web-0, namespace: {NS}}}
ports:
- {{name: http, port: 8080, protocol: TCP}}
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: web
  namespace: {NS}
spec:
  timeoutSec: 42
---
apiVersion: networking.gke.io/v1beta1
kind: FrontendConfig
metadata:
  name: web
  namespace: {NS}
spec:
  redirectToHttps: {{enabled: false}}
---
apiVersion: networking.gke.io/v1
kind: ManagedCertificate
metadata:
  name: web
  namespace: {NS}
spec:
  domains: [web.example.com]
---
apiVersion: gclb-operator.dev/v1alpha1
kind: TLSCertificateDelegation
metadata:
  name: web
  namespace: {NS}
spec:
  delegations: [{{secretName: web-tls, targetNamespaces: ["*", default]}}]
"#
    )
}

const INGRESS: &str = r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  annotations:
    networking.gke.io/v1beta1.FrontendConfig: web
spec:
  ingressClassName: gclb
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {number: 80}}}
"#;

#[test]
fn operator_on_a_real_api_server() {
    let Some(assets) = harness::assets() else {
        return;
    };
    if let Some(passed) = harness::in_private_netns("operator_on_a_real_api_server") {
        assert!(
            passed,
            "the tier failed inside its network namespace (output above)"
        );
        return;
    }
    let netns = std::env::var_os(harness::NETNS_ENV).is_some();
    if !netns {
        eprintln!(
            "NOTE: no private network namespace (not root, or GCLB_REAL_API_NO_NETNS): control-plane checks only \
             (no traffic through the load balancer, no readiness gate)"
        );
    }
    let real = harness::RealApi::start(&assets).expect("start kube-apiserver and etcd");
    eprintln!("real API server: {}", real.version);
    let kc = real.kubeconfig.clone();

    // Install as a user would: `kubectl apply -k deploy/` (CRDs, namespace, RBAC, Deployment,
    // IngressClass), then again: unchanged.
    let deploy = support::repo_root().join("deploy");
    let deploy = deploy.to_str().expect("path");
    let out = kubectl_ok(&kc, &["apply", "-k", deploy], None);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/backendconfigs.cloud.google.com created"
        ),
        "{out}"
    );
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/gclb-operator created"),
        "{out}"
    );
    let again = kubectl_ok(&kc, &["apply", "-k", deploy], None);
    // kubectl reports a PodDisruptionBudget `configured` on every apply against a real server:
    // its `spec.selector` has patch strategy `replace`, so the computed patch is never empty.
    let again: String = again
        .lines()
        .filter(|l| !l.starts_with("poddisruptionbudget.policy/"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !again.contains(" created") && !again.contains(" configured"),
        "re-apply changed something:\n{again}"
    );

    // RBAC of the operator's ServiceAccount, as the real authorizer answers.
    let sa = "system:serviceaccount:gclb-operator:gclb-operator";
    for (verb, resource, sub, want) in [
        ("list", "ingresses.networking.k8s.io", "", "yes"),
        ("patch", "ingresses.networking.k8s.io", "status", "yes"),
        ("patch", "pods", "status", "yes"),
        ("create", "events.events.k8s.io", "", "yes"),
        ("delete", "ingresses.networking.k8s.io", "", "no"),
        ("patch", "pods", "", "no"),
        // Nodes are read (their zones are the NEG zones), never written.
        ("list", "nodes", "", "yes"),
        ("patch", "nodes", "", "no"),
    ] {
        let sub = format!("--subresource={sub}");
        let (_, out, _) = harness::kubectl(
            &kc,
            &["auth", "can-i", verb, resource, &sub, "--as", sa, "-n", NS],
            None,
        );
        assert_eq!(out.trim(), want, "can-i {verb} {resource} {sub}");
    }
    let operator_kc = real
        .service_account_kubeconfig("gclb-operator", "gclb-operator")
        .expect("operator kubeconfig");
    let (ok, _, err) = harness::kubectl(&operator_kc, &["delete", "ingress", "x", "-n", NS], None);
    assert!(!ok);
    assert!(
        err.contains(r#"ingresses.networking.k8s.io "x" is forbidden: User "system:serviceaccount:gclb-operator:gclb-operator" cannot delete resource "ingresses" in API group "networking.k8s.io" in the namespace "shop""#),
        "{err}"
    );

    // The emulator, with NEG endpoint validation in the private ranges of the tier's network
    // namespace (issue 40): the Node is registered as a Compute instance whose alias IP range
    // holds the Pod IPs, so every endpoint the operator attaches is checked against it.
    let dir = real.dir.path();
    let (_emulator, compute_url) = stack::start_emulator(dir).expect("emulator");
    stack::register_node(&real, &compute_url).expect("the Node and its instance");
    let log = dir.join("operator.log");
    let out = std::fs::File::create(&log).expect("log");
    let mut operator = Command::new(support::bin("gclb-operator"));
    support::metadata_adc(&mut operator, &compute_url, dir);
    let operator = operator
        .arg("run")
        .args([
            "--project",
            support::PROJECT,
            "--zone",
            support::ZONE,
            "--network",
            "default",
        ])
        .args([
            "--cluster-name",
            support::CLUSTER,
            "--compute-endpoint",
            &compute_url,
        ])
        .arg("--kubeconfig")
        .arg(&operator_kc)
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--resync-period",
            "3600",
            "--leader-elect",
        ])
        .env("POD_NAMESPACE", "gclb-operator")
        .env("RUST_LOG", "info,gclb_operator=debug")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("gclb-operator");
    let _operator = KillOnDrop(operator);
    let logs = || {
        format!(
            "\n===== operator =====\n{}\n===== kube-apiserver (tail) =====\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            real.log()
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let compute = |path: &str| -> Value {
        http.get(format!("{compute_url}/{path}"))
            .send()
            .and_then(|r| r.json())
            .unwrap_or(Value::Null)
    };

    // Leader election: the operator holds its Lease.
    poll("the operator's leader Lease", &logs, || {
        let (ok, out, _) = harness::kubectl(
            &kc,
            &[
                "get",
                "lease",
                "gclb-operator",
                "-n",
                "gclb-operator",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
            None,
        );
        (ok && !out.trim().is_empty()).then_some(())
    });

    // The workload, written as a kubelet and the EndpointSlice controller would.
    // In the Pod range of the network namespace (a real server refuses loopback addresses).
    let pod_ip = "10.244.0.2";
    if netns {
        backend(&format!("{pod_ip}:8080"), 200, "hello from web-0");
    }
    kubectl_ok(&kc, &["create", "namespace", NS], None);
    kubectl_ok(
        &kc,
        &["create", "serviceaccount", "default", "-n", NS],
        None,
    );
    kubectl_ok(&kc, &["apply", "-f", "-"], Some(&workload(pod_ip, netns)));
    // The CRD's schema refuses a delegation to no namespace; Ingress v1 refuses `ns/name` in
    // secretName (why docs/annotations.md sends users to projectcontour.io/tls-cert-namespace).
    let refused = [
        ("apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: none, namespace: shop}\nspec: {delegations: [{secretName: web-tls, targetNamespaces: []}]}\n", "targetNamespaces"),
        ("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: slash, namespace: shop}\nspec:\n  defaultBackend: {service: {name: web, port: {number: 80}}}\n  tls: [{secretName: certs/web-tls}]\n", "secretName"),
    ];
    for (yaml, field) in refused {
        let (ok, _, err) = harness::kubectl(&kc, &["apply", "-f", "-"], Some(yaml));
        assert!(
            !ok && err.contains(field),
            "{yaml} was not refused on {field}: {err}"
        );
    }
    let status = format!(
        r#"{{"status":{{"phase":"Running","podIP":"{pod_ip}","podIPs":[{{"ip":"{pod_ip}"}}],"conditions":[{{"type":"ContainersReady","status":"True"}}]}}}}"#
    );
    kubectl_ok(
        &kc,
        &[
            "patch",
            "pod",
            "web-0",
            "-n",
            NS,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
        None,
    );
    kubectl_ok(&kc, &["apply", "-f", "-"], Some(INGRESS));

    // Ingress -> Compute resources -> status.
    let ip = poll("an IP on Ingress shop/web", &logs, || {
        let ing = get_json(&kc, &["ingress", "web", "-n", NS]);
        ing["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .map(str::to_string)
    });
    let ing = get_json(&kc, &["ingress", "web", "-n", NS]);
    let finalizers = ing["metadata"]["finalizers"].to_string();
    assert!(
        finalizers.contains("finalizer"),
        "no finalizer on the Ingress: {finalizers}"
    );
    let project = support::PROJECT;
    let rules = compute(&format!(
        "compute/v1/projects/{project}/global/forwardingRules"
    ));
    assert!(
        rules["items"]
            .as_array()
            .is_some_and(|i| i.iter().any(|r| r["IPAddress"] == ip.as_str())),
        "no forwarding rule for {ip}: {rules}"
    );
    let services = compute(&format!(
        "compute/v1/projects/{project}/global/backendServices"
    ));
    assert!(
        services["items"]
            .as_array()
            .is_some_and(|i| i.iter().any(|s| s["timeoutSec"] == 42)),
        "the BackendConfig's timeoutSec is not on a backend service: {services}"
    );
    poll("an Event on Ingress shop/web", &logs, || {
        let events = get_json(&kc, &["events", "-n", NS]);
        events["items"]
            .as_array()
            .is_some_and(|items| {
                items.iter().any(|e| {
                    e["involvedObject"]["name"] == "web" && e["involvedObject"]["kind"] == "Ingress"
                })
            })
            .then_some(())
    });

    let listener = |ip: &str, port: u64| -> Option<String> {
        let listeners = compute("_emulator/listeners");
        let items = listeners
            .as_array()
            .cloned()
            .or_else(|| listeners["listeners"].as_array().cloned())
            .unwrap_or_default();
        items
            .iter()
            .find(|l| l["ipAddress"] == ip && l["port"].as_u64() == Some(port))
            .and_then(|l| l["localAddr"].as_str().map(str::to_string))
    };
    if netns {
        // The readiness gate: the operator marks the Pod once the load balancer finds it healthy.
        poll("the readiness gate condition True", &logs, || {
            let pod = get_json(&kc, &["pod", "web-0", "-n", NS]);
            pod["status"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "cloud.google.com/load-balancer-neg-ready"
                            && c["status"] == "True"
                    })
                })
                .then_some(())
        });
        let socket = poll("the HTTP listener", &logs, || listener(&ip, 80));
        let body = poll(
            "the backend's answer through the load balancer",
            &logs,
            || {
                let resp = http
                    .get(format!("http://{socket}/"))
                    .header("Host", "web.example.com")
                    .send()
                    .ok()?;
                (resp.status() == 200).then(|| resp.text().unwrap_or_default())
            },
        );
        assert_eq!(body, "hello from web-0");
    }

    // Adding TLS keeps the IP and adds an HTTPS forwarding rule.
    let (cert, key) = self_signed("web.example.com");
    kubectl_ok(
        &kc,
        &[
            "create", "secret", "tls", "web-tls", "-n", NS, "--cert", &cert, "--key", &key,
        ],
        None,
    );
    kubectl_ok(
        &kc,
        &[
            "patch",
            "ingress",
            "web",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"tls":[{"hosts":["web.example.com"],"secretName":"web-tls"}]}}"#,
        ],
        None,
    );
    poll("an HTTPS forwarding rule on the same IP", &logs, || {
        let rules = compute(&format!(
            "compute/v1/projects/{project}/global/forwardingRules"
        ));
        rules["items"]
            .as_array()
            .is_some_and(|i| {
                i.iter().any(|r| {
                    r["IPAddress"] == ip.as_str()
                        && r["portRange"]
                            .as_str()
                            .is_some_and(|p| p.starts_with("443"))
                })
            })
            .then_some(())
    });
    let after = get_json(&kc, &["ingress", "web", "-n", NS]);
    assert_eq!(
        after["status"]["loadBalancer"]["ingress"][0]["ip"],
        ip.as_str(),
        "TLS changed the IP"
    );

    // Deletion: the finalizer holds the Ingress until the load balancer is gone.
    kubectl_ok(
        &kc,
        &["delete", "ingress", "web", "-n", NS, "--wait=false"],
        None,
    );
    poll("the Ingress gone after cleanup", &logs, || {
        let (ok, _, err) = harness::kubectl(&kc, &["get", "ingress", "web", "-n", NS], None);
        (!ok && err.contains("NotFound")).then_some(())
    });
    let rules = compute(&format!(
        "compute/v1/projects/{project}/global/forwardingRules"
    ));
    assert!(
        !rules["items"]
            .as_array()
            .is_some_and(|i| i.iter().any(|r| r["IPAddress"] == ip.as_str())),
        "forwarding rules left after deletion: {rules}"
    );
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A self-signed certificate and key for `host`, written to files; `(cert path, key path)`.
fn self_signed(host: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec![host.to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let dir = std::env::temp_dir().join(format!("real-api-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&c, cert.pem()).expect("cert");
    std::fs::write(&k, key.serialize_pem()).expect("key");
    (c.display().to_string(), k.display().to_string())
}
