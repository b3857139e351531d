//! Operations (`compute#operation`) returned by every mutation and served by globalOperations
//! zoneOperations and regionOperations (get, list, wait, delete).
//!
//! Per reference/gce-clients.md: names and selfLinks are unique and never change between the
//! mutation's response and later polls; `operationType` and `targetLink` (the affected
//! resource's selfLink) are always present (gcloud needs both); zonal operations carry `zone`, regional ones `region`.
//! An operation reads `PENDING` (no `startTime`), then `RUNNING`, then `DONE` ([`Phases`]: the
//! slow cloud's figures, or `--operation-latency-ms` of RUNNING); `wait` answers when it is DONE
//! or after [`WAIT_LIMIT`].

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::methods::{new_id, Mutation};
use crate::snapshot::ResourceKey;

/// Operations kept for polling; older ones are forgotten first.
pub const MAX_OPERATIONS: usize = 20_000;

/// The longest `operations.wait` blocks: "Waits for the specified Operation resource to return
/// as DONE or for the request to approach the 2 minute deadline ... and then returns the current
/// state of the operation, which might be DONE or still in progress" (Compute API v1 reference,
/// `globalOperations.wait`, `zoneOperations.wait`).
pub const WAIT_LIMIT: Duration = Duration::from_secs(120);

/// How long a new Operation stays in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    /// `PENDING` for this long after the call...
    pub pending: Duration,
    /// ...then `RUNNING` for this long, then `DONE`.
    pub running: Duration,
}

/// One recorded operation.
#[derive(Debug, Clone)]
pub struct OperationRecord {
    /// The DONE form of the operation.
    pub done: Value,
    /// When it starts RUNNING.
    pub started_at: Instant,
    /// When it becomes DONE.
    pub done_at: Instant,
}

impl OperationRecord {
    /// The operation as a client sees it now.
    pub fn view(&self, now: Instant) -> Value {
        if now >= self.done_at {
            return self.done.clone();
        }
        let mut v = self.done.clone();
        v["progress"] = json!(0);
        if let Some(o) = v.as_object_mut() {
            o.remove("endTime");
            if now < self.started_at {
                o.remove("startTime");
            }
        }
        v["status"] = json!(if now < self.started_at {
            "PENDING"
        } else {
            "RUNNING"
        });
        v
    }
}

/// All operations, by key (`projects/p/global/operations/name`).
#[derive(Debug, Default)]
pub struct Operations {
    ops: BTreeMap<ResourceKey, OperationRecord>,
    order: VecDeque<ResourceKey>,
    counter: u64,
}

