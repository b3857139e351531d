//! Sets of field paths, as structured-merge-diff (sigs.k8s.io/structured-merge-diff v4
//! `fieldpath`, `typed/tofieldset.go`, `typed/compare.go`) keeps them for `managedFields`: a path
//! is a list of elements written as `fieldsV1` keys: `f:<field>`, `k:<keys as JSON>` for an
//! element of a keyed list (`k:{"containerPort":80,"protocol":"TCP"}`, keys sorted, a missing
//! key at its schema default), `v:<value as JSON>` for an element of a set. Atomic lists and
//! scalars are leaves. [`FieldSet::to_fields_v1`] writes the nested `fieldsV1` form, with `.`
//! for a path that is a member and has members below it.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::go_values;
use crate::schema::{Relationship, Schema};

/// Metadata fields that are never owned (the field manager's `stripMeta`).
const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "generateName",
];

/// One path: its elements as `fieldsV1` keys.
pub type Path = Vec<String>;

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet(pub BTreeSet<Path>);

/// What changed between two objects (`typed.Comparison`): paths added (with every path below
/// them), leaves modified, paths removed (with every path below them).
#[derive(Debug, Default)]
pub struct Comparison {
    /// In the new object only.
    pub added: FieldSet,
    /// Leaves (scalars, atomic lists) whose value changed.
    pub modified: FieldSet,
    /// In the old object only.
    pub removed: FieldSet,
}

impl Comparison {
    /// `Added ∪ Modified`: what a write takes ownership of.
    pub fn changed(&self) -> FieldSet {
        let mut s = self.added.clone();
        s.0.extend(self.modified.0.iter().cloned());
        s
    }
}

/// How a path prints in a conflict (`fieldpath.Path.String()`): `.spec.containers[name="web"].image`,
/// `.metadata.finalizers[="a"]`.
pub fn display(path: &[String]) -> String {
    let mut out = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let v: Value = serde_json::from_str(k).unwrap_or(Value::Null);
            out.push_str(&format!("[{}]", go_values::to_string(&v)));
        } else if let Some(v) = e.strip_prefix("v:") {
            let v: Value = serde_json::from_str(v).unwrap_or(Value::Null);
            out.push_str(&format!("[={}]", go_values::to_string(&v)));
        }
    }
    out
}

/// The `k:` element of a keyed list's item (`None` when it lacks a key without default).
fn key_element(item: &Value, keys: &[String], item_schema: Option<Schema<'_>>) -> Option<String> {
    let m = item.as_object()?;
    let defaults = item_schema.and_then(|s| s.resolve().node.get("properties"));
    let mut key = Map::new();
    for k in keys {
        let v = m.get(k).or_else(|| {
            defaults
                .and_then(|p| p.get(k))
                .and_then(|f| f.get("default"))
        })?;
        key.insert(k.clone(), v.clone());
    }
    Some(format!("k:{}", Value::Object(key)))
}

/// The items of a list by their path element (`None`: the list is atomic).
fn elements<'v>(
    items: &'v [Value],
    schema: Option<Schema<'_>>,
) -> Option<Vec<(String, &'v Value)>> {
    let schema = schema?;
    match schema.relationship() {
        Relationship::Atomic => None,
        Relationship::Set => Some(items.iter().map(|v| (format!("v:{v}"), v)).collect()),
        Relationship::Keyed(keys) => items
            .iter()
            .map(|v| key_element(v, &keys, schema.items()).map(|k| (k, v)))
            .collect(),
    }
}

/// The children of a map to walk: skips `apiVersion`/`kind` at the top, untracked metadata,
/// and `status` when `skip_status`.
fn tracked<'v>(
    map: &'v Map<String, Value>,
    path: &[String],
    skip_status: bool,
) -> impl Iterator<Item = (&'v String, &'v Value)> + 'v {
    let top = path.is_empty();
    let in_metadata = path.len() == 1 && path[0] == "f:metadata";
    map.iter().filter(move |(k, _)| {
        !(top && (k.as_str() == "apiVersion" || k.as_str() == "kind"))
            && !(top && skip_status && k.as_str() == "status")
            && !(in_metadata && UNTRACKED_METADATA.contains(&k.as_str()))
    })
}

