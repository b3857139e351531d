//! The seam between the emulator's control plane (REST API and resource store) and its data
//! plane (listeners, URL map routing, health checking).
//!
//! The control plane publishes an immutable [`Snapshot`] after every committed mutation through a
//! `tokio::sync::watch` channel; the data plane compiles each new snapshot into its routing tables
//! and never mutates resources itself. Resources are kept in their wire JSON form (exactly what a
//! `GET` returns, as documented by the Compute Engine API v1 reference), so both halves read the
//! same public field names and no private mirror of the API types is needed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// Key of a stored resource: its path from `projects/` on, without scheme, host or
/// `/compute/v1/` prefix. Examples: `projects/p1/global/urlMaps/um1`,
/// `projects/p1/zones/us-central1-a/networkEndpointGroups/neg1`.
pub type ResourceKey = String;

/// One network endpoint attached to a zonal `GCE_VM_IP_PORT` network endpoint group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NetworkEndpoint {
    /// IPv4 address of the endpoint (on this machine always in 127.0.0.0/8).
    pub ip_address: String,
    /// TCP port of the endpoint (the NEG's `defaultPort` when the request omitted it).
    pub port: u16,
    /// Name of the VM instance, when the client sent one.
    pub instance: Option<String>,
}

/// A consistent view of every project's resources at one point in time.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Bumped by one on every committed mutation.
    pub version: u64,
    /// Every resource as its wire JSON, keyed by [`ResourceKey`]. References inside resources
    /// (for example `urlMap.defaultService`) are stored normalised as full URLs built from the
    /// emulator's public base URL; use [`key_from_url`] to turn them into keys.
    pub resources: BTreeMap<ResourceKey, Arc<Value>>,
    /// Endpoints attached to each network endpoint group, keyed by the NEG's [`ResourceKey`].
    pub neg_endpoints: BTreeMap<ResourceKey, Vec<NetworkEndpoint>>,
    /// PEM private keys of sslCertificates (SELF_MANAGED keys as inserted, MANAGED keys issued by
    /// the local CA once ACTIVE), keyed by the certificate's [`ResourceKey`]. Never served by the API.
    pub private_keys: BTreeMap<ResourceKey, String>,
}

impl Snapshot {
    /// The resource stored under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.resources.get(key).map(|v| v.as_ref())
    }

    /// Resolves a reference in any form clients send (full URL with any host,
    /// `projects/p/global/...`) to the resource it names, if it exists.
    pub fn resolve(&self, reference: &str) -> Option<&Value> {
        key_from_url(reference).and_then(|k| self.get(&k))
    }
}

/// Turns a resource reference into a [`ResourceKey`].
///
/// Accepts `https://compute.googleapis.com/compute/v1/projects/p/global/x/n`, the same with any
/// scheme and host, `/compute/v1/projects/...`, `projects/p/...`. Returns `None` for a string
/// with no `projects/` segment (relative forms like `global/x/n` need a project: see
/// [`key_in_project`]).
pub fn key_from_url(reference: &str) -> Option<ResourceKey> {
    let reference = reference.split(['?', '#']).next().unwrap_or_default();
    let start = if reference.starts_with("projects/") {
        0
    } else {
        reference.find("/projects/")? + 1
    };
    let key = reference[start..].trim_end_matches('/');
    (key.split('/').count() >= 3).then(|| key.to_string())
}

/// Like [`key_from_url`], but also accepts project-relative forms (`global/backendServices/b`,
/// `zones/z/networkEndpointGroups/n`) by prefixing `projects/{project}/`.
pub fn key_in_project(project: &str, reference: &str) -> Option<ResourceKey> {
    key_from_url(reference).or_else(|| {
        let r = reference.trim_start_matches('/');
        (r.starts_with("global/") || r.starts_with("zones/") || r.starts_with("regions/"))
            .then(|| format!("projects/{project}/{}", r.trim_end_matches('/')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_every_reference_form() {
        let want = Some("projects/p1/global/backendServices/bs1".to_string());
        assert_eq!(
            key_from_url(
                "https://compute.googleapis.com/compute/v1/projects/p1/global/backendServices/bs1"
            ),
            want
        );
        assert_eq!(
            key_from_url("http://127.0.0.1:9/compute/v1/projects/p1/global/backendServices/bs1"),
            want
        );
        assert_eq!(key_from_url("projects/p1/global/backendServices/bs1"), want);
        assert_eq!(key_from_url("global/backendServices/bs1"), None);
        assert_eq!(key_in_project("p1", "global/backendServices/bs1"), want);
        assert_eq!(key_in_project("p1", "bs1"), None);
    }
}
