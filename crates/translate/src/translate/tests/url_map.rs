//! The URL map: host rules merged per host, path matchers, exact and prefix paths, wildcard
//! hosts and the default backend.

use super::*;

#[test]
fn rules_for_one_host_are_merged_and_collisions_warn() {
    let d = translate_yaml(&ingress(
        r#"  rules:
  - host: shop.example
    http:
      paths:
      - {path: /a, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /same, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}
  - host: shop.example
    http:
      paths:
      - {path: /b, pathType: Exact, backend: {service: {name: api, port: {number: 8081}}}}
      - {path: /same, pathType: Exact, backend: {service: {name: api, port: {number: 8081}}}}
      - {path: /a, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
"#,
    ))
    .unwrap();
    let web = backend_name("web", 80);
    let api = backend_name("api", 8081);
    assert!(api < web, "the test relies on api's backend sorting first");
    assert_eq!(
        path_rules(&d),
        vec![(
            "shop.example".to_owned(),
            vec![
                ("/a".to_owned(), web.clone()),
                ("/a/*".to_owned(), web.clone()),
                ("/b".to_owned(), api.clone()),
                ("/same".to_owned(), api.clone()),
            ]
        )]
    );
    assert_eq!(d.findings.len(), 1, "{:?}", d.findings);
    let finding = &d.findings[0];
    assert!(finding.warning);
    assert!(
        finding.message.contains("spec.rules[0].http.paths[1]")
            && finding.message.contains("spec.rules[1].http.paths[1]"),
        "{}",
        finding.message
    );
}

/// Reference 001 "Multiple matches": an Exact path beats a Prefix path on the same string, in
/// either order and without a warning (it is Kubernetes' rule, not a conflict); the Prefix path
/// still serves everything below.
#[test]
fn exact_beats_prefix_on_the_same_string_in_any_order() {
    let exact =
        "{path: /foo, pathType: Exact, backend: {service: {name: api, port: {number: 8081}}}}";
    let prefix =
        "{path: /foo, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}";
    let (web, api) = (backend_name("web", 80), backend_name("api", 8081));
    for (a, b) in [(exact, prefix), (prefix, exact)] {
        let d = translate_yaml(&ingress(&format!(
            "  rules:\n  - http:\n      paths:\n      - {a}\n      - {b}\n"
        )))
        .unwrap();
        assert_eq!(
            path_rules(&d)[0].1,
            vec![
                ("/foo".to_owned(), api.clone()),
                ("/foo/*".to_owned(), web.clone())
            ]
        );
        assert!(d.findings.is_empty(), "{:?}", d.findings);
    }
}

/// Exact `/foo/` and Prefix `/foo` both match `/foo/`; Kubernetes gives it to the longer Exact
/// path. pathRules would leave it to GCE's tie-break between `/foo/` and `/foo/*`, so the path
/// matcher uses routeRules: exact matches first, then prefixes, longest first.
#[test]
fn an_exact_trailing_slash_path_beside_a_prefix_uses_ordered_route_rules() {
    let d = translate_yaml(&ingress(
        r#"  rules:
  - host: shop.example
    http:
      paths:
      - {path: /foo, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /foo/, pathType: Exact, backend: {service: {name: api, port: {number: 8081}}}}
"#,
    ))
    .unwrap();
    let um = d.frontend.url_map.as_ref().unwrap();
    let pm = &um.path_matchers[0];
    assert!(pm.path_rules.is_empty(), "{pm:?}");
    let got: Vec<(i32, String, String)> = pm
        .route_rules
        .iter()
        .map(|r| {
            let m = &r.match_rules[0];
            let what = m
                .full_path_match
                .clone()
                .map(|p| format!("full {p}"))
                .or(m.prefix_match.clone().map(|p| format!("prefix {p}")))
                .unwrap();
            let short = r
                .service
                .as_deref()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            (r.priority.unwrap(), what, short)
        })
        .collect();
    let (web, api) = (backend_name("web", 80), backend_name("api", 8081));
    assert_eq!(
        got,
        vec![
            (1, "full /foo".to_owned(), web.clone()),
            (2, "full /foo/".to_owned(), api),
            (3, "prefix /foo/".to_owned(), web.clone()),
            (4, "prefix /".to_owned(), web),
        ]
    );
}

/// Without such a conflict (an Exact `/foo/` alone, or beside a Prefix `/foo` to the same
/// backend) the path matcher keeps GKE's pathRules.
#[test]
fn an_exact_trailing_slash_path_without_a_conflict_keeps_path_rules() {
    for second in ["api, port: {number: 8081}", "web, port: {number: 80}"] {
        let same_backend = second.starts_with("web");
        let prefix = if same_backend {
            "      - {path: /foo, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n"
        } else {
            ""
        };
        let d = translate_yaml(&ingress(&format!(
            "  rules:\n  - host: shop.example\n    http:\n      paths:\n{prefix}      - {{path: /foo/, pathType: Exact, backend: {{service: {{name: {second}}}}}}}\n"
        )))
        .unwrap();
        let pm = &d.frontend.url_map.as_ref().unwrap().path_matchers[0];
        assert!(pm.route_rules.is_empty(), "{second}: {pm:?}");
        assert!(!pm.path_rules.is_empty(), "{second}");
    }
}

/// `port: {name: ""}` names no port: the same error as no port at all.
#[test]
fn an_empty_port_name_is_no_port() {
    let err = translate_yaml(&ingress(
        "  defaultBackend: {service: {name: web, port: {name: \"\"}}}\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TranslateError::UnsupportedBackend { field, reason, .. }
            if field == "spec.defaultBackend.service.port" && reason.contains("neither")),
        "{err}"
    );
}

#[test]
fn hosts_are_lower_cased_and_wildcards_warn_about_deeper_names() {
    let d = translate_yaml(&ingress(
        r#"  rules:
  - host: "*.Foo.com"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
  - host: Bar.Foo.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 8081}}}}
