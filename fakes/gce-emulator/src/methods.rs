//! The standard methods every collection shares: insert, get, delete, update (PUT), patch
//! (JSON merge patch, as the Compute reference says of every `patch`) and the custom verbs that
//! only set fields (`setUrlMap`, `setTarget`, `setLabels`, ...). Pure functions over [`State`]:
//! they validate everything first and write only when the whole request is valid, so a failed
//! request changes nothing.

use std::net::Ipv4Addr;

use serde_json::{json, Map, Value};

use crate::errors::ApiError;
use crate::resources::{self, collection_of_key, zones, Collection, Prepare, Scope};
use crate::snapshot::ResourceKey;
use crate::store::State;
use crate::validate::{self, Obj};

/// Which resource (or collection) a request addresses.
#[derive(Clone, Debug)]
pub struct Target {
    /// The collection.
    pub coll: &'static Collection,
    /// Project id from the path.
    pub project: String,
    /// Zone from the path (zonal collections), or region (regional collections).
    pub zone: Option<String>,
    /// Resource name from the path, when the request names one.
    pub name: Option<String>,
}

impl Target {
    /// The collection's key prefix: `projects/p/global/urlMaps/`.
    pub fn prefix(&self) -> String {
        match (&self.coll.scope, &self.zone) {
            (Scope::Zonal, Some(z)) => {
                format!("projects/{}/zones/{z}/{}/", self.project, self.coll.segment)
            }
            (Scope::Regional, Some(r)) => {
                format!(
                    "projects/{}/regions/{r}/{}/",
                    self.project, self.coll.segment
                )
            }
            (Scope::Project, _) => format!("projects/{}/{}/", self.project, self.coll.segment),
            _ => format!("projects/{}/global/{}/", self.project, self.coll.segment),
        }
    }

    /// The key of the named resource (`name` must be set).
    pub fn key(&self) -> ResourceKey {
        format!(
            "{}{}",
            self.prefix(),
            self.name.as_deref().unwrap_or_default()
        )
    }
}

/// A committed mutation: what the Operation reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation {
    /// `operationType`: `insert`, `delete`, `patch`, `update`, or the custom verb.
    pub op_type: String,
    /// Key of the affected resource (the Operation's `targetLink`).
    pub target: ResourceKey,
    /// Zone of a zonal operation.
    pub zone: Option<String>,
    /// `id` of the affected resource (`targetId`), when known before it was deleted.
    pub target_id: Option<String>,
}

pub use crate::store::{fingerprint, new_id, timestamp};

/// Parses a request body as a JSON object. Errors: 400 `parseError`.
pub fn parse_body(body: &[u8]) -> Result<Obj, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Obj::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::parse("Expected a JSON object at 'resource'.")),
        Err(e) => Err(ApiError::parse(&format!("{e}"))),
    }
}

/// `GET` one resource. Errors: 404.
pub fn get(state: &State, t: &Target) -> Result<Value, ApiError> {
    let key = t.key();
    state
        .resources
        .get(&key)
        .map(|v| v.as_ref().clone())
        .ok_or_else(|| ApiError::not_found(&key))
}

/// `insert`: validates `body` and stores the new resource. Errors: 400 (invalid fields or
/// references), 404 (missing references), 409 `alreadyExists`.
pub fn insert(
    state: &mut State,
    t: &Target,
    body: &[u8],
    range: (Ipv4Addr, u8),
) -> Result<Mutation, ApiError> {
    let mut obj = parse_body(body)?;
    let name = validate::req_str(&obj, "resource", "name")?.to_string();
    validate::check_name("resource.name", &name)?;
    check_zone(t)?;
    let t = Target {
        name: Some(name),
        ..t.clone()
    };
    let key = t.key();
    if state.resources.contains_key(&key) {
        return Err(ApiError::already_exists(&key));
    }
    for f in resources::output_only(t.coll)
        .iter()
        .chain(["fingerprint"].iter())
    {
        obj.remove(*f);
    }
    let value = build(state, &t, &key, obj, None, range)?;
    write(state, t.coll, key.clone(), value);
    Ok(Mutation {
        op_type: "insert".into(),
        target: key,
        zone: t.zone.clone(),
        target_id: None,
    })
}

