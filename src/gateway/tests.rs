//! Translation tests: Gateway API objects (YAML, as users write them) in, the desired load
//! balancer and the status out.

use std::sync::Arc;

use serde_json::{json, Value};

use super::conditions::Cond;
use super::desired::PortTarget;
use super::inputs::{GatewayInputs, RouteKind};
use super::translate::{translate, GatewayConfig, Translation};
use super::DEFAULT_CONTROLLER_NAME;
use crate::translate::test_support::{config, snapshot_from_yaml};
use crate::translate::ObjectKey;

const CLASS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gclb}
spec: {controllerName: gclb-operator.dev/gateway-controller}
"#;

/// Services `name` (port 80 -> 8080, or 443 -> 8443 for names starting with `tls`) with one
/// ready endpoint each, and the default backend.
fn services(names: &[&str]) -> String {
    let mut out = String::from(
        r#"
apiVersion: v1
kind: Service
metadata: {name: default-http-backend, namespace: kube-system}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
"#,
    );
    for (i, n) in names.iter().enumerate() {
        let (port, target) = if n.starts_with("tls") {
            (443, 8443)
        } else {
            (80, 8080)
        };
        out.push_str(&format!(
            r#"---
apiVersion: v1
kind: Service
metadata: {{name: {n}, namespace: default}}
spec: {{ports: [{{port: {port}, targetPort: {target}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {n}-x, namespace: default, labels: {{kubernetes.io/service-name: {n}}}}}
addressType: IPv4
ports: [{{port: {target}}}]
endpoints: [{{addresses: [127.64.0.{i}], conditions: {{ready: true}}, zone: us-central1-a}}]
"#,
            i = i + 10
        ));
    }
    out
}

fn inputs(yaml: &str) -> GatewayInputs {
    let mut inputs = GatewayInputs::default();
    let mut core = String::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value: serde_yaml::Value = serde::Deserialize::deserialize(doc).expect("valid YAML");
        if value.is_null() {
            continue;
        }
        let mut v: Value = serde_json::to_value(&value).expect("JSON-compatible");
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        if kind != "GatewayClass" && v["metadata"].get("namespace").is_none() {
            v["metadata"]["namespace"] = json!("default");
        }
        macro_rules! put {
            ($map:ident, $t:ty) => {{
                let o: $t = serde_json::from_value(v).unwrap_or_else(|e| panic!("bad {kind}: {e}"));
                inputs.$map.insert(ObjectKey::of(&o), Arc::new(o));
            }};
        }
        match kind.as_str() {
            "GatewayClass" => {
                let o: super::api::gatewayclasses::GatewayClass =
                    serde_json::from_value(v).unwrap();
                inputs
                    .classes
                    .insert(kube::ResourceExt::name_any(&o), Arc::new(o));
            }
            "Gateway" => put!(gateways, super::api::gateways::Gateway),
            "HTTPRoute" => put!(http_routes, super::api::httproutes::HttpRoute),
            "TLSRoute" => put!(tls_routes, super::api::tlsroutes::TlsRoute),
            "ReferenceGrant" => put!(
                reference_grants,
                super::api::referencegrants::ReferenceGrant
            ),
            _ => {
                core.push_str("---\n");
                core.push_str(&serde_yaml::to_string(&value).unwrap());
            }
        }
    }
    inputs.cluster = snapshot_from_yaml(&core);
    inputs
}

fn run(yaml: &str) -> Translation {
    translate(
        &inputs(&format!("{CLASS}---{yaml}")),
        &GatewayConfig {
            controller_name: DEFAULT_CONTROLLER_NAME.to_owned(),
            translate: config(),
        },
    )
}

fn route_cond(t: &Translation, kind: RouteKind, name: &str, type_: &str) -> Cond {
    let (_, parents) = &t.routes[&(kind, ObjectKey::new("default", name))];
    parents[0]
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap()
}

const TLS_GATEWAY: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: gclb
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: tls, port: 443, protocol: TLS, hostname: "*.example.com", tls: {mode: Passthrough}}
"#;

#[test]
fn tls_route_two_hostnames_weighted_becomes_one_sni_route() {
    let t = run(&format!(
        r#"{TLS_GATEWAY}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: split}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [a.example.com, b.example.com, c.example.net]
  rules:
  - backendRefs: [{{name: tls-a, port: 443, weight: 3}}, {{name: tls-b, port: 443, weight: 1}}]
---
{}"#,
        services(&["tls-a", "tls-b"])
    ));
    let gw = &t.gateways[&ObjectKey::new("default", "gw")];
    assert_eq!(gw.desired.tls_routes.len(), 1);
    let route = serde_json::to_value(&gw.desired.tls_routes[0].route).unwrap();
    // c.example.net does not intersect the listener's *.example.com: left out.
    assert_eq!(
        route["rules"][0]["matches"][0]["sniHost"],
        json!(["a.example.com", "b.example.com"])
    );
    let dests = route["rules"][0]["action"]["destinations"]
        .as_array()
        .unwrap();
    let weights: Vec<_> = dests
        .iter()
        .map(|d| {
            (
                d["serviceName"].as_str().unwrap().contains("tls-a"),
                d["weight"].clone(),
            )
        })
        .collect();
    assert_eq!(weights, vec![(true, json!(3)), (false, json!(1))]);
    assert!(dests[0]["serviceName"]
        .as_str()
        .unwrap()
        .starts_with("projects/my-project/locations/global/backendServices/gkegw1t-"));
    let Some(PortTarget::Passthrough { proxy, no_match }) =
        gw.desired.ports.get(&443).map(|p| &p.target)
    else {
        panic!(
            "port 443 is not a passthrough port: {:?}",
            gw.desired.ports.keys()
        );
    };
    assert!(
        no_match.backends.is_empty(),
        "the no-match service must have no backends"
    );
    assert_eq!(
        route["targetProxies"][0],
        json!(format!(
            "projects/my-project/locations/global/targetTcpProxies/{}",
            proxy.name.clone().unwrap()
        ))
    );
    assert_eq!(gw.attached_routes, vec![0, 1]);
    assert!(route_cond(&t, RouteKind::Tls, "split", "Accepted").status);
    assert!(route_cond(&t, RouteKind::Tls, "split", "ResolvedRefs").status);
    // The TCP backends are TCP, health-checked with TCP, on the HTTP backend's NEG name.
    let tcp = gw
        .desired
        .backends
        .values()
        .find(|b| {
            b.backend_service
                .name
                .as_deref()
                .unwrap()
                .starts_with("gkegw1t-")
        })
        .unwrap();
    assert_eq!(
        serde_json::to_value(&tcp.backend_service).unwrap()["protocol"],
        "TCP"
    );
    assert_eq!(
        serde_json::to_value(&tcp.health_check).unwrap()["type"],
        "TCP"
    );
}

#[test]
fn tls_route_on_http_listener_is_unsupported_value_and_without_tls_listener_not_allowed() {
    let t = run(&format!(
        r#"{TLS_GATEWAY}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: on-http}}
spec:
  parentRefs: [{{name: gw, sectionName: http}}]
  hostnames: [a.example.com]
  rules: [{{backendRefs: [{{name: tls-a, port: 443}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: http-only}}
spec:
  gatewayClassName: gclb
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: no-tls-listener}}
spec:
  parentRefs: [{{name: http-only}}]
  hostnames: [a.example.com]
  rules: [{{backendRefs: [{{name: tls-a, port: 443}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: other-host}}
spec:
  parentRefs: [{{name: gw, sectionName: tls}}]
  hostnames: [www.example.net]
  rules: [{{backendRefs: [{{name: tls-a, port: 443}}]}}]
---
{}"#,
        services(&["tls-a"])
    ));
    let c = route_cond(&t, RouteKind::Tls, "on-http", "Accepted");
    assert_eq!((c.status, c.reason), (false, "UnsupportedValue"));
    let c = route_cond(&t, RouteKind::Tls, "no-tls-listener", "Accepted");
    assert_eq!((c.status, c.reason), (false, "NotAllowedByListeners"));
    let c = route_cond(&t, RouteKind::Tls, "other-host", "Accepted");
    assert_eq!((c.status, c.reason), (false, "NoMatchingListenerHostname"));
    assert!(t.gateways[&ObjectKey::new("default", "gw")]
        .desired
        .tls_routes
        .is_empty());
}

#[test]
fn http_route_precedence_follows_the_spec() {
    let t = run(&format!(
        r#"{TLS_GATEWAY}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /}}}}]
    backendRefs: [{{name: web-v1, port: 80, weight: 90}}, {{name: web-v2, port: 80, weight: 10}}]
  - matches: [{{path: {{type: PathPrefix, value: /api/}}, headers: [{{name: X-Env, value: canary}}]}}]
    backendRefs: [{{name: web-v2, port: 80}}]
  - matches: [{{path: {{type: Exact, value: /api}}}}]
    filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-a, value: b}}], remove: [x-c]}}}}]
    backendRefs: [{{name: web-v1, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /api}}, method: POST}}]
    backendRefs: [{{name: missing, port: 80}}]
