//! Fuzzing on stable Rust (issue 20): the Compute API request parsing of the emulator, driven
//! in-process through its axum router ([`crate::api::router`], tower `oneshot`), so the real
//! routing, body decoding, schema check and per-collection validation run.
//!
//! Corpus: `testdata/fuzz/api/*.json`, one valid insert body per file (`collection`, `body`),
//! inserted in file order as the fixtures the others reference, and `queries.json` (list query
//! strings). Each round takes one seed and does one of:
//! - insert a mutated body (1-4 mutations of [`crate::fuzz_support::mutate`]) under a fresh name;
//! - insert the seed, then `PUT` or `PATCH` it with a mutated body;
//! - insert bytes of a seed cut or corrupted at random;
//! - list the seed's collection with a mutated query (filter, pageToken, maxResults, orderBy);
//! - `GET` or `DELETE` a hostile name.
//!
//! Properties: no panic; every answer is 200 or a 4xx in Google's error shape
//! (`{"error":{"code","message","errors":[{"reason","message"}]}}`, code = the HTTP status);
//! an accepted insert or update round-trips: every field sent comes back from `GET` with the
//! same value (references may come back as full URLs of the same resource; output-only fields
//! are the server's), and the resource can then be deleted.
//!
//! Runs for `FUZZ_SECS` seconds (default 60) from `FUZZ_SEED` (default random, printed).

use std::time::{Duration, Instant};

use http::Method;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::fuzz_support::{at, corpus, hostile, mutate, paths, settings, Harness};

/// Fields a client may send that the server owns (Compute API v1 reference: "[Output Only]").
const OUTPUT_ONLY: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "selfLink",
    "selfLinkWithId",
    "fingerprint",
    "region",
    "zone",
    "status",
    "users",
    "size",
    "managed",
    "expireTime",
    "subjectAlternativeNames",
    "certificate",
    "privateKey",
    "peerings",
    "subnetworks",
    "gatewayIPv4",
    "IPAddress",
    "labelFingerprint",
];

/// Fields the server takes but never returns (Compute API v1 reference: "@InputOnly"), by path.
const INPUT_ONLY: &[&[&str]] = &[&["iap", "oauth2ClientSecret"]];

/// Field names worth adding to a body (known to some collection, so the schema lets some in).
const KEYS: &[&str] = &[
    "name",
    "description",
    "port",
    "timeoutSec",
    "priority",
    "paths",
    "service",
    "hosts",
    "pathMatcher",
    "matchRules",
    "prefixMatch",
    "regexMatch",
    "urlRedirect",
    "routeAction",
    "weightedBackendServices",
    "backends",
    "group",
    "healthChecks",
    "labels",
    "portRange",
    "target",
    "sslCertificates",
    "sslPolicy",
    "securityPolicy",
    "defaultService",
    "headerAction",
    "cdnPolicy",
    "iap",
];

/// What is wrong with an answer, if anything: not 200 and not a 4xx in Google's error shape.
fn bad_answer(status: u16, body: &Value) -> Option<String> {
    if status == 200 {
        return None;
    }
    if !(400..500).contains(&status) {
        return Some(format!("status {status}: {body}"));
    }
    let e = &body["error"];
    let shaped = e["code"] == status
        && e["message"].as_str().is_some_and(|m| !m.is_empty())
        && e["errors"].as_array().is_some_and(|a| {
            !a.is_empty()
                && a.iter()
                    .all(|x| x["reason"].is_string() && x["message"].is_string())
        });
    (!shaped).then(|| format!("{status} not in Google's error shape: {body}"))
}

/// Does `got` (from GET) hold `sent`? References may come back as full URLs of the same path.
fn same(sent: &Value, got: &Value) -> bool {
    match (sent, got) {
        (Value::String(s), Value::String(g)) if s.contains("projects/") => {
            let tail = |x: &str| x[x.find("projects/").unwrap_or(0)..].to_string();
            tail(s) == tail(g)
        }
        (Value::Number(s), Value::Number(g)) => s.as_f64() == g.as_f64(),
        (Value::String(s), Value::Number(g)) | (Value::Number(g), Value::String(s)) => {
            s.parse::<f64>().ok() == g.as_f64()
        }
        _ => sent == got,
    }
}