/// `x-kubernetes-map-type: atomic` (a `LabelSelector`, a `LocalObjectReference`...): owned and
/// compared as one leaf.
fn atomic_map(schema: Option<Schema<'_>>) -> bool {
    schema.is_some_and(|s| {
        let get =
            |n: &Value| n.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        get(s.node) || get(s.resolve().node)
    })
}

fn child(path: &[String], e: String) -> Path {
    let mut p = path.to_vec();
    p.push(e);
    p
}

impl FieldSet {
    /// The set of `v` (`TypedValue.ToFieldSet`): every leaf and every element of a keyed list
    /// or set; with `parents`, every map below the root too (how an added subtree is owned).
    pub fn of(v: &Value, schema: Option<Schema<'_>>, parents: bool, skip_status: bool) -> Self {
        let mut s = FieldSet::default();
        s.walk(v, schema, &[], parents, skip_status);
        s
    }

    fn walk(
        &mut self,
        v: &Value,
        schema: Option<Schema<'_>>,
        path: &[String],
        parents: bool,
        skip_status: bool,
    ) {
        match v {
            Value::Object(_) if atomic_map(schema) && !path.is_empty() => {
                self.0.insert(path.to_vec());
            }
            Value::Object(map) => {
                if parents && !path.is_empty() {
                    self.0.insert(path.to_vec());
                }
                for (k, c) in tracked(map, path, skip_status) {
                    let cs = schema.and_then(|s| s.property(k));
                    self.walk(c, cs, &child(path, format!("f:{k}")), parents, false);
                }
                if !parents && map.is_empty() && !path.is_empty() {
                    self.0.insert(path.to_vec());
                }
            }
            Value::Array(items) => match elements(items, schema) {
                None => {
                    self.0.insert(path.to_vec());
                }
                Some(els) => {
                    if parents {
                        self.0.insert(path.to_vec());
                    }
                    let item_schema = schema.and_then(|s| s.items());
                    for (e, item) in els {
                        let p = child(path, e);
                        self.0.insert(p.clone());
                        if let Value::Object(m) = item {
                            for (k, c) in m {
                                let cs = item_schema.and_then(|s| s.property(k));
                                self.walk(c, cs, &child(&p, format!("f:{k}")), parents, false);
                            }
                        }
                    }
                }
            },
            _ => {
                self.0.insert(path.to_vec());
            }
        }
    }

    /// `self − other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    /// Reads a `fieldsV1` object: a key whose node is empty or holds `.` is a member.
    pub fn from_fields_v1(v: &Value) -> Self {
        fn walk(node: &Value, path: &[String], out: &mut BTreeSet<Path>) {
            for (k, c) in node.as_object().into_iter().flatten() {
                if k == "." {
                    continue;
                }
                let p = child(path, k.clone());
                let empty = c.as_object().is_none_or(|m| m.is_empty());
                if empty || c.get(".").is_some() {
                    out.insert(p.clone());
                }
                walk(c, &p, out);
            }
        }
        let mut out = BTreeSet::new();
        walk(v, &[], &mut out);
        FieldSet(out)
    }

    /// The nested `fieldsV1` form.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for p in &self.0 {
            let mut node = &mut root;
            for e in p {
                node = node
                    .entry(e.clone())
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .expect("object");
            }
        }
        fn dots(node: &mut Map<String, Value>, path: &mut Path, set: &BTreeSet<Path>) {
            for (k, c) in node.iter_mut() {
                path.push(k.clone());
                let m = c.as_object_mut().expect("object");
                if !m.is_empty() && set.contains(path) {
                    m.insert(".".into(), Value::Object(Map::new()));
                }
                dots(m, path, set);
                path.pop();
            }
        }
        dots(&mut root, &mut Vec::new(), &self.0);
        Value::Object(root)
    }
}

/// Paths every built-in object holds even when empty: Go serializes a non-pointer struct field
/// always, and a list without `omitempty` as `null` (`containers`), so the server's empty "live
/// object" of a create has them and a create does not add them (they get no `.` in
/// `fieldsV1`; maps and pointer structs, such as `labels` and `rollingUpdate`, do).
const ZERO_STRUCTS: &[&[&str]] = &[
    &["f:metadata"],
    &["f:spec"],
    &["f:status"],
    &["f:spec", "f:template"],
    &["f:spec", "f:template", "f:metadata"],
    &["f:spec", "f:template", "f:spec"],
    &["f:spec", "f:strategy"],
    &["f:spec", "f:updateStrategy"],
    &["f:status", "f:loadBalancer"],
    &["f:spec", "f:containers"],
    &["f:spec", "f:template", "f:spec", "f:containers"],
];

