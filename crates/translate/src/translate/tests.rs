//! Unit tests of translation: ownership, every error case, host merging, wildcards, health
//! check derivation, endpoints, BackendConfig, TLS and determinism.

use super::test_support::{config, snapshot_from_yaml};
use super::*;

/// Services `web` (80 -> 8080, named port `http`) and `api` (8081 -> 9000) in `default`, the
/// system default backend, and one ready endpoint each.
const BASE: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: default-http-backend, namespace: kube-system}
spec:
  selector: {app: default-http-backend}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 8081, targetPort: 9000}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.0.1"]
  conditions: {ready: true}
  zone: us-central1-b
"#;

fn ingress(spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing}}\nspec:\n{spec}"
    )
}

fn translate_yaml(extra: &str) -> Result<DesiredIngress, TranslateError> {
    let snapshot = snapshot_from_yaml(&format!("{BASE}\n---\n{extra}"));
    let ing = snapshot
        .ingresses
        .get(&ObjectKey::new("default", "ing"))
        .expect("test Ingress `ing`");
    translate_ingress(&snapshot, ing, &config())
}

fn path_rules(d: &DesiredIngress) -> Vec<(String, Vec<(String, String)>)> {
    let um = d.frontend.url_map.as_ref().unwrap();
    um.host_rules
        .iter()
        .map(|hr| {
            let pm = um
                .path_matchers
                .iter()
                .find(|pm| pm.name == hr.path_matcher)
                .expect("every host rule has its path matcher");
            let rules = pm
                .path_rules
                .iter()
                .map(|r| {
                    let service = r.service.clone().unwrap();
                    let short = service.rsplit('/').next().unwrap().to_owned();
                    (r.paths.join(","), short)
                })
                .collect();
            (hr.hosts.join(","), rules)
        })
        .collect()
}

fn backend_name(service: &str, port: i32) -> String {
    namer::backend(
        namer::Scheme::Gke,
        &config().cluster_uid,
        "default",
        service,
        port,
    )
}

// ---- ownership ----

fn owns(objects: &str) -> bool {
    let snapshot = snapshot_from_yaml(objects);
    let ing = snapshot.ingresses.values().next().unwrap();
    owns_ingress(&snapshot, ing, &config())
}

const GCE_CLASS: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gce}\nspec: {controller: k8s.io/ingress-gce}\n";
const NGINX_DEFAULT: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}\nspec: {controller: k8s.io/ingress-nginx}\n";

#[test]
fn ownership_follows_annotation_class_name_and_default_class() {
    let with = |meta: &str, spec: &str| {
        format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{meta}}}\nspec: {{{spec}}}\n")
    };
    // Annotation.
    assert!(owns(&with(
        ", annotations: {kubernetes.io/ingress.class: gce}",
        ""
    )));
    assert!(!owns(&with(
        ", annotations: {kubernetes.io/ingress.class: nginx}",
        ""
    )));
    // The annotation wins over ingressClassName.
    assert!(!owns(&format!(
        "{GCE_CLASS}---\n{}",
        with(
            ", annotations: {kubernetes.io/ingress.class: nginx}",
            "ingressClassName: gce"
        )
    )));
    // ingressClassName naming an IngressClass with our controller, or our class name when the
    // IngressClass object is missing.
    assert!(owns(&format!(
        "{GCE_CLASS}---\n{}",
        with("", "ingressClassName: gce")
    )));
    assert!(owns(&with("", "ingressClassName: gce")));
    assert!(!owns(&with("", "ingressClassName: nginx")));
    let nginx_named_gce = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gce}\nspec: {controller: k8s.io/ingress-nginx}\n";
    assert!(!owns(&format!(
        "{nginx_named_gce}---\n{}",
        with("", "ingressClassName: gce")
    )));
    // Neither: ours when no default class exists or the default is ours.
    assert!(owns(&with("", "")));
    assert!(!owns(&format!("{NGINX_DEFAULT}---\n{}", with("", ""))));
    // Another controller's class that is not the default (no annotation, or `"false"`) does not
    // take class-less Ingresses.
    let nginx = NGINX_DEFAULT.replace("\"true\"", "\"false\"");
    assert!(owns(&format!("{nginx}---\n{}", with("", ""))));
    assert!(owns(&format!("{nginx_named_gce}---\n{}", with("", ""))));
    let gce_default = GCE_CLASS.replace(
        "{name: gce}",
        "{name: gce, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    assert!(owns(&format!("{gce_default}---\n{}", with("", ""))));
}