/// The first field of `sent` that `got` does not hold, if any (output-only fields and `null`s
/// excepted: the server owns the first, and `null` or `""` means "unset", which may be
/// defaulted, as the network of a firewall rule is). Only scalars are compared:
/// an empty object comes back with its defaults, an empty list comes back absent, as Google's
/// JSON omits empty repeated fields.
fn round_trip(sent: &Value, got: &Value) -> Option<String> {
    let sent = &ordered_as_returned(sent);
    paths(sent).into_iter().find_map(|p| {
        let mut s = sent.clone();
        let leaf = at(&mut s, &p).clone();
        let skip = p
            .first()
            .and_then(Value::as_str)
            .is_some_and(|k| OUTPUT_ONLY.contains(&k))
            || INPUT_ONLY
                .iter()
                .any(|i| p.iter().map(Value::as_str).eq(i.iter().copied().map(Some)))
            || leaf.is_null()
            || leaf == ""
            || leaf.is_object()
            || leaf.is_array();
        if skip {
            return None;
        }
        let mut g = got.clone();
        let mut cursor = &mut g;
        for k in &p {
            cursor = match (k, cursor) {
                (Value::String(k), Value::Object(m)) => m.get_mut(k.as_str())?,
                (Value::Number(i), Value::Array(a)) => a.get_mut(i.as_u64()? as usize)?,
                _ => return Some(format!("{p:?}: sent {leaf}, GET has no such field")),
            };
        }
        (!same(&leaf, cursor)).then(|| format!("{p:?}: sent {leaf}, GET returned {cursor}"))
    })
}

/// `sent` with a security policy's `rules` in priority order: Compute returns them sorted by
/// priority, whatever order they were sent in (the emulator does the same).
fn ordered_as_returned(sent: &Value) -> Value {
    let mut sent = sent.clone();
    if let Some(rules) = sent.get_mut("rules").and_then(Value::as_array_mut) {
        let priority = |r: &Value| match &r["priority"] {
            Value::String(s) => s.parse::<i64>().unwrap_or(2147483647),
            p => p.as_i64().unwrap_or(2147483647),
        };
        rules.sort_by_key(priority);
    }
    sent
}

/// Percent-encodes a path segment or query value.
fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// One fuzz round. Ok(what was done) or Err(finding).
fn round(
    rng: &mut impl Rng,
    h: &Harness,
    n: u64,
    (_, coll, seed): &(String, String, Value),
    queries: &[String],
) -> Result<String, String> {
    let call = |method: Method, path: &str, body: Vec<u8>| {
        let shown = format!("{method} {path} {}", String::from_utf8_lossy(&body));
        h.call(method, path, body)
            .map_err(|p| format!("{shown}: panicked: {p}"))
    };
    let fresh = format!("fz{n}");
    let mut body = seed.clone();
    body["name"] = fresh.clone().into();
    let check = |what: &str, (status, answer): (u16, Value)| match bad_answer(status, &answer) {
        Some(bad) => Err(format!("{what}: {bad}")),
        None => Ok((status, answer)),
    };
    match rng.random_range(0..10) {
        0..=3 => {
            let done: Vec<_> = (0..rng.random_range(1..=4))
                .map(|_| mutate(rng, &mut body, KEYS))
                .collect();
            let what = format!("insert {coll} after {done:?}: {body}");
            let (status, _) = check(&what, call(Method::POST, coll, body.to_string().into())?)?;
            if status == 200 {
                accepted(h, coll, &body, &what)?;
            }
            Ok(what)
        }
        4..=5 => {
            let (status, answer) = call(Method::POST, coll, body.to_string().into())?;
            if status != 200 {
                return Err(format!("insert of seed {coll} {body} refused: {answer}"));
            }
            let done: Vec<_> = (0..rng.random_range(1..=3))
                .map(|_| mutate(rng, &mut body, KEYS))
                .collect();
            let method = if rng.random_bool(0.5) {
                Method::PUT
            } else {
                Method::PATCH
            };
            let what = format!("{method} {coll}/{fresh} after {done:?}: {body}");
            let path = format!("{coll}/{fresh}");
            let (status, _) = check(&what, call(method, &path, body.to_string().into())?)?;
            if status == 200 && body["name"] == fresh.as_str() {
                let (_, got) = check(&what, call(Method::GET, &path, vec![])?)?;
                if let Some(diff) = round_trip(&body, &got) {
                    return Err(format!("{what}: not round-tripped: {diff}"));
                }
            }
            let name = body["name"]
                .as_str()
                .filter(|_| status == 200)
                .unwrap_or(&fresh);
            check(
                &what,
                call(Method::DELETE, &format!("{coll}/{}", enc(name)), vec![])?,
            )?;
            Ok(what)
        }
        6 => {
            let mut bytes = body.to_string().into_bytes();
            let cut = rng.random_range(0..bytes.len());
            match rng.random_range(0..3) {
                0 => bytes.truncate(cut),
                1 => bytes[cut] = rng.random(),
                _ => {
                    let junk = b"{}[],:\"\\\0\xff";
                    bytes.insert(cut, junk[rng.random_range(0..junk.len())])
                }
            }
            let what = format!("insert {coll} raw {:?}", String::from_utf8_lossy(&bytes));
            let (status, _) = check(&what, call(Method::POST, coll, bytes.clone())?)?;
            if status == 200 {
                let sent: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("{what}: accepted a body that is not JSON ({e})"))?;
                accepted(h, coll, &sent, &what)?;
            }
            Ok(what)
        }
        7..=8 => {
            let mut q = queries[rng.random_range(0..queries.len())].clone();
            match rng.random_range(0..4) {
                0 => {
                    let v = match hostile(rng) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    let key =
                        ["filter", "pageToken", "maxResults", "orderBy"][rng.random_range(0..4)];
                    q = format!("{key}={}", enc(&v));
                }
                1 => q.push_str(&format!("&{}", queries[rng.random_range(0..queries.len())])),
                2 if !q.is_empty() => q.truncate(rng.random_range(0..q.len())),
                _ => {}
            }
            let what = format!("list {coll}?{q}");
            check(&what, call(Method::GET, &format!("{coll}?{q}"), vec![])?)?;
            Ok(what)
        }
        _ => {
            let name = match hostile(rng) {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let method = if rng.random_bool(0.5) {
                Method::GET
            } else {
                Method::DELETE
            };
            let what = format!("{method} {coll}/{name:?}");
            check(
                &what,
                call(method, &format!("{coll}/{}", enc(&name)), vec![])?,
            )?;
            Ok(what)
        }
    }
}

