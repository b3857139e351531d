//! The resource store: every project's resources as wire JSON, with the indexes the API needs
//! (who references whom, which IP addresses are taken), plus the ids, timestamps and fingerprints every
//! resource gets. Pure data at the bottom of the control plane: it imports no method or
//! resource module; locking and publishing are the emulator's job (see `emulator/`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::snapshot::{NetworkEndpoint, ResourceKey, Snapshot};

/// Fields whose URLs are not references that pin another resource.
const NOT_REFERENCES: &[&str] = &["selfLink", "users", "zone", "region", "kind", "targetLink"];

static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new resource id: a random 63-bit number (decimal string on the wire), never repeated
/// within one process.
pub fn new_id() -> u64 {
    let r: u64 = rand::random::<u64>() >> 12;
    (r << 11 | (ID_COUNTER.fetch_add(1, Ordering::Relaxed) & 0x7ff)) | 1 << 62
}

/// Now as RFC 3339 with milliseconds, as `creationTimestamp` and Operation times are written.
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
}

/// Fingerprint of a JSON value: URL-safe base64 (as the real API and the Rust client, which
/// decodes it as `bytes`, use) of the first 8 bytes of SHA-256 over its canonical
/// (key-sorted) serialisation, the same length as the real API's fingerprints.
pub fn fingerprint(v: &Value) -> String {
    fn canon(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push(b'{');
                for k in keys {
                    out.extend_from_slice(k.as_bytes());
                    out.push(b':');
                    canon(&m[k], out);
                    out.push(b',');
                }
                out.push(b'}');
            }
            Value::Array(a) => {
                out.push(b'[');
                for x in a {
                    canon(x, out);
                    out.push(b',');
                }
                out.push(b']');
            }
            other => out.extend_from_slice(other.to_string().as_bytes()),
        }
    }
    let mut bytes = Vec::new();
    canon(v, &mut bytes);
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(&bytes);
    base64::engine::general_purpose::URL_SAFE.encode(&digest[..8])
}

/// The mutable state of the emulator.
#[derive(Debug, Default)]
pub struct State {
    /// Public API base, `http://127.0.0.1:PORT/compute/v1/`; stored references start with it.
    pub base: String,
    /// Resources by key.
    pub resources: BTreeMap<ResourceKey, Arc<Value>>,
    /// Endpoints of each NEG.
    pub neg_endpoints: BTreeMap<ResourceKey, Vec<NetworkEndpoint>>,
    /// Private keys of sslCertificates (never served).
    pub private_keys: BTreeMap<ResourceKey, String>,
    /// Bumped on every committed mutation.
    pub version: u64,
    /// key -> the keys that reference it.
    referrers: HashMap<ResourceKey, BTreeSet<ResourceKey>>,
    /// key -> the keys it references.
    references: HashMap<ResourceKey, Vec<ResourceKey>>,
    /// IPv4 address -> the addresses and forwarding rules using it.
    ip_owners: HashMap<Ipv4Addr, BTreeSet<ResourceKey>>,
    /// Projects that have been set up (default network, project resource).
    projects: HashSet<String>,
    /// Private (RFC 1918) ranges instances may take addresses from besides loopback
    /// (`--private-ranges`, [`crate::network::ranges`]); copied from the emulator's `Config`
    /// when it starts, never persisted.
    pub private_ranges: Vec<(Ipv4Addr, u8)>,
}

impl State {
    /// An empty store whose references are built from `base`.
    pub fn new(base: String) -> State {
        State {
            base,
            ..State::default()
        }
    }

    /// Records that `project` has been set up (its `default` network and project resource,
    /// see `resources::projects::ensure`). Returns true the first time.
    pub fn mark_project(&mut self, project: &str) -> bool {
        self.projects.insert(project.to_string())
    }

    /// Stores `value` under `key`, updating the reference and address indexes.
    pub fn put(&mut self, key: ResourceKey, value: Value) {
        self.unindex(&key);
        let refs = self.extract_references(&key, &value);
        for r in &refs {
            self.referrers
                .entry(r.clone())
                .or_default()
                .insert(key.clone());
        }
        self.references.insert(key.clone(), refs);
        if let Some(ip) = owned_ip(&key, &value) {
            self.ip_owners.entry(ip).or_default().insert(key.clone());
        }
        self.resources.insert(key, Arc::new(value));
    }

    /// Removes `key` (and its NEG endpoints and private key) from the store.
    pub fn remove(&mut self, key: &str) -> Option<Arc<Value>> {
        self.unindex(key);
        self.references.remove(key);
        self.neg_endpoints.remove(key);
        self.private_keys.remove(key);
        self.resources.remove(key)
    }

