//! Defaulting that `kubectl describe` shows: Pod probe timings, grace period, restart and DNS
//! policies (k8s.io/kubernetes pkg/apis/core/v1/defaults.go), and a Deployment's strategy and
//! Pod template.

mod api_support;

use api_support::start;

/// kubectl aligns describe columns by the longest label: compare with whitespace collapsed.
fn squeezed(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  containers:
  - name: web
    image: example/web
    ports: [{containerPort: 8080}]
    readinessProbe:
      httpGet: {port: 8080, path: /healthz}
"#;

#[test]
fn describe_pod_shows_defaulted_probe_and_policies() {
    let server = start(&["--no-local-controllers"]);
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(POD));
    assert!(ok, "{out}\n{err}");
    let out = squeezed(&server.kubectl_ok(&["describe", "pod", "probed"]));
    assert!(
        out.contains("Readiness: http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3"),
        "{out}"
    );
    let spec = server.kubectl_ok(&[
        "get",
        "pod",
        "probed",
        "-o",
        "jsonpath={.spec.restartPolicy} {.spec.dnsPolicy} {.spec.terminationGracePeriodSeconds}",
    ]);
    assert_eq!(spec, "Always ClusterFirst 30");
    // Re-applying the same manifest is a no-op: defaulted fields do not look like changes.
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(POD));
    assert!(ok && out.contains("pod/probed unchanged"), "{out}\n{err}");
}

#[test]
fn describe_deployment_shows_defaulted_strategy_and_template_probe() {
    let server = start(&["--no-local-controllers"]);
    let deployment = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: example/web
        readinessProbe:
          httpGet: {port: 8080}
"#;
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(deployment));
    assert!(ok, "{out}\n{err}");
    let out = squeezed(&server.kubectl_ok(&["describe", "deployment", "web"]));
    assert!(out.contains("StrategyType: RollingUpdate"), "{out}");
    assert!(
        out.contains("RollingUpdateStrategy: 25% max unavailable, 25% max surge"),
        "{out}"
    );
    assert!(
        out.contains("Readiness: http-get http://:8080/ delay=0s timeout=1s period=10s #success=1 #failure=3"),
        "{out}"
    );
}