/// `update` (PUT, `patch == false`: the body replaces the resource) or `patch` (JSON merge
/// patch onto the stored resource). A `fingerprint` in the body must match (412 otherwise).
pub fn update(
    state: &mut State,
    t: &Target,
    body: &[u8],
    patch: bool,
    range: (Ipv4Addr, u8),
) -> Result<Mutation, ApiError> {
    let key = t.key();
    let old = state
        .resources
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&key))?;
    let body = parse_body(body)?;
    if let Some(fp) = validate::opt_str(&body, "resource", "fingerprint")? {
        if t.coll.fingerprint && old.get("fingerprint").and_then(Value::as_str) != Some(fp) {
            return Err(ApiError::stale_fingerprint("fingerprint", &key));
        }
    }
    if let Some(n) = validate::opt_str(&body, "resource", "name")? {
        if Some(n) != t.name.as_deref() {
            return Err(ApiError::invalid_value(
                "resource.name",
                n,
                "The name of an existing resource cannot be changed.",
            ));
        }
    }
    let mut obj = if patch {
        let mut merged = old.as_ref().clone();
        merge_patch(&mut merged, &Value::Object(body));
        merged.as_object().cloned().unwrap_or_default()
    } else {
        body
    };
    obj.insert(
        "name".into(),
        Value::String(t.name.clone().unwrap_or_default()),
    );
    for f in resources::output_only(t.coll)
        .iter()
        .chain(["fingerprint"].iter())
    {
        obj.remove(*f);
    }
    let value = build(state, t, &key, obj, Some(&old), range)?;
    write(state, t.coll, key.clone(), value);
    Ok(Mutation {
        op_type: if patch { "patch" } else { "update" }.into(),
        target: key,
        zone: t.zone.clone(),
        target_id: None,
    })
}

/// A custom verb that sets fields (see [`resources::setter`]): copies `fields` from the body
/// onto the resource and validates the result. `setLabels` checks `labelFingerprint` (412).
pub fn set_fields(
    state: &mut State,
    t: &Target,
    verb: &str,
    fields: &[&str],
    body: &[u8],
    range: (Ipv4Addr, u8),
) -> Result<Mutation, ApiError> {
    let key = t.key();
    let old = state
        .resources
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&key))?;
    let body = parse_body(body)?;
    if verb == "setLabels" {
        let sent = validate::opt_str(&body, "", "labelFingerprint")?;
        if sent.is_some() && sent != old.get("labelFingerprint").and_then(Value::as_str) {
            return Err(ApiError::stale_fingerprint("labelFingerprint", &key));
        }
    }
    let mut obj = old.as_object().cloned().unwrap_or_default();
    for f in fields {
        match body.get(*f) {
            None | Some(Value::Null) => {
                obj.remove(*f);
            }
            Some(v) => {
                obj.insert(f.to_string(), v.clone());
            }
        }
    }
    for f in resources::output_only(t.coll)
        .iter()
        .chain(["fingerprint"].iter())
    {
        obj.remove(*f);
    }
    let value = build(state, t, &key, obj, Some(&old), range)?;
    write(state, t.coll, key.clone(), value);
    Ok(Mutation {
        op_type: verb.to_string(),
        target: key,
        zone: t.zone.clone(),
        target_id: None,
    })
}

