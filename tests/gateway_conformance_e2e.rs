//! Gateway API conformance cases (kubernetes-sigs/gateway-api `conformance/tests/*.yaml` and
//! `*.go`: their manifests and expected answers, ported) through real traffic: one local system,
//! the operator with `--gateway-api`, one Gateway `same-namespace` in
//! `gateway-conformance-infra` with an HTTP listener (port 80) and a TLS Passthrough listener
//! (port 443), upstream's Gateway `same-namespace-with-https-listener` (HTTPS listeners on port
//! 443 of its own address), the echo backends `infra-backend-v1..v3` and TLS echo backends;
//! real HTTP and HTTPS requests and `openssl s_client` connections through the emulated load
//! balancers.
//!
//! Deviation from the suite, so that every case shares one Gateway (CI time): HTTPRoutes of
//! cases that upstream writes without `hostnames` carry one hostname per case (the suite's
//! requests then carry that Host); what each case checks is unchanged.
//!
//! The test writes the report (every case, its features and result) and compares it with
//! docs/gateway-api.md's section between the `conformance-report` markers
//! (`GATEWAY_CONFORMANCE_WRITE=1` rewrites the section), and checks that the GatewayClass claims in
//! `supportedFeatures` exactly the features of the passing cases: the claim cannot drift from
//! what is proven. Last, deleting the routes and the Gateway must leave no Compute or Network
//! Services resource behind.

#[path = "gateway_conformance/extended.rs"]
mod extended;
#[path = "gateway_conformance/https.rs"]
mod https;
#[path = "gateway_conformance/leftovers.rs"]
mod leftovers;
mod support;
#[path = "gateway_conformance/tls.rs"]
mod tls;

use std::collections::BTreeSet;
use std::io::Write;

use anyhow::{anyhow, bail, ensure, Context, Result};
use leftovers::gateway_resources;
use serde_json::Value;
use support::*;
use tls::{s_client, tls_backend};

const NS: &str = "gateway-conformance-infra";
/// The namespace of ReferenceGrant cases' backend `web-backend`.
const WEB_NS: &str = "gateway-conformance-web-backend";
/// The Gateway `same-namespace`, the cases' HTTPRoutes and the TLSRoutes.
const MANIFESTS: &str = include_str!("gateway_conformance/manifests.yaml");
const CLASS: &str = "gclb-l7-global-external-managed";
const REPORT_START: &str =
    "<!-- conformance-report:start (written by tests/gateway_conformance_e2e.rs) -->";
const REPORT_END: &str = "<!-- conformance-report:end -->";

/// An echo Pod (`app: <svc>`) and its Service `<svc>` in `NS` (`port` -> 3000, or -> 8443
/// served over TLS with the Pod's own self-signed certificate when `tls`).
fn backend(svc: &str, pod: &str, port: u16, tls: bool) -> String {
    backend_in(NS, svc, pod, port, tls)
}

/// [`backend`] in namespace `ns`.
fn backend_in(ns: &str, svc: &str, pod: &str, port: u16, tls: bool) -> String {
    let (target, tls_ann) = if tls {
        (8443, ", local.gclb-operator.dev/tls-ports: '8443'")
    } else {
        (3000, "")
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {svc}, namespace: {ns}}}\nspec:\n  selector: {{app: {svc}}}\n  ports: [{{port: {port}, targetPort: {target}}}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: {ns}\n  labels: {{app: {svc}}}\n  annotations: {{local.gclb-operator.dev/run: echo{tls_ann}}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports: [{{containerPort: {target}}}]\n---\n"
    )
}

/// HTTPRoutes attached to the HTTP listener (`attachedRoutes`).
const HTTP_ROUTE_COUNT: u64 = 19;
/// Upstream's Gateway with HTTPS listeners.
const HTTPS_GATEWAY: &str = "same-namespace-with-https-listener";

