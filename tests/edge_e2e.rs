//! End to end, issue 29: BackendConfigs turn on Cloud Armor, Cloud CDN, request logging and IAP
//! for three Services of one Ingress; the operator writes them to the backend services; real
//! requests through the Ingress-built load balancer show the emulator enforcing them:
//! - Cloud Armor: a CEL header rule, the OWASP CRS sqli rule set, a rate limit that recovers
//!   after its interval, a preview rule that only logs;
//! - Cloud CDN: a cache hit with `Age` that the Pod never sees, `invalidateCache` (gcloud), a
//!   `Set-Cookie` response never cached, a signed URL with a bad signature refused;
//! - request logs read with `gcloud logging read` (Armor decisions, cache fields) and a
//!   `sampleRate` of 0.5 logging about half of 1000 requests;
//! - IAP (its OAuth client from an Opaque Secret the operator reads by name): a sign-in
//!   redirect, an allowed identity whose JWT the test verifies against the
//!   published keys, another identity refused with 403.
//!
//! The Pod's echo body counts the requests that reached it per path (`pathRequests`), which is
//! how the test knows what the cache and IAP kept from the backend.

#[path = "edge_e2e/iap.rs"]
mod iap;
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use support::*;

use iap::iap;

/// The host of the Armor, CDN and logging backend (and of `/sampled`).
const WEB: &str = "web.example";
/// The host of the IAP backend.
const IAP: &str = "iap.example";

fn yaml() -> String {
    let service = |name: &str, bc: &str| {
        format!(
            r#"apiVersion: v1
kind: Service
metadata:
  name: {name}
  annotations:
    cloud.google.com/backend-config: '{{"default": "{bc}"}}'
spec:
  type: NodePort
  selector: {{app: web}}
  ports:
  - {{name: http, protocol: TCP, port: 80, targetPort: 8080}}
---
"#
        )
    };
    let mut y = String::from(
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
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: sampled-bc
spec:
  logging: {enable: true, sampleRate: 0.5}
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: iap-bc
spec:
  iap: {enabled: true, oauthclientCredentials: {secretName: iap-oauth}}
---
# Opaque, as GKE's docs create it: the operator's Secret store watches kubernetes.io/tls only,
# so it reads this one by name when it translates the Ingress.
apiVersion: v1
kind: Secret
metadata:
  name: iap-oauth
type: Opaque
stringData: {client_id: e2e-client.apps.googleusercontent.com, client_secret: e2e-oauth-secret}
---
"#,
    );
    y += &service("web", "edge-bc");
    y += &service("sampled", "sampled-bc");
    y += &service("private", "iap-bc");
    y + r#"apiVersion: v1
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
  rules:
  - host: web.example
    http:
      paths:
      - {path: /sampled, pathType: Prefix, backend: {service: {name: sampled, port: {number: 80}}}}
  - host: iap.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: private, port: {number: 80}}}}
"#
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

    /// `gcloud logging read FILTER` (the last hour, at most 1000 entries).
    fn read_logs(&self, filter: &str) -> Result<Vec<Value>> {
        let out = self.run(&[
            "logging",
            "read",
            filter,
            "--format=json",
            "--limit=1000",
            "--freshness=1h",
        ])?;
        Ok(serde_json::from_str(&out)?)
    }
}

/// One response: status, headers, body.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    /// The echo body's `pathRequests`: how many requests for this path reached the Pod.
    fn path_requests(&self) -> u64 {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v["pathRequests"].as_u64())
            .unwrap_or_else(|| panic!("not an echo body: {}", self.body))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The load balancer under test and the clients that talk to it.
struct Lb<'a> {
    sys: &'a System,
    http: reqwest::blocking::Client,
    socket: String,
    gcloud: Gcloud<'a>,
    url_map: String,
}

impl Lb<'_> {
    fn get(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> Result<Answer> {
        let mut r = self
            .http
            .get(format!("http://{}{path}", self.socket))
            .header("host", host);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let resp = r.send()?;
        Ok(Answer {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: resp.text()?,
        })
    }

    /// The backend service of `service`'s port 80, found through the URL map.
    fn backend_service(&self, service: &str) -> Result<Value> {
        let list = self.sys.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/backendServices"
        ))?;
        let needle = format!("-default-{service}-80-");
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|bs| bs["name"].as_str().is_some_and(|n| n.contains(&needle)))
            .cloned()
            .ok_or_else(|| anyhow!("no backend service for Service {service}: {list}"))
    }
}