"#,
    ))
    .unwrap();
    let hosts: Vec<String> = path_rules(&d).into_iter().map(|(h, _)| h).collect();
    assert_eq!(hosts, ["*.foo.com", "bar.foo.com"]);
    assert_eq!(d.findings.len(), 1, "{:?}", d.findings);
    assert!(
        d.findings[0].message.contains("spec.rules[0].host")
            && d.findings[0].message.contains("deeper names"),
        "{}",
        d.findings[0].message
    );
}

/// One wildcard warning per wildcard host: a host in two rules warns once, two hosts twice.
#[test]
fn each_wildcard_host_warns_once() {
    let rule = |host: &str| {
        format!("  - host: \"{host}\"\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n")
    };
    let warnings = |hosts: &[&str]| {
        let rules: String = hosts.iter().map(|h| rule(h)).collect();
        let d = translate_yaml(&ingress(&format!("  rules:\n{rules}"))).unwrap();
        d.findings
            .iter()
            .filter(|f| f.message.contains("one DNS label"))
            .count()
    };
    assert_eq!(warnings(&["*.a.com", "*.a.com"]), 1);
    assert_eq!(warnings(&["*.a.com", "*.b.com"]), 2);
}

/// The URL map does not depend on the order of rules or of paths within them.
#[test]
fn url_map_is_the_same_for_every_order_of_rules_and_paths() {
    let rules = [
        "  - host: a.example\n    http:\n      paths:\n      - {path: /x, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /x, pathType: Exact, backend: {service: {name: api, port: {number: 8081}}}}\n",
        "  - host: a.example\n    http:\n      paths:\n      - {path: /x/, pathType: Prefix, backend: {service: {name: api, port: {number: 8081}}}}\n      - {path: /y, pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}\n",
        "  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 8081}}}}\n",
    ];
    let reversed_paths = |r: &str| {
        let mut lines: Vec<&str> = r.lines().collect();
        let split = lines.iter().position(|l| l.contains("paths:")).unwrap() + 1;
        lines[split..].reverse();
        lines.join("\n") + "\n"
    };
    let mut seen = None;
    for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [1, 2, 0]] {
        for flip in [false, true] {
            let spec: String = order
                .iter()
                .map(|&i| {
                    if flip {
                        reversed_paths(rules[i])
                    } else {
                        rules[i].to_owned()
                    }
                })
                .collect();
            let d = translate_yaml(&ingress(&format!("  rules:\n{spec}"))).unwrap();
            let um = serde_json::to_string(&d.frontend.url_map).unwrap();
            let mut messages: Vec<String> = d
                .findings
                .iter()
                .map(|f| f.message.replace(char::is_numeric, "#"))
                .collect();
            messages.sort();
            match &seen {
                None => seen = Some((um, messages)),
                Some((first, first_messages)) => {
                    assert_eq!(&um, first, "order {order:?} flip {flip}");
                    assert_eq!(&messages, first_messages, "order {order:?} flip {flip}");
                }
            }
        }
    }
}

#[test]
fn wildcard_and_empty_hosts_pass_through() {
    let d = translate_yaml(&ingress(
        r#"  rules:
  - host: "*.foo.com"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
  - http:
      paths:
      - {pathType: ImplementationSpecific, backend: {service: {name: api, port: {number: 8081}}}}
"#,
    ))
    .unwrap();
    let hosts: Vec<String> = path_rules(&d).into_iter().map(|(h, _)| h).collect();
    assert_eq!(hosts, ["*", "*.foo.com"]);
    assert_eq!(
        path_rules(&d)[0].1,
        vec![("/*".to_owned(), backend_name("api", 8081))]
    );
}

#[test]
fn default_backend_is_spec_default_backend_else_the_system_one() {
    let d = translate_yaml(&ingress(
        "  defaultBackend: {service: {name: web, port: {name: http}}}\n",
    ))
    .unwrap();
    let um = d.frontend.url_map.as_ref().unwrap();
    assert!(um
        .default_service
        .as_ref()
        .unwrap()
        .ends_with(&backend_name("web", 80)));
    assert_eq!(d.backends.len(), 1, "only the default backend is used");
    let d = translate_yaml(&ingress("  rules: []\n")).unwrap();
    let system = namer::backend(
        namer::Scheme::Gke,
        &config().cluster_uid,
        "kube-system",
        "default-http-backend",
        80,
    );
    assert!(d
        .frontend
        .url_map
        .as_ref()
        .unwrap()
        .default_service
        .as_ref()
        .unwrap()
        .ends_with(&system));
    let hc = &d.backends[&system].health_check;
    assert_eq!(
        hc.http_health_check
            .as_ref()
            .unwrap()
            .request_path
            .as_deref(),
        Some("/healthz")
    );
}
