//! Fuzzing on stable Rust (issue 20): URL map matching in the data plane. Each round builds a
//! URL map (generated at random from pools of hosts, paths, priorities, header and query
//! matches, or a checked-in seed of `testdata/url_map_fuzz/*.json` mutated by
//! [`crate::fuzz_support::mutate`]), submits it to the emulator's API in-process (its own
//! validation decides; refused maps are counted), compiles what `GET` returns with
//! [`UrlMapTable::compile`] and routes random requests (host, path, headers, query, method).
//!
//! Properties: an accepted map compiles; no panic; routing is deterministic and its trace names
//! the rule it routed by; every backend service a request goes to (or is mirrored to) is one the
//! map references; and for maps without route rules, the rule chosen is the one an independent
//! oracle of Google's URL map documentation picks (reference/gce-url-maps.md: an exact host beats
//! the longest `*` suffix, which beats `*`; within a matcher an exact path beats the longest
//! `/p/*` prefix, which matches what starts with `/p/`; otherwise the matcher's default, and
//! without a host rule the map's).
//!
//! Runs for `FUZZ_SECS` seconds (default 60) from `FUZZ_SEED` (default random, printed).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::url_map::{RequestView, RouteAction, RouteTrace, UrlMapTable};
use crate::fuzz_support::{corpus, mutate, no_panic, settings, Harness};

const BS: &str = "https://compute.googleapis.com/compute/v1/projects/p/global/backendServices";
const HOSTS: &[&str] = &[
    "a.example.com",
    "b.example.com",
    "*.example.com",
    "*.b.example.com",
    "*-y.test",
    "x-y.test",
    "shop.test",
    "*",
];
const PATHS: &[&str] = &[
    "/",
    "/*",
    "/a",
    "/a/*",
    "/a/b",
    "/a/b/*",
    "/a/b/c",
    "/api/*",
    "/api/v1/*",
    "/static/*",
    "/login",
];
const KEYS: &[&str] = &[
    "hosts",
    "paths",
    "service",
    "priority",
    "prefixMatch",
    "fullPathMatch",
    "headerName",
    "exactMatch",
    "presentMatch",
    "invertMatch",
    "defaultService",
    "pathMatcher",
    "urlRedirect",
];

fn bs(rng: &mut impl Rng) -> String {
    format!("{BS}/bs{}", rng.random_range(0..4))
}

fn pick<'a>(rng: &mut impl Rng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

/// A URL map drawn from the pools; the emulator refuses the invalid ones.
fn random_map(rng: &mut impl Rng) -> Value {
    let mut matchers = Vec::new();
    let mut host_rules = Vec::new();
    for i in 0..rng.random_range(0..=3) {
        let mut pm = json!({"name": format!("pm{i}"), "defaultService": bs(rng)});
        if rng.random_bool(0.6) {
            let rules: Vec<Value> = (0..rng.random_range(1..=4))
                .map(|_| {
                    let paths: BTreeSet<&str> = (0..rng.random_range(1..=3))
                        .map(|_| pick(rng, PATHS))
                        .collect();
                    let mut r = json!({"paths": paths});
                    if rng.random_bool(0.85) {
                        r["service"] = bs(rng).into();
                    } else {
                        r["urlRedirect"] = json!({"pathRedirect": "/moved"});
                    }
                    r
                })
                .collect();
            pm["pathRules"] = rules.into();
        } else {
            let rules: Vec<Value> = (0..rng.random_range(1..=4))
                .map(|_| {
                    let matches: Vec<Value> = (0..rng.random_range(0..=2))
                        .map(|_| {
                            let p = pick(rng, PATHS).trim_end_matches('*');
                            let mut m = match rng.random_range(0..3) {
                                0 => json!({"prefixMatch": p}),
                                1 => json!({"fullPathMatch": p}),
                                _ => json!({"regexMatch": format!("{p}[a-z]*")}),
                            };
                            if rng.random_bool(0.4) {
                                let name = pick(rng, &["x-a", "x-b", ":method", ":authority"]);
                                m["headerMatches"] = json!([match rng.random_range(0..4) {
                                    0 => json!({"headerName": name, "exactMatch": "1"}),
                                    1 => json!({"headerName": name, "presentMatch": true}),
                                    2 => json!({"headerName": name, "prefixMatch": "P", "invertMatch": true}),
                                    _ => json!({"headerName": name, "exactMatch": "POST"}),
                                }]);
                            }
                            if rng.random_bool(0.3) {
                                m["queryParameterMatches"] = json!([if rng.random_bool(0.5) {
                                    json!({"name": "q", "exactMatch": "1"})
                                } else {
                                    json!({"name": "q", "presentMatch": true})
                                }]);
                            }
                            m
                        })
                        .collect();
                    let mut r = json!({"priority": rng.random_range(0..8), "matchRules": matches});
                    if rng.random_bool(0.3) {
                        r["routeAction"] = json!({"weightedBackendServices": [
                            {"backendService": bs(rng), "weight": rng.random_range(0..100)},
                            {"backendService": bs(rng), "weight": rng.random_range(1..100)}
                        ]});
                    } else {
                        r["service"] = bs(rng).into();
                    }
                    r
                })
                .collect();
            pm["routeRules"] = rules.into();
        }
        let hosts: BTreeSet<&str> = (0..rng.random_range(1..=3))
            .map(|_| pick(rng, HOSTS))
            .collect();
        host_rules.push(json!({"hosts": hosts, "pathMatcher": format!("pm{i}")}));
        matchers.push(pm);
    }
    let mut um = json!({"defaultService": bs(rng)});
    if !matchers.is_empty() {
        um["hostRules"] = host_rules.into();
        um["pathMatchers"] = matchers.into();
    }
    um
}

