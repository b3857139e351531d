//! Property test: random Ingresses either fail with a TranslateError or give a URL map the
//! Compute API accepts (unique hosts, existing path matchers, no duplicate paths, valid names,
//! every referenced backend service built), deterministically.

use std::collections::BTreeSet;

use k8s_openapi::api::networking::v1::Ingress;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::test_support::{config, snapshot_from_yaml};
use super::*;

const SERVICES: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: default-http-backend, namespace: kube-system}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: a}
spec: {ports: [{name: http, port: 80, targetPort: 8080}, {name: admin, port: 81, targetPort: 8081}]}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {ports: [{port: 9000}]}
"#;

fn random_ingress(rng: &mut impl Rng, n: usize) -> Ingress {
    let hosts = ["", "a.example", "b.example", "*.example", "a.example"];
    let paths = [
        "", "/", "/x", "/x/", "/x/*", "/x/y", "/*", "/x/*/y", "x", "/x*",
    ];
    let types = [
        "Exact",
        "Prefix",
        "ImplementationSpecific",
        "ImplementationSpecific",
        "Bogus",
    ];
    let backends = [
        ("a", json!({"number": 80})),
        ("a", json!({"name": "admin"})),
        ("b", json!({"number": 9000})),
        ("a", json!({"number": 82})),
        ("c", json!({"number": 80})),
    ];
    let mut rules = Vec::new();
    for _ in 0..rng.random_range(0..4) {
        let mut rule_paths = Vec::new();
        for _ in 0..rng.random_range(1..5) {
            let (svc, port) = &backends[rng.random_range(0..backends.len())];
            rule_paths.push(json!({
                "path": paths[rng.random_range(0..paths.len())],
                "pathType": types[rng.random_range(0..types.len())],
                "backend": {"service": {"name": svc, "port": port}},
            }));
        }
        let host = hosts[rng.random_range(0..hosts.len())];
        let mut rule = json!({"http": {"paths": rule_paths}});
        if !host.is_empty() {
            rule["host"] = json!(host);
        }
        rules.push(rule);
    }
    let mut spec = json!({"rules": rules});
    if rng.random_bool(0.3) {
        spec["defaultBackend"] = json!({"service": {"name": "b", "port": {"number": 9000}}});
    }
    serde_json::from_value(
        json!({"metadata": {"name": format!("ing-{n}"), "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

#[test]
fn random_ingresses_give_valid_url_maps_or_errors() {
    let snapshot = snapshot_from_yaml(SERVICES);
    let cfg = config();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let (mut ok, mut failed) = (0, 0);
    for n in 0..2000 {
        let ingress = random_ingress(&mut rng, n);
        let result = translate_ingress(&snapshot, &ingress, &cfg);
        assert_eq!(
            result,
            translate_ingress(&snapshot, &ingress, &cfg),
            "not deterministic"
        );
        let Ok(desired) = result else {
            failed += 1;
            continue;
        };
        ok += 1;
        let um = desired.frontend.url_map.as_ref().unwrap();
        assert!(namer::is_valid_name(um.name.as_deref().unwrap()));
        let mut hosts = BTreeSet::new();
        let matchers: BTreeSet<&str> = um
            .path_matchers
            .iter()
            .map(|m| m.name.as_deref().unwrap())
            .collect();
        assert_eq!(
            matchers.len(),
            um.path_matchers.len(),
            "duplicate path matcher names"
        );
        for rule in &um.host_rules {
            for h in &rule.hosts {
                assert!(hosts.insert(h.clone()), "host {h} in two host rules");
            }
            assert!(matchers.contains(rule.path_matcher.as_deref().unwrap()));
        }
        let mut referenced = vec![um.default_service.clone().unwrap()];
        for pm in &um.path_matchers {
            let mut seen = BTreeSet::new();
            for pr in &pm.path_rules {
                for p in &pr.paths {
                    assert!(
                        seen.insert(p.clone()),
                        "duplicate path {p} in {:?}",
                        pm.name
                    );
                    assert!(
                        p.starts_with('/')
                            && (!p.contains('*')
                                || (p.ends_with("/*") && p.matches('*').count() == 1)),
                        "bad path {p}"
                    );
                }
                referenced.push(pr.service.clone().unwrap());
            }
        }
        for r in referenced {
            let name = r.rsplit('/').next().unwrap();
            assert!(
                desired.backends.contains_key(name),
                "{name} referenced but not built"
            );
        }
        for (name, b) in &desired.backends {
            assert!(namer::is_valid_name(name));
            assert_eq!(b.backend_service.name.as_deref(), Some(name.as_str()));
            assert_eq!(b.health_check.name.as_deref(), Some(name.as_str()));
        }
    }
    assert!(
        ok > 100 && failed > 100,
        "the generator must exercise both outcomes ({ok} ok, {failed} failed)"
    );
}
