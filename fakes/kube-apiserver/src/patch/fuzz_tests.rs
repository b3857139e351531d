//! Fuzzing on stable Rust (issue 20): the patch engines of the local API (JSON merge patch,
//! RFC 7386; strategic merge patch; JSON patch, RFC 6902; server-side apply), over a corpus of
//! real manifests (`docs/examples/`, `deploy/`, `tests/fixtures/` and `testdata/fuzz/*.yaml`).
//!
//! Each round creates a seed object under a fresh name through the request handler in-process
//! ([`crate::handlers::handle`], the code every HTTP request runs), mutates a copy of it with
//! 1-4 mutations (a value replaced by a hostile one, a key removed, a value copied, a list
//! element duplicated, a field added), derives a patch of one type from it (a merge patch of
//! the changed fields, a strategic merge patch with directives, JSON patch operations on the
//! object's paths, or the mutated object as an apply configuration), and sends it.
//!
//! Properties: no panic; every answer is 2xx or a `Status` (`kind: Status`, `status: Failure`,
//! `code` = the HTTP status, a `reason` and a `message`) with a 4xx code, never 500 (except the
//! one 500 the real server gives too: apply's `failed to create typed patch object`); the merge
//! patch engine gives what an independent RFC 7386 reference ([`merge_reference`]) gives; the
//! strategic merge engine does too for patches without lists or directives (where the two are
//! defined to agree); the JSON patch engine gives what the `json-patch` crate gives, except the
//! documented deviation (`test` of a missing path against `null` succeeds); and apply is
//! idempotent: the same configuration applied twice by the same manager gives the same object.
//!
//! Runs for `FUZZ_SECS` seconds (default 60) from `FUZZ_SEED` (default random, printed).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri};
use http_body_util::BodyExt;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::fuzz_inputs::{has_list_or_directive, hostile, json_patch_ops, merge_diff, mutate};
use super::{apply_patch, PatchType};
use crate::auth::tokens::TokenIssuer;
use crate::auth::Auth;
use crate::handlers::App;
use crate::openapi::OpenApi;
use crate::registry::Registry;
use crate::store::Store;

const TOKEN: &str = "fuzz-admin-token";
const NAMESPACE: &str = "fuzz";

/// RFC 7386 section 2, `MergePatch(Target, Patch)`, as the RFC writes it.
fn merge_reference(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut t = match target {
        Value::Object(t) => t.clone(),
        _ => serde_json::Map::new(),
    };
    for (name, value) in p {
        if value.is_null() {
            t.remove(name);
        } else {
            let merged = merge_reference(t.get(name).unwrap_or(&Value::Null), value);
            t.insert(name.clone(), merged);
        }
    }
    Value::Object(t)
}

struct Server {
    rt: tokio::runtime::Runtime,
    app: Arc<App>,
    /// PATCH answers seen: (2xx, 4xx).
    seen: std::cell::Cell<(u64, u64)>,
}

impl Server {
    fn new() -> Server {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let store = Store::new(Registry::new(), 16);
        let app = Arc::new(App {
            store,
            openapi: Arc::new(OpenApi::new()),
            auth: Arc::new(Auth {
                admin_token: TOKEN.into(),
                tokens: TokenIssuer::new(),
                audit: None,
            }),
            server_address: "127.0.0.1:1".into(),
        });
        Server {
            rt,
            app,
            seen: Default::default(),
        }
    }

