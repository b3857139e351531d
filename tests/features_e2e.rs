//! End to end, issue 6 (GKE Ingress features over plain HTTP): kubectl applies BackendConfigs,
//! annotated Services and Ingresses to the local Kubernetes API; the operator programs the
//! Compute emulator; real requests through the emulator's data plane show each feature works:
//! BackendConfig health check path and port, timeoutSec, GENERATED_COOKIE affinity, custom
//! request/response headers, connection draining, app-protocols HTTPS, a static IP by name,
//! and the CRDs' printer columns and validation.

#[path = "features_e2e/crds.rs"]
mod crds;
mod support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use support::*;

/// Starts the system with ports 80/443 mapped, the CRDs, the IngressClass and default backend,
/// then the operator.
fn start() -> Result<System> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    Ok(sys)
}

/// One echo Pod named `name` with label `app`, listening on `ports` (name, number).
fn pod(name: &str, app: &str, ports: &[(&str, u16)], annotations: &[(&str, &str)]) -> String {
    let mut ann = String::from("    local.gclb-operator.dev/run: echo\n");
    for (k, v) in annotations {
        ann.push_str(&format!("    {k}: '{v}'\n"));
    }
    let mut port_list = String::new();
    for (n, p) in ports {
        port_list.push_str(&format!("    - {{name: {n}, containerPort: {p}}}\n"));
    }
    let (probe_port, scheme) = if ports[0].0.starts_with("https") {
        (ports[0].1, "HTTPS")
    } else {
        (ports[0].1, "HTTP")
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {app}}}
  annotations:
{ann}spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: echo
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    ports:
{port_list}    readinessProbe:
      httpGet: {{path: /, port: {probe_port}, scheme: {scheme}}}
      periodSeconds: 1
---
"#
    )
}

/// A Service `name` selecting `app`, port 80 (named `port_name`) -> `target`, with annotations.
fn service(
    name: &str,
    app: &str,
    port_name: &str,
    target: u16,
    annotations: &[(&str, &str)],
) -> String {
    let mut ann = String::new();
    for (k, v) in annotations {
        ann.push_str(&format!("    {k}: '{v}'\n"));
    }
    let ann = if ann.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{ann}")
    };
    format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: {name}
{ann}spec:
  type: NodePort
  selector: {{app: {app}}}
  ports:
  - {{name: {port_name}, protocol: TCP, port: 80, targetPort: {target}}}
---
"#
    )
}

/// An Ingress `name` sending everything to Service `svc` port 80, with annotations.
fn ingress(name: &str, svc: &str, annotations: &[(&str, &str)]) -> String {
    let mut ann = String::new();
    for (k, v) in annotations {
        ann.push_str(&format!("    {k}: '{v}'\n"));
    }
    let ann = if ann.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{ann}")
    };
    format!(
        r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
{ann}spec:
  defaultBackend:
    service: {{name: {svc}, port: {{number: 80}}}}
---
"#
    )
}

/// A client that keeps no connections and follows no redirects.
fn client() -> Result<reqwest::blocking::Client> {
    Ok(reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

fn pod_of(body: &str) -> Option<String> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["pod"].as_str().map(str::to_string))
}

fn pod_ip(sys: &System, name: &str) -> Result<String> {
    wait_for(&format!("an IP on Pod {name}"), DEADLINE, || {
        let p = sys.get_json(&["pod", name])?;
        Ok(p["status"]["podIP"].as_str().map(str::to_string))
    })
}

