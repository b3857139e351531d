//! Per-method call counters (admin API `GET /_emulator/calls`), split into mutating and reading
//! calls, so tests can prove that a no-op resync sends no mutating call; and, per NEG endpoint,
//! how many times it was attached and detached, so tests can prove that an endpoint was never
//! detached (issue 40).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};

/// Verbs that never change anything.
const READING_VERBS: &[&str] = &[
    "get",
    "list",
    "aggregatedList",
    "getHealth",
    "listNetworkEndpoints",
    "wait",
    "validate",
    "getRule",
    "getXpnHost",
    "getXpnResources",
    "listXpnHosts",
];

/// Whether a method id (`compute.backendServices.getHealth`) only reads.
pub fn is_reading(method: &str) -> bool {
    method
        .rsplit('.')
        .next()
        .is_some_and(|verb| READING_VERBS.contains(&verb))
}

/// Counts of calls by method id.
#[derive(Debug, Default)]
pub struct Calls {
    counts: Mutex<BTreeMap<String, u64>>,
    /// `verb -> "ip:port" -> count` for `attachNetworkEndpoints` and `detachNetworkEndpoints`.
    endpoints: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

impl Calls {
    /// Counts one call.
    pub fn record(&self, method: &str) {
        *self
            .counts
            .lock()
            .expect("calls poisoned")
            .entry(method.to_string())
            .or_default() += 1;
    }

    /// Counts the endpoints (`"ip:port"`) one successful `attachNetworkEndpoints` or
    /// `detachNetworkEndpoints` call (`verb`) carried.
    pub fn record_endpoints<'a>(
        &self,
        verb: &str,
        endpoints: impl IntoIterator<Item = (&'a str, u16)>,
    ) {
        let mut g = self.endpoints.lock().expect("calls poisoned");
        let counts = g.entry(verb.to_string()).or_default();
        for (ip, port) in endpoints {
            *counts.entry(format!("{ip}:{port}")).or_default() += 1;
        }
    }

    /// `{"methods":{"compute.urlMaps.get":3,...},"mutating":N,"reading":N,"total":N,
    /// "networkEndpoints":{"detachNetworkEndpoints":{"10.0.0.9:8080":1},...}}`.
    pub fn to_json(&self) -> Value {
        let endpoints = self.endpoints.lock().expect("calls poisoned").clone();
        let g = self.counts.lock().expect("calls poisoned");
        let (mut m, mut r) = (0u64, 0u64);
        for (k, v) in g.iter() {
            if is_reading(k) {
                r += v
            } else {
                m += v
            }
        }
        json!({"methods": *g, "mutating": m, "reading": r, "total": m + r, "networkEndpoints": endpoints})
    }

    /// Zeroes every counter.
    pub fn reset(&self) {
        self.counts.lock().expect("calls poisoned").clear();
        self.endpoints.lock().expect("calls poisoned").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_are_told_apart() {
        let c = Calls::default();
        for m in [
            "compute.urlMaps.get",
            "compute.globalOperations.wait",
            "compute.backendServices.aggregatedList",
            "compute.networkEndpointGroups.listNetworkEndpoints",
            "compute.urlMaps.patch",
            "compute.networkEndpointGroups.attachNetworkEndpoints",
        ] {
            c.record(m);
        }
        let v = c.to_json();
        assert_eq!(v["reading"], 4);
        assert_eq!(v["mutating"], 2);
        assert_eq!(v["methods"]["compute.urlMaps.get"], 1);
    }

    #[test]
    fn endpoints_are_counted_per_verb_and_reset() {
        let c = Calls::default();
        c.record_endpoints(
            "detachNetworkEndpoints",
            [("10.0.0.9", 8080), ("10.0.0.8", 8080)],
        );
        c.record_endpoints("detachNetworkEndpoints", [("10.0.0.9", 8080)]);
        c.record_endpoints("attachNetworkEndpoints", [("10.0.0.9", 8080)]);
        let v = c.to_json();
        assert_eq!(
            v["networkEndpoints"]["detachNetworkEndpoints"]["10.0.0.9:8080"],
            2
        );
        assert_eq!(
            v["networkEndpoints"]["detachNetworkEndpoints"]["10.0.0.8:8080"],
            1
        );
        assert_eq!(
            v["networkEndpoints"]["attachNetworkEndpoints"]["10.0.0.9:8080"],
            1
        );
        c.reset();
        assert_eq!(c.to_json()["networkEndpoints"], json!({}));
    }
}
