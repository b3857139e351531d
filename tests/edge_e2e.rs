//! End to end, issue 29: a BackendConfig turns on Cloud Armor, Cloud CDN and request logging for
//! a Service; the operator writes them to the backend service; real requests through the
//! Ingress-built load balancer show the emulator enforcing them: a CEL header rule, the OWASP
//! CRS sqli rule set, a rate limit that recovers after its interval, a preview rule that only
//! logs, a cache hit with `Age`, `invalidateCache` and signed URLs with `gcloud`, and the
//! request log read with `gcloud logging read`.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use support::*;

fn yaml() -> String {
    r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: edge-bc
spec:
  securityPolicy: {name: edge-policy}
  logging: {enable: true, sampleRate: 1.0}
  cdn:
    enabled: true
    cacheMode: FORCE_CACHE_ALL
    defaultTtl: 3600
    cachePolicy: {includeHost: true, includeProtocol: true, includeQueryString: true}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    cloud.google.com/backend-config: '{"default": "edge-bc"}'
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
  annotations:
    local.gclb-operator.dev/run: echo
spec:
  containers:
  - name: echo
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    ports:
    - {name: http, containerPort: 8080}
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
"#
    .to_string()
}

fn policy() -> Value {
    json!({"name": "edge-policy", "rules": [
        {"priority": 100, "action": "deny(404)", "match": {"expr": {"expression": "request.headers['x-e2e-block'] == 'yes'"}}},
        {"priority": 200, "action": "deny(403)", "preview": true, "match": {"expr": {"expression": "request.path.startsWith('/preview')"}}},
        {"priority": 300, "action": "deny(403)", "match": {"expr": {"expression": "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}},
        {"priority": 400, "action": "throttle", "match": {"expr": {"expression": "request.path == '/limited'"}},
         "rateLimitOptions": {"rateLimitThreshold": {"count": 5, "intervalSec": 10}, "conformAction": "allow",
                              "exceedAction": "deny(429)", "enforceOnKey": "IP"}},
        {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
    ]})
}

struct Gcloud<'a> {
    dir: &'a Path,
    compute: String,
    logging: String,
}

impl Gcloud<'_> {
    fn run(&self, args: &[&str]) -> Result<String> {
        let token = self.dir.join("token");
        std::fs::write(&token, "fake-token")?;
        let out = Command::new("gcloud")
            .args(args)
            .env("CLOUDSDK_CONFIG", self.dir.join("gcloud"))
            .env("CLOUDSDK_CORE_PROJECT", PROJECT)
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", &self.compute)
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", &self.logging)
            .output()
            .context("gcloud is required for this test (see make deps)")?;
        if !out.status.success() {
            bail!(
                "gcloud {} failed:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn send(
    http: &reqwest::blocking::Client,
    socket: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, reqwest::header::HeaderMap, String)> {
    let mut r = http
        .get(format!("http://{socket}{path}"))
        .header("host", "web.example");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send()?;
    let s = resp.status().as_u16();
    let h = resp.headers().clone();
    Ok((s, h, resp.text()?))
}

#[test]
fn armor_cdn_and_request_logs_through_an_ingress() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    // The documented example (docs/examples/edge/) is accepted by the CRD's schema (nothing
    // routes to it here).
    sys.apply_path(&repo_root().join("docs/examples/edge"))?;
    sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/global/securityPolicies"),
        &policy(),
    )?;
    sys.start_operator(&[])?;
    sys.apply(&yaml())?;
    let socket = sys.wait_for_ingress_socket("default", "web")?;
    sys.wait_for_response(&socket, "web.example", "/hello", 200, "web-1")?;

    // The BackendConfig reached the backend service.
    let ing = sys.get_json(&["ingress", "web"])?;
    let um_name = ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
        .as_str()
        .ok_or_else(|| anyhow!("no url-map annotation: {ing}"))?
        .to_string();
    let um = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/urlMaps/{um_name}"
    ))?;
    let bs_url = um["defaultService"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let bs_name = bs_url.rsplit('/').next().unwrap_or_default().to_string();
    let bs = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/backendServices/{bs_name}"
    ))?;
    assert!(
        bs["securityPolicy"]
            .as_str()
            .unwrap_or("")
            .ends_with("/securityPolicies/edge-policy"),
        "{bs}"
    );
    assert_eq!(bs["enableCDN"], true, "{bs}");
    assert_eq!(bs["cdnPolicy"]["cacheMode"], "FORCE_CACHE_ALL", "{bs}");
    assert_eq!(bs["logConfig"]["enable"], true, "{bs}");

    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()?;

    // Cloud Armor: a CEL rule on a header denies with its configured status.
    let (s, _, body) = send(&http, &socket, "/armor", &[("x-e2e-block", "yes")])?;
    assert_eq!(s, 404, "{body}");
    assert!(body.contains("denied_by_security_policy"), "{body}");
    assert_eq!(
        send(&http, &socket, "/armor", &[("x-e2e-block", "no")])?.0,
        200
    );
    // The OWASP CRS 3.3 sqli rules block the injection and pass a normal request.
    let (s, _, body) = send(&http, &socket, "/item?id=1'%20OR%20'1'='1", &[])?;
    assert_eq!(s, 403, "{body}");
    assert_eq!(send(&http, &socket, "/item?id=42", &[])?.0, 200);
    // A preview rule logs and does not block.
    assert_eq!(send(&http, &socket, "/preview/page", &[])?.0, 200);
    // A rate-based rule: 429 past its threshold, traffic again after its interval.
    for i in 0..5 {
        let (s, _, body) = send(&http, &socket, "/limited", &[])?;
        assert_eq!(s, 200, "request {i}: {body}");
    }
    assert_eq!(send(&http, &socket, "/limited", &[])?.0, 429);
    wait_for("the rate limit's interval to pass", DEADLINE, || {
        let (s, _, _) = send(&http, &socket, "/limited", &[])?;
        Ok((s == 200).then_some(()))
    })?;

    // Cloud CDN: the second request is a cache hit with Age; invalidateCache (gcloud) sends the
    // next one to the backend.
    let dir = tempfile::tempdir()?;
    let g = Gcloud {
        dir: dir.path(),
        compute: format!("{}compute/v1/", sys.compute_url),
        logging: sys.compute_url.clone(),
    };
    let (s, h1, b1) = send(&http, &socket, "/static/app.js", &[])?;
    assert_eq!((s, h1.get("age")), (200, None), "{b1}");
    let (s, h2, b2) = send(&http, &socket, "/static/app.js", &[])?;
    assert_eq!(s, 200);
    assert!(
        h2.get("age").is_some(),
        "second request not served from the cache: {h2:?}"
    );
    assert_eq!(b2, b1);
    g.run(&[
        "compute",
        "url-maps",
        "invalidate-cdn-cache",
        &um_name,
        "--path=/static/*",
        "--global",
    ])?;
    let (_, h3, _) = send(&http, &socket, "/static/app.js", &[])?;
    assert_eq!(h3.get("age"), None, "still cached after invalidateCache");

    // Signed URLs: once a key is added (gcloud), a bad signature is refused.
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, "MDEyMzQ1Njc4OWFiY2RlZg==")?;
    g.run(&[
        "compute",
        "backend-services",
        "add-signed-url-key",
        &bs_name,
        "--key-name=k1",
        &format!("--key-file={}", key_file.display()),
    ])?;
    wait_for("signed requests to be required", DEADLINE, || {
        let (s, _, _) = send(
            &http,
            &socket,
            "/private?Expires=9999999999&KeyName=k1&Signature=AAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            &[],
        )?;
        Ok((s == 403).then_some(()))
    })?;
    g.run(&[
        "compute",
        "backend-services",
        "delete-signed-url-key",
        &bs_name,
        "--key-name=k1",
    ])?;

    // Request logs: gcloud logging read shows the Armor decisions and the cache fields.
    let read = |filter: &str| -> Result<Vec<Value>> {
        let out = g.run(&[
            "logging",
            "read",
            filter,
            "--format=json",
            "--limit=1000",
            "--freshness=1h",
        ])?;
        Ok(serde_json::from_str(&out)?)
    };
    let denied = read(&format!(
        "resource.type=\"http_load_balancer\" AND resource.labels.backend_service_name=\"{bs_name}\" AND jsonPayload.enforcedSecurityPolicy.outcome=\"DENY\""
    ))?;
    let priorities: Vec<i64> = denied
        .iter()
        .filter_map(|e| e["jsonPayload"]["enforcedSecurityPolicy"]["priority"].as_i64())
        .collect();
    for p in [100, 300, 400] {
        assert!(
            priorities.contains(&p),
            "no DENY by rule {p} in {priorities:?}"
        );
    }
    let sqli = denied
        .iter()
        .find(|e| e["jsonPayload"]["enforcedSecurityPolicy"]["priority"] == 300)
        .expect("checked above");
    assert!(
        sqli["jsonPayload"]["enforcedSecurityPolicy"]["preconfiguredExprIds"]
            .as_array()
            .is_some_and(|ids| !ids.is_empty()),
        "{sqli}"
    );
    let preview = read("jsonPayload.previewSecurityPolicy.priority=200")?;
    assert!(
        !preview.is_empty(),
        "the preview rule's match is not logged"
    );
    assert_eq!(preview[0]["httpRequest"]["status"], 200);
    let hits = read("httpRequest.cacheHit=true")?;
    assert!(
        hits.iter().any(|e| e["httpRequest"]["requestUrl"]
            .as_str()
            .unwrap_or("")
            .ends_with("/static/app.js")),
        "no cache hit logged: {hits:?}"
    );
    assert!(hits.iter().all(|e| e["httpRequest"]["cacheLookup"] == true));
    Ok(())
}
