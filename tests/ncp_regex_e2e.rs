//! End to end, issue 22: NCP's `ncp/use-regex` (reference 002) on the internal Application Load
//! Balancer, whose `INTERNAL_MANAGED` URL map accepts `regexMatch`. kubectl applies one
//! manifest twice over the GKE documentation's two Services: as an internal Ingress (class
//! `gce-internal`) and as a classic one (class `gce`). Real HTTP through the internal address's
//! loopback mapping shows:
//! - a path matching the regex `/items/[0-9]+` reaches its Service (the echo names the Pod);
//! - the Exact path `/items/7` wins over the regex it also matches (NCP 3.0.2: Exact, Prefix,
//!   then regex);
//! - a path the regex does not match as a whole (`/items/abc`, `/items/42/more`) reaches the
//!   default backend's 404;
//! - the regional URL map holds the `regexMatch` route;
//!
//! and the classic Ingress is refused with the error annotation and a Warning Event naming
//! `regexMatch`, with nothing built for it.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::*;

const REGION: &str = "us-central1";
const HOST: &str = "shop.example";
const ERROR_KEY: &str = "gclb-operator.dev/error.loadbalancer";

/// The Ingress `name` of class `class` with `ncp/use-regex: "true"`: the regex over
/// my-products, an Exact path inside it over my-discounted-products, no default backend (the
/// cluster's default backend answers 404).
fn ingress(name: &str, class: &str) -> String {
    format!(
        r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
  annotations:
    kubernetes.io/ingress.class: {class}
    ncp/use-regex: "true"
spec:
  rules:
  - host: {HOST}
    http:
      paths:
      - path: /items/[0-9]+
        pathType: ImplementationSpecific
        backend: {{service: {{name: my-products, port: {{number: 60000}}}}}}
      - path: /items/7
        pathType: Exact
        backend: {{service: {{name: my-discounted-products, port: {{number: 80}}}}}}
---
"#
    )
}

/// Polls until `GET HOST+path` through `socket` answers 200 from an echo Pod; returns the
/// Pod's name.
fn pod(sys: &System, socket: &str, path: &str) -> Result<String> {
    let body = sys.wait_for_response(socket, HOST, path, 200, "\"pod\"")?;
    let v: Value = serde_json::from_str(&body).with_context(|| format!("{path}: {body}"))?;
    Ok(v["pod"].as_str().unwrap_or_default().to_string())
}

#[test]
fn use_regex_routes_on_the_internal_class_and_is_refused_on_the_classic_one() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    // The cluster's subnet (the internal address comes from it) and the region's proxy-only
    // subnet; the default network's `default-allow-internal` admits the proxies.
    let subnets = format!("compute/v1/projects/{PROJECT}/regions/{REGION}/subnetworks");
    sys.compute_post(
        &subnets,
        &serde_json::json!({"name": "nodes", "network": "global/networks/default",
            "ipCidrRange": "10.1.2.0/24"}),
    )?;
    sys.compute_post(
        &subnets,
        &serde_json::json!({"name": "proxy-only", "network": "global/networks/default",
            "ipCidrRange": "10.129.0.0/23", "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}),
    )?;
    sys.apply_basics()?;
    sys.apply_path(&repo_root().join("docs/examples/20-services-and-deployments.yaml"))?;
    sys.apply(&(ingress("regex", "gce-internal") + &ingress("classic", "gce")))?;
    sys.start_operator(&[])?;

    // The internal Ingress: its address, served on loopback.
    let ip = sys.wait_for_ingress_ip("default", "regex")?;
    let socket = sys.wait_for_listener(&ip, 80)?;

    // A path the regex matches reaches my-products; the Exact path it also matches wins.
    let got = pod(&sys, &socket, "/items/42")?;
    assert!(got.starts_with("products-"), "/items/42 reached {got}");
    let got = pod(&sys, &socket, "/items/7")?;
    assert!(
        got.starts_with("discounted-products-"),
        "/items/7 reached {got}"
    );
    // Whole-path matching: neither `/items/abc` nor `/items/42/more` matches the regex, so the
    // default backend answers.
    for path in ["/items/abc", "/items/42/more"] {
        sys.wait_for_response(&socket, HOST, path, 404, "default backend - 404")?;
    }

    // The regional URL map carries the regex as a regexMatch route.
    let ing = sys.get_json(&["ingress", "regex"])?;
    let um = ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
        .as_str()
        .ok_or_else(|| anyhow!("no url-map annotation: {ing}"))?
        .to_string();
    let um = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/regions/{REGION}/urlMaps/{um}"
    ))?;
    let regexes: Vec<&str> = um["pathMatchers"][0]["routeRules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["matchRules"][0]["regexMatch"].as_str())
        .collect();
    assert_eq!(regexes, ["/items/[0-9]+"], "{um}");

    // The classic Ingress: refused, with the error annotation and a Warning Event.
    let error = wait_for("the classic use-regex refusal", DEADLINE, || {
        let ing = sys.get_json(&["ingress", "classic"])?;
        Ok(ing["metadata"]["annotations"][ERROR_KEY]
            .as_str()
            .map(str::to_string))
    })
    .with_context(|| sys.logs())?;
    assert!(
        error.contains("ncp/use-regex") && error.contains("loadBalancingScheme EXTERNAL"),
        "{error}"
    );
    wait_for("the classic use-regex Warning Event", DEADLINE, || {
        let events = sys.events_for("default", "Ingress", "classic")?;
        if events
            .iter()
            .any(|e| e.starts_with("Warning") && e.contains("regexMatch"))
        {
            Ok(Some(()))
        } else {
            Err(anyhow!("Events of classic: {events:?}"))
        }
    })
    .with_context(|| sys.logs())?;
    let global: Vec<Value> = ["urlMaps", "backendServices"]
        .iter()
        .map(|c| sys.compute_names(c).map(|n| Value::from(n.join(","))))
        .collect::<Result<_>>()?;
    assert_eq!(global, [Value::from(""), Value::from("")], "nothing global");
    sys.stop_operator();
    Ok(())
}