#[test]
fn backend_config_headers_timeout_and_cookie_affinity_apply_to_traffic() -> Result<()> {
    let sys = start()?;
    let mut yaml = String::new();
    yaml.push_str(
        r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: web-bc
spec:
  timeoutSec: 2
  sessionAffinity: {affinityType: GENERATED_COOKIE, affinityCookieTtlSec: 120}
  customRequestHeaders:
    headers: ["X-E2e-Request: from-the-load-balancer"]
  customResponseHeaders:
    headers: ["X-E2e-Response: to-the-client"]
---
"#,
    );
    yaml.push_str(&service(
        "web",
        "web",
        "http",
        8080,
        &[(
            "cloud.google.com/backend-config",
            r#"{"default": "web-bc"}"#,
        )],
    ));
    yaml.push_str(&pod("web-1", "web", &[("http", 8080)], &[]));
    yaml.push_str(&pod("web-2", "web", &[("http", 8080)], &[]));
    yaml.push_str(&ingress("web", "web", &[]));
    sys.apply(&yaml)?;
    let socket = sys.wait_for_ingress_socket("default", "web")?;
    let http = client()?;
    let url = format!("http://{socket}/hello");

    // Custom request headers reach the Pod; custom response headers reach the client.
    let (body, headers) = wait_for("the BackendConfig's custom headers", DEADLINE, || {
        let resp = http.get(&url).header("host", "web.example").send()?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text()?;
        if status == 200 && body.to_ascii_lowercase().contains("from-the-load-balancer") {
            Ok(Some((body, headers)))
        } else {
            Err(anyhow!("got {status}: {body}"))
        }
    })
    .with_context(|| sys.logs())?;
    let echo: Value = serde_json::from_str(&body)?;
    let seen = echo["headers"]
        .as_object()
        .and_then(|h| {
            h.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("x-e2e-request"))
                .map(|(_, v)| v.to_string())
        })
        .unwrap_or_default();
    assert!(
        seen.contains("from-the-load-balancer"),
        "Pod saw headers {}",
        echo["headers"]
    );
    assert_eq!(
        headers.get("x-e2e-response").and_then(|v| v.to_str().ok()),
        Some("to-the-client"),
        "response headers: {headers:?}"
    );

    // timeoutSec 2: a Pod answering after 6 s gives 504 `backend_timeout`; one answering in
    // 0.2 s is fine.
    let resp = http
        .get(format!("{url}?sleep_ms=6000"))
        .header("host", "web.example")
        .send()?;
    assert_eq!(resp.status().as_u16(), 504, "slow Pod: {}", resp.text()?);
    let resp = http
        .get(format!("{url}?sleep_ms=200"))
        .header("host", "web.example")
        .send()?;
    assert_eq!(resp.status().as_u16(), 200);

    // Both Pods serve; GENERATED_COOKIE affinity pins a client that sends its GCLB cookie.
    wait_for("both Pods to answer", DEADLINE, || {
        let mut pods = BTreeSet::new();
        for _ in 0..30 {
            let body = http
                .get(&url)
                .header("host", "web.example")
                .send()?
                .text()?;
            pods.extend(pod_of(&body));
        }
        Ok((pods.len() == 2).then_some(()))
    })
    .with_context(|| sys.logs())?;
    let first = http.get(&url).header("host", "web.example").send()?;
    let cookie = first
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("GCLB="))
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
        .ok_or_else(|| anyhow!("no GCLB cookie in {:?}", first.headers()))?;
    let pinned = pod_of(&first.text()?).ok_or_else(|| anyhow!("no pod in the first answer"))?;
    for i in 0..20 {
        let body = http
            .get(&url)
            .header("host", "web.example")
            .header("cookie", &cookie)
            .send()?
            .text()?;
        assert_eq!(
            pod_of(&body).as_deref(),
            Some(pinned.as_str()),
            "request {i} with {cookie}"
        );
    }
    Ok(())
}

