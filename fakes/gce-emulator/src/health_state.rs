//! Health states of network endpoints as seen by each backend service, shared between the
//! health checker (data plane, the only writer) and the API methods that report health:
//! `backendServices.getHealth` and `networkEndpointGroups.listNetworkEndpoints` with
//! `healthStatus: SHOW` (control plane, readers).
//!
//! Health is per (backend service, endpoint) because each backend service names its own health
//! check, as in the Compute API: the same endpoint may be HEALTHY for one backend service and
//! UNHEALTHY for another.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::snapshot::ResourceKey;

/// What one health state is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HealthKey {
    /// The backend service whose health check produced the state.
    pub backend_service: ResourceKey,
    /// The network endpoint group holding the endpoint.
    pub neg: ResourceKey,
    /// Endpoint IP address.
    pub ip_address: String,
    /// Endpoint port.
    pub port: u16,
}

/// `healthState` values of the Compute API (`HealthStatusForNetworkEndpoint.healthState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthState {
    Healthy,
    Unhealthy,
    Draining,
    Unknown,
}

impl HealthState {
    /// The wire value: `HEALTHY`, `UNHEALTHY`, `DRAINING` or `UNKNOWN`.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "HEALTHY",
            HealthState::Unhealthy => "UNHEALTHY",
            HealthState::Draining => "DRAINING",
            HealthState::Unknown => "UNKNOWN",
        }
    }
}

/// The table of current health states. Entries absent from the table read as `UNKNOWN`
/// (an endpoint that was never probed), except that a backend service without a health check
/// reports nothing, as the real API does.
#[derive(Debug, Default)]
pub struct HealthTable {
    states: RwLock<HashMap<HealthKey, HealthState>>,
}

impl HealthTable {
    /// Records the state for `key`.
    pub fn set(&self, key: HealthKey, state: HealthState) {
        self.states
            .write()
            .expect("health table poisoned")
            .insert(key, state);
    }

    /// The state for `key`, or `None` if it was never recorded.
    pub fn get(&self, key: &HealthKey) -> Option<HealthState> {
        self.states
            .read()
            .expect("health table poisoned")
            .get(key)
            .copied()
    }

    /// Keeps only the entries for which `keep` returns true (used when endpoints are detached
    /// or backend services deleted).
    pub fn retain(&self, mut keep: impl FnMut(&HealthKey) -> bool) {
        self.states
            .write()
            .expect("health table poisoned")
            .retain(|k, _| keep(k));
    }

    /// Every recorded (key, state), sorted by key.
    pub fn entries(&self) -> Vec<(HealthKey, HealthState)> {
        let mut v: Vec<_> = self
            .states
            .read()
            .expect("health table poisoned")
            .iter()
            .map(|(k, s)| (k.clone(), *s))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}