/// `delete`. Errors: 404; 400 `resourceInUseByAnotherResource` naming the first user.
pub fn delete(state: &mut State, t: &Target) -> Result<Mutation, ApiError> {
    let key = t.key();
    let old = state
        .resources
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&key))?;
    if let Some(user) = state.referrers(&key).next() {
        return Err(ApiError::in_use(&key, user));
    }
    if t.coll.segment == "addresses" {
        if let Some(ip) = old
            .get("address")
            .and_then(Value::as_str)
            .and_then(|a| a.parse().ok())
        {
            if let Some(user) = state
                .ip_owners(ip)
                .find(|k| k.contains("/forwardingRules/"))
            {
                return Err(ApiError::in_use(&key, user));
            }
        }
    }
    state.remove(&key);
    after_write(state, t.coll, &key, Some(&old));
    Ok(Mutation {
        op_type: "delete".into(),
        target: key,
        zone: t.zone.clone(),
        target_id: old.get("id").and_then(Value::as_str).map(str::to_string),
    })
}

fn check_zone(t: &Target) -> Result<(), ApiError> {
    match (&t.coll.scope, &t.zone) {
        (Scope::Zonal, Some(z)) if !zones::exists(z) => Err(ApiError::not_found(&format!(
            "projects/{}/zones/{z}",
            t.project
        ))),
        _ => Ok(()),
    }
}

/// Validates the resource, then stamps the server-owned fields.
fn build(
    state: &State,
    t: &Target,
    key: &str,
    mut obj: Obj,
    old: Option<&Value>,
    range: (Ipv4Addr, u8),
) -> Result<Value, ApiError> {
    let cx = Prepare {
        state,
        project: &t.project,
        zone: t.zone.as_deref(),
        key,
        old,
        address_range: range,
    };
    resources::prepare(t.coll, &cx, &mut obj)?;
    obj.insert("kind".into(), json!(t.coll.kind));
    let id = old
        .and_then(|o| o.get("id"))
        .cloned()
        .unwrap_or_else(|| json!(new_id().to_string()));
    obj.insert("id".into(), id);
    let created = old
        .and_then(|o| o.get("creationTimestamp"))
        .cloned()
        .unwrap_or_else(|| json!(timestamp()));
    obj.insert("creationTimestamp".into(), created);
    obj.insert("selfLink".into(), json!(cx.url(key)));
    if let (Scope::Zonal, Some(z)) = (t.coll.scope, &t.zone) {
        obj.insert(
            "zone".into(),
            json!(cx.url(&format!("projects/{}/zones/{z}", t.project))),
        );
    }
    if t.coll.label_fingerprint {
        let labels = obj.get("labels").cloned().unwrap_or_else(|| json!({}));
        obj.insert("labelFingerprint".into(), json!(fingerprint(&labels)));
    }
    if t.coll.fingerprint {
        let fp = fingerprint(&Value::Object(obj.clone()));
        obj.insert("fingerprint".into(), json!(fp));
    }
    Ok(Value::Object(obj))
}

/// Stores a validated resource and keeps derived fields of other resources current.
fn write(state: &mut State, coll: &Collection, key: ResourceKey, mut value: Value) {
    let old = state.resources.get(&key).cloned();
    // Private keys go to the snapshot for the data plane, never into the served resource.
    if let Some(Value::String(pem)) = value.as_object_mut().and_then(|o| o.remove("privateKey")) {
        state.private_keys.insert(key.clone(), pem);
    }
    state.put(key.clone(), value);
    after_write(state, coll, &key, old.as_deref());
}

/// Replaces the stored resource `t` with `obj` (a whole resource as a custom verb computed
/// it, e.g. `instances.setTags`), validating it like an update; the Operation's type is
/// `verb`.
pub fn rewrite(
    state: &mut State,
    t: &Target,
    verb: &str,
    mut obj: Obj,
    range: (Ipv4Addr, u8),
) -> Result<Mutation, ApiError> {
    let key = t.key();
    let old = state
        .resources
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&key))?;
    for f in resources::output_only(t.coll)
        .iter()
        .chain(["fingerprint"].iter())
    {
        obj.remove(*f);
    }
    let value = build(state, t, &key, obj, Some(&old), range)?;
    write(state, t.coll, key.clone(), value);
    Ok(Mutation {
        op_type: verb.to_string(),
        target: key,
        zone: t.zone.clone(),
        target_id: None,
    })
}