/// An insert of `sent` was accepted: it must read back as sent and delete cleanly.
fn accepted(h: &Harness, coll: &str, sent: &Value, what: &str) -> Result<(), String> {
    let Some(name) = sent["name"].as_str() else {
        return Err(format!("{what}: accepted without a name"));
    };
    let path = format!("{coll}/{}", enc(name));
    let (status, got) = h
        .call(Method::GET, &path, vec![])
        .map_err(|p| format!("{what}: GET panicked: {p}"))?;
    if status != 200 {
        return Err(format!(
            "{what}: accepted, then GET answered {status}: {got}"
        ));
    }
    if let Some(diff) = round_trip(sent, &got) {
        return Err(format!("{what}: not round-tripped: {diff}"));
    }
    let (status, answer) = h
        .call(Method::DELETE, &path, vec![])
        .map_err(|p| format!("{what}: DELETE panicked: {p}"))?;
    if status != 200 {
        return Err(format!(
            "{what}: accepted, then DELETE answered {status}: {answer}"
        ));
    }
    Ok(())
}

#[test]
fn mutated_requests_get_200_or_a_shaped_4xx_and_round_trip() {
    let (secs, seed) = settings();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut seeds, mut queries, mut regressions) = (Vec::new(), Vec::new(), Vec::new());
    for (path, v) in corpus("src/testdata/fuzz/api") {
        if let Some(q) = v["queries"].as_array() {
            queries.extend(q.iter().filter_map(Value::as_str).map(str::to_string));
        } else if v.get("expect").is_some() {
            regressions.push((path.display().to_string(), v));
        } else {
            let coll = v["collection"]
                .as_str()
                .expect("seed has a collection")
                .to_string();
            seeds.push((path.display().to_string(), coll, v["body"].clone()));
        }
    }
    assert!(
        seeds.len() >= 10 && !queries.is_empty(),
        "corpus: {} seeds",
        seeds.len()
    );
    let mut h = Harness::new(&seeds);
    // Past findings (`expect`: the status they must get now), replayed first.
    for (file, v) in &regressions {
        let coll = v["collection"]
            .as_str()
            .expect("regression has a collection");
        let (status, answer) = h
            .call(Method::POST, coll, v["body"].to_string().into_bytes())
            .unwrap_or_else(|p| panic!("{file}: panicked: {p}"));
        assert_eq!(status, v["expect"], "{file}: {answer}");
        assert_eq!(bad_answer(status, &answer), None, "{file}");
    }
    let start = Instant::now();
    let (mut rounds, mut findings, mut seen) = (0u64, Vec::new(), (0, 0));
    while start.elapsed() < Duration::from_secs(secs) && findings.len() < 5 {
        rounds += 1;
        let seed_file = &seeds[rng.random_range(0..seeds.len())];
        if let Err(finding) = round(&mut rng, &h, rounds, seed_file, &queries) {
            findings.push(format!("{}: {finding}", seed_file.0));
            // A panic may have poisoned the emulator's locks: start over.
            seen = (seen.0 + h.seen.get().0, seen.1 + h.seen.get().1);
            h = Harness::new(&seeds);
        }
    }
    let seen = (seen.0 + h.seen.get().0, seen.1 + h.seen.get().1);
    println!(
        "fuzz (FUZZ_SEED={seed}): {rounds} rounds ({} requests answered 200, {} 4xx) in {:.0} s ({:.0} rounds/s); {} findings",
        seen.0,
        seen.1,
        start.elapsed().as_secs_f64(),
        rounds as f64 / start.elapsed().as_secs_f64(),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "FUZZ_SEED={seed}:\n{}",
        findings.join("\n")
    );
    assert!(
        seen.0 > 0 && seen.1 > 0,
        "the mutator must reach both outcomes"
    );
}
