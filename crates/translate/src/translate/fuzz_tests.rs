//! Fuzzing on stable Rust (issue 20): the Ingress/BackendConfig/FrontendConfig/annotation ->
//! translate path over a checked-in corpus and a bounded random mutator.
//!
//! Corpus: `testdata/*.yaml` (the golden snapshots) and `testdata/fuzz/*.yaml`. Each round takes
//! one seed, applies 1-4 mutations to its objects as JSON (a value replaced by a hostile one from
//! [`HOSTILE`], a key removed, a value copied from elsewhere, a known annotation set to a hostile
//! string), keeps the objects that still decode as their Kubernetes type (what the API server
//! would hand the operator) and translates every Ingress. Each translation must:
//! - not panic (caught; the seed, mutations and panic are reported),
//! - be deterministic (the same snapshot twice gives the same result),
//! - name every resource it creates inside this cluster's names (`k8s1-<uid8>-`, `k8s2-..-<uid8>-`,
//!   `mcrt-<uid8>-`) and validly (RFC 1035, 63 chars),
//! - on error, name the object (`namespace/name`) the error is about.
//!
//! Runs for `FUZZ_SECS` seconds (default 60, the figure issue 20 asks of CI) from `FUZZ_SEED`
//! (default: random, printed so a finding can be replayed).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::test_support::config;
use super::*;

/// Values no well-behaved manifest holds.
fn hostile(rng: &mut impl Rng) -> Value {
    let long = "a".repeat(rng.random_range(60..400));
    let choices = [
        json!(null),
        json!(""),
        json!(" "),
        json!(-1),
        json!(0),
        json!(65536),
        json!(2147483648_i64),
        json!(-9223372036854775807_i64),
        json!(1e300),
        json!(0.5),
        json!(true),
        json!([]),
        json!({}),
        json!("*"),
        json!("/*"),
        json!("//"),
        json!("/a/*/b"),
        json!("../.."),
        json!("UPPER.Example"),
        json!("*.*.example"),
        json!("-leading-dash"),
        json!("ünïcödé"),
        json!("nul\u{0}byte"),
        json!("{not json"),
        json!("{\"default\": 7}"),
        json!("{\"ports\": {\"80\": \"\", \"http\": \"bc\"}}"),
        json!("{\"http\": \"GRPC\", \"x\": \"HTTPS\"}"),
        json!("a,,b,"),
        json!("NaN"),
        json!("-5"),
        json!(long),
        json!(format!("{long}.example")),
    ];
    choices[rng.random_range(0..choices.len())].clone()
}

/// The annotation keys translation reads.
const ANNOTATIONS: [&str; 11] = [
    annotations::APP_PROTOCOLS,
    annotations::APP_PROTOCOLS_ALPHA,
    annotations::BACKEND_CONFIG,
    annotations::BACKEND_CONFIG_BETA,
    annotations::MAX_RATE_PER_ENDPOINT,
    annotations::CAPACITY_SCALER,
    annotations::ALLOW_HTTP,
    annotations::GLOBAL_STATIC_IP_NAME,
    annotations::PRE_SHARED_CERT,
    annotations::MANAGED_CERTIFICATES,
    annotations::FRONTEND_CONFIG,
];

/// The seeds: (file, its objects as JSON).
fn corpus() -> Vec<(String, Vec<Value>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/translate/testdata");
    let mut files: Vec<_> = [dir.clone(), dir.join("fuzz")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).expect("testdata").flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable seed");
            let docs = serde_yaml::Deserializer::from_str(&text)
                .map(|d| serde::Deserialize::deserialize(d).expect("seed YAML"))
                .filter(|v: &serde_yaml::Value| !v.is_null())
                .map(|v| serde_json::to_value(v).expect("JSON-compatible seed"))
                .collect();
            (p.display().to_string(), docs)
        })
        .collect()
}

/// Every `(path)` to a value inside `v` (object keys and array indexes).
fn paths(v: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            here.push(json!(k));
            paths(x, here, out);
            here.pop();
        }),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            here.push(json!(i));
            paths(x, here, out);
            here.pop();
        }),
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k {
        Value::String(s) => &mut v[s.as_str()],
        Value::Number(n) => &mut v[n.as_u64().unwrap_or(0) as usize],
        _ => v,
    })
}