/// Derived state: NEG endpoint lists, global addresses' `status`/`users`, the NEG endpoints
/// of a deleted instance, and the firewall rules of a new `default` network.
fn after_write(state: &mut State, coll: &Collection, key: &str, old: Option<&Value>) {
    match coll.segment {
        "instances" if !state.resources.contains_key(key) => {
            resources::instances::forget_endpoints(state, key);
        }
        // A new `default` network comes with the default network's four rules, as a
        // project's first one does (resources/firewalls.rs `default_rules`).
        "networks" if old.is_none() && resources::name_of(key) == "default" => {
            let project = key.split('/').nth(1).unwrap_or_default().to_string();
            let base = state.base.clone();
            for (k, v) in resources::default_network::firewall_rules(&base, &project) {
                if !state.resources.contains_key(&k) {
                    state.put(k, v);
                }
            }
        }
        "networkEndpointGroups" if state.resources.contains_key(key) => {
            state.neg_endpoints.entry(key.to_string()).or_default();
        }
        // A new address may promote an IP forwarding rules already use (status IN_USE at once);
        // a deleted one frees nothing else.
        "addresses" => {
            if let Some(ip) = state
                .resources
                .get(key)
                .and_then(|v| v.get("address"))
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
            {
                refresh_address_users(state, ip);
            }
        }
        "forwardingRules" => {
            let mut ips: Vec<Ipv4Addr> = Vec::new();
            for v in [old, state.resources.get(key).map(|v| v.as_ref())]
                .into_iter()
                .flatten()
            {
                if let Some(ip) = v
                    .get("IPAddress")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                {
                    ips.push(ip);
                }
            }
            for ip in ips {
                refresh_address_users(state, ip);
            }
        }
        _ => {}
    }
}

/// Sets `users` and `status` (`IN_USE`/`RESERVED`) of the global addresses holding `ip`.
pub fn refresh_address_users(state: &mut State, ip: Ipv4Addr) {
    let owners: Vec<ResourceKey> = state.ip_owners(ip).cloned().collect();
    let users: Vec<Value> = owners
        .iter()
        .filter(|k| k.contains("/forwardingRules/"))
        .map(|k| json!(format!("{}{k}", state.base)))
        .collect();
    for addr in owners.iter().filter(|k| k.contains("/addresses/")) {
        let Some(mut v) = state.resources.get(addr).map(|v| v.as_ref().clone()) else {
            continue;
        };
        if users.is_empty() {
            v.as_object_mut().map(|o| o.remove("users"));
            v["status"] = json!("RESERVED");
        } else {
            v["users"] = json!(users);
            v["status"] = json!("IN_USE");
        }
        if state.resources.get(addr).map(|x| x.as_ref()) != Some(&v) {
            state.put(addr.clone(), v);
        }
    }
}

/// RFC 7396 JSON merge patch: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The collection of a stored key; used by code that walks references.
pub fn kind_of(key: &str) -> Option<&'static str> {
    collection_of_key(key).map(|c| c.segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc7396() {
        let mut t = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": null, "b": {"c": 5}, "l": [3]}));
        assert_eq!(t, json!({"b": {"c": 5, "d": 3}, "l": [3]}));
    }

    #[test]
    fn fingerprint_ignores_key_order_but_not_values() {
        let a = fingerprint(&json!({"x": 1, "y": [1, 2]}));
        let b = fingerprint(&serde_json::from_str::<Value>(r#"{"y":[1,2],"x":1}"#).unwrap());
        assert_eq!(a, b);
        assert_ne!(a, fingerprint(&json!({"x": 2, "y": [1, 2]})));
        assert_eq!(a.len(), 12);
    }

    #[test]
    fn ids_are_distinct() {
        assert_ne!(new_id(), new_id());
    }
}