/// Beside GKE's controller (the default mode) only class `gclb` and IngressClasses with
/// controller `gclb-operator.dev/gclb` are ours: GKE's `gce` Ingresses, by annotation, by class
/// or by default, never are, and "no default IngressClass" does not mean ours.
#[test]
fn coexisting_ownership_leaves_gke_ingresses_alone() {
    let owns_coexisting = |objects: &str| {
        let snapshot = snapshot_from_yaml(objects);
        let ing = snapshot.ingresses.values().next().unwrap();
        owns_ingress(&snapshot, ing, &config().with_mode(Mode::Coexist))
    };
    let with = |meta: &str, spec: &str| {
        format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{meta}}}\nspec: {{{spec}}}\n")
    };
    let gclb_class = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gclb}\nspec: {controller: gclb-operator.dev/gclb}\n";
    let gce_default = GCE_CLASS.replace(
        "{name: gce}",
        "{name: gce, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    // GKE's: annotation gce, class gce (object or not), no class with gce the default, and no
    // class with no default at all.
    for gke in [
        with(", annotations: {kubernetes.io/ingress.class: gce}", ""),
        format!("{GCE_CLASS}---\n{}", with("", "ingressClassName: gce")),
        with("", "ingressClassName: gce"),
        format!("{gce_default}---\n{}", with("", "")),
        with("", ""),
        // An IngressClass named gclb that another controller serves is not ours either.
        format!(
            "{}---\n{}",
            GCE_CLASS.replace("{name: gce}", "{name: gclb}"),
            with("", "ingressClassName: gclb")
        ),
    ] {
        assert!(!owns_coexisting(&gke), "claimed GKE's Ingress:\n{gke}");
    }
    // Ours: annotation gclb, class gclb (object or not), no class with gclb the default.
    let gclb_default = gclb_class.replace(
        "{name: gclb}",
        "{name: gclb, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    for ours in [
        with(", annotations: {kubernetes.io/ingress.class: gclb}", ""),
        format!("{gclb_class}---\n{}", with("", "ingressClassName: gclb")),
        with("", "ingressClassName: gclb"),
        format!("{gclb_default}---\n{}", with("", "")),
    ] {
        assert!(owns_coexisting(&ours), "did not claim:\n{ours}");
    }
    // In takeover mode the same gclb Ingresses are not served.
    assert!(!owns(&format!(
        "{gclb_class}---\n{}",
        with("", "ingressClassName: gclb")
    )));
}

/// The default mode's names start with `gclb-`, never with GKE's `k8s`, for every resource of a
/// translated Ingress.
#[test]
fn coexisting_translation_names_every_resource_gclb() {
    let snapshot = snapshot_from_yaml(&format!(
        "{BASE}\n---\n{}",
        ingress("  defaultBackend:\n    service: {name: web, port: {number: 80}}\n  rules:\n  - http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 8081}}}}\n")
    ));
    let ing = snapshot.ingresses.values().next().unwrap();
    let config = config().with_mode(Mode::Coexist);
    let desired = translate_ingress(&snapshot, ing, &config).unwrap();
    let mut names = vec![desired
        .frontend
        .url_map
        .as_ref()
        .unwrap()
        .name
        .clone()
        .unwrap()];
    for (name, b) in &desired.backends {
        names.push(name.clone());
        names.push(b.health_check.name.clone().unwrap());
        names.extend(b.negs.iter().map(|n| n.neg.name.clone().unwrap()));
        for backend in &b.backend_service.backends {
            names.push(backend.group.clone().unwrap());
        }
    }
    for name in &names {
        let last = name.rsplit('/').next().unwrap();
        assert!(last.starts_with("gclb-"), "{name}");
    }
    assert_eq!(
        config.l7_firewall_name(),
        format!("gclb-fw-l7--{}", config.cluster_uid)
    );
}

// ---- errors: each names the Ingress and the field ----