/// A request: (method, host, path, query, headers).
fn random_request(rng: &mut impl Rng) -> (Method, String, String, Option<String>, HeaderMap) {
    let host = match rng.random_range(0..4) {
        0 => pick(rng, HOSTS).replace('*', "sub"),
        1 => pick(rng, HOSTS).replace('*', "").to_ascii_uppercase(),
        2 => pick(
            rng,
            &["other.test", "y.test", "c.b.example.com", "example.com"],
        )
        .to_string(),
        _ => pick(rng, HOSTS).trim_start_matches("*.").to_string(),
    };
    let mut path = pick(rng, PATHS).trim_end_matches('*').to_string();
    path.push_str(pick(rng, &["", "", "x", "x/y", "/", "b", "v1/z"]));
    if rng.random_bool(0.1) {
        path = pick(rng, &["", "//", "/a//b", "/%2e%2e/a", "/a/./b", "*"]).to_string();
    }
    let query = pick(rng, &["", "q=1", "q=2", "q", "a=b&q=1", "q=1&q=2"]);
    let mut headers = HeaderMap::new();
    for name in ["x-a", "x-b"] {
        if rng.random_bool(0.4) {
            let v = pick(rng, &["1", "2", "P", "Pz", ""]);
            headers.insert(HeaderName::from_static(name), HeaderValue::from_static(v));
        }
    }
    let method = if rng.random_bool(0.7) {
        Method::GET
    } else {
        Method::POST
    };
    let query = (!query.is_empty()).then(|| query.to_string());
    (method, host, path, query, headers)
}

/// Backend service index of a service URL (`.../bsN`).
fn index(url: &str) -> Option<usize> {
    url.rsplit('/').next()?.strip_prefix("bs")?.parse().ok()
}

/// Every backend service index `um` names.
fn referenced(v: &Value, out: &mut BTreeSet<usize>) {
    match v {
        Value::String(s) if s.contains("/backendServices/") => out.extend(index(s)),
        Value::Array(a) => a.iter().for_each(|x| referenced(x, out)),
        Value::Object(m) => m.values().for_each(|x| referenced(x, out)),
        _ => {}
    }
}