impl Operations {
    /// Records the operation of `m` in `project`, going through `phases`; returns its current
    /// view.
    pub fn create(&mut self, base: &str, project: &str, m: &Mutation, phases: Phases) -> Value {
        self.counter += 1;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let name = format!(
            "operation-{now_ms}-{:013x}-{:08x}-{:08x}",
            self.counter,
            rand::random::<u32>(),
            rand::random::<u32>()
        );
        // A regional resource's operation is a regionOperation (its key has `regions/R/`).
        let region = match m.target.split('/').collect::<Vec<_>>().as_slice() {
            ["projects", _, "regions", r, ..] => Some(r.to_string()),
            _ => None,
        };
        let zone = m.zone.as_ref().filter(|_| region.is_none());
        let scope = match (&region, zone) {
            (Some(r), _) => format!("projects/{project}/regions/{r}"),
            (None, Some(z)) => format!("projects/{project}/zones/{z}"),
            (None, None) => format!("projects/{project}/global"),
        };
        let key = format!("{scope}/operations/{name}");
        let insert = chrono::Utc::now();
        let start = insert + chrono::Duration::from_std(phases.pending).unwrap_or_default();
        let end = start + chrono::Duration::from_std(phases.running).unwrap_or_default();
        let fmt = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
        };
        let mut done = json!({
            "kind": "compute#operation",
            "id": new_id().to_string(),
            "name": name,
            "operationType": m.op_type,
            "status": "DONE",
            "progress": 100,
            "targetLink": format!("{base}{}", m.target),
            "targetId": m.target_id.clone().unwrap_or_else(|| "0".into()),
            "user": "emulator@gce-emulator.local",
            "insertTime": fmt(insert),
            "startTime": fmt(start),
            "endTime": fmt(end),
            "selfLink": format!("{base}{key}"),
        });
        if let Some(z) = zone {
            done["zone"] = json!(format!("{base}projects/{project}/zones/{z}"));
        }
        if let Some(r) = &region {
            done["region"] = json!(format!("{base}projects/{project}/regions/{r}"));
        }
        let now = Instant::now();
        let rec = OperationRecord {
            done,
            started_at: now + phases.pending,
            done_at: now + phases.pending + phases.running,
        };
        let view = rec.view(Instant::now());
        self.ops.insert(key.clone(), rec);
        self.order.push_back(key);
        while self.order.len() > MAX_OPERATIONS {
            if let Some(old) = self.order.pop_front() {
                self.ops.remove(&old);
            }
        }
        view
    }

    /// The operation stored under `key`.
    pub fn get(&self, key: &str) -> Option<&OperationRecord> {
        self.ops.get(key)
    }

    /// Every operation whose key starts with `prefix`, viewed now, by key.
    pub fn list(&self, prefix: &str) -> Vec<Value> {
        let now = Instant::now();
        self.ops
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, r)| r.view(now))
            .collect()
    }

    /// Forgets an operation; false if unknown.
    pub fn delete(&mut self, key: &str) -> bool {
        self.order.retain(|k| k != key);
        self.ops.remove(key).is_some()
    }

    /// Forgets everything (admin reset).
    pub fn clear(&mut self) {
        self.ops.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_unique_and_run_for_the_latency() {
        let mut ops = Operations::default();
        let m = Mutation {
            op_type: "insert".into(),
            target: "projects/p/zones/us-central1-a/networkEndpointGroups/n".into(),
            zone: Some("us-central1-a".into()),
            target_id: None,
        };
        let hour = Duration::from_secs(3600);
        let running = Phases {
            pending: Duration::ZERO,
            running: hour,
        };
        let a = ops.create("http://h/compute/v1/", "p", &m, running);
        let b = ops.create("http://h/compute/v1/", "p", &m, Phases::default());
        assert_ne!(a["name"], b["name"]);
        assert_eq!(a["status"], "RUNNING");
        assert!(a["startTime"].is_string() && a["endTime"].is_null(), "{a}");
        assert_eq!(b["status"], "DONE");
        assert_eq!(
            b["zone"],
            "http://h/compute/v1/projects/p/zones/us-central1-a"
        );
        assert_eq!(
            b["targetLink"],
            "http://h/compute/v1/projects/p/zones/us-central1-a/networkEndpointGroups/n"
        );
        assert_eq!(
            ops.list("projects/p/zones/us-central1-a/operations/").len(),
            2
        );
    }

    #[test]
    fn an_operation_is_pending_then_running_then_done() {
        let mut ops = Operations::default();
        let m = Mutation {
            op_type: "insert".into(),
            target: "projects/p/global/urlMaps/u".into(),
            zone: None,
            target_id: None,
        };
        let phases = Phases {
            pending: Duration::from_secs(10),
            running: Duration::from_secs(20),
        };
        let first = ops.create("http://h/compute/v1/", "p", &m, phases);
        assert_eq!(first["status"], "PENDING");
        assert!(first["startTime"].is_null() && first["insertTime"].is_string());
        let key = format!(
            "projects/p/global/operations/{}",
            first["name"].as_str().unwrap()
        );
        let rec = ops.get(&key).unwrap();
        let at = |s: u64| rec.started_at - phases.pending + Duration::from_secs(s);
        assert_eq!(rec.view(at(9))["status"], "PENDING");
        assert_eq!(rec.view(at(10))["status"], "RUNNING");
        assert!(rec.view(at(10))["startTime"].is_string());
        assert_eq!(rec.view(at(29))["status"], "RUNNING");
        let done = rec.view(at(30));
        assert_eq!(
            (done["status"].as_str(), done["progress"].as_i64()),
            (Some("DONE"), Some(100))
        );
        assert!(done["endTime"].is_string());
    }
}