    fn unindex(&mut self, key: &str) {
        if let Some(old) = self.references.get(key) {
            for r in old {
                if let Some(set) = self.referrers.get_mut(r) {
                    set.remove(key);
                    if set.is_empty() {
                        self.referrers.remove(r);
                    }
                }
            }
        }
        if let Some(old) = self.resources.get(key).cloned() {
            if let Some(ip) = owned_ip(key, &old) {
                if let Some(set) = self.ip_owners.get_mut(&ip) {
                    set.remove(key);
                    if set.is_empty() {
                        self.ip_owners.remove(&ip);
                    }
                }
            }
        }
    }

    /// The resources that reference `key`, sorted.
    pub fn referrers(&self, key: &str) -> impl Iterator<Item = &ResourceKey> {
        self.referrers.get(key).into_iter().flatten()
    }

    /// The keys `key` references.
    pub fn references_of(&self, key: &str) -> &[ResourceKey] {
        self.references
            .get(key)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The resources and forwarding rules holding `ip`.
    pub fn ip_owners(&self, ip: Ipv4Addr) -> impl Iterator<Item = &ResourceKey> {
        self.ip_owners.get(&ip).into_iter().flatten()
    }

    /// Every resource whose key starts with `prefix` (a collection: `projects/p/global/urlMaps/`), by key.
    pub fn scan<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a ResourceKey, &'a Arc<Value>)> + 'a {
        self.resources
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Every reference inside `value` to a resource of this emulator (full URLs under `base`).
    fn extract_references(&self, key: &str, value: &Value) -> Vec<ResourceKey> {
        let mut out = BTreeSet::new();
        walk_refs(&self.base, value, &mut out);
        out.remove(key);
        out.into_iter().collect()
    }

    /// A consistent snapshot for the data plane.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: self.version,
            resources: self.resources.clone(),
            neg_endpoints: self.neg_endpoints.clone(),
            private_keys: self.private_keys.clone(),
        }
    }

    /// Empties the store (admin reset); projects get their default network again on next use.
    pub fn clear(&mut self) {
        let base = std::mem::take(&mut self.base);
        let version = self.version + 1;
        *self = State::new(base);
        self.version = version;
    }
}

fn walk_refs(base: &str, v: &Value, out: &mut BTreeSet<ResourceKey>) {
    match v {
        Value::String(s) => {
            if let Some(rest) = s.strip_prefix(base) {
                if rest.starts_with("projects/") {
                    out.insert(rest.to_string());
                }
            } else if let Some(key) = network_services_ref(s) {
                out.insert(key);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| walk_refs(base, x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                if !NOT_REFERENCES.contains(&k.as_str()) {
                    walk_refs(base, x, out);
                }
            }
        }
        _ => {}
    }
}

/// A Network Services reference to a Compute resource, in the form that API uses
/// (`projects/p/locations/global/backendServices/b`, `.../targetTcpProxies/t`; Network Services
/// API v1 reference, `TlsRoute.rules[].action.destinations[].serviceName` and `targetProxies`),
/// as the Compute key it pins (`projects/p/global/backendServices/b`), so that a backend
/// service or proxy a tlsRoute uses cannot be deleted.
fn network_services_ref(s: &str) -> Option<ResourceKey> {
    let parts: Vec<&str> = s.split('/').collect();
    match parts.as_slice() {
        ["projects", p, "locations", "global", coll @ ("backendServices" | "targetTcpProxies"), name] => {
            Some(format!("projects/{p}/global/{coll}/{name}"))
        }
        _ => None,
    }
}

/// The IPv4 address a global address or forwarding rule holds.
fn owned_ip(key: &str, value: &Value) -> Option<Ipv4Addr> {
    let field = if key.contains("/addresses/") {
        "address"
    } else if key.contains("/forwardingRules/") {
        "IPAddress"
    } else {
        return None;
    };
    value.get(field)?.as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_index_follows_puts_and_removes() {
        let base = "http://h/compute/v1/".to_string();
        let mut s = State::new(base.clone());
        s.put(
            "projects/p/global/healthChecks/hc".into(),
            json!({"name": "hc"}),
        );
        s.put(
            "projects/p/global/backendServices/bs".into(),
            json!({"healthChecks": [format!("{base}projects/p/global/healthChecks/hc")], "selfLink": format!("{base}projects/p/global/backendServices/bs")}),
        );
        let users: Vec<_> = s
            .referrers("projects/p/global/healthChecks/hc")
            .cloned()
            .collect();
        assert_eq!(
            users,
            vec!["projects/p/global/backendServices/bs".to_string()]
        );
        s.put(
            "projects/p/global/backendServices/bs".into(),
            json!({"healthChecks": []}),
        );
        assert_eq!(s.referrers("projects/p/global/healthChecks/hc").count(), 0);
        assert_eq!(s.scan("projects/p/global/healthChecks/").count(), 1);
    }
}
