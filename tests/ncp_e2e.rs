//! End to end, issue 22 (what NSX NCP users rely on, reference 002): NCP's Ingress annotations,
//! applied with kubectl under their original names, programmed by the operator into the
//! Compute emulator and shown with real requests through its data plane. One stack, one
//! Ingress per feature, all converging at once:
//! - `ncp/http-redirect` with `allow-http: "false"`: 301 to `https://`, the redirect wins;
//! - `ingress.kubernetes.io/rewrite-target`: the backend sees the rewritten path;
//! - `ncp/use-regex`: refused (error annotation and Event): no `regexMatch` on the classic LB;
//! - `ncp/whitelist-source-range`: 403 for a client outside the list, 200 once it is in;
//! - the `gclb-operator.dev/error.loadbalancer` annotation appears for a bad value and clears
//!   when fixed; an annotation the Compute API cannot express gives a Warning and the warning
//!   annotation.

mod support;

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use base64::Engine as _;
use serde_json::Value;
use support::*;

const ERROR_KEY: &str = "gclb-operator.dev/error.loadbalancer";
const WARNING_KEY: &str = "gclb-operator.dev/warning.loadbalancer";

/// A Service `name` (port 80 -> 8080) with one echo Pod `name-1`.
fn app(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec:\n  type: NodePort\n  selector: {{app: {name}}}\n  ports:\n  - {{name: http, protocol: TCP, port: 80, targetPort: 8080}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-1\n  labels: {{app: {name}}}\n  annotations: {{local.gclb-operator.dev/run: echo}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {{name: http, containerPort: 8080}}\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n---\n"
    )
}

/// An Ingress with `annotations`, `spec` given as YAML lines indented by two spaces.
fn ingress(name: &str, annotations: &[(&str, &str)], spec: &str) -> String {
    let mut ann = String::new();
    for (k, v) in annotations {
        ann.push_str(&format!("    {k}: '{v}'\n"));
    }
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations:\n{ann}spec:\n{spec}---\n"
    )
}

fn tls_secret(name: &str, host: &str) -> Result<String> {
    let ck = rcgen::generate_simple_self_signed(vec![host.to_string()])?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(&ck.cert.pem()),
        b64(&ck.signing_key.serialize_pem())
    ))
}

/// (status, Location) of `GET http://{socket}{path}` with `Host: host`, redirects not followed.
fn get_redirect(socket: &str, host: &str, path: &str) -> Result<(u16, Option<String>)> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let resp = client
        .get(format!("http://{socket}{path}"))
        .header(reqwest::header::HOST, host)
        .send()?;
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .map(str::to_string);
    Ok((resp.status().as_u16(), location))
}

/// Polls until `GET host+path` is answered 200 by a backend; returns (pod, path it saw).
fn backend_view(sys: &System, socket: &str, host: &str, path: &str) -> Result<(String, String)> {
    wait_for(
        &format!("a backend answer to {host}{path}"),
        DEADLINE,
        || {
            let (status, body) = sys.http_get(socket, host, path)?;
            let v: Value = serde_json::from_str(&body)
                .map_err(|_| anyhow!("{status}: {}", body.chars().take(200).collect::<String>()))?;
            match (status, v["pod"].as_str(), v["path"].as_str()) {
                (200, Some(pod), Some(seen)) => Ok(Some((pod.to_string(), seen.to_string()))),
                _ => Err(anyhow!("{status}: {v}")),
            }
        },
    )
    .with_context(|| sys.logs())
}