#[test]
fn backend_config_health_check_path_and_port_are_what_the_probes_use() -> Result<()> {
    let sys = start()?;
    let mut yaml = String::from(
        r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: hc-bc
spec:
  healthCheck:
    type: HTTP
    requestPath: /custom-health
    port: 8081
    checkIntervalSec: 1
    timeoutSec: 1
    healthyThreshold: 1
    unhealthyThreshold: 1
---
"#,
    );
    yaml.push_str(&service(
        "hc",
        "hc",
        "http",
        8080,
        &[(
            "cloud.google.com/backend-config",
            r#"{"ports": {"http": "hc-bc"}}"#,
        )],
    ));
    // good: serves the check path on the check port.
    yaml.push_str(&pod(
        "hc-good",
        "hc",
        &[("http", 8080), ("health", 8081)],
        &[],
    ));
    // bad-path: fails only /custom-health (its readiness probe on / passes).
    yaml.push_str(&pod(
        "hc-bad-path",
        "hc",
        &[("http", 8080), ("health", 8081)],
        &[("local.gclb-operator.dev/fail-paths", "/custom-health")],
    ));
    // bad-port: nothing listens on 8081.
    yaml.push_str(&pod("hc-bad-port", "hc", &[("http", 8080)], &[]));
    yaml.push_str(&ingress("hc", "hc", &[]));
    sys.apply(&yaml)?;
    let socket = sys.wait_for_ingress_socket("default", "hc")?;
    let http = client()?;

    // Every Pod serves `/` when asked directly: only the load balancer's probe tells them apart.
    for name in ["hc-good", "hc-bad-path", "hc-bad-port"] {
        let ip = pod_ip(&sys, name)?;
        let body = wait_for(&format!("{name} to answer directly"), DEADLINE, || {
            let r = http.get(format!("http://{ip}:8080/")).send()?;
            Ok((r.status().as_u16() == 200).then(|| r.text().unwrap_or_default()))
        })?;
        assert_eq!(pod_of(&body).as_deref(), Some(name));
    }
    let bad_path_ip = pod_ip(&sys, "hc-bad-path")?;
    let r = http
        .get(format!("http://{bad_path_ip}:8081/custom-health"))
        .send()?;
    assert_eq!(r.status().as_u16(), 500, "hc-bad-path fails the check path");

    // The load balancer only sends traffic to the Pod healthy on /custom-health at port 8081.
    wait_for("traffic only to hc-good", DEADLINE, || {
        let mut pods = BTreeSet::new();
        for _ in 0..20 {
            let r = http
                .get(format!("http://{socket}/"))
                .header("host", "hc.example")
                .send()?;
            let status = r.status().as_u16();
            let body = r.text()?;
            if status != 200 {
                return Err(anyhow!("got {status}: {body}"));
            }
            pods.extend(pod_of(&body));
        }
        if pods.len() == 1 && pods.contains("hc-good") {
            Ok(Some(()))
        } else {
            Err(anyhow!("answered by {pods:?}"))
        }
    })
    .with_context(|| sys.logs())?;

    // The health check the operator wrote carries the path and the fixed port.
    let hcs = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/healthChecks"
    ))?;
    let hc = hcs["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["httpHealthCheck"]["requestPath"] == "/custom-health")
        .ok_or_else(|| anyhow!("no health check with /custom-health: {hcs}"))?;
    assert_eq!(hc["httpHealthCheck"]["port"], 8081, "{hc}");
    Ok(())
}