/// The oracle for maps without route rules: the label of the rule Google's documentation
/// picks, in the data plane's naming (`defaultService`, `pathMatchers[n].defaultService`,
/// `pathMatchers[n].pathRules[i]`).
fn oracle(um: &Value, host: &str, path: &str) -> String {
    let host = host.to_ascii_lowercase();
    let rules = um["hostRules"].as_array().cloned().unwrap_or_default();
    let patterns = || {
        rules.iter().flat_map(|r| {
            let pm = r["pathMatcher"].as_str().unwrap_or_default().to_string();
            r["hosts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |h| {
                    (
                        h.as_str().unwrap_or_default().to_ascii_lowercase(),
                        pm.clone(),
                    )
                })
        })
    };
    let exact = patterns().find(|(h, _)| *h == host && !h.starts_with('*'));
    // HostRule.hosts: "`*` matches any string of ([a-z0-9-.]*)" (Compute API reference).
    let star = |s: &str| {
        s.bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.'))
    };
    let wildcard = patterns()
        .filter(|(h, _)| h.len() > 1 && h.starts_with('*'))
        .filter(|(h, _)| host.strip_suffix(&h[1..]).is_some_and(star))
        .fold(None::<(String, String)>, |best, c| match best {
            Some(b) if b.0.len() >= c.0.len() => Some(b),
            _ => Some(c),
        });
    let any = patterns().find(|(h, _)| h == "*");
    let Some((_, pm_name)) = exact.or(wildcard).or(any) else {
        return "defaultService".into();
    };
    let pm = um["pathMatchers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|pm| pm["name"] == pm_name.as_str())
        .expect("validated: the matcher exists");
    let mut best: Option<(usize, usize)> = None; // (length matched, rule)
    for (i, rule) in pm["pathRules"].as_array().into_iter().flatten().enumerate() {
        for p in rule["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let len = match p.strip_suffix('*') {
                Some(prefix) if path.starts_with(prefix) => prefix.len(),
                None if p == path => usize::MAX,
                _ => continue,
            };
            if best.is_none_or(|(l, _)| len > l) {
                best = Some((len, i));
            }
        }
    }
    match best {
        Some((_, i)) => format!("pathMatchers[{pm_name}].pathRules[{i}]"),
        None => format!("pathMatchers[{pm_name}].defaultService"),
    }
}

fn describe(a: &RouteAction) -> String {
    match a {
        RouteAction::Forward(f) => format!("forward {:?} mirror {:?}", f.services, f.mirror),
        RouteAction::Redirect(r) => format!("redirect {r:?}"),
        RouteAction::Unavailable(e) => format!("unavailable {e}"),
    }
}

/// What is wrong with routing requests through the accepted map `um`, if anything.
fn check(rng: &mut impl Rng, um: &Value, oracle_applies: bool) -> Result<u64, String> {
    let table = no_panic(|| {
        UrlMapTable::compile(um, &mut |url: &str| {
            index(url).ok_or(format!("unknown {url}"))
        })
    })
    .map_err(|p| format!("compile panicked: {p}"))?
    .map_err(|e| format!("accepted by the API, refused by the data plane: {e}"))?;
    let mut refs = BTreeSet::new();
    referenced(um, &mut refs);
    let requests = 32;
    for _ in 0..requests {
        let (method, host, path, query, headers) = random_request(rng);
        let view = RequestView {
            method: method.as_str(),
            host: &host,
            path: &path,
            query: query.as_deref(),
            headers: &headers,
        };
        let req = format!("{method} {host}{path}?{query:?} {headers:?}");
        let (first, second, traced) = no_panic(|| {
            let a = table.route(&view);
            let b = table.route(&view);
            let mut trace = RouteTrace::default();
            let t = table.route_traced(&view, Some(&mut trace));
            (
                (a.rule.to_string(), describe(a.action)),
                (b.rule.to_string(), describe(b.action)),
                (t.rule.to_string(), trace.matched.clone()),
            )
        })
        .map_err(|p| format!("{req}: route panicked: {p}"))?;
        if first != second || traced.0 != first.0 || traced.1 != first.0 {
            return Err(format!(
                "{req}: not deterministic: {first:?} {second:?} {traced:?}"
            ));
        }
        let r = table.route(&view);
        if let RouteAction::Forward(f) = r.action {
            let mut to = f.services.iter().map(|s| s.0).chain(f.mirror.map(|m| m.0));
            if let Some(stray) = to.find(|i| !refs.contains(i)) {
                return Err(format!(
                    "{req}: routed to bs{stray}, which the map does not name"
                ));
            }
        }
        if oracle_applies {
            let want = oracle(um, &host, &path);
            if want != r.rule {
                return Err(format!(
                    "{req}: routed by {}, the oracle says {want}",
                    r.rule
                ));
            }
        }
    }
    Ok(requests)
}