/// The shared system and the Gateway's sockets.
struct Cx {
    sys: System,
    http: String,
    tls: String,
    /// The TLS Terminate listener's socket.
    terminate: String,
    /// The Terminate listener's certificate (PEM), the CA its clients trust.
    ca: tempfile::NamedTempFile,
    /// The socket of `HTTPS_GATEWAY`'s port 443.
    https: String,
    /// Trusts only the certificate of `HTTPS_GATEWAY`'s listeners.
    https_roots: std::sync::Arc<rustls::ClientConfig>,
    client: reqwest::blocking::Client,
}

/// One answer.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn pod(&self) -> &str {
        self.body["pod"].as_str().unwrap_or_default()
    }
}

impl Cx {
    fn request(
        &self,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<Answer> {
        let mut rb = self
            .client
            .request(method.parse()?, format!("http://{}{path}", self.http))
            .header(reqwest::header::HOST, host);
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let resp = rb.send()?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text()?;
        Ok(Answer {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        })
    }

    /// Polls until the request is answered as `check` wants (the load balancer converges).
    fn expect(
        &self,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        check: impl Fn(&Answer) -> Result<()>,
    ) -> Result<Answer> {
        wait_for(
            &format!("{method} http://{host}{path} {headers:?}"),
            DEADLINE,
            || {
                let a = self.request(method, host, path, headers)?;
                check(&a).map(|()| Some(a))
            },
        )
    }

    /// Expects the request to reach a Pod of `backend` (`infra-backend-v1`).
    fn expect_backend(
        &self,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        backend: &str,
    ) -> Result<Answer> {
        self.expect(method, host, path, headers, |a| {
            ensure!(
                a.status == 200 && a.pod().starts_with(&format!("{backend}-")),
                "got {} from {:?}",
                a.status,
                a.pod()
            );
            Ok(())
        })
    }

    fn expect_status(&self, host: &str, path: &str, status: u16) -> Result<Answer> {
        self.expect("GET", host, path, &[], |a| {
            ensure!(a.status == status, "got {} {:?}", a.status, a.body);
            Ok(())
        })
    }

    /// The parent status of this controller on route `kind/name`, once it has `type_`.
    fn route_condition(&self, kind: &str, name: &str, type_: &str) -> Result<(String, String)> {
        wait_for(
            &format!("{kind}/{name} condition {type_}"),
            DEADLINE,
            || {
                let r = self.sys.get_json(&[kind, "-n", NS, name])?;
                Ok(r["status"]["parents"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|p| condition(&p["conditions"], type_)))
            },
        )
    }

    fn expect_route_condition(
        &self,
        kind: &str,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> Result<()> {
        wait_for(
            &format!("{kind}/{name} {type_}={status} {reason}"),
            DEADLINE,
            || {
                let got = self.route_condition(kind, name, type_)?;
                Ok((got.0 == status && got.1 == reason).then_some(()))
            },
        )
    }
}

/// `conditions[type]` as (status, reason).
fn condition(conditions: &Value, type_: &str) -> Option<(String, String)> {
    conditions
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

type Case = (&'static str, &'static [&'static str], fn(&Cx) -> Result<()>);

/// The cases: (name as in the upstream suite, or `own:` for checks of issue 19, features it
/// proves, check).
const CASES: &[Case] = &[
    ("GatewayClassObservedGenerationBump", &["Gateway"], |cx| {
        cx.sys.kubectl_ok(&["patch", "gatewayclass", CLASS, "--type=merge", "-p", r#"{"spec":{"description":"bumped by the conformance test"}}"#])?;
        wait_for("GatewayClass observedGeneration follows", DEADLINE, || {
            let c = cx.sys.get_json(&["gatewayclass", CLASS])?;
            let g = c["metadata"]["generation"].as_i64();
            let accepted = c["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Accepted").cloned();
            Ok(accepted.filter(|a| a["status"] == "True" && a["observedGeneration"].as_i64() == g && g >= Some(2)).map(drop))
        })
    }),
    ("GatewayWithAttachedRoutes", &["Gateway"], |cx| {
        wait_for("listener attachedRoutes", DEADLINE, || {
            let gw = cx.sys.get_json(&["gateway", "-n", NS, "same-namespace"])?;
            let l = gw["status"]["listeners"].as_array().cloned().unwrap_or_default();
            let count = |name: &str| l.iter().find(|x| x["name"] == name).and_then(|x| x["attachedRoutes"].as_u64());
            Ok((count("http") == Some(HTTP_ROUTE_COUNT) && count("tls") == Some(3) && count("tls-terminate") == Some(1)).then_some(()))
        })
    }),
    ("HTTPRouteSimpleSameNamespace", &["Gateway", "HTTPRoute"], |cx| {
        cx.expect_route_condition("httproute", "gateway-conformance-infra-test", "Accepted", "True", "Accepted")?;
        cx.expect_backend("GET", "simple.example", "/", &[], "infra-backend-v1")?;
        // A host no route claims goes to the default backend.
        cx.expect_status("other.example", "/", 404).map(drop)
    }),
    ("HTTPRouteMatching", &["Gateway", "HTTPRoute"], |cx| {
        let h = "matching.example";
        cx.expect_backend("GET", h, "/", &[], "infra-backend-v1")?;
        cx.expect_backend("GET", h, "/example", &[], "infra-backend-v1")?;
        cx.expect_backend("GET", h, "/", &[("version", "one")], "infra-backend-v1")?;
        cx.expect_backend("GET", h, "/v2", &[], "infra-backend-v2")?;
        cx.expect_backend("GET", h, "/v2/example", &[], "infra-backend-v2")?;
        cx.expect_backend("GET", h, "/", &[("version", "two")], "infra-backend-v2").map(drop)
    }),
    ("HTTPRouteExactPathMatching", &["Gateway", "HTTPRoute"], |cx| {
        let h = "exact.example";
        cx.expect_backend("GET", h, "/one", &[], "infra-backend-v1")?;
        cx.expect_backend("GET", h, "/two", &[], "infra-backend-v2")?;
        cx.expect_status(h, "/one/example", 404)?;
        cx.expect_status(h, "/two/", 404).map(drop)
    }),
    ("HTTPRouteHeaderMatching", &["Gateway", "HTTPRoute"], |cx| {
        let h = "headers.example";
        cx.expect_backend("GET", h, "/", &[("Version", "one")], "infra-backend-v1")?;
        cx.expect_backend("GET", h, "/", &[("version", "two")], "infra-backend-v2")?;
        cx.expect_backend("GET", h, "/", &[("version", "two"), ("color", "orange")], "infra-backend-v1")?;
        cx.expect_status(h, "/", 404).map(drop)
    }),
    ("HTTPRouteInvalidNonExistentBackendRef", &["Gateway", "HTTPRoute"], |cx| {
        cx.expect_route_condition("httproute", "invalid-nonexistent-backend-ref", "ResolvedRefs", "False", "BackendNotFound")?;
        cx.expect_status("nonexistent.example", "/", 500).map(drop)
    }),
    ("HTTPRouteInvalidBackendRefUnknownKind", &["Gateway", "HTTPRoute"], |cx| {
        cx.expect_route_condition("httproute", "invalid-backend-ref-unknown-kind", "ResolvedRefs", "False", "InvalidKind")?;
        cx.expect_status("unknown-kind.example", "/", 500).map(drop)
    }),
    ("HTTPRouteRequestHeaderModifier", &["Gateway", "HTTPRoute"], |cx| {
        cx.expect("GET", "header-mod.example", "/", &[("X-Header-Set", "some-other-value"), ("X-Header-Add", "something"), ("X-Header-Remove", "val")], |a| {
            let h = &a.body["headers"];
            let get = |n: &str| h.as_object().and_then(|m| m.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.to_string()));
            ensure!(a.status == 200, "status {}", a.status);
            ensure!(get("x-header-set").is_some_and(|v| v.contains("set-overwrites-values") && !v.contains("some-other-value")), "set: {h}");
            ensure!(get("x-header-add").is_some_and(|v| v.contains("something") && v.contains("add-appends-values")), "add: {h}");
            ensure!(get("x-header-remove").is_none(), "remove: {h}");
            Ok(())
        }).map(drop)
    }),
    ("HTTPRouteWeight", &["Gateway", "HTTPRoute"], |cx| {
        cx.expect_backend("GET", "weight.example", "/", &[], "infra-backend")?;
        // Until both answered (the second may still be on its way to HEALTHY), not a fixed
        // number of requests.
        let mut seen = BTreeSet::new();
        let start = std::time::Instant::now();
        while start.elapsed() < DEADLINE {
            let a = cx.request("GET", "weight.example", "/", &[])?;
            ensure!(a.status == 200, "status {}", a.status);
            let backend = a.pod().rsplit_once('-').map(|(b, _)| b.to_owned()).unwrap_or_default();
            ensure!(backend != "infra-backend-v3", "weight 0 got a request");
            seen.insert(backend);
            if seen.len() == 2 {
                return Ok(());
            }
        }
        bail!("only {seen:?} answered {DEADLINE:?} of requests split 1:1")
    }),
    ("HTTPRouteMethodMatching", &["Gateway", "HTTPRoute", "HTTPRouteMethodMatching"], |cx| {
        cx.expect_backend("POST", "method.example", "/", &[], "infra-backend-v1")?;
        cx.expect_backend("GET", "method.example", "/", &[], "infra-backend-v2")?;
        cx.expect("PUT", "method.example", "/", &[], |a| {
            ensure!(a.status == 404, "got {}", a.status);
            Ok(())
        }).map(drop)
    }),
    ("HTTPRouteQueryParamMatching", &["Gateway", "HTTPRoute", "HTTPRouteQueryParamMatching"], |cx| {
        cx.expect_backend("GET", "query.example", "/?animal=whale", &[], "infra-backend-v1")?;
        cx.expect_backend("GET", "query.example", "/?animal=dolphin", &[], "infra-backend-v2")?;
        cx.expect_status("query.example", "/?animal=shark", 404).map(drop)
    }),
    ("HTTPRouteResponseHeaderModifier", &["Gateway", "HTTPRoute", "HTTPRouteResponseHeaderModification"], |cx| {
        cx.expect("GET", "response-mod.example", "/", &[], |a| {
            let h = &a.headers;
            ensure!(a.status == 200, "status {}", a.status);
            ensure!(h.get("x-header-set").is_some_and(|v| v == "set-overwrites-values"), "set: {h:?}");
            ensure!(h.get_all("x-header-add").iter().any(|v| v == "add-appends-values"), "add: {h:?}");
            ensure!(h.get("x-pod-name").is_none(), "remove: {h:?}");
            Ok(())
        }).map(drop)
    }),
    ("HTTPRouteRewriteHost", &["Gateway", "HTTPRoute", "HTTPRouteHostRewrite"], |cx| {
        for (path, host, backend) in [("/one", "one.example.org", "infra-backend-v1"), ("/", "example.org", "infra-backend-v2")] {
            let a = cx.expect_backend("GET", "rewrite.example", path, &[], backend)?;
            ensure!(a.body["host"] == host, "{path}: backend saw host {}", a.body["host"]);
        }
        Ok(())
    }),
    ("HTTPRouteRedirectScheme", &["Gateway", "HTTPRoute", "HTTPRouteSchemeRedirect"], |cx| {
        for (path, location) in [("/scheme", "https://redirect.example/scheme"), ("/scheme-and-host", "https://example.org/scheme-and-host")] {
            cx.expect("GET", "redirect.example", path, &[], |a| {
                let loc = a.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default();
                ensure!(a.status == 302 && loc == location, "got {} location {loc:?}", a.status);
                Ok(())
            })?;
        }
        Ok(())
    }),
    ("HTTPRouteHTTPSListener", &["Gateway", "HTTPRoute"], https::https_listener),
    ("TLSRouteSimpleSameNamespace", &["Gateway", "TLSRoute"], |cx| {
        cx.expect_route_condition("tlsroute", "alpha", "Accepted", "True", "Accepted")?;
        let (san, pod) = tls_backend(&cx.tls, "alpha.example")?;
        ensure!(pod == "tls-alpha-1", "alpha.example reached {pod}");
        ensure!(san.contains("DNS:tls-alpha-1"), "alpha.example: the client saw {san}, not the backend's certificate");
        Ok(())
    }),
    ("TLSRouteInvalidBackendRefNonexistent", &["Gateway", "TLSRoute"], |cx| {
        cx.expect_route_condition("tlsroute", "nonexistent-backend", "ResolvedRefs", "False", "BackendNotFound")
    }),
    ("own: TLSRoute two hostnames, weighted backends, each client sees its backend's certificate", &["Gateway", "TLSRoute"], |cx| {
        let (san, pod) = tls_backend(&cx.tls, "alpha.example")?;
        ensure!(pod == "tls-alpha-1" && san.contains("DNS:tls-alpha-1"), "alpha: {pod} {san}");
        let mut seen = BTreeSet::new();
        let start = std::time::Instant::now();
        while start.elapsed() < DEADLINE {
            let (san, pod) = tls_backend(&cx.tls, "beta.example")?;
            ensure!(pod != "tls-zero-1", "weight 0 got a connection");
            ensure!(pod == "tls-beta-1" || pod == "tls-gamma-1", "beta.example reached {pod}");
            ensure!(san.contains(&format!("DNS:{pod}")), "{pod} answered but the client saw {san}");
            seen.insert(pod);
            if seen.len() == 2 {
                return Ok(());
            }
        }
        bail!("only {seen:?} answered {DEADLINE:?} of connections split 1:1")
    }),
    ("own: TLSRoute unknown SNI is refused", &["Gateway", "TLSRoute"], |cx| {
        tls_backend(&cx.tls, "alpha.example")?;
        let s = s_client(&cx.tls, "unknown.example", None)?;
        ensure!(s.san.is_none() && s.pod().is_none(), "an unknown SNI got through: {}", s.out);
        Ok(())
    }),
    ("own: TLSRoute on an HTTP listener is Accepted=False, UnsupportedValue", &["Gateway", "TLSRoute"], |cx| {
        cx.expect_route_condition("tlsroute", "on-http-listener", "Accepted", "False", "UnsupportedValue")
    }),
];

/// The report table for `results` (case, features, result).
fn report(results: &[(&str, &[&str], Result<()>)]) -> String {
    let mut out = format!("{REPORT_START}\n| Case | Features | Result |\n|---|---|---|\n");
    for (name, features, r) in results {
        let result = if r.is_ok() { "pass" } else { "FAIL" };
        out.push_str(&format!(
            "| {name} | {} | {result} |\n",
            features.join(", ")
        ));
    }
    out.push_str(REPORT_END);
    out
}

#[test]
fn gateway_api_conformance_cases_pass_through_real_traffic() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0,8443=0"])?;
    let root = repo_root();
    sys.kubectl_ok(&[
        "apply",
        "-k",
        &root.join("crds/gateway-api").to_string_lossy(),
    ])?;
    wait_for("Gateway API kinds to be served", DEADLINE, || {
        sys.kubectl_ok(&["get", "gatewayclasses,gateways,httproutes,tlsroutes", "-A"])
            .map(Some)
    })?;
    sys.apply_basics()?;
    sys.apply_path(&root.join("deploy/gateway/gatewayclass.yaml"))?;
    sys.apply_path(&root.join("deploy/gateway/rbac.yaml"))?;
    let mut infra = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {WEB_NS}}}\n---\n");
    infra.push_str(&backend("tcp-backend", "tcp-backend-1", 3000, false));
    infra.push_str(&backend_in(
        WEB_NS,
        "web-backend",
        "web-backend-1",
        8080,
        false,
    ));
    let (secret, cert) =
        tls::tls_secret(NS, "tls-terminate-checks-certificate", "tls.example.com")?;
    infra.push_str(&secret);
    let mut ca = tempfile::NamedTempFile::new()?;
    ca.write_all(cert.as_bytes())?;
    let (secret, https_cert) = tls::tls_secret_for(
        NS,
        "tls-validity-checks-certificate",
        https::CERTIFICATE_HOSTS,
    )?;
    infra.push_str(&secret);
    for v in ["v1", "v2", "v3"] {
        infra.push_str(&backend(
            &format!("infra-backend-{v}"),
            &format!("infra-backend-{v}-1"),
            8080,
            false,
        ));
    }
    for t in ["alpha", "beta", "gamma", "zero"] {
        infra.push_str(&backend(
            &format!("tls-{t}"),
            &format!("tls-{t}-1"),
            443,
            true,
        ));
    }
    sys.apply(&infra)?;
    sys.apply(MANIFESTS)?;
    sys.start_operator(&["--gateway-api"])?;

    let programmed_ip = |name: &str| {
        wait_for(
            &format!("Gateway {name} Programmed=True with an address"),
            DEADLINE,
            || {
                let gw = sys.get_json(&["gateway", "-n", NS, name])?;
                let programmed = condition(&gw["status"]["conditions"], "Programmed")
                    .is_some_and(|c| c.0 == "True");
                Ok(gw["status"]["addresses"][0]["value"]
                    .as_str()
                    .filter(|_| programmed)
                    .map(str::to_owned))
            },
        )
        .with_context(|| sys.logs())
    };
    let ip = programmed_ip("same-namespace")?;
    let https_ip = programmed_ip(HTTPS_GATEWAY)?;
    let http = sys.wait_for_listener(&ip, 80)?;
    let tls = sys.wait_for_listener(&ip, 443)?;
    let terminate = sys.wait_for_listener(&ip, 8443)?;
    let https = sys.wait_for_listener(&https_ip, 443)?;
    let cx = Cx {
        sys,
        http,
        tls,
        terminate,
        ca,
        https,
        https_roots: support::tls::trusting(&https_cert)?,
        client: reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30))
            .build()?,
    };

    let results: Vec<(&str, &[&str], Result<()>)> = CASES
        .iter()
        .chain(extended::CASES)
        .map(|(name, features, f)| (*name, *features, f(&cx)))
        .collect();
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(n, _, r)| r.as_ref().err().map(|e| format!("{n}: {e:#}")))
        .collect();
    ensure!(
        failed.is_empty(),
        "failed cases:\n{}\n{}",
        failed.join("\n"),
        cx.sys.logs()
    );