#[test]
fn bad_wildcard_path_is_an_error_naming_the_rule() {
    let err = translate_yaml(&ingress(
        "  rules:\n  - http:\n      paths:\n      - {path: /ok, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /foo/*/bar, pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TranslateError::InvalidPath { field, path, .. }
        if field == "spec.rules[0].http.paths[1].path" && path == "/foo/*/bar"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("default/ing") && text.contains("spec.rules[0].http.paths[1].path"),
        "{text}"
    );
}

#[test]
fn missing_service_is_an_error_naming_the_field() {
    let err = translate_yaml(&ingress(
        "  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: nope, port: {number: 80}}}}\n",
    ))
    .unwrap_err();
    assert_eq!(
        err,
        TranslateError::ServiceNotFound {
            ingress: "default/ing".into(),
            field: "spec.rules[0].http.paths[0].backend.service.name".into(),
            service: "default/nope".into(),
        }
    );
}

#[test]
fn missing_port_is_an_error_naming_the_field_and_the_ports() {
    let err = translate_yaml(&ingress(
        "  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /a, pathType: Prefix, backend: {service: {name: web, port: {number: 81}}}}\n",
    ))
    .unwrap_err();
    let TranslateError::ServicePortNotFound {
        field, available, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        field,
        "spec.rules[0].http.paths[1].backend.service.port.number"
    );
    assert_eq!(available, "80 (http)");
    // A port whose name is empty is listed by number alone, as one without a name.
    let empty_name = translate_yaml(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: bare}}\nspec:\n  ports: [{{name: '', port: 90}}, {{port: 91}}]\n---\n{}",
        ingress("  defaultBackend: {service: {name: bare, port: {number: 80}}}\n")
    ))
    .unwrap_err();
    assert!(
        matches!(&empty_name, TranslateError::ServicePortNotFound { available, .. } if available == "90, 91"),
        "{empty_name:?}"
    );
    let by_name = translate_yaml(&ingress(
        "  defaultBackend: {service: {name: web, port: {name: grpc}}}\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&by_name, TranslateError::ServicePortNotFound { field, .. } if field == "spec.defaultBackend.service.port.name"),
        "{by_name:?}"
    );
}

#[test]
fn unknown_path_type_and_resource_backends_are_errors() {
    let err = translate_yaml(&ingress(
        "  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Regex, backend: {service: {name: web, port: {number: 80}}}}\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TranslateError::UnknownPathType { field, path_type, .. }
        if field == "spec.rules[0].http.paths[0].pathType" && path_type == "Regex"),
        "{err:?}"
    );
    let err = translate_yaml(&ingress(
        "  defaultBackend: {resource: {apiGroup: k8s.example.com, kind: StorageBucket, name: static}}\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TranslateError::UnsupportedBackend { field, .. } if field == "spec.defaultBackend"),
        "{err:?}"
    );
}

#[test]
fn external_name_services_are_refused() {
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: ext}\nspec: {type: ExternalName, externalName: example.com, ports: [{port: 80}]}\n---\n";
    let err = translate_yaml(&format!(
        "{svc}{}",
        ingress("  defaultBackend: {service: {name: ext, port: {number: 80}}}\n")
    ))
    .unwrap_err();
    assert!(
        matches!(&err, TranslateError::BadServiceType { service_type, .. } if service_type == "ExternalName"),
        "{err:?}"
    );
}

#[test]
fn missing_default_backend_is_an_error() {
    let snapshot = snapshot_from_yaml(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web}}\nspec: {{ports: [{{port: 80}}]}}\n---\n{}",
        ingress("  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n")
    ));
    let ing = snapshot.ingresses.values().next().unwrap();
    let err = translate_ingress(&snapshot, ing, &config()).unwrap_err();
    assert!(
        matches!(&err, TranslateError::NoDefaultBackend { default_backend, .. } if default_backend == "kube-system/default-http-backend:http"),
        "{err:?}"
    );
}

// ---- URL map ----

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

// ---- determinism ----

#[test]
fn translation_is_deterministic_regardless_of_input_order() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/translate/testdata/features.yaml"
    ))
    .unwrap();
    let first = golden_tests::translate_all(&snapshot_from_yaml(&yaml), &config());
    let again = golden_tests::translate_all(&snapshot_from_yaml(&yaml), &config());
    assert_eq!(first, again);
    // Reverse the document order: the snapshot maps are ordered, so the output must not move.
    let mut docs: Vec<&str> = yaml.split("\n---\n").collect();
    docs.reverse();
    let reversed =
        golden_tests::translate_all(&snapshot_from_yaml(&docs.join("\n---\n")), &config());
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&reversed).unwrap()
    );
}

