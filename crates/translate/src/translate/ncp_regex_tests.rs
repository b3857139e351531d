//! Unit tests of `ncp/use-regex` (reference 002): supported as a function of the load
//! balancing scheme, refused on the classic class, and NCP's precedence (Exact, then Prefix,
//! then regex, longest first) as the emulator's own URL map matcher routes it.

use super::ncp::{regex_supported, USE_REGEX};
use super::test_support::{config, snapshot_from_yaml};
use super::*;

const OBJECTS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: items}
spec:
  selector: {app: items}
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: special}
spec:
  selector: {app: special}
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: fallback}
spec:
  selector: {app: fallback}
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ing
  annotations: {kubernetes.io/ingress.class: CLASS, ncp/use-regex: "true"}
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules:
  - host: shop.example
    http:
      paths:
      - {path: '/items/[0-9]+', pathType: ImplementationSpecific, backend: {service: {name: items, port: {number: 80}}}}
      - {path: /items/7, pathType: Exact, backend: {service: {name: special, port: {number: 80}}}}
      - {path: /items/new, pathType: Prefix, backend: {service: {name: special, port: {number: 80}}}}
      - {path: '/items/[a-z]+/[0-9]+', pathType: ImplementationSpecific, backend: {service: {name: special, port: {number: 80}}}}
  - host: any.example
    http:
      paths:
      - {pathType: ImplementationSpecific, backend: {service: {name: items, port: {number: 80}}}}
      - {path: '/tea|/coffee', pathType: ImplementationSpecific, backend: {service: {name: special, port: {number: 80}}}}
"#;

fn translate(class: &str) -> Result<DesiredIngress, TranslateError> {
    let snapshot = snapshot_from_yaml(&OBJECTS.replace("CLASS", class));
    let ingress = snapshot.ingresses[&ObjectKey::new("default", "ing")].clone();
    translate_ingress(&snapshot, &ingress, &config())
}

/// The backend service name a request for `host` + `path` reaches, routed by the emulator's
/// matcher (the code that routes its data plane's real requests).
fn routed(um: &serde_json::Value, host: &str, path: &str) -> String {
    let url = gce_emulator::resources::url_maps::route(um, host, path)
        .unwrap_or_else(|| panic!("{host}{path} routed nowhere"));
    url.rsplit('/').next().unwrap_or_default().to_owned()
}

#[test]
fn regex_is_a_function_of_the_scheme_and_scope() {
    for (scheme, regional, ok) in [
        ("INTERNAL_MANAGED", true, true),
        ("INTERNAL_MANAGED", false, true),
        ("INTERNAL_SELF_MANAGED", false, true),
        ("EXTERNAL_MANAGED", true, true),
        ("EXTERNAL_MANAGED", false, false),
        ("EXTERNAL", false, false),
        ("EXTERNAL", true, false),
    ] {
        assert_eq!(regex_supported(scheme, regional), ok, "{scheme} {regional}");
    }
}

#[test]
fn the_classic_class_refuses_use_regex_naming_the_scheme() {
    let err = translate("gce").unwrap_err().to_string();
    assert!(
        err.contains(USE_REGEX)
            && err.contains("regexMatch")
            && err.contains("loadBalancingScheme EXTERNAL")
            && err.contains("gce-internal"),
        "{err}"
    );
}

#[test]
fn the_internal_class_routes_exact_then_prefix_then_regex_longest_first() {
    let d = translate("gce-internal").unwrap();
    let um = d.frontend.url_map.as_ref().unwrap();
    let shop = um
        .path_matchers
        .iter()
        .find(|pm| {
            um.host_rules.iter().any(|h| {
                h.hosts == ["shop.example"] && h.path_matcher.as_deref() == pm.name.as_deref()
            })
        })
        .unwrap();
    let kinds: Vec<String> = shop
        .route_rules
        .iter()
        .map(|r| {
            let m = &r.match_rules[0];
            match (&m.full_path_match, &m.prefix_match, &m.regex_match) {
                (Some(p), _, _) => format!("full {p}"),
                (_, Some(p), _) => format!("prefix {p}"),
                (_, _, Some(p)) => format!("regex {p}"),
                _ => "none".to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "full /items/7",
            "full /items/new",
            "prefix /items/new/",
            "regex /items/[a-z]+/[0-9]+",
            "regex /items/[0-9]+",
        ]
    );
    assert!(shop.route_rules[4]
        .service
        .as_deref()
        .unwrap()
        .starts_with("projects/my-project/regions/us-central1/backendServices/"));

    let json = serde_json::to_value(um).unwrap();
    let backend = |svc: &str| config().backend_name("default", svc, 80);
    for (path, svc) in [
        ("/items/42", "items"),
        ("/items/7", "special"),
        ("/items/new", "special"),
        ("/items/new/42", "special"),
        ("/items/abc/9", "special"),
        ("/items/abc", "fallback"),
        ("/items/42/more", "fallback"),
        ("/shop/items/42", "fallback"),
    ] {
        assert_eq!(
            routed(&json, "shop.example", path),
            backend(svc),
            "shop.example{path}"
        );
    }
    // An omitted path is NCP's `/.*`; every alternative of `/tea|/coffee` must match the
    // whole path (NCP's textual `^/tea|/coffee$` would send `/tea/x` to it).
    assert_eq!(routed(&json, "any.example", "/x/y"), backend("items"));
    assert_eq!(routed(&json, "any.example", "/coffee"), backend("special"));
    assert_eq!(routed(&json, "any.example", "/tea/x"), backend("items"));
    let warnings: Vec<&str> = d
        .findings
        .iter()
        .filter(|f| f.warning && f.message.contains("top-level '|'"))
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", d.findings);
    assert!(warnings[0].contains("/tea|/coffee"), "{}", warnings[0]);
}

#[test]
fn a_regex_path_that_does_not_compile_names_its_field() {
    let yaml = OBJECTS
        .replace("CLASS", "gce-internal")
        .replace("'/items/[0-9]+'", "'/items/([0-9]+'");
    let snapshot = snapshot_from_yaml(&yaml);
    let ingress = snapshot.ingresses[&ObjectKey::new("default", "ing")].clone();
    let err = translate_ingress(&snapshot, &ingress, &config())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.rules[0].http.paths[0].path") && err.contains("ncp/use-regex"),
        "{err}"
    );
}