    // The report in docs/gateway-api.md is this run's.
    let table = report(&results);
    let doc_path = root.join("docs/gateway-api.md");
    let doc = std::fs::read_to_string(&doc_path)?;
    let (before, rest) = doc
        .split_once(REPORT_START)
        .context("docs/gateway-api.md has no report start marker")?;
    let (_, after) = rest
        .split_once(REPORT_END)
        .context("docs/gateway-api.md has no report end marker")?;
    let want = format!("{before}{table}{after}");
    if std::env::var_os("GATEWAY_CONFORMANCE_WRITE").is_some() {
        std::fs::write(&doc_path, &want)?;
    } else {
        ensure!(doc == want, "docs/gateway-api.md's report differs from this run's; rerun with GATEWAY_CONFORMANCE_WRITE=1:\n{table}");
    }

    // The GatewayClass claims exactly the features proven above.
    let proven: BTreeSet<&str> = results
        .iter()
        .flat_map(|(_, f, _)| f.iter().copied())
        .collect();
    let class = cx.sys.get_json(&["gatewayclass", CLASS])?;
    let claimed: BTreeSet<&str> = class["status"]["supportedFeatures"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    ensure!(
        claimed == proven,
        "supportedFeatures {claimed:?} but the passing cases prove {proven:?}"
    );

    // Deleting the routes and the Gateway leaves no Compute or Network Services resource.
    cx.sys
        .kubectl_ok(&["delete", "httproutes,tlsroutes", "--all", "-n", NS])?;
    cx.sys.kubectl_ok(&[
        "delete",
        "gateway",
        "same-namespace",
        HTTPS_GATEWAY,
        "-n",
        NS,
    ])?;
    wait_for("every Gateway resource deleted", DEADLINE, || {
        let left = gateway_resources(&cx.sys)?;
        if left.is_empty() {
            Ok(Some(()))
        } else {
            Err(anyhow!("left: {left:?}"))
        }
    })
    .with_context(|| cx.sys.logs())?;
    Ok(())
}