#[test]
fn in_namespace_returns_only_that_namespace() {
    let snapshot = snapshot_from_yaml(BASE);
    let names: Vec<String> = snapshot::in_namespace(&snapshot.services, "default")
        .map(|(k, _)| k.name.clone())
        .collect();
    assert_eq!(names, ["api", "web"]);
    assert_eq!(
        snapshot::in_namespace(&snapshot.services, "kube-system").count(),
        1
    );
    assert_eq!(
        snapshot::in_namespace(&snapshot.services, "defaul").count(),
        0
    );
}

/// Scale figures, not a pass/fail timing: `cargo test -p gclb-translate --lib
/// translate::tests::scale_figures -- --ignored --nocapture`. 200 namespaces, each with 5
/// Services of 20 ready Pods and one Ingress routing to all of them.
#[test]
#[ignore = "prints scale figures; run on demand"]
fn scale_figures() {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: default-http-backend, namespace: kube-system}\nspec: {ports: [{name: http, port: 80}]}\n",
    );
    for ns in 0..200 {
        let mut paths = String::new();
        for svc in 0..5 {
            yaml.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{svc}, namespace: n{ns}}}\nspec: {{selector: {{app: s{svc}}}, ports: [{{port: 80, targetPort: 8080}}]}}\n"
            ));
            let endpoints: String = (0..20)
                .map(|p| format!("- {{addresses: [\"10.{ns}.{svc}.{p}\"], conditions: {{ready: true}}, zone: us-central1-a}}\n"))
                .collect();
            yaml.push_str(&format!(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: s{svc}-x, namespace: n{ns}, labels: {{kubernetes.io/service-name: s{svc}}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints:\n{endpoints}"
            ));
            for p in 0..20 {
                yaml.push_str(&format!(
                    "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: s{svc}-{p}, namespace: n{ns}, labels: {{app: s{svc}}}}}\nspec: {{containers: [{{name: c, ports: [{{containerPort: 8080}}], readinessProbe: {{httpGet: {{path: /ready, port: 8080}}}}}}]}}\n"
                ));
            }
            paths.push_str(&format!(
                "      - {{path: /s{svc}, pathType: Prefix, backend: {{service: {{name: s{svc}, port: {{number: 80}}}}}}}}\n"
            ));
        }
        yaml.push_str(&format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing, namespace: n{ns}}}\nspec:\n  rules:\n  - host: n{ns}.example\n    http:\n      paths:\n{paths}"
        ));
    }
    let snapshot = snapshot_from_yaml(&yaml);
    let cfg = config();
    let start = std::time::Instant::now();
    let desired: Vec<DesiredIngress> = snapshot
        .ingresses
        .values()
        .map(|i| translate_ingress(&snapshot, i, &cfg).unwrap())
        .collect();
    let elapsed = start.elapsed();
    let endpoints: usize = desired
        .iter()
        .flat_map(|d| d.backends.values())
        .flat_map(|b| b.negs.iter())
        .map(|n| n.endpoints.len())
        .sum();
    assert_eq!(endpoints, 200 * 5 * 20);
    println!(
        "translated {} Ingresses ({} Pods, {endpoints} endpoints) in {elapsed:?} ({:?} per Ingress)",
        desired.len(),
        snapshot.pods.len(),
        elapsed / u32::try_from(desired.len()).unwrap()
    );
}