/// One mutation of `docs`; returns what it did.
fn mutate(rng: &mut impl Rng, docs: &mut [Value]) -> String {
    let d = rng.random_range(0..docs.len());
    let mut all = Vec::new();
    paths(&docs[d], &mut Vec::new(), &mut all);
    // Never the kind, apiVersion or the whole object: the object would only stop decoding.
    all.retain(|p| {
        !p.is_empty() && p[0] != "kind" && p[0] != "apiVersion" && p.get(1) != Some(&json!("name"))
    });
    let pick = |rng: &mut dyn rand::RngCore, all: &[Vec<Value>]| {
        all[rand::Rng::random_range(rng, 0..all.len())].clone()
    };
    match rng.random_range(0..4) {
        0 if !all.is_empty() => {
            let p = pick(rng, &all);
            let v = hostile(rng);
            *at(&mut docs[d], &p) = v.clone();
            format!("doc {d} {p:?} = {v}")
        }
        1 if !all.is_empty() => {
            let p = pick(rng, &all);
            let (last, parent) = p.split_last().expect("non-empty path");
            match (at(&mut docs[d], parent), last) {
                (Value::Object(m), Value::String(k)) => {
                    m.remove(k);
                }
                (Value::Array(a), Value::Number(i)) => {
                    a.remove(i.as_u64().unwrap_or(0) as usize);
                }
                _ => {}
            }
            format!("doc {d} remove {p:?}")
        }
        2 if all.len() > 1 => {
            let (from, to) = (pick(rng, &all), pick(rng, &all));
            if to.starts_with(&from) {
                return "nothing".into();
            }
            let v = at(&mut docs[d], &from).clone();
            *at(&mut docs[d], &to) = v;
            format!("doc {d} {to:?} = {from:?}")
        }
        _ => {
            let key = ANNOTATIONS[rng.random_range(0..ANNOTATIONS.len())];
            let v = match hostile(rng) {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let meta = docs[d].get_mut("metadata").and_then(Value::as_object_mut);
            let Some(meta) = meta else {
                return "nothing".into();
            };
            let notes = meta.entry("annotations").or_insert_with(|| json!({}));
            if !notes.is_object() {
                *notes = json!({});
            }
            notes[key] = json!(v);
            format!("doc {d} annotation {key} = {v:?}")
        }
    }
}

fn decode<K: SnapshotObject + DeserializeOwned>(s: &mut ClusterSnapshot, doc: &Value) -> bool {
    serde_json::from_value::<K>(doc.clone())
        .map(|o| s.insert(o))
        .is_ok()
}

/// The snapshot of the objects that decode as their kind; counts those that do not.
fn snapshot(docs: &[Value]) -> (ClusterSnapshot, usize) {
    use k8s_openapi::api::{core::v1, discovery::v1 as discovery, networking::v1 as networking};
    let mut s = ClusterSnapshot::default();
    let mut refused = 0;
    for doc in docs {
        let mut doc = doc.clone();
        let cluster_scoped = doc["kind"] == "IngressClass";
        let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
            refused += 1;
            continue;
        };
        if !cluster_scoped && !meta.get("namespace").is_some_and(Value::is_string) {
            meta.insert("namespace".into(), "default".into());
        }
        let ok = match doc["kind"].as_str().unwrap_or_default() {
            "Ingress" => decode::<networking::Ingress>(&mut s, &doc),
            "IngressClass" => decode::<networking::IngressClass>(&mut s, &doc),
            "Service" => decode::<v1::Service>(&mut s, &doc),
            "Pod" => {
                serde_json::from_value::<v1::Pod>(doc.clone()).is_ok()
                    && decode::<crate::translate::pod::PodRecord>(&mut s, &doc)
            }
            "Secret" => decode::<v1::Secret>(&mut s, &doc),
            "EndpointSlice" => decode::<discovery::EndpointSlice>(&mut s, &doc),
            "BackendConfig" => decode::<crate::crd::BackendConfig>(&mut s, &doc),
            "FrontendConfig" => decode::<crate::crd::FrontendConfig>(&mut s, &doc),
            "ManagedCertificate" => decode::<crate::crd::ManagedCertificate>(&mut s, &doc),
            _ => false,
        };
        refused += usize::from(!ok);
    }
    (s, refused)
}

