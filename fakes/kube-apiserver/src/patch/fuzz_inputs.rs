//! The inputs of the patch fuzz target ([`super::fuzz_tests`]): hostile values, paths and JSON
//! pointers into an object, structural mutations, the merge patch between two objects, and JSON
//! patch operations on an object's paths.

use rand::Rng;
use serde_json::{json, Value};

pub(super) fn hostile(rng: &mut impl Rng) -> Value {
    let choices = [
        json!(null),
        json!(""),
        json!(-1),
        json!(0),
        json!(65536),
        json!(2147483648_i64),
        json!(1e300),
        json!(0.5),
        json!(true),
        json!([]),
        json!([null]),
        json!({}),
        json!({"$patch": "delete"}),
        json!({"$patch": "replace", "x": 1}),
        json!([{"$patch": "delete", "name": "web"}]),
        json!("UPPER_case"),
        json!("-x-"),
        json!("ünïcödé"),
        json!("nul\u{0}byte"),
        json!("a".repeat(300)),
        json!("1"),
    ];
    choices[rng.random_range(0..choices.len())].clone()
}

/// Every path inside `v` (object keys, array indexes).
pub(super) fn paths(v: &Value) -> Vec<Vec<Value>> {
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

pub(super) fn at<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, k| match (k, v) {
        (Value::String(s), Value::Object(m)) => m.get_mut(s.as_str()),
        (Value::Number(n), Value::Array(a)) => a.get_mut(n.as_u64()? as usize),
        _ => None,
    })
}

/// The JSON pointer of `path` (RFC 6901 escapes).
pub(super) fn pointer(path: &[Value]) -> String {
    path.iter()
        .map(|k| match k {
            Value::String(s) => format!("/{}", s.replace('~', "~0").replace('/', "~1")),
            other => format!("/{other}"),
        })
        .collect()
}

/// Paths a mutation may touch: not the identity of the object (kind, apiVersion, name,
/// namespace), which would only make the request address another object.
pub(super) fn mutable_paths(v: &Value) -> Vec<Vec<Value>> {
    paths(v)
        .into_iter()
        .filter(|p| {
            !p.is_empty()
                && p[0] != "kind"
                && p[0] != "apiVersion"
                && !(p[0] == "metadata"
                    && matches!(
                        p.get(1).and_then(Value::as_str),
                        Some("name" | "namespace") | None
                    ))
        })
        .collect()
}

/// One mutation of `v`; returns what it did.
pub(super) fn mutate(rng: &mut impl Rng, v: &mut Value) -> String {
    let all = mutable_paths(v);
    if all.is_empty() {
        return "nothing".into();
    }
    let p = all[rng.random_range(0..all.len())].clone();
    match rng.random_range(0..5) {
        0 => {
            let h = hostile(rng);
            if let Some(x) = at(v, &p) {
                *x = h.clone();
            }
            format!("{} = {h}", pointer(&p))
        }
        1 => {
            let (last, parent) = p.split_last().expect("non-empty");
            match (at(v, parent), last) {
                (Some(Value::Object(m)), Value::String(k)) => {
                    m.remove(k);
                }
                (Some(Value::Array(a)), Value::Number(i)) => {
                    a.remove(i.as_u64().unwrap_or(0) as usize);
                }
                _ => {}
            }
            format!("remove {}", pointer(&p))
        }
        2 => {
            let to = all[rng.random_range(0..all.len())].clone();
            if to.starts_with(&p) {
                return "nothing".into();
            }
            let x = at(v, &p).cloned().unwrap_or_default();
            if let Some(t) = at(v, &to) {
                *t = x;
            }
            format!("{} = {}", pointer(&to), pointer(&p))
        }
        3 => match at(v, &p) {
            Some(Value::Array(a)) if !a.is_empty() => {
                let x = a[0].clone();
                a.push(x);
                format!("duplicate {}/0", pointer(&p))
            }
            _ => "nothing".into(),
        },
        _ => {
            let key = [
                "name",
                "image",
                "port",
                "replicas",
                "$patch",
                "x-unknown",
                "type",
            ][rng.random_range(0..7)];
            let h = hostile(rng);
            if let Some(Value::Object(m)) = at(v, &p) {
                m.insert(key.into(), h.clone());
            }
            format!("{}/{key} = {h}", pointer(&p))
        }
    }
}

/// RFC 7386 merge patch from `from` to `to` (what `kubectl patch --type merge` of a diff sends).
pub(super) fn merge_diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = serde_json::Map::new();
            for k in f.keys().filter(|k| !t.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            for (k, tv) in t {
                match f.get(k) {
                    Some(fv) if fv == tv => {}
                    Some(fv) => {
                        out.insert(k.clone(), merge_diff(fv, tv));
                    }
                    None => {
                        out.insert(k.clone(), tv.clone());
                    }
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

pub(super) fn has_list_or_directive(v: &Value) -> bool {
    match v {
        Value::Array(_) => true,
        Value::Object(m) => m
            .iter()
            .any(|(k, x)| k.starts_with('$') || has_list_or_directive(x)),
        _ => false,
    }
}

/// JSON patch operations on `live`'s paths (and a few that point nowhere).
pub(super) fn json_patch_ops(rng: &mut impl Rng, live: &Value, target: &Value) -> Vec<Value> {
    let all = mutable_paths(live);
    let pick = |rng: &mut dyn rand::RngCore| {
        if all.is_empty() || rand::Rng::random_bool(rng, 0.1) {
            [
                "",
                "/",
                "/-",
                "/spec/ports/99",
                "/metadata/labels/a~2b",
                "/nope/deeper",
            ][rand::Rng::random_range(rng, 0..6)]
            .to_string()
        } else {
            pointer(&all[rand::Rng::random_range(rng, 0..all.len())])
        }
    };
    (0..rng.random_range(1..=4))
        .map(|_| {
            let path = pick(rng);
            let value = if rng.random_bool(0.5) {
                hostile(rng)
            } else {
                target.pointer(&path).cloned().unwrap_or(json!("v"))
            };
            match rng.random_range(0..6) {
                0 => json!({"op": "add", "path": path, "value": value}),
                1 => json!({"op": "remove", "path": path}),
                2 => json!({"op": "replace", "path": path, "value": value}),
                3 => json!({"op": "move", "from": pick(rng), "path": path}),
                4 => json!({"op": "copy", "from": pick(rng), "path": path}),
                _ => json!({"op": "test", "path": path, "value": value}),
            }
        })
        .collect()
}