    /// One request -> (status, JSON body). Err: a panic.
    fn call(
        &self,
        method: Method,
        uri: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(u16, Value), String> {
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::from_str(&format!("Bearer {TOKEN}")).expect("ascii");
        headers.insert(http::header::AUTHORIZATION, bearer);
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).expect("ascii"),
        );
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let uri: Uri = uri
            .parse()
            .map_err(|e| format!("test built a bad URI {uri}: {e}"))?;
        let app = self.app.clone();
        let patch = method == Method::PATCH;
        let answer = catch_unwind(AssertUnwindSafe(|| {
            self.rt.block_on(async move {
                let resp =
                    crate::handlers::handle(app, method, uri, headers, Bytes::from(body), None)
                        .await;
                let status = resp.status().as_u16();
                let bytes = resp.into_body().collect().await.expect("body").to_bytes();
                (
                    status,
                    serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                )
            })
        }))
        .map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })?;
        if patch {
            let (ok, refused) = self.seen.get();
            self.seen.set(match answer.0 {
                200..=299 => (ok + 1, refused),
                _ => (ok, refused + 1),
            });
        }
        Ok(answer)
    }
}

/// What is wrong with an answer: not 2xx and not a 4xx `Status`. The 500s allowed are the real
/// server's own answers to an apply configuration its typed conversion refuses (an undeclared
/// field, a wrong-typed value, duplicated list keys: `patch::typed`) or whose merged object
/// does not convert to the Go type (a fraction for an integer): a `Status` without a reason.
fn bad_answer(status: u16, body: &Value) -> Option<String> {
    if (200..300).contains(&status) {
        return None;
    }
    let typed_patch_refused = status == 500
        && body["kind"] == "Status"
        && body["code"] == 500
        && body.get("reason").is_none()
        && body["message"].as_str().is_some_and(|m| {
            m.starts_with("failed to create typed patch object (")
                || m.starts_with("failed to convert new object (")
        });
    if typed_patch_refused {
        return None;
    }
    if !(400..500).contains(&status) {
        return Some(format!("status {status}: {body}"));
    }
    let shaped = body["kind"] == "Status"
        && body["apiVersion"] == "v1"
        && body["status"] == "Failure"
        && body["code"] == status
        && body["reason"].is_string()
        && body["message"].as_str().is_some_and(|m| !m.is_empty());
    (!shaped).then(|| format!("{status} is not a Status: {body}"))
}

/// A seed: its file, the resource's collection path, and the object.
struct Seed {
    file: String,
    collection: String,
    object: Value,
    strategic_schema: bool,
}

fn yaml_docs(dir: &Path) -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable");
            serde_yaml::Deserializer::from_str(&text)
                .filter_map(|d| serde::Deserialize::deserialize(d).ok())
                .filter(|v: &Value| v.is_object())
                .map(|v| (p.display().to_string(), v))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The seeds the server accepts (created once to find out), and the CRDs they need.
fn seeds(s: &Server) -> Vec<Seed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs: Vec<_> = [
        root.join("../../docs/examples"),
        root.join("../../deploy"),
        root.join("tests/fixtures"),
        root.join("src/patch/testdata/fuzz"),
    ]
    .iter()
    .flat_map(|d| yaml_docs(d))
    .collect();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let (status, answer) = s
        .call(
            Method::POST,
            "/api/v1/namespaces",
            "application/json",
            ns.to_string().into(),
        )
        .expect("namespace");
    assert_eq!(status, 201, "{answer}");
    for (file, crd) in docs
        .iter()
        .filter(|(_, d)| d["kind"] == "CustomResourceDefinition")
    {
        let uri = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let (status, answer) = s
            .call(
                Method::POST,
                uri,
                "application/json",
                crd.to_string().into(),
            )
            .expect("CRD");
        assert!(status < 300, "{file}: {answer}");
    }
    let mut out = Vec::new();
    let kept = |d: &Value| d["kind"] != "CustomResourceDefinition" && d["kind"] != "FuzzRegression";
    for (file, mut obj) in docs.into_iter().filter(|(_, d)| kept(d)) {
        let (kind, api_version) = (obj["kind"].clone(), obj["apiVersion"].clone());
        let Some(res) = s
            .app
            .store
            .registry
            .all()
            .into_iter()
            .find(|r| kind == r.kind.as_str() && api_version == r.api_version().as_str())
        else {
            continue;
        };
        let mut collection = res.group_version_path();
        if res.namespaced {
            collection.push_str(&format!("/namespaces/{NAMESPACE}"));
            obj["metadata"]["namespace"] = NAMESPACE.into();
        }
        collection.push_str(&format!("/{}", res.plural));
        obj["metadata"]["name"] = "fz-seed".into();
        let body = obj.to_string().into_bytes();
        let (status, answer) = s
            .call(Method::POST, &collection, "application/json", body)
            .expect("seed create");
        if status != 201 {
            continue;
        }
        let _ = s.call(
            Method::DELETE,
            &format!("{collection}/fz-seed"),
            "application/json",
            vec![],
        );
        out.push(Seed {
            file,
            collection,
            object: obj,
            strategic_schema: res.crd_version.is_none() && s.app.openapi.schema_of(&res).is_some(),
        });
        let _ = answer;
    }
    out
}