---
{}"#,
        services(&["web-v1", "web-v2"])
    ));
    let gw = &t.gateways[&ObjectKey::new("default", "gw")];
    let Some(PortTarget::Http { url_map, .. }) = gw.desired.ports.get(&80).map(|p| &p.target)
    else {
        panic!("no HTTP port");
    };
    let um = serde_json::to_value(url_map).unwrap();
    let rules = um["pathMatchers"][0]["routeRules"].as_array().unwrap();
    let paths: Vec<String> = rules
        .iter()
        .map(|r| {
            let m = &r["matchRules"][0];
            let p = m["fullPathMatch"]
                .as_str()
                .map(|p| format!("={p}"))
                .or_else(|| m["prefixMatch"].as_str().map(|p| format!("^{p}")))
                .unwrap();
            let h = m["headerMatches"].as_array().map_or(0, Vec::len);
            format!("{p}/{h}")
        })
        .collect();
    // Exact first; then /api (method) before /api (headers) at equal length; / last.
    assert_eq!(
        paths,
        vec!["=/api/0", "=/api/1", "^/api//1", "=/api/1", "^/api//1", "^//0"]
    );
    let priorities: Vec<i64> = rules
        .iter()
        .map(|r| r["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities, (0..6).collect::<Vec<i64>>());
    assert_eq!(
        rules[1]["matchRules"][0]["headerMatches"][0],
        json!({"headerName": ":method", "exactMatch": "POST"})
    );
    // The Exact rule carries its header filter.
    assert_eq!(
        rules[0]["headerAction"]["requestHeadersToAdd"][0],
        json!({"headerName": "x-a", "headerValue": "b", "replace": true})
    );
    assert_eq!(
        rules[0]["headerAction"]["requestHeadersToRemove"],
        json!(["x-c"])
    );
    // The rule whose only backend is missing answers 500.
    assert_eq!(
        rules[1]["routeAction"]["faultInjectionPolicy"]["abort"]["httpStatus"],
        500
    );
    let split = rules[5]["routeAction"]["weightedBackendServices"]
        .as_array()
        .unwrap();
    assert_eq!(
        split
            .iter()
            .map(|w| w["weight"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![90, 10]
    );
    let c = route_cond(&t, RouteKind::Http, "web", "ResolvedRefs");
    assert_eq!((c.status, c.reason), (false, "BackendNotFound"));
    assert!(route_cond(&t, RouteKind::Http, "web", "Accepted").status);
    // Unmatched requests go to the default backend (404).
    let default = super::namer::backend(
        &config().cluster_uid,
        "kube-system",
        "default-http-backend",
        80,
    );
    assert!(
        um["defaultService"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{default}")),
        "{}",
        um["defaultService"]
    );
}

#[test]
fn listeners_conflict_and_cross_namespace_refs_need_grants() {
    let t = run(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: mixed}}
spec:
  gatewayClassName: gclb
  listeners:
  - {{name: pass, port: 443, protocol: TLS, hostname: a.example.com, tls: {{mode: Passthrough}}}}
  - {{name: term, port: 443, protocol: TLS, hostname: b.example.com, tls: {{mode: Terminate, certificateRefs: [{{name: cert, namespace: other}}]}}}}
  - {{name: http, port: 80, protocol: HTTP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: cross}}
spec:
  parentRefs: [{{name: mixed}}]
  rules: [{{backendRefs: [{{name: web-v1, namespace: other, port: 80}}]}}]
---
{}"#,
        services(&["web-v1"])
    ));
    let gw = &t.gateways[&ObjectKey::new("default", "mixed")];
    for l in &gw.listeners[..2] {
        let conflicted = l
            .conditions
            .iter()
            .find(|c| c.type_ == "Conflicted")
            .unwrap();
        assert_eq!(
            (conflicted.status, conflicted.reason),
            (true, "ProtocolConflict"),
            "{}",
            l.name
        );
        let accepted = l.conditions.iter().find(|c| c.type_ == "Accepted").unwrap();
        assert_eq!(
            (accepted.status, accepted.reason),
            (false, "ProtocolConflict")
        );
    }
    let refs = gw.listeners[1]
        .conditions
        .iter()
        .find(|c| c.type_ == "ResolvedRefs")
        .unwrap();
    assert_eq!((refs.status, refs.reason), (false, "RefNotPermitted"));
    assert!(
        !gw.desired.ports.contains_key(&443),
        "conflicted listeners are not programmed"
    );
    let c = route_cond(&t, RouteKind::Http, "cross", "ResolvedRefs");
    assert_eq!((c.status, c.reason), (false, "RefNotPermitted"));
}

/// `RegularExpression` matches need Compute's `regexMatch`, which the global EXTERNAL_MANAGED
/// load balancer of this controller's classes does not accept (Compute API reference,
/// `HttpRouteRuleMatch.regexMatch`): the route is `Accepted=False, UnsupportedValue` naming the
/// field and builds no route rule; a regional EXTERNAL_MANAGED scheme would take it.
#[test]
fn regular_expression_matches_are_unsupported_on_the_global_external_class() {
    let t = run(&format!(
        r#"{TLS_GATEWAY}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: regex-path}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [a.example.com]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /ok}}}}, {{path: {{type: RegularExpression, value: "/items/[0-9]+"}}}}]
    backendRefs: [{{name: web-v1, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: regex-header}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [b.example.com]
  rules:
  - matches: [{{headers: [{{type: RegularExpression, name: x-v, value: "v[0-9]"}}]}}]
    backendRefs: [{{name: web-v1, port: 80}}]
---
{}"#,
        services(&["web-v1"])
    ));
    for (name, field) in [
        ("regex-path", "spec.rules[0].matches[1].path"),
        ("regex-header", "spec.rules[0].matches[0].headers[0]"),
    ] {
        let c = route_cond(&t, RouteKind::Http, name, "Accepted");
        assert_eq!((c.status, c.reason), (false, "UnsupportedValue"), "{name}");
        assert!(
            c.message.starts_with(&format!(
                "{field}: RegularExpression matches are not supported"
            )) && c.message.contains("EXTERNAL_MANAGED"),
            "{name}: {}",
            c.message
        );
    }
    let gw = &t.gateways[&ObjectKey::new("default", "gw")];
    let Some(PortTarget::Http { url_map, .. }) = gw.desired.ports.get(&80).map(|p| &p.target)
    else {
        panic!("no HTTP port");
    };
    let text = serde_json::to_string(url_map).unwrap();
    assert!(!text.contains("regexMatch"), "{text}");
    // The same route on a scheme that has regexMatch is accepted.
    let route: super::api::httproutes::HttpRoute = serde_yaml::from_str(
        "metadata: {name: r}\nspec:\n  rules: [{matches: [{path: {type: RegularExpression, value: /x}}]}]\n",
    )
    .unwrap();
    let check = super::http_routes::check_supported;
    assert!(check(&route, ("EXTERNAL_MANAGED", true)).is_ok());
    assert!(check(&route, ("EXTERNAL_MANAGED", false)).is_err());
}