#[test]
fn armor_cdn_logs_and_iap_through_an_ingress() -> Result<()> {
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
    sys.wait_for_response(&socket, WEB, "/hello", 200, "web-1")?;
    sys.wait_for_response(&socket, WEB, "/sampled/warm", 200, "web-1")?;
    sys.wait_for_response(&socket, IAP, "/", 302, "")?;

    // The status annotations are written after the IP (and the responses do not wait for
    // them): polled.
    let url_map = wait_for("the url-map annotation", DEADLINE, || {
        let ing = sys.get_json(&["ingress", "web"])?;
        Ok(
            ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
                .as_str()
                .map(str::to_string),
        )
    })
    .with_context(|| sys.logs())?;
    let dir = tempfile::tempdir()?;
    let lb = Lb {
        sys: &sys,
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()?,
        socket,
        gcloud: Gcloud {
            dir: dir.path(),
            compute: format!("{}compute/v1/", sys.compute_url),
            logging: sys.compute_url.clone(),
        },
        url_map,
    };

    // The BackendConfigs reached the backend services.
    let web = lb.backend_service("web")?;
    assert!(
        web["securityPolicy"]
            .as_str()
            .unwrap_or("")
            .ends_with("/securityPolicies/edge-policy"),
        "{web}"
    );
    assert_eq!(web["enableCDN"], true, "{web}");
    assert_eq!(web["cdnPolicy"]["cacheMode"], "FORCE_CACHE_ALL", "{web}");
    assert_eq!(web["logConfig"]["enable"], true, "{web}");
    let sampled = lb.backend_service("sampled")?;
    assert_eq!(sampled["logConfig"]["sampleRate"], 0.5, "{sampled}");
    let private = lb.backend_service("private")?;
    // The OAuth client from the Opaque Secret named by oauthclientCredentials, which the
    // operator's type=kubernetes.io/tls Secret store never holds: read by name.
    assert_eq!(private["iap"]["enabled"], true, "{private}");
    assert_eq!(
        private["iap"]["oauth2ClientId"], "e2e-client.apps.googleusercontent.com",
        "{private}"
    );

    let web_name = web["name"].as_str().unwrap_or_default();
    armor(&lb)?;
    cdn(&lb, web_name)?;
    logs(&lb, web_name)?;
    sample_rate(&lb, sampled["name"].as_str().unwrap_or_default())?;
    iap(&lb, &private)?;
    Ok(())
}

/// Cloud Armor through the load balancer.
fn armor(lb: &Lb) -> Result<()> {
    // A CEL rule on a header denies with its configured status.
    let a = lb.get(WEB, "/armor", &[("x-e2e-block", "yes")])?;
    assert_eq!(a.status, 404, "{}", a.body);
    assert!(a.body.contains("denied_by_security_policy"), "{}", a.body);
    assert_eq!(lb.get(WEB, "/armor", &[("x-e2e-block", "no")])?.status, 200);
    // The OWASP CRS 3.3 sqli rules block the injection and pass a normal request.
    let a = lb.get(WEB, "/item?id=1'%20OR%20'1'='1", &[])?;
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(lb.get(WEB, "/item?id=42", &[])?.status, 200);
    // A preview rule logs (checked in logs()) and does not block.
    assert_eq!(lb.get(WEB, "/preview/page", &[])?.status, 200);
    // A rate-based rule: 429 past its threshold, traffic again after its interval. Each query
    // differs, so no response comes from the cache (a backend security policy only sees
    // requests that go to the backend).
    for i in 0..5 {
        let a = lb.get(WEB, &format!("/limited?n={i}"), &[])?;
        assert_eq!(a.status, 200, "request {i}: {}", a.body);
    }
    assert_eq!(lb.get(WEB, "/limited?n=5", &[])?.status, 429);
    let mut n = 6;
    wait_for("the rate limit's interval to pass", DEADLINE, || {
        n += 1;
        let a = lb.get(WEB, &format!("/limited?n={n}"), &[])?;
        Ok((a.status == 200).then_some(()))
    })?;
    Ok(())
}