/// Replays the past findings of `testdata/fuzz/regressions.yaml` (see the file).
fn replay_regressions(s: &Server, corpus: &[Seed]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/patch/testdata/fuzz");
    let regressions: Vec<_> = yaml_docs(&dir)
        .into_iter()
        .filter(|(_, d)| d["kind"] == "FuzzRegression")
        .collect();
    assert!(
        !regressions.is_empty(),
        "no regressions in {}",
        dir.display()
    );
    for (i, (file, r)) in regressions.iter().enumerate() {
        let kind = &r["object"]["kind"];
        let seed = corpus
            .iter()
            .find(|c| c.object["kind"] == *kind)
            .unwrap_or_else(|| {
                panic!("{file}: no seed of kind {kind} to learn its collection from")
            });
        let name = format!("fz-regression-{i}");
        let mut obj = r["object"].clone();
        obj["metadata"]["name"] = name.clone().into();
        obj["metadata"]["namespace"] = NAMESPACE.into();
        let (status, answer) = s
            .call(
                Method::POST,
                &seed.collection,
                "application/json",
                obj.to_string().into(),
            )
            .expect("create");
        assert_eq!(status, 201, "{file} #{i}: {answer}");
        let patch = r["patch"]
            .as_str()
            .expect("patch")
            .replace("\"seed\"", &format!("{name:?}"));
        let uri = format!("{}/{name}?fieldManager=fuzz", seed.collection);
        let ct = r["contentType"].as_str().expect("contentType");
        for _ in 0..2 {
            let (status, answer) = s
                .call(Method::PATCH, &uri, ct, patch.clone().into_bytes())
                .unwrap_or_else(|p| panic!("{file} #{i}: panicked: {p}"));
            assert_eq!(status, r["expect"], "{file} #{i}: {answer}");
            assert_eq!(bad_answer(status, &answer), None, "{file} #{i}");
        }
    }
}

/// Strips what the server owns (for comparing two answers).
fn without_server_fields(mut v: Value) -> Value {
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    v
}

