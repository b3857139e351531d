//! Shared pieces of the emulator's stable-Rust fuzz targets (issue 20; the approach of the
//! operator's `crates/translate/src/translate/fuzz_tests.rs`): the run settings (`FUZZ_SECS`,
//! `FUZZ_SEED`), a JSON mutator over a checked-in corpus, and panic capture.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::Router;
use http::{Method, Request};
use http_body_util::BodyExt;
use rand::Rng;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::emulator::{Config, Emulator};

/// `FUZZ_SECS` (default 60, what issue 20 asks of CI) and `FUZZ_SEED` (default random; printed
/// so a finding can be replayed).
pub fn settings() -> (u64, u64) {
    let secs = std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    (secs, seed)
}

/// The `*.json` files of `dir` (relative to the crate), sorted, parsed.
pub fn corpus(dir: &str) -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable seed");
            let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, v)
        })
        .collect()
}

/// Values no well-behaved request holds.
pub fn hostile(rng: &mut impl Rng) -> Value {
    let long = "a".repeat(rng.random_range(60..300));
    let choices = [
        json!(null),
        json!(""),
        json!(" "),
        json!(-1),
        json!(0),
        json!(65536),
        json!(2147483648_i64),
        json!(-9223372036854775807_i64),
        json!(18446744073709551615_u64),
        json!(1e300),
        json!(0.5),
        json!(true),
        json!([]),
        json!([null]),
        json!({}),
        json!("*"),
        json!("/*"),
        json!("//"),
        json!("/a/*/b"),
        json!("*.*.example"),
        json!("../.."),
        json!("-leading-dash"),
        json!("UPPER"),
        json!("ünïcödé"),
        json!("nul\u{0}byte"),
        json!("%2F%00"),
        json!("{not json"),
        json!("NaN"),
        json!("-5"),
        json!("99999999999999999999"),
        json!("projects/p/global/backendServices/missing"),
        json!("https://www.googleapis.com/compute/v1/projects/other/global/healthChecks/x"),
        json!(long),
    ];
    choices[rng.random_range(0..choices.len())].clone()
}

/// Every path (object keys and array indexes) to a value inside `v`.
pub fn paths(v: &Value) -> Vec<Vec<Value>> {
    fn walk(v: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
        out.push(here.clone());
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                here.push(json!(k));
                walk(x, here, out);
                here.pop();
            }),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
                here.push(json!(i));
                walk(x, here, out);
                here.pop();
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The value at `path` (created as `null` where missing, as `serde_json`'s `IndexMut` does).
pub fn at<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match (k, &*v) {
        (Value::String(s), Value::Object(_) | Value::Null) => &mut v[s.as_str()],
        (Value::Number(n), Value::Array(a)) if (n.as_u64().unwrap_or(0) as usize) < a.len() => {
            &mut v[n.as_u64().unwrap_or(0) as usize]
        }
        _ => v,
    })
}

/// One structural mutation of `v` (never its root); `keys` are field names worth adding.
/// Returns what it did.
pub fn mutate(rng: &mut impl Rng, v: &mut Value, keys: &[&str]) -> String {
    let all: Vec<_> = paths(v).into_iter().filter(|p| !p.is_empty()).collect();
    if all.is_empty() {
        *v = json!({});
    }
    let pick =
        |rng: &mut dyn rand::RngCore| all[rand::Rng::random_range(rng, 0..all.len())].clone();
    match rng.random_range(0..5) {
        0 if !all.is_empty() => {
            let p = pick(rng);
            let h = hostile(rng);
            *at(v, &p) = h.clone();
            format!("{p:?} = {h}")
        }
        1 if !all.is_empty() => {
            let p = pick(rng);
            let (last, parent) = p.split_last().expect("non-empty path");
            match (at(v, parent), last) {
                (Value::Object(m), Value::String(k)) => {
                    m.remove(k);
                }
                (Value::Array(a), Value::Number(i)) => {
                    let i = i.as_u64().unwrap_or(0) as usize;
                    if i < a.len() {
                        a.remove(i);
                    }
                }
                _ => {}
            }
            format!("remove {p:?}")
        }
        2 if all.len() > 1 => {
            let (from, to) = (pick(rng), pick(rng));
            if to.starts_with(&from) {
                return "nothing".into();
            }
            let x = at(v, &from).clone();
            *at(v, &to) = x;
            format!("{to:?} = {from:?}")
        }
        3 if !all.is_empty() => {
            // Duplicate an array element (same names twice, same priorities twice).
            let p = pick(rng);
            if let Value::Array(a) = at(v, &p) {
                if let Some(x) = a.first().cloned() {
                    a.push(x);
                    return format!("duplicate {p:?}[0]");
                }
            }
            "nothing".into()
        }
        _ => {
            // Add a field (known or unknown) to a random object.
            let objects: Vec<_> = paths(v)
                .into_iter()
                .filter(|p| at(&mut v.clone(), p).is_object())
                .collect();
            let p = objects[rng.random_range(0..objects.len())].clone();
            let key = if rng.random_bool(0.8) && !keys.is_empty() {
                keys[rng.random_range(0..keys.len())].to_string()
            } else {
                "unknownField".to_string()
            };
            let h = hostile(rng);
            if let Value::Object(m) = at(v, &p) {
                m.insert(key.clone(), h.clone());
            }
            format!("{p:?}.{key} = {h}")
        }
    }
}

/// Runs `f`, turning a panic into `Err(message)`.
pub fn no_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// An in-process emulator driven through its axum router (tower `oneshot`).
pub struct Harness {
    rt: tokio::runtime::Runtime,
    router: Router,
    /// Answers seen: (200, 4xx).
    pub seen: std::cell::Cell<(u64, u64)>,
}

impl Harness {
    /// A fresh emulator holding every seed once, under its own name.
    pub fn new(seeds: &[(String, String, Value)]) -> Harness {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let emu: Arc<Emulator> = rt.block_on(async {
            Emulator::new(
                Config::default(),
                "http://127.0.0.1:1/compute/v1/".into(),
                Default::default(),
                None,
            )
        });
        let h = Harness {
            rt,
            router: crate::api::router(emu),
            seen: Default::default(),
        };
        for (file, coll, body) in seeds {
            let (status, answer) = h
                .call(Method::POST, coll, body.to_string().into_bytes())
                .expect("seed insert does not panic");
            assert_eq!(status, 200, "{file}: seed refused: {answer}");
        }
        h
    }

    /// One request to `/compute/v1/{path_and_query}` -> (status, JSON body). Err: a panic.
    pub fn call(&self, method: Method, path: &str, body: Vec<u8>) -> Result<(u16, Value), String> {
        let req = Request::builder()
            .method(method)
            .uri(format!("/compute/v1/{path}"))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .map_err(|e| format!("test built a bad request: {e}"))?;
        let router = self.router.clone();
        let answer = no_panic(|| {
            self.rt.block_on(async move {
                let resp = router.oneshot(req).await.expect("infallible");
                let status = resp.status().as_u16();
                let bytes = resp.into_body().collect().await.expect("body").to_bytes();
                (
                    status,
                    serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                )
            })
        })?;
        let (ok, refused) = self.seen.get();
        self.seen.set(match answer.0 {
            200 => (ok + 1, refused),
            _ => (ok, refused + 1),
        });
        Ok(answer)
    }
}
