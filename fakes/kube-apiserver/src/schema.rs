//! Navigation of OpenAPI v3 schemas for the strategic merge and apply logic: follows `$ref` and
//! single-element `allOf`, and reads the list metadata (`x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`).

use std::collections::HashMap;

use serde_json::Value;

/// A schema node together with the component table its `$ref`s point into.
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    /// The node (raw: may be a `$ref`).
    pub node: &'a Value,
    /// `components.schemas` by name.
    pub components: &'a HashMap<String, Value>,
}

/// How a list is merged.
#[derive(Debug, Clone, PartialEq)]
pub enum ListStrategy {
    /// Replace the whole list (atomic).
    Replace,
    /// Merge items by the value of this key.
    MergeByKey(String),
    /// Union of primitive values.
    Set,
}

/// How a list's elements are identified (server-side apply, `managedFields`).
#[derive(Debug, Clone, PartialEq)]
pub enum Relationship {
    /// Replaced as a whole.
    Atomic,
    /// Scalars identified by value.
    Set,
    /// Maps identified by these keys (sorted).
    Keyed(Vec<String>),
}

impl<'a> Schema<'a> {
    /// Follows `$ref` / `allOf: [{$ref}]`.
    pub fn resolve(self) -> Schema<'a> {
        let mut node = self.node;
        for _ in 0..16 {
            let r = node.get("$ref").or_else(|| {
                node.get("allOf")
                    .and_then(|a| a.as_array())
                    .filter(|a| a.len() == 1)
                    .and_then(|a| a[0].get("$ref"))
            });
            match r
                .and_then(Value::as_str)
                .and_then(|r| r.rsplit('/').next())
                .and_then(|n| self.components.get(n))
            {
                Some(target) => node = target,
                None => break,
            }
        }
        Schema {
            node,
            components: self.components,
        }
    }

    /// The raw schema of property `name`, or of `additionalProperties` for map types.
    pub fn property(self, name: &str) -> Option<Schema<'a>> {
        let r = self.resolve();
        let p = r
            .node
            .get("properties")
            .and_then(|p| p.get(name))
            .or_else(|| r.node.get("additionalProperties").filter(|a| a.is_object()))?;
        Some(Schema {
            node: p,
            components: self.components,
        })
    }

    /// The item schema of an array.
    pub fn items(self) -> Option<Schema<'a>> {
        let r = self.resolve();
        r.node.get("items").map(|i| Schema {
            node: i,
            components: self.components,
        })
    }

    /// The keys that identify an element of the list at this node, in the order
    /// structured-merge-diff names them in a path (sorted by name): `x-kubernetes-list-map-keys`
    /// of a `map` list (e.g. `containerPort, protocol` for container ports), else the
    /// `x-kubernetes-patch-merge-key` of a `merge` list; empty for atomic lists and sets.
    pub fn list_map_keys(self) -> Vec<String> {
        let raw = self.node;
        let resolved = self.resolve().node;
        let get = |k: &str| raw.get(k).or_else(|| resolved.get(k));
        let mut keys: Vec<String> = match get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|ks| {
                    ks.iter()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            _ => match self.list_strategy() {
                ListStrategy::MergeByKey(k) => vec![k],
                _ => Vec::new(),
            },
        };
        keys.sort();
        keys
    }

    /// How structured-merge-diff identifies the elements of the list at this node, as
    /// kube-openapi's schema conversion decides it (`x-kubernetes-list-type` first, then
    /// `x-kubernetes-patch-strategy: merge` with or without a merge key).
    pub fn relationship(self) -> Relationship {
        let raw = self.node;
        let resolved = self.resolve().node;
        let get = |k: &str| {
            raw.get(k)
                .or_else(|| resolved.get(k))
                .and_then(Value::as_str)
        };
        match get("x-kubernetes-list-type") {
            Some("map") => match self.list_map_keys() {
                keys if keys.is_empty() => Relationship::Set,
                keys => Relationship::Keyed(keys),
            },
            Some("set") => Relationship::Set,
            Some(_) => Relationship::Atomic,
            None => match get("x-kubernetes-patch-strategy") {
                Some(s) if s.split(',').any(|s| s == "merge") => {
                    match get("x-kubernetes-patch-merge-key") {
                        Some(_) => Relationship::Keyed(self.list_map_keys()),
                        None => Relationship::Set,
                    }
                }
                _ => Relationship::Atomic,
            },
        }
    }

    /// How the list at this node is merged by strategic merge patch and apply.
    pub fn list_strategy(self) -> ListStrategy {
        let raw = self.node;
        let resolved = self.resolve().node;
        let get = |k: &str| raw.get(k).or_else(|| resolved.get(k));
        let strategy = get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if strategy.split(',').any(|s| s == "merge") {
            return match get("x-kubernetes-patch-merge-key").and_then(Value::as_str) {
                Some(k) => ListStrategy::MergeByKey(k.to_string()),
                None => ListStrategy::Set,
            };
        }
        match get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => match get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .and_then(|k| k.first())
                .and_then(Value::as_str)
            {
                Some(k) => ListStrategy::MergeByKey(k.to_string()),
                None => ListStrategy::Replace,
            },
            Some("set") => ListStrategy::Set,
            _ => ListStrategy::Replace,
        }
    }
}
