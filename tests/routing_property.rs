//! Property test (issue 17): for random Ingresses (hosts, paths, path types, rule and path order,
//! default backend), the backend the emulator's data plane picks for a request, with the URL map
//! the translator built, equals the backend an independent model of the Kubernetes rules picks.
//!
//! In-process and cheap: the operator's pure translation, then the emulator's URL map matcher
//! (`gce_emulator::dataplane::url_map::UrlMapTable`, the code that routes real requests); no
//! processes or sockets. At least 1,000 cases per run (`PROPTEST_CASES` raises it).
//!
//! The model ([`model_route`]) is written from reference 001 ("Path types", "Multiple matches",
//! "Hostname wildcards") and docs/routing.md, not from the translator: paths are compared
//! element by element, hosts label by label. Where Kubernetes says nothing, it follows the rules
//! docs/routing.md states (the most specific host's rules only; equal paths: Exact, Prefix,
//! ImplementationSpecific, then the lower backend service name). One documented deviation is
//! modelled explicitly: a classic Google Cloud load balancer's `*.foo.com` also matches deeper
//! names; whenever that changes the answer, the translation must carry a Warning about it.

use std::collections::BTreeSet;

use gce_emulator::dataplane::url_map::{RequestView, RouteAction, UrlMapTable};
use gclb_operator::translate::{namer, translate_ingress, ClusterSnapshot, TranslateConfig};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use proptest::prelude::*;
use serde_json::json;

const SERVICES: [&str; 4] = ["s0", "s1", "s2", "s3"];
const HOSTS: [&str; 6] = [
    "",
    "foo.com",
    "bar.foo.com",
    "*.foo.com",
    "*.bar.foo.com",
    "other.org",
];
const REQUEST_HOSTS: [&str; 10] = [
    "foo.com",
    "bar.foo.com",
    "BAR.Foo.com",
    "bar.foo.com:8080",
    "x.foo.com",
    "a.bar.foo.com",
    "a.b.bar.foo.com",
    "z.y.foo.com",
    "other.org",
    "unknown.net",
];
const SEGMENTS: [&str; 3] = ["a", "b", "ab"];

#[derive(Clone, Debug)]
struct PathSpec {
    path_type: &'static str,
    path: String,
    service: usize,
}

#[derive(Clone, Debug)]
struct RuleSpec {
    host: &'static str,
    paths: Vec<PathSpec>,
}

#[derive(Clone, Debug)]
struct Case {
    rules: Vec<RuleSpec>,
    default_backend: Option<usize>,
    requests: Vec<(&'static str, String)>,
}

fn plain_path() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(&SEGMENTS[..]), 0..3),
        any::<bool>(),
    )
        .prop_map(|(segs, slash)| {
            let mut p = format!("/{}", segs.join("/"));
            if slash && !segs.is_empty() {
                p.push('/');
            }
            p
        })
}

fn path_spec() -> impl Strategy<Value = PathSpec> {
    let typed = prop_oneof![
        Just("Exact"),
        Just("Prefix"),
        Just("ImplementationSpecific")
    ];
    (typed, plain_path(), any::<bool>(), 0..SERVICES.len()).prop_map(
        |(path_type, mut path, star, service)| {
            // ImplementationSpecific as GKE reads it: GCE patterns, `/p/*` or `/p`, or empty.
            if path_type == "ImplementationSpecific" && star {
                if !path.ends_with('/') {
                    path.push('/');
                }
                path.push('*');
            }
            PathSpec {
                path_type,
                path,
                service,
            }
        },
    )
}

fn case() -> impl Strategy<Value = Case> {
    let rule = (
        prop::sample::select(&HOSTS[..]),
        prop::collection::vec(path_spec(), 1..4),
    )
        .prop_map(|(host, paths)| RuleSpec { host, paths });
    (
        prop::collection::vec(rule, 1..5),
        prop::option::of(0..SERVICES.len()),
        prop::collection::vec(
            (prop::sample::select(&REQUEST_HOSTS[..]), plain_path()),
            1..12,
        ),
    )
        .prop_map(|(rules, default_backend, requests)| Case {
            rules,
            default_backend,
            requests,
        })
}