/// Every Compute name the translation creates.
fn created_names(d: &DesiredIngress) -> Vec<String> {
    let mut out = Vec::new();
    for (key, b) in &d.backends {
        out.push(key.clone());
        out.extend(b.backend_service.name.clone());
        out.extend(b.health_check.name.clone());
        out.extend(b.negs.iter().filter_map(|n| n.neg.name.clone()));
    }
    let f = &d.frontend;
    out.extend(f.url_map.as_ref().and_then(|x| x.name.clone()));
    out.extend(f.redirect_url_map.as_ref().and_then(|x| x.name.clone()));
    out.extend(f.target_http_proxy.as_ref().and_then(|x| x.name.clone()));
    out.extend(f.http_forwarding_rule.as_ref().and_then(|x| x.name.clone()));
    out.extend(f.target_https_proxy.as_ref().and_then(|x| x.name.clone()));
    out.extend(
        f.https_forwarding_rule
            .as_ref()
            .and_then(|x| x.name.clone()),
    );
    out.extend(f.ssl_certificates.iter().filter_map(|c| c.name.clone()));
    out
}

/// What is wrong with one translation of Ingress `key`, if anything.
fn check(snapshot: &ClusterSnapshot, ingress: &Ingress, cfg: &TranslateConfig) -> Option<String> {
    let run = || {
        catch_unwind(AssertUnwindSafe(|| {
            translate_ingress(snapshot, ingress, cfg)
        }))
    };
    let first = match run() {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Some(format!("panicked: {msg}"));
        }
    };
    if run().ok().as_ref() != Some(&first) {
        return Some("not deterministic".into());
    }
    let uid8 = &cfg.cluster_uid;
    match first {
        Ok(d) => created_names(&d)
            .into_iter()
            .find(|n| {
                let ours = n.starts_with(&format!("k8s1-{uid8}-"))
                    || (n.starts_with("k8s2-") && n.contains(&format!("-{uid8}-")))
                    || n.starts_with(&format!("mcrt-{uid8}-"));
                !ours || !namer::is_valid_name(n)
            })
            .map(|n| format!("created name {n:?} outside this cluster's names or invalid")),
        Err(e) => {
            let text = e.to_string();
            let names_object = text.contains("default/") || text.contains("kube-system/");
            (!names_object).then(|| format!("error names no object: {text}"))
        }
    }
}

#[test]
fn mutated_corpus_never_panics_and_stays_deterministic_and_named() {
    let secs = std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let seeds = corpus();
    assert!(seeds.len() >= 5, "corpus: {} files", seeds.len());
    let cfg = config();
    // Every seed decodes whole and translates cleanly by the same rules before it is mutated.
    for (file, docs) in &seeds {
        let (s, refused) = snapshot(docs);
        assert_eq!(refused, 0, "{file}: {refused} objects do not decode");
        for ing in s.ingresses.values() {
            if let Some(problem) = check(&s, ing, &cfg) {
                panic!("{file}: seed itself: {problem}");
            }
        }
    }
    let start = Instant::now();
    let (mut rounds, mut translations, mut errors, mut findings) = (0u64, 0u64, 0u64, Vec::new());
    while start.elapsed() < Duration::from_secs(secs) && findings.len() < 5 {
        rounds += 1;
        let (file, seed_docs) = &seeds[rng.random_range(0..seeds.len())];
        let mut docs = seed_docs.clone();
        let done: Vec<String> = (0..rng.random_range(1..=4))
            .map(|_| mutate(&mut rng, &mut docs))
            .collect();
        let (s, _) = snapshot(&docs);
        for ing in s.ingresses.values() {
            translations += 1;
            errors += u64::from(translate_ingress(&s, ing, &cfg).is_err());
            if let Some(problem) = check(&s, ing, &cfg) {
                findings.push(format!(
                    "{file} {:?} after {done:?}: {problem}",
                    ing.metadata.name
                ));
            }
        }
    }
    println!(
        "fuzz (FUZZ_SEED={seed}): {rounds} mutated snapshots, {translations} translations ({errors} errors) in {:.0} s; {} findings",
        start.elapsed().as_secs_f64(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "FUZZ_SEED={seed}:\n{}",
        findings.join("\n")
    );
    assert!(
        translations > 0 && errors > 0 && errors < translations,
        "the mutator must reach both outcomes"
    );
}