/// One round on `seed`; Ok(patch type) or Err(finding).
fn round(rng: &mut impl Rng, s: &Server, n: u64, seed: &Seed) -> Result<&'static str, String> {
    let name = format!("fz{n}");
    let mut obj = seed.object.clone();
    obj["metadata"]["name"] = name.clone().into();
    let item = format!("{}/{name}", seed.collection);
    let check = |what: &str, r: Result<(u16, Value), String>| {
        let (status, answer) = r.map_err(|p| format!("{what}: panicked: {p}"))?;
        match bad_answer(status, &answer) {
            Some(bad) => Err(format!("{what}: {bad}")),
            None => Ok((status, answer)),
        }
    };
    let (status, live) = check(
        "create",
        s.call(
            Method::POST,
            &seed.collection,
            "application/json",
            obj.to_string().into(),
        ),
    )?;
    if status != 201 {
        return Err(format!("seed {item} no longer created: {live}"));
    }
    let mut target = live.clone();
    let done: Vec<_> = (0..rng.random_range(1..=4))
        .map(|_| mutate(rng, &mut target))
        .collect();
    let kind = match rng.random_range(0..8) {
        0..=1 => {
            let mut patch = merge_diff(&live, &target);
            if rng.random_bool(0.2) {
                patch = hostile(rng);
            }
            let body = patch.to_string();
            let what = format!("merge patch {item} {body} (from {done:?})");
            let engine =
                catch_unwind(|| apply_patch(PatchType::Merge, &live, body.as_bytes(), None))
                    .map_err(|_| format!("{what}: engine panicked"))?;
            let reference = merge_reference(&live, &patch);
            if engine.as_ref().ok() != Some(&reference) {
                return Err(format!(
                    "{what}: engine gave {engine:?}, RFC 7386 gives {reference}"
                ));
            }
            check(
                &what,
                s.call(
                    Method::PATCH,
                    &item,
                    "application/merge-patch+json",
                    body.into(),
                ),
            )?;
            "merge"
        }
        2..=3 => {
            let mut patch = merge_diff(&live, &target);
            if rng.random_bool(0.3) {
                let _ = mutate(rng, &mut patch);
            }
            let body = patch.to_string();
            let what = format!("strategic merge patch {item} {body} (from {done:?})");
            if seed.strategic_schema && patch.is_object() && !has_list_or_directive(&patch) {
                let (group_version, plural) = seed.collection.rsplit_once('/').expect("collection");
                let _ = group_version;
                let res = s
                    .app
                    .store
                    .registry
                    .all()
                    .into_iter()
                    .find(|r| {
                        r.plural == plural && seed.collection.contains(&r.group_version_path())
                    })
                    .expect("resource");
                let schema = s.app.openapi.schema_of(&res);
                let engine = catch_unwind(AssertUnwindSafe(|| {
                    apply_patch(PatchType::Strategic, &live, body.as_bytes(), schema)
                }))
                .map_err(|_| format!("{what}: engine panicked"))?;
                let reference = merge_reference(&live, &patch);
                if engine.as_ref().ok() != Some(&reference) {
                    return Err(format!(
                        "{what}: strategic engine gave {engine:?}, without lists RFC 7386 gives {reference}"
                    ));
                }
            }
            let ct = "application/strategic-merge-patch+json";
            check(&what, s.call(Method::PATCH, &item, ct, body.into()))?;
            "strategic"
        }
        4..=5 => {
            let ops = json_patch_ops(rng, &live, &target);
            let body = Value::Array(ops.clone()).to_string();
            let what = format!("JSON patch {item} {body}");
            let engine =
                catch_unwind(|| apply_patch(PatchType::Json, &live, body.as_bytes(), None))
                    .map_err(|_| format!("{what}: engine panicked"))?;
            let null_test = ops
                .iter()
                .any(|o| o["op"] == "test" && o["value"].is_null());
            if !null_test {
                let reference = serde_json::from_value::<json_patch::Patch>(Value::Array(ops))
                    .ok()
                    .and_then(|p| {
                        let mut doc = live.clone();
                        json_patch::patch_unsafe(&mut doc, &p).ok().map(|_| doc)
                    });
                if engine.as_ref().ok() != reference.as_ref() {
                    return Err(format!(
                        "{what}: engine gave {engine:?}, the json-patch crate {reference:?}"
                    ));
                }
            }
            let ct = "application/json-patch+json";
            check(&what, s.call(Method::PATCH, &item, ct, body.into()))?;
            "json"
        }
        _ => {
            let mut config = target.clone();
            if let Some(m) = config["metadata"].as_object_mut() {
                m.retain(|k, _| {
                    matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations")
                });
            }
            if let Some(m) = config.as_object_mut() {
                m.remove("status");
            }
            let body = serde_yaml::to_string(&config).map_err(|e| e.to_string())?;
            let what = format!("apply {item} {config} (from {done:?})");
            // Half forced: the seed's creator owns its fields, so an unforced change conflicts
            // (409) and is not applied.
            let force = if rng.random_bool(0.5) {
                "&force=true"
            } else {
                ""
            };
            let uri = format!("{item}?fieldManager=fuzz{force}");
            let ct = "application/apply-patch+yaml";
            let (first_status, first) =
                check(&what, s.call(Method::PATCH, &uri, ct, body.clone().into()))?;
            let (second_status, second) =
                check(&what, s.call(Method::PATCH, &uri, ct, body.into()))?;
            if first_status < 300 {
                if second_status >= 300 {
                    return Err(format!(
                        "{what}: applied once, refused the second time: {second}"
                    ));
                }
                let (a, b) = (without_server_fields(first), without_server_fields(second));
                if a != b {
                    return Err(format!("{what}: not idempotent:\n first {a}\nsecond {b}"));
                }
            }
            "apply"
        }
    };
    check(
        "delete",
        s.call(Method::DELETE, &item, "application/json", vec![]),
    )?;
    Ok(kind)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