fn config() -> TranslateConfig {
    TranslateConfig::new(
        "p",
        "default",
        &["us-central1-a"],
        "c",
        "5a6b7c8d-0000-4000-8000-123456789abc",
    )
}

fn snapshot() -> ClusterSnapshot {
    let mut snapshot = ClusterSnapshot::default();
    let service = |ns: &str, name: &str, port: serde_json::Value| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name}, "ports": [port]}
        }))
        .unwrap()
    };
    for s in SERVICES {
        snapshot.insert(service(
            "default",
            s,
            json!({"port": 80, "targetPort": 8080}),
        ));
    }
    snapshot.insert(service(
        "kube-system",
        "default-http-backend",
        json!({"name": "http", "port": 80, "targetPort": 8080}),
    ));
    snapshot
}

fn ingress(case: &Case) -> Ingress {
    let backend = |s: usize| json!({"service": {"name": SERVICES[s], "port": {"number": 80}}});
    let rules: Vec<serde_json::Value> = case
        .rules
        .iter()
        .map(|r| {
            let paths: Vec<serde_json::Value> = r
                .paths
                .iter()
                .map(|p| json!({"path": p.path, "pathType": p.path_type, "backend": backend(p.service)}))
                .collect();
            let mut rule = json!({"http": {"paths": paths}});
            if !r.host.is_empty() {
                rule["host"] = json!(r.host);
            }
            rule
        })
        .collect();
    let mut spec = json!({ "rules": rules });
    if let Some(d) = case.default_backend {
        spec["defaultBackend"] = backend(d);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "ing", "namespace": "default", "annotations": {"kubernetes.io/ingress.class": "gce"}},
        "spec": spec
    }))
    .unwrap()
}

fn backend_name(namespace: &str, service: &str) -> String {
    namer::backend(
        namer::Scheme::Gke,
        &config().cluster_uid,
        namespace,
        service,
        80,
    )
}

// ---- the reference model ----

/// Which host rules apply to `request_host`: `Some(index of the rules' host in HOSTS)`. With
/// `classic`, a wildcard also matches deeper names (the documented deviation).
fn model_host(case: &Case, request_host: &str, classic: bool) -> Option<&'static str> {
    let host = request_host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let hosts: BTreeSet<&'static str> = case.rules.iter().map(|r| r.host).collect();
    if let Some(h) = hosts.iter().find(|h| **h == host) {
        return Some(h);
    }
    let labels: Vec<&str> = host.split('.').collect();
    let mut best: Option<(usize, &'static str)> = None;
    for h in hosts.iter().filter(|h| h.starts_with("*.")) {
        let suffix: Vec<&str> = h[2..].split('.').collect();
        let extra = labels.len().saturating_sub(suffix.len());
        let matches = labels.len() > suffix.len()
            && labels[labels.len() - suffix.len()..] == suffix[..]
            && (extra == 1 || classic);
        if matches && best.is_none_or(|(n, _)| suffix.len() > n) {
            best = Some((suffix.len(), h));
        }
    }
    if let Some((_, h)) = best {
        return Some(h);
    }
    hosts.contains("").then_some("")
}