/// A raw HTTP/1.1 request that the echo Pod answers after `ms` milliseconds.
fn slow_request(host: &str, ms: u64) -> String {
    format!("GET /slow?sleep_ms={ms} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// Whether `ip` is an endpoint of any NEG in the test zone.
fn in_a_neg(sys: &System, ip: &str) -> Result<bool> {
    let mut present = false;
    for neg in sys.neg_names()? {
        let list = sys.compute_post(
            &format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
            &serde_json::json!({}),
        )?;
        present |= list.to_string().contains(&format!("\"{ip}\""));
    }
    Ok(present)
}

/// Connection draining end to end. Two Services, one Pod each, with BackendConfigs of
/// `drainingTimeoutSec` 30 and 0; a slow request goes to each Pod, then both Pods are deleted
/// (their grace period keeps them serving). Once both endpoints have left their NEGs, the request
/// under a 30 s window still finishes with its Pod's answer, and the one under 0 is cut with a
/// 502 at once (it would otherwise have been answered 50 s later).
#[test]
fn draining_lets_an_in_flight_request_finish_within_the_timeout_and_zero_cuts_it() -> Result<()> {
    /// The request under the 30 s window takes 25 s: its endpoint leaves before it ends and it
    /// ends within 30 s of that.
    const FINISHES_MS: u64 = 25_000;
    /// The request under 0 would take 50 s (less than the Pod's 60 s grace period).
    const CUT_MS: u64 = 50_000;
    let sys = start()?;
    let mut yaml = String::new();
    for (name, secs) in [("drain30", 30), ("drain0", 0)] {
        yaml.push_str(&format!(
            "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata:\n  name: {name}\nspec:\n  timeoutSec: 90\n  connectionDraining: {{drainingTimeoutSec: {secs}}}\n---\n"
        ));
        yaml.push_str(&service(
            name,
            name,
            "http",
            8080,
            &[(
                "cloud.google.com/backend-config",
                &format!(r#"{{"default": "{name}"}}"#),
            )],
        ));
        yaml.push_str(&pod(&format!("{name}-1"), name, &[("http", 8080)], &[]));
        yaml.push_str(&ingress(name, name, &[]));
    }
    sys.apply(&yaml)?;
    // Both load balancers serve before either slow request starts: the 25 s request's window
    // must not be spent waiting for the other Ingress to come up.
    let mut ready = Vec::new();
    for (name, ms) in [("drain30", FINISHES_MS), ("drain0", CUT_MS)] {
        let socket = sys.wait_for_ingress_socket("default", name)?;
        let host = format!("{name}.example");
        sys.wait_for_response(&socket, &host, "/", 200, &format!("{name}-1"))?;
        let ip = pod_ip(&sys, &format!("{name}-1"))?;
        ready.push((name, ms, socket, host, ip));
    }
    let mut conns = Vec::new();
    for (name, ms, socket, host, ip) in ready {
        let mut conn = std::net::TcpStream::connect(&socket)?;
        conn.write_all(slow_request(&host, ms).as_bytes())?;
        conn.flush()?;
        conns.push((name, ip, conn));
    }
    sys.kubectl_ok(&["delete", "pod", "drain30-1", "drain0-1", "--wait=false"])?;

    // Both endpoints leave their NEGs while the requests are in flight ...
    for (name, ip, _) in &conns {
        wait_for(&format!("{name}-1 to leave its NEG"), DEADLINE, || {
            Ok((!in_a_neg(&sys, ip)?).then_some(()))
        })
        .with_context(|| sys.logs())?;
    }
    let mut answers = std::collections::BTreeMap::new();
    for (name, _, mut conn) in conns {
        // Whether an answer had come before the endpoint left (for the 30 s request).
        conn.set_nonblocking(true)?;
        let answered_before = !matches!(conn.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_secs(90)))?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer)?;
        if name == "drain30" && answered_before && answer.starts_with("HTTP/1.1 200") {
            bail!(
                "the {FINISHES_MS} ms request was answered before its endpoint left the NEG, so \
                 nothing was drained (the endpoint removal took longer than the request): {answer}"
            );
        }
        answers.insert(name, answer);
    }
    // ... the request under a 30 s window finishes with its Pod's answer ...
    let finished = &answers["drain30"];
    assert!(
        finished.starts_with("HTTP/1.1 200") && finished.contains("drain30-1"),
        "in-flight request under drainingTimeoutSec 30: {finished}"
    );
    // ... and the one under 0 was cut when its endpoint left.
    let cut = &answers["drain0"];
    assert!(
        cut.starts_with("HTTP/1.1 502")
            && cut.contains("backend_connection_closed_before_data_sent_to_client")
            && cut.contains("drainingTimeoutSec=0 elapsed"),
        "in-flight request under drainingTimeoutSec 0: {cut}"
    );
    Ok(())
}

#[test]
fn app_protocols_https_reaches_a_tls_pod() -> Result<()> {
    let sys = start()?;
    let mut yaml = service(
        "secure",
        "secure",
        "https",
        8443,
        &[("cloud.google.com/app-protocols", r#"{"https": "HTTPS"}"#)],
    );
    yaml.push_str(&pod("secure-1", "secure", &[("https", 8443)], &[]));
    yaml.push_str(&ingress("secure", "secure", &[]));
    sys.apply(&yaml)?;
    let socket = sys.wait_for_ingress_socket("default", "secure")?;
    let body = sys.wait_for_response(&socket, "secure.example", "/tls", 200, "secure-1")?;
    let echo: Value = serde_json::from_str(&body)?;
    assert_eq!(echo["port"], 8443, "{body}");
    // The Pod only speaks TLS on 8443: a plain-HTTP request to it directly fails.
    let ip = pod_ip(&sys, "secure-1")?;
    let plain = client()?.get(format!("http://{ip}:8443/")).send();
    assert!(
        plain.map(|r| r.status().as_u16() != 200).unwrap_or(true),
        "the Pod must not answer plain HTTP on its TLS port"
    );
    let bss = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/backendServices"
    ))?;
    assert!(
        bss["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|b| b["protocol"] == "HTTPS"),
        "no HTTPS backend service: {bss}"
    );
    Ok(())
}

#[test]
fn global_static_ip_name_gives_that_exact_address() -> Result<()> {
    let sys = start()?;
    let reserved = sys.reserve_global_address("e2e-static-ip")?;
    let mut yaml = service("static", "static", "http", 8080, &[]);
    yaml.push_str(&pod("static-1", "static", &[("http", 8080)], &[]));
    yaml.push_str(&ingress(
        "static",
        "static",
        &[(
            "kubernetes.io/ingress.global-static-ip-name",
            "e2e-static-ip",
        )],
    ));
    sys.apply(&yaml)?;
    let ip = sys.wait_for_ingress_ip("default", "static")?;
    assert_eq!(ip, reserved);
    let socket = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&socket, "static.example", "/", 200, "static-1")?;
    let address = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/addresses/e2e-static-ip"
    ))?;
    assert_eq!(address["status"], "IN_USE", "{address}");
    Ok(())
}