fn zero_struct(path: &[String]) -> bool {
    ZERO_STRUCTS
        .iter()
        .any(|z| z.len() == path.len() && z.iter().zip(path).all(|(a, b)| a == b))
}

/// `old.Compare(new)`; `builtin`: a built-in kind, whose Go zero value holds
/// [`ZERO_STRUCTS`].
pub fn compare(
    old: &Value,
    new: &Value,
    schema: Option<Schema<'_>>,
    skip_status: bool,
    builtin: bool,
) -> Comparison {
    let mut c = Comparison::default();
    let cx = Cx {
        skip_status,
        builtin,
    };
    compare_at(old, new, schema, &[], cx, &mut c);
    c
}

#[derive(Clone, Copy)]
struct Cx {
    skip_status: bool,
    builtin: bool,
}

fn subtree(v: &Value, schema: Option<Schema<'_>>, path: &[String], into: &mut FieldSet) {
    let mut s = FieldSet::default();
    s.walk(v, schema, path, true, false);
    s.0.insert(path.to_vec());
    into.0.extend(s.0);
}

fn compare_at(
    old: &Value,
    new: &Value,
    schema: Option<Schema<'_>>,
    path: &[String],
    cx: Cx,
    c: &mut Comparison,
) {
    let empty = Value::Object(Map::new());
    match (old, new) {
        (Value::Object(_), Value::Object(_)) if atomic_map(schema) && !path.is_empty() => {
            if old != new {
                c.modified.0.insert(path.to_vec());
            }
        }
        (Value::Object(o), Value::Object(n)) => {
            for (k, nv) in tracked(n, path, cx.skip_status) {
                let cs = schema.and_then(|s| s.property(k));
                let p = child(path, format!("f:{k}"));
                match o.get(k) {
                    None if cx.builtin && nv.is_object() && zero_struct(&p) => {
                        compare_at(&empty, nv, cs, &p, cx, c)
                    }
                    None if cx.builtin && nv.is_array() && zero_struct(&p) => {
                        compare_at(&Value::Array(Vec::new()), nv, cs, &p, cx, c)
                    }
                    None => subtree(nv, cs, &p, &mut c.added),
                    Some(ov) => compare_at(ov, nv, cs, &p, cx, c),
                }
            }
            for (k, ov) in tracked(o, path, cx.skip_status) {
                if !n.contains_key(k) {
                    let cs = schema.and_then(|s| s.property(k));
                    subtree(ov, cs, &child(path, format!("f:{k}")), &mut c.removed);
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            let (Some(oe), Some(ne)) = (elements(o, schema), elements(n, schema)) else {
                if o != n {
                    c.modified.0.insert(path.to_vec());
                }
                return;
            };
            let item_schema = schema.and_then(|s| s.items());
            for (e, nv) in &ne {
                let p = child(path, e.clone());
                match oe.iter().find(|(k, _)| k == e) {
                    None => subtree(nv, item_schema, &p, &mut c.added),
                    Some((_, ov)) => {
                        if let (Value::Object(om), Value::Object(nm)) = (ov, nv) {
                            for (k, v) in nm {
                                let cs = item_schema.and_then(|s| s.property(k));
                                let fp = child(&p, format!("f:{k}"));
                                match om.get(k) {
                                    None => subtree(v, cs, &fp, &mut c.added),
                                    Some(o) => compare_at(o, v, cs, &fp, cx, c),
                                }
                            }
                            for (k, v) in om {
                                if !nm.contains_key(k) {
                                    let cs = item_schema.and_then(|s| s.property(k));
                                    subtree(v, cs, &child(&p, format!("f:{k}")), &mut c.removed);
                                }
                            }
                        }
                    }
                }
            }
            for (e, ov) in &oe {
                if !ne.iter().any(|(k, _)| k == e) {
                    subtree(ov, item_schema, &child(path, e.clone()), &mut c.removed);
                }
            }
        }
        (o, n) => {
            if o != n {
                if o.is_null() {
                    subtree(n, schema, path, &mut c.added);
                } else if n.is_null() {
                    subtree(o, schema, path, &mut c.removed);
                } else {
                    c.modified.0.insert(path.to_vec());
                }
            }
        }
    }
}