fn annotation(sys: &System, name: &str, key: &str) -> Result<Option<String>> {
    let ing = sys.get_json(&["ingress", name])?;
    Ok(ing["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_string))
}

#[test]
fn ncp_annotations_through_the_emulated_load_balancer() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    let backend = |svc: &str| format!("service: {{name: {svc}, port: {{number: 80}}}}");
    let mut yaml = app("tea") + &app("coffee") + &app("milk");
    yaml += &tls_secret("cafe-tls", "secure.example")?;
    // Redirect: wins over allow-http "false" (reference 002), so the HTTP listener exists.
    yaml += &ingress(
        "redirect",
        &[
            ("ncp/http-redirect", "true"),
            ("kubernetes.io/ingress.allow-http", "false"),
        ],
        &format!(
            "  tls:\n  - {{hosts: [secure.example], secretName: cafe-tls}}\n  defaultBackend: {{{}}}\n",
            backend("tea")
        ),
    );
    yaml += &ingress(
        "rewrite",
        &[("ingress.kubernetes.io/rewrite-target", "/")],
        &format!(
            "  rules:\n  - host: rewrite.example\n    http:\n      paths:\n      - {{path: /tea, pathType: Prefix, backend: {{{}}}}}\n",
            backend("tea")
        ),
    );
    yaml += &ingress(
        "regex",
        &[("ncp/use-regex", "true")],
        &format!(
            "  defaultBackend: {{{}}}\n  rules:\n  - host: regex.example\n    http:\n      paths:\n      - {{path: '/(tea|milk)/[0-9]+', pathType: ImplementationSpecific, backend: {{{}}}}}\n",
            backend("coffee"),
            backend("tea")
        ),
    );
    // The client is 127.0.0.1: outside 10.0.0.0/8.
    yaml += &ingress(
        "guarded",
        &[("ncp/whitelist-source-range", "10.0.0.0/8")],
        &format!("  defaultBackend: {{{}}}\n", backend("milk")),
    );
    yaml += &ingress(
        "broken",
        &[
            ("ncp/http-redirect", "maybe"),
            ("ncp/ssl-mode", "passthrough"),
        ],
        &format!("  defaultBackend: {{{}}}\n", backend("coffee")),
    );
    sys.apply(&yaml)?;

    // http-redirect.
    let socket = sys.wait_for_ingress_socket("default", "redirect")?;
    let (status, location) = wait_for("the HTTPS redirect", DEADLINE, || {
        let got = get_redirect(&socket, "secure.example", "/tea?cup=1")?;
        Ok((got.0 == 301).then_some(got))
    })
    .with_context(|| sys.logs())?;
    assert_eq!(status, 301);
    assert_eq!(
        location.as_deref(),
        Some("https://secure.example/tea?cup=1")
    );

    // rewrite-target: `/tea/cup` reaches the backend as `/cup`, `/tea` as `/`.
    let socket = sys.wait_for_ingress_socket("default", "rewrite")?;
    let (pod, seen) = backend_view(&sys, &socket, "rewrite.example", "/tea/cup")?;
    assert_eq!((pod.as_str(), seen.as_str()), ("tea-1", "/cup"));
    let (_, seen) = backend_view(&sys, &socket, "rewrite.example", "/tea")?;
    assert_eq!(seen, "/");

    // use-regex: the classic load balancer has no regexMatch: refused with an error
    // annotation and a Warning Event, and no load balancer.
    let error = wait_for("the use-regex refusal", DEADLINE, || {
        annotation(&sys, "regex", ERROR_KEY)
    })
    .with_context(|| sys.logs())?;
    assert!(
        error.contains("ncp/use-regex") && error.contains("regexMatch"),
        "{error}"
    );
    // Polled: the Event and the annotation are two writes; seeing one does not order the other.
    wait_for("the use-regex Warning Event", DEADLINE, || {
        let events = sys.events_for("default", "Ingress", "regex")?;
        if events
            .iter()
            .any(|e| e.starts_with("Warning") && e.contains("regexMatch"))
        {
            Ok(Some(()))
        } else {
            Err(anyhow!("Events of regex: {events:?}"))
        }
    })
    .with_context(|| sys.logs())?;

    // whitelist-source-range: refused (403) outside the list, served once the client is in.
    let socket = sys.wait_for_ingress_socket("default", "guarded")?;
    sys.wait_for_response(&socket, "guarded.example", "/", 403, "")?;
    let policies = sys.compute_names("securityPolicies")?;
    assert_eq!(policies.len(), 1, "one whitelist policy: {policies:?}");
    sys.kubectl_ok(&[
        "annotate",
        "ingress",
        "guarded",
        "--overwrite",
        "ncp/whitelist-source-range=10.0.0.0/8, 127.0.0.1",
    ])?;
    let (pod, _) = backend_view(&sys, &socket, "guarded.example", "/")?;
    assert_eq!(pod, "milk-1");

    // Error annotation: set for a bad value (with the Event), cleared when fixed; the
    // passthrough mode Compute cannot express stays a warning.
    let error = wait_for("the error annotation", DEADLINE, || {
        annotation(&sys, "broken", ERROR_KEY)
    })
    .with_context(|| sys.logs())?;
    assert!(
        error.starts_with("INVALID_INGRESS: ") && error.contains("ncp/http-redirect"),
        "{error}"
    );
    sys.kubectl_ok(&[
        "annotate",
        "ingress",
        "broken",
        "--overwrite",
        "ncp/http-redirect=false",
    ])?;
    wait_for("the error annotation to clear", DEADLINE, || {
        Ok(annotation(&sys, "broken", ERROR_KEY)?
            .is_none()
            .then_some(()))
    })
    .with_context(|| sys.logs())?;
    let warning = wait_for("the warning annotation", DEADLINE, || {
        annotation(&sys, "broken", WARNING_KEY)
    })?;
    assert!(warning.contains("ncp/ssl-mode"), "{warning}");
    // The operator writes the warning annotation before it publishes the finding's Event:
    // wait for the Event too.
    wait_for("the ncp/ssl-mode Unsupported Event", DEADLINE, || {
        let events = sys.events_for("default", "Ingress", "broken")?;
        if events
            .iter()
            .any(|e| e.contains("Unsupported") && e.contains("ncp/ssl-mode"))
        {
            Ok(Some(()))
        } else {
            Err(anyhow!("Events of broken: {events:?}"))
        }
    })
    .with_context(|| sys.logs())?;
    let socket = sys.wait_for_ingress_socket("default", "broken")?;
    let (pod, _) = backend_view(&sys, &socket, "broken.example", "/")?;
    assert_eq!(pod, "coffee-1");
    Ok(())
}
