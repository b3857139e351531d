//! End to end for the Gateway API (issue 19): kubectl applies the Gateway API CRDs, deploy/gateway's
//! GatewayClass and RBAC, a Gateway with an HTTP listener and an HTTPRoute; the operator (run with
//! `--gateway-api`) builds a global external Application Load Balancer in the Compute emulator;
//! real HTTP requests through the emulated load balancer reach the right Pods; the Gateway API
//! status conditions say so; deleting the objects deletes every Compute resource.
//!
//! The route below follows the conformance suite's HTTPRouteSimpleSameNamespace and
//! HTTPRouteMatching cases (kubernetes-sigs/gateway-api conformance/tests), on the Services of
//! docs/examples.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::*;

const GATEWAY: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: default}
spec:
  gatewayClassName: gclb-l7-global-external-managed
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: store, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [your-store.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /products}}]
    backendRefs: [{name: my-products, port: 60000}]
  - matches: [{path: {type: Exact, value: /discounted}}]
    backendRefs: [{name: my-discounted-products, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [broken.example]
  rules:
  - backendRefs: [{name: no-such-service, port: 80}]
"#;

/// The Compute collections a Gateway with HTTP listeners uses.
const COLLECTIONS: &[&str] = &[
    "forwardingRules",
    "targetHttpProxies",
    "urlMaps",
    "backendServices",
    "healthChecks",
    "addresses",
];

/// `status.conditions[type]` of a JSON object as (status, reason).
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

fn is_true(conditions: &Value, type_: &str) -> bool {
    condition(conditions, type_).is_some_and(|(s, _)| s == "True")
}

/// Every Compute resource name in [`COLLECTIONS`] and the NEGs of the zone.
fn compute_resources(sys: &System) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for c in COLLECTIONS {
        for n in sys.compute_names(c)? {
            out.push(format!("{c}/{n}"));
        }
    }
    for n in sys.neg_names()? {
        out.push(format!("networkEndpointGroups/{n}"));
    }
    Ok(out)
}

#[test]
fn gateway_and_http_route_serve_real_requests_and_report_status() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    let root = repo_root();
    sys.kubectl_ok(&[
        "apply",
        "-k",
        &root.join("crds/gateway-api").to_string_lossy(),
    ])?;
    wait_for("Gateway API kinds to be served", DEADLINE, || {
        sys.kubectl_ok(&["get", "gatewayclasses,gateways,httproutes", "-A"])
            .map(Some)
    })?;
    sys.apply_basics()?;
    sys.apply_path(&root.join("docs/examples/20-services-and-deployments.yaml"))?;
    sys.apply_path(&root.join("deploy/gateway/gatewayclass.yaml"))?;
    sys.apply_path(&root.join("deploy/gateway/rbac.yaml"))?;
    sys.apply(GATEWAY)?;
    sys.start_operator(&["--gateway-api"])?;

    // The GatewayClass is ours and accepted.
    wait_for("GatewayClass Accepted=True", DEADLINE, || {
        let c = sys.get_json(&["gatewayclass", "gclb-l7-global-external-managed"])?;
        Ok(is_true(&c["status"]["conditions"], "Accepted").then_some(()))
    })
    .with_context(|| sys.logs())?;

    // The Gateway gets an address and is programmed.
    let gw = wait_for("Gateway Programmed=True with an address", DEADLINE, || {
        let gw = sys.get_json(&["gateway", "web"])?;
        let ok = is_true(&gw["status"]["conditions"], "Programmed")
            && gw["status"]["addresses"][0]["value"].is_string();
        Ok(ok.then_some(gw))
    })
    .with_context(|| sys.logs())?;
    assert!(is_true(&gw["status"]["conditions"], "Accepted"), "{gw}");
    let listener = &gw["status"]["listeners"][0];
    assert_eq!(listener["name"], "http", "{gw}");
    assert_eq!(listener["attachedRoutes"], 2, "{gw}");
    for t in ["Accepted", "ResolvedRefs", "Programmed"] {
        assert!(is_true(&listener["conditions"], t), "listener {t}: {gw}");
    }
    let ip = gw["status"]["addresses"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let socket = sys.wait_for_listener(&ip, 80)?;

    // Real requests: each rule reaches its Service's Pods.
    let host = "your-store.example";
    let products = sys.wait_for_response(&socket, host, "/products/shoes", 200, "\"pod\"")?;
    assert!(
        products.contains("products-") && !products.contains("discounted-"),
        "{products}"
    );
    let discounted = sys.wait_for_response(&socket, host, "/discounted", 200, "\"pod\"")?;
    assert!(discounted.contains("discounted-products-"), "{discounted}");
    // Exact means exact; other hosts and paths get the default backend's 404.
    let (status, _) = sys.http_get(&socket, host, "/discounted/more")?;
    assert_eq!(status, 404);
    let (status, _) = sys.http_get(&socket, "other.example", "/products")?;
    assert_eq!(status, 404);
    // A rule whose backend does not exist answers 500 (HTTPRouteInvalidBackendRefUnknownKind's
    // expectation for unresolved refs).
    let (status, _) = sys.http_get(&socket, "broken.example", "/")?;
    assert_eq!(status, 500);

    // Route status: one parent entry of our controller each. The operator writes the routes'
    // status after the Gateway's (and an earlier sync may have left an older one), so it is
    // polled until ResolvedRefs says what is expected, then checked in full.
    let route_status = |name: &str, resolved: &str| {
        wait_for(
            &format!("HTTPRoute {name} ResolvedRefs={resolved}"),
            DEADLINE,
            || {
                let r = sys.get_json(&["httproute", name])?;
                let got = condition(&r["status"]["parents"][0]["conditions"], "ResolvedRefs");
                if got.as_ref().is_some_and(|(s, _)| s == resolved) {
                    Ok(Some(r))
                } else {
                    Err(anyhow!("ResolvedRefs {got:?}: {}", r["status"]))
                }
            },
        )
        .with_context(|| sys.logs())
    };
    let store = route_status("store", "True")?;
    let parent = &store["status"]["parents"][0];
    assert_eq!(
        parent["controllerName"], "gclb-operator.dev/gateway-controller",
        "{store}"
    );
    assert!(is_true(&parent["conditions"], "Accepted"), "{store}");
    assert!(is_true(&parent["conditions"], "ResolvedRefs"), "{store}");
    let broken = route_status("broken", "False")?;
    let conds = &broken["status"]["parents"][0]["conditions"];
    assert!(is_true(conds, "Accepted"), "{broken}");
    assert_eq!(
        condition(conds, "ResolvedRefs"),
        Some(("False".into(), "BackendNotFound".into())),
        "{broken}"
    );

    // Deleting the routes and the Gateway leaves no Compute resource behind.
    assert!(!compute_resources(&sys)?.is_empty());
    sys.kubectl_ok(&["delete", "httproute", "store", "broken"])?;
    sys.kubectl_ok(&["delete", "gateway", "web"])?;
    wait_for("every Compute resource deleted", DEADLINE, || {
        let left = compute_resources(&sys)?;
        if left.is_empty() {
            Ok(Some(()))
        } else {
            Err(anyhow!("left: {left:?}"))
        }
    })
    .with_context(|| sys.logs())?;
    assert!(sys.listener_for(&ip, 80)?.is_none());
    Ok(())
}