/// Cloud CDN through the load balancer.
fn cdn(lb: &Lb, bs_name: &str) -> Result<()> {
    // The second request is a cache hit with Age; the Pod sees only the first.
    let first = lb.get(WEB, "/static/app.js", &[])?;
    assert_eq!(
        (first.status, first.header("age")),
        (200, None),
        "{}",
        first.body
    );
    let seen = first.path_requests();
    let hit = lb.get(WEB, "/static/app.js", &[])?;
    assert_eq!(hit.status, 200);
    assert!(
        hit.header("age").is_some(),
        "second request not served from the cache: {:?}",
        hit.headers
    );
    assert_eq!(hit.body, first.body);
    // invalidateCache (gcloud) sends the next one to the Pod, which has seen one request since.
    lb.gcloud.run(&[
        "compute",
        "url-maps",
        "invalidate-cdn-cache",
        &lb.url_map,
        "--path=/static/*",
        "--global",
    ])?;
    let after = lb.get(WEB, "/static/app.js", &[])?;
    assert_eq!(
        after.header("age"),
        None,
        "still cached after invalidateCache"
    );
    assert_eq!(
        after.path_requests(),
        seen + 1,
        "the cache hit reached the Pod"
    );

    // A Set-Cookie response is never cached, even with FORCE_CACHE_ALL.
    let path = "/account?set_cookie=session%3Dalice";
    let one = lb.get(WEB, path, &[])?;
    let two = lb.get(WEB, path, &[])?;
    assert_eq!(one.header("set-cookie"), Some("session=alice"));
    assert_eq!(two.header("set-cookie"), Some("session=alice"));
    assert_eq!(two.header("age"), None, "a Set-Cookie response was cached");
    assert_eq!(two.path_requests(), one.path_requests() + 1);

    // Signed URLs: once a key is added (gcloud), a bad signature is refused.
    let key_file = lb.gcloud.dir.join("key");
    std::fs::write(&key_file, "MDEyMzQ1Njc4OWFiY2RlZg==")?;
    lb.gcloud.run(&[
        "compute",
        "backend-services",
        "add-signed-url-key",
        bs_name,
        "--key-name=k1",
        &format!("--key-file={}", key_file.display()),
    ])?;
    let bad = "/private?Expires=9999999999&KeyName=k1&Signature=AAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    wait_for("signed requests to be required", DEADLINE, || {
        Ok((lb.get(WEB, bad, &[])?.status == 403).then_some(()))
    })?;
    lb.gcloud.run(&[
        "compute",
        "backend-services",
        "delete-signed-url-key",
        bs_name,
        "--key-name=k1",
    ])?;
    Ok(())
}

/// `gcloud logging read` shows the Armor decisions and the cache fields.
fn logs(lb: &Lb, bs_name: &str) -> Result<()> {
    let denied = lb.gcloud.read_logs(&format!(
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
    let preview = lb
        .gcloud
        .read_logs("jsonPayload.previewSecurityPolicy.priority=200")?;
    assert!(
        !preview.is_empty(),
        "the preview rule's match is not logged"
    );
    assert_eq!(preview[0]["httpRequest"]["status"], 200);
    let hits = lb.gcloud.read_logs("httpRequest.cacheHit=true")?;
    assert!(
        hits.iter().any(|e| e["httpRequest"]["requestUrl"]
            .as_str()
            .unwrap_or("")
            .ends_with("/static/app.js")),
        "no cache hit logged: {hits:?}"
    );
    assert!(hits.iter().all(|e| e["httpRequest"]["cacheLookup"] == true));
    let not_cached = lb
        .gcloud
        .read_logs("jsonPayload.cacheDecision:\"RESPONSE_HAS_SET_COOKIE\"")?;
    assert!(
        not_cached.len() >= 2,
        "the Set-Cookie responses' cache decision is not logged: {not_cached:?}"
    );
    Ok(())
}

/// `logConfig.sampleRate: 0.5` logs about half of 1000 requests.
fn sample_rate(lb: &Lb, bs_name: &str) -> Result<()> {
    const SENT: usize = 1000;
    for i in 0..SENT {
        let a = lb.get(WEB, "/sampled/count", &[])?;
        assert_eq!(a.status, 200, "request {i}: {}", a.body);
    }
    let logged = lb.gcloud.read_logs(&format!(
        "resource.labels.backend_service_name=\"{bs_name}\" AND httpRequest.requestUrl:\"/sampled/count\""
    ))?;
    // Binomial(1000, 0.5): the standard deviation is about 16, so 400..=600 is over six of
    // them either side (a false failure about once in 10^9 runs), while logging every request
    // or none falls far outside.
    assert!(
        (400..=600).contains(&logged.len()),
        "sampleRate 0.5 logged {} of {SENT} requests",
        logged.len()
    );
    Ok(())
}