#[test]
fn random_url_maps_route_deterministically_to_their_services_as_the_oracle_says() {
    let (secs, seed) = settings();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let seeds = corpus("src/dataplane/testdata/url_map_fuzz");
    assert!(seeds.len() >= 3, "corpus: {} seeds", seeds.len());
    let services: Vec<_> = (0..4)
        .map(|i| {
            let body = json!({"name": format!("bs{i}"), "loadBalancingScheme": "EXTERNAL_MANAGED"});
            (
                format!("bs{i}"),
                "projects/p/global/backendServices".to_string(),
                body,
            )
        })
        .collect();
    let h = Harness::new(&services);
    let coll = "projects/p/global/urlMaps";
    // Past findings (`regression-*.json`), unmutated first: refused, or served as accepted.
    for (file, um) in seeds.iter().filter(|(f, _)| {
        f.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("regression"))
    }) {
        let mut um = um.clone();
        um["name"] = "regression".into();
        let (status, answer) = h
            .call(Method::POST, coll, um.to_string().into_bytes())
            .unwrap_or_else(|p| panic!("{}: panicked: {p}", file.display()));
        if status == 200 {
            let path = format!("{coll}/regression");
            let got = h.call(Method::GET, &path, vec![]).expect("GET").1;
            if let Err(e) = check(&mut rng, &got, false) {
                panic!("{}: {e}", file.display());
            }
            h.call(Method::DELETE, &path, vec![]).expect("DELETE");
        } else {
            assert!((400..500).contains(&status), "{}: {answer}", file.display());
        }
    }
    let start = Instant::now();
    let (mut maps, mut accepted, mut oracle_maps, mut requests) = (0u64, 0u64, 0u64, 0u64);
    let mut findings = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) && findings.len() < 5 {
        maps += 1;
        let (mut um, origin) = if rng.random_bool(0.7) {
            (random_map(&mut rng), "generated".to_string())
        } else {
            let (file, seed_map) = &seeds[rng.random_range(0..seeds.len())];
            let mut um = seed_map.clone();
            let done: Vec<_> = (0..rng.random_range(0..=3))
                .map(|_| mutate(&mut rng, &mut um, KEYS))
                .collect();
            (um, format!("{} after {done:?}", file.display()))
        };
        let name = format!("um{maps}");
        um["name"] = name.clone().into();
        let (status, answer) = match h.call(Method::POST, coll, um.to_string().into_bytes()) {
            Ok(a) => a,
            Err(p) => {
                findings.push(format!("{origin}: insert panicked: {p}: {um}"));
                continue;
            }
        };
        if status != 200 {
            if !(400..500).contains(&status) {
                findings.push(format!(
                    "{origin}: insert answered {status}: {answer}: {um}"
                ));
            }
            continue;
        }
        accepted += 1;
        let path = format!("{coll}/{name}");
        let got = h
            .call(Method::GET, &path, vec![])
            .map(|a| a.1)
            .unwrap_or_default();
        let route_rules = got["pathMatchers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|pm| pm.get("routeRules").is_some());
        oracle_maps += u64::from(!route_rules);
        match check(&mut rng, &got, !route_rules) {
            Ok(n) => requests += n,
            Err(e) => findings.push(format!("{origin}: {e}\nURL map: {got}")),
        }
        let _ = h.call(Method::DELETE, &path, vec![]);
    }
    println!(
        "fuzz (FUZZ_SEED={seed}): {maps} URL maps ({accepted} accepted, {oracle_maps} checked by the oracle), {requests} requests routed in {:.0} s ({:.0} maps/s); {} findings",
        start.elapsed().as_secs_f64(),
        maps as f64 / start.elapsed().as_secs_f64(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "FUZZ_SEED={seed}:\n{}",
        findings.join("\n")
    );
    assert!(
        oracle_maps > 0 && accepted > oracle_maps && accepted < maps,
        "the generator must reach refused maps, route-rule maps and path-rule maps"
    );
}