/// Reference 001's element-wise path matching and precedence; returns the service index.
fn model_path(case: &Case, host: &str, request_path: &str) -> Option<usize> {
    let elements = |p: &str| -> Vec<String> {
        let t = p.trim_start_matches('/');
        if t.is_empty() {
            Vec::new()
        } else {
            t.split('/').map(str::to_string).collect()
        }
    };
    let request = elements(request_path);
    // (matched length, rank, backend name, service)
    let mut best: Option<(usize, u8, String, usize)> = None;
    for p in case
        .rules
        .iter()
        .filter(|r| r.host == host)
        .flat_map(|r| &r.paths)
    {
        let (matched, len, rank) = match p.path_type {
            "Exact" => (request_path == p.path, p.path.len(), 0),
            "Prefix" => {
                let trimmed = p.path.trim_end_matches('/');
                let want = elements(trimmed);
                (request.starts_with(&want), trimmed.len(), 1)
            }
            _ => match p.path.strip_suffix('*') {
                // GCE `/p/*`: everything below `/p/`, not `/p` itself.
                Some(base) => (
                    request_path.starts_with(base),
                    base.trim_end_matches('/').len(),
                    2,
                ),
                None if p.path.is_empty() => (true, 0, 2),
                None => (request_path == p.path, p.path.len(), 2),
            },
        };
        if !matched {
            continue;
        }
        let name = backend_name("default", SERVICES[p.service]);
        let key = (
            len,
            std::cmp::Reverse(rank),
            std::cmp::Reverse(name.clone()),
        );
        let better = match &best {
            None => true,
            Some((l, r, n, _)) => key > (*l, std::cmp::Reverse(*r), std::cmp::Reverse(n.clone())),
        };
        if better {
            best = Some((len, rank, name, p.service));
        }
    }
    best.map(|(_, _, _, s)| s)
}

/// The backend service name Kubernetes' rules give a request.
fn model_route(case: &Case, request_host: &str, request_path: &str, classic: bool) -> String {
    let default = match case.default_backend {
        Some(d) => backend_name("default", SERVICES[d]),
        None => namer::backend(
            namer::Scheme::Gke,
            &config().cluster_uid,
            "kube-system",
            "default-http-backend",
            80,
        ),
    };
    model_host(case, request_host, classic)
        .and_then(|h| model_path(case, h, request_path))
        .map(|s| backend_name("default", SERVICES[s]))
        .unwrap_or(default)
}

// ---- the data plane ----

fn data_plane_route(table: &UrlMapTable, names: &[String], host: &str, path: &str) -> String {
    let headers = http::HeaderMap::new();
    let route = table.route(&RequestView {
        method: "GET",
        host: host.split(':').next().unwrap_or(host),
        path,
        query: None,
        headers: &headers,
    });
    match route.action {
        RouteAction::Forward(f) => names[f.pick(0)].clone(),
        other => panic!("expected a backend, got {other:?}"),
    }
}

fn compile(url_map: &serde_json::Value) -> (UrlMapTable, Vec<String>) {
    let mut names: Vec<String> = Vec::new();
    let table = UrlMapTable::compile(url_map, &mut |url: &str| {
        let name = url.rsplit('/').next().unwrap_or(url).to_string();
        Ok(names.iter().position(|n| *n == name).unwrap_or_else(|| {
            names.push(name);
            names.len() - 1
        }))
    })
    .expect("the translated URL map compiles");
    (table, names)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
        .max(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_data_plane_routes_every_request_as_the_kubernetes_model_does(case in case()) {
        let snapshot = snapshot();
        let config = config();
        let desired = translate_ingress(&snapshot, &ingress(&case), &config)
            .expect("every generated Ingress translates");
        let url_map = serde_json::to_value(desired.frontend.url_map.as_ref().unwrap()).unwrap();
        let (table, names) = compile(&url_map);

        // The same rules in reverse order (rules and paths) give the same routes.
        let mut reversed = case.clone();
        reversed.rules.reverse();
        for r in &mut reversed.rules {
            r.paths.reverse();
        }
        let desired_rev = translate_ingress(&snapshot, &ingress(&reversed), &config).unwrap();
        prop_assert_eq!(&desired_rev.frontend.url_map, &desired.frontend.url_map);

        let warned_wildcards = desired
            .findings
            .iter()
            .any(|f| f.warning && f.message.contains("deeper names"));
        for (host, path) in &case.requests {
            let got = data_plane_route(&table, &names, host, path);
            let kubernetes = model_route(&case, host, path, false);
            let classic = model_route(&case, host, path, true);
            prop_assert_eq!(
                &got, &classic,
                "request {}{} with rules {:?}\nURL map {}", host, path, case.rules, url_map
            );
            if kubernetes != classic {
                prop_assert!(
                    warned_wildcards,
                    "{}{} differs from Kubernetes' answer without a Warning", host, path
                );
            }
        }
    }
}