fn mutated_patches_of_every_type_get_2xx_or_a_4xx_status_and_match_their_references() {
    let secs = env_u64("FUZZ_SECS").unwrap_or(60);
    let seed = env_u64("FUZZ_SEED").unwrap_or_else(rand::random::<u64>);
    fuzz(seed, secs);
}

/// The fixed seed `make test` passes (`FUZZ_SEED`) keeps CI reproducible; this short run
/// explores from a fresh random seed every time (`FUZZ_FRESH_SECS`, default 10 s), so a new
/// corner shows up in an ordinary run too. A failure prints the seed: replay it with
/// `FUZZ_SEED=<seed>` (or `FUZZ_FRESH_SEED=<seed>` for this test).
#[test]
fn a_short_run_from_a_fresh_random_seed() {
    let secs = env_u64("FUZZ_FRESH_SECS").unwrap_or(10);
    let seed = env_u64("FUZZ_FRESH_SEED").unwrap_or_else(rand::random::<u64>);
    println!("fresh fuzz seed: FUZZ_SEED={seed}");
    fuzz(seed, secs);
}

fn fuzz(seed: u64, secs: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut server = Server::new();
    let mut corpus = seeds(&server);
    assert!(
        corpus.len() >= 8,
        "corpus: {} seeds the server accepts",
        corpus.len()
    );
    replay_regressions(&server, &corpus);
    let start = Instant::now();
    let (mut rounds, mut findings) = (0u64, Vec::new());
    let mut by_type = std::collections::BTreeMap::new();
    let mut seen = (0, 0);
    while start.elapsed() < Duration::from_secs(secs) && findings.len() < 5 {
        rounds += 1;
        let seed_obj = &corpus[rng.random_range(0..corpus.len())];
        match round(&mut rng, &server, rounds, seed_obj) {
            Ok(kind) => *by_type.entry(kind).or_insert(0u64) += 1,
            Err(finding) => {
                findings.push(format!("{}: {finding}", seed_obj.file));
                // A panic may have poisoned the store's locks: start over.
                seen = (seen.0 + server.seen.get().0, seen.1 + server.seen.get().1);
                server = Server::new();
                corpus = seeds(&server);
            }
        }
    }
    let seen = (seen.0 + server.seen.get().0, seen.1 + server.seen.get().1);
    println!(
        "fuzz (FUZZ_SEED={seed}): {rounds} rounds {by_type:?} over {} seeds, PATCH answered {} 2xx, {} 4xx, in {:.0} s ({:.0} rounds/s); {} findings",
        corpus.len(),
        seen.0,
        seen.1,
        start.elapsed().as_secs_f64(),
        rounds as f64 / start.elapsed().as_secs_f64(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "FUZZ_SEED={seed}:\n{}",
        findings.join("\n\n")
    );
    assert!(
        seen.0 > 0 && seen.1 > 0,
        "the mutator must reach both outcomes"
    );
}