/// Only the system default backend (`kube-system/default-http-backend`) is probed on
/// `/healthz`; a Service of the same name in another namespace, or another Service in
/// kube-system, gets the ordinary default path `/`.
#[test]
fn only_the_system_default_backend_is_probed_on_healthz() {
    let snapshot = snapshot_from_yaml(&format!(
        r#"{BASE}
---
apiVersion: v1
kind: Service
metadata: {{name: default-http-backend}}
spec:
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: v1
kind: Service
metadata: {{name: metrics, namespace: kube-system}}
spec:
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: same-name}}
spec:
  defaultBackend: {{service: {{name: default-http-backend, port: {{number: 80}}}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: same-namespace, namespace: kube-system}}
spec:
  rules:
  - http:
      paths:
      - {{path: /, pathType: Prefix, backend: {{service: {{name: metrics, port: {{number: 80}}}}}}}}
"#
    ));
    use std::collections::BTreeMap;
    let request_paths = |namespace: &str, ingress: &str| -> BTreeMap<String, String> {
        let ing = &snapshot.ingresses[&ObjectKey::new(namespace, ingress)];
        let desired = translate_ingress(&snapshot, ing, &config()).unwrap();
        desired
            .backends
            .values()
            .map(|b| {
                let check = b.health_check.http_health_check.as_ref().unwrap();
                (
                    format!("{}/{}", b.key.namespace, b.key.service),
                    check.request_path.clone().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        request_paths("default", "same-name"),
        BTreeMap::from([("default/default-http-backend".into(), "/".into())])
    );
    assert_eq!(
        request_paths("kube-system", "same-namespace"),
        BTreeMap::from([
            ("kube-system/default-http-backend".into(), "/healthz".into()),
            ("kube-system/metrics".into(), "/".into()),
        ])
    );
}

/// An EndpointSlice port without a usable number (0) carries no endpoints: none are attached
/// with port 0, and the firewall opens the Service's `targetPort` instead of port 0. The slice
/// of the same Service with a real port still counts.
#[test]
fn endpoint_slice_ports_of_zero_are_skipped() {
    let d = translate_yaml(&format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: api-1, labels: {{kubernetes.io/service-name: api}}}}
addressType: IPv4
ports: [{{port: 0}}]
endpoints:
- addresses: ["10.0.0.2"]
  zone: us-central1-a
---
{}"#,
        ingress("  defaultBackend: {service: {name: api, port: {number: 8081}}}\n")
    ))
    .unwrap();
    let api = &d.backends[&backend_name("api", 8081)];
    let endpoints: Vec<_> = api.negs.iter().flat_map(|n| &n.endpoints).collect();
    assert!(endpoints.is_empty(), "{endpoints:?}");
    assert_eq!(
        api.firewall_ports.iter().copied().collect::<Vec<_>>(),
        [9000]
    );

    let d = translate_yaml(&format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: api-1, labels: {{kubernetes.io/service-name: api}}}}
addressType: IPv4
ports: [{{port: 9000}}]
endpoints:
- addresses: ["10.0.0.2"]
  zone: us-central1-a
---
{}"#,
        ingress("  defaultBackend: {service: {name: api, port: {number: 8081}}}\n")
    ))
    .unwrap();
    let api = &d.backends[&backend_name("api", 8081)];
    let endpoints: Vec<_> = api
        .negs
        .iter()
        .flat_map(|n| {
            n.endpoints
                .iter()
                .map(move |e| (n.zone.as_str(), e.ip_address.as_str(), e.port))
        })
        .collect();
    assert_eq!(endpoints, [("us-central1-a", "10.0.0.2", 9000)]);
}

#[test]
fn a_shared_object_is_inserted_without_a_copy() {
    let service: k8s_openapi::api::core::v1::Service = serde_yaml::from_str(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec: {}",
    )
    .unwrap();
    let shared = std::sync::Arc::new(service);
    let mut snapshot = ClusterSnapshot::default();
    snapshot.insert_shared(shared.clone());
    let held = &snapshot.services[&ObjectKey::new("default", "web")];
    assert!(
        std::sync::Arc::ptr_eq(held, &shared),
        "the snapshot holds the store's own Arc"
    );
}

/// FrontendConfig `redirectToHttps` makes the HTTP forwarding rule's redirect URL map only when
/// it is enabled (GKE's FrontendConfig reference); `enabled: false` leaves HTTP serving.
#[test]
fn a_disabled_https_redirect_makes_no_redirect_url_map() {
    let with = |enabled: bool| {
        translate_yaml(&format!(
            "apiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {{name: fc}}\nspec:\n  redirectToHttps: {{enabled: {enabled}}}\n---\n{}",
            ingress("  defaultBackend: {service: {name: web, port: {number: 80}}}\n")
                .replace("metadata: {name: ing}", "metadata: {name: ing, annotations: {networking.gke.io/v1beta1.FrontendConfig: fc}}")
        ))
        .unwrap()
    };
    assert!(
        with(true).frontend.redirect_url_map.is_some(),
        "enabled: the redirect map"
    );
    assert!(
        with(false).frontend.redirect_url_map.is_none(),
        "disabled: none"
    );
}
