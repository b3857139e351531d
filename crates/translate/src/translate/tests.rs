//! Unit tests of translation: ownership, every error case, host merging, wildcards, health
//! check derivation, endpoints, BackendConfig, TLS and determinism.

use super::test_support::{config, snapshot_from_yaml};
use super::*;

mod ownership;
mod url_map;

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
