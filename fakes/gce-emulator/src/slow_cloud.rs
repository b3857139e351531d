//! The slow cloud: the emulator answering about as slowly as Google's Compute API, so clients
//! can be measured on the emulator as users will feel them in the cloud (`--slow-cloud`, admin
//! API `/_emulator/slow-cloud`; docs/performance.md, "The slow cloud", lists the figures and
//! their sources).
//!
//! Three effects, each off while its figures are zero:
//! - **latency per method family** ([`Family`]): every API call waits this long before it is
//!   handled (the request's trip through Google's front end and the API server);
//! - **Operations that take time**: a mutation's Operation reads `PENDING`, then `RUNNING`,
//!   then `DONE`, global ones longer than zonal ones ([`OperationTimes`]); `operations.wait`
//!   answers when the Operation is DONE or after [`crate::operations::WAIT_LIMIT`], as the API
//!   documents;
//! - **a per-project rate quota** ([`Quota`]): past so many writes (mutations) or reads a
//!   second, a call is refused with `rateLimitExceeded` (403 by default, the code Compute's rate
//!   quotas answer with; 429 on request) and changes nothing. Google counts per-minute windows
//!   that refill at the start of the next minute (Compute Engine rate quotas page); the emulator
//!   uses a token bucket of one second's worth instead, so a benchmark's result does not depend
//!   on where in the minute it starts. Operation `get`/`wait` calls count as reads.
//!
//! The data plane is not slowed down: a resource serves traffic as soon as its mutation is
//! committed (Google's load balancers take minutes to propagate; measuring that is not the point).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::calls::is_reading;
use crate::errors::ApiError;

/// What kind of call a method is, for its latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `get`, `getHealth`, and the other reading verbs that are not lists.
    Get,
    /// `list`, `listNetworkEndpoints`.
    List,
    /// `aggregatedList`.
    AggregatedList,
    /// `insert`.
    Insert,
    /// `update`, `patch`.
    Update,
    /// `delete`.
    Delete,
    /// Custom mutating verbs: `setUrlMap`, `setTarget`, `attachNetworkEndpoints`, ...
    Verb,
    /// `globalOperations.get`, `zoneOperations.get` (and their `list`, `delete`).
    OperationGet,
    /// `globalOperations.wait`, `zoneOperations.wait`.
    OperationWait,
}

impl Family {
    /// The family of a method id such as `compute.urlMaps.insert`.
    pub fn of(method: &str) -> Family {
        let mut parts = method.rsplit('.');
        let verb = parts.next().unwrap_or_default();
        let collection = parts.next().unwrap_or_default();
        if collection.ends_with("Operations") {
            return if verb == "wait" {
                Family::OperationWait
            } else {
                Family::OperationGet
            };
        }
        match verb {
            "list" | "listNetworkEndpoints" => Family::List,
            "aggregatedList" => Family::AggregatedList,
            "insert" => Family::Insert,
            "update" | "patch" => Family::Update,
            "delete" => Family::Delete,
            _ if is_reading(method) => Family::Get,
            _ => Family::Verb,
        }
    }
}

/// Milliseconds added to every call of a family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FamilyLatency {
    /// [`Family::Get`].
    pub get: u64,
    /// [`Family::List`].
    pub list: u64,
    /// [`Family::AggregatedList`].
    pub aggregated_list: u64,
    /// [`Family::Insert`].
    pub insert: u64,
    /// [`Family::Update`].
    pub update: u64,
    /// [`Family::Delete`].
    pub delete: u64,
    /// [`Family::Verb`].
    pub verb: u64,
    /// [`Family::OperationGet`].
    pub operation_get: u64,
    /// [`Family::OperationWait`]: added before the wait starts.
    pub operation_wait: u64,
}

impl FamilyLatency {
    /// The same latency for every family.
    pub fn uniform(ms: u64) -> FamilyLatency {
        FamilyLatency {
            get: ms,
            list: ms,
            aggregated_list: ms,
            insert: ms,
            update: ms,
            delete: ms,
            verb: ms,
            operation_get: ms,
            operation_wait: ms,
        }
    }

    /// The latency of `family`.
    pub fn of(&self, family: Family) -> Duration {
        Duration::from_millis(match family {
            Family::Get => self.get,
            Family::List => self.list,
            Family::AggregatedList => self.aggregated_list,
            Family::Insert => self.insert,
            Family::Update => self.update,
            Family::Delete => self.delete,
            Family::Verb => self.verb,
            Family::OperationGet => self.operation_get,
            Family::OperationWait => self.operation_wait,
        })
    }
}

/// How long an Operation stays in each state before the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Phases {
    /// Milliseconds `PENDING` (queued, not started: no `startTime`).
    pub pending_ms: u64,
    /// Milliseconds `RUNNING` after that, then `DONE`.
    pub running_ms: u64,
}

impl Phases {
    fn is_zero(&self) -> bool {
        self.pending_ms == 0 && self.running_ms == 0
    }

    /// `(pending, running)` as durations.
    pub fn durations(&self) -> (Duration, Duration) {
        (
            Duration::from_millis(self.pending_ms),
            Duration::from_millis(self.running_ms),
        )
    }
}

/// Operation phases by scope (the emulator has no regional resources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OperationTimes {
    /// Global Operations (`globalOperations`): URL maps, backend services, health checks,
    /// proxies, forwarding rules, addresses, certificates, firewalls.
    pub global: Phases,
    /// Zonal Operations (`zoneOperations`): NEGs and their endpoints, instances.
    pub zonal: Phases,
}

/// The per-project rate quota.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Quota {
    /// Mutating calls a second per project; 0 = unlimited.
    pub writes_per_second: f64,
    /// Reading calls (get, list, getHealth, Operation get and wait, ...) a second per project;
    /// 0 = unlimited.
    pub reads_per_second: f64,
    /// HTTP status of a refused call: 403 (Compute's rate quotas, the default) or 429.
    pub code: Option<u16>,
}

/// A slow-cloud profile: what [`SlowCloud`] applies. All zero (the default) is off.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Profile {
    /// Latency per method family.
    pub latency_ms: FamilyLatency,
    /// Operation phases.
    pub operations: OperationTimes,
    /// Rate quota.
    pub quota: Quota,
}

/// Errors in a profile given on the command line or to the admin API.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    /// Not a preset name, `uniform:MS`, JSON or `@FILE`.
    #[error("slow-cloud profile {0:?}: {1}; expected `realistic`, `uniform:MS`, a JSON profile or @FILE (docs/performance.md, \"The slow cloud\")")]
    Invalid(String, String),
}

impl Profile {
    /// The `realistic` preset: figures at the low end of what Compute API users report (the
    /// sources are in docs/performance.md, "The slow cloud"), no quota.
    pub fn realistic() -> Profile {
        Profile {
            latency_ms: FamilyLatency {
                get: 120,
                list: 250,
                aggregated_list: 400,
                insert: 300,
                update: 300,
                delete: 300,
                verb: 300,
                operation_get: 100,
                operation_wait: 100,
            },
            operations: OperationTimes {
                global: Phases {
                    pending_ms: 500,
                    running_ms: 2500,
                },
                zonal: Phases {
                    pending_ms: 300,
                    running_ms: 1200,
                },
            },
            quota: Quota::default(),
        }
    }

    /// Every call takes `ms` milliseconds; Operations are DONE at once.
    pub fn uniform(ms: u64) -> Profile {
        Profile {
            latency_ms: FamilyLatency::uniform(ms),
            ..Profile::default()
        }
    }

    /// Parses a profile: `realistic`, `off`, `uniform:MS`, a JSON object or `@FILE` holding one.
    /// In JSON, `"preset": "realistic"` (or `"uniform:MS"`) starts from that preset and the
    /// other keys override its fields; unknown keys are refused.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let bad = |why: String| ProfileError::Invalid(text.to_string(), why);
        let text = text.trim();
        if let Some(path) = text.strip_prefix('@') {
            let content = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
            return Profile::parse(&content);
        }
        if text.starts_with('{') {
            let value: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
            return Profile::from_json(value).map_err(bad);
        }
        match text {
            "realistic" => Ok(Profile::realistic()),
            "off" | "" => Ok(Profile::default()),
            _ => match text.strip_prefix("uniform:").map(str::parse::<u64>) {
                Some(Ok(ms)) => Ok(Profile::uniform(ms)),
                _ => Err(bad("unknown preset".into())),
            },
        }
    }

    /// A profile from JSON, with an optional `"preset"` as the base (see [`Profile::parse`]).
    pub fn from_json(mut value: Value) -> Result<Profile, String> {
        let Some(object) = value.as_object_mut() else {
            return Err("a profile is a JSON object".into());
        };
        let base = match object.remove("preset") {
            None => Profile::default(),
            Some(Value::String(name)) => Profile::parse(&name).map_err(|e| e.to_string())?,
            Some(other) => return Err(format!("preset {other}: expected a string")),
        };
        let mut merged = serde_json::to_value(base).map_err(|e| e.to_string())?;
        merge(&mut merged, value);
        let profile: Profile = serde_json::from_value(merged).map_err(|e| e.to_string())?;
        if let Some(code) = profile.quota.code {
            if code != 403 && code != 429 {
                return Err(format!("quota.code {code}: must be 403 or 429"));
            }
        }
        if profile.quota.writes_per_second < 0.0 || profile.quota.reads_per_second < 0.0 {
            return Err("quota rates must be >= 0".into());
        }
        Ok(profile)
    }
}

/// Overlays `patch` onto `base`, object by object (RFC 7396 without deletions).
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

/// One token bucket: `rate` tokens a second, holding at most one second's worth (at least 1).
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(rate: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: rate.max(1.0),
            at: now,
        }
    }

    /// Takes one token at `now` if there is one (refilling at `rate` a second first).
    pub fn take(&mut self, rate: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(rate.max(1.0));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The slow cloud's state: the active profile, the quota buckets per project and what the
/// quota refused.
#[derive(Debug, Default)]
pub struct SlowCloud {
    profile: Mutex<Profile>,
    /// `(project, is_write)` -> bucket.
    buckets: Mutex<HashMap<(String, bool), Bucket>>,
    refused_writes: AtomicU64,
    refused_reads: AtomicU64,
}

impl SlowCloud {
    /// A slow cloud applying `profile`.
    pub fn new(profile: Profile) -> SlowCloud {
        SlowCloud {
            profile: Mutex::new(profile),
            ..SlowCloud::default()
        }
    }

    /// The active profile.
    pub fn profile(&self) -> Profile {
        self.profile.lock().expect("slow cloud poisoned").clone()
    }

    /// Replaces the profile; the quota starts over with full buckets and zero refusals.
    pub fn set(&self, profile: Profile) {
        *self.profile.lock().expect("slow cloud poisoned") = profile;
        self.buckets.lock().expect("slow cloud poisoned").clear();
        self.refused_writes.store(0, Ordering::Relaxed);
        self.refused_reads.store(0, Ordering::Relaxed);
    }

    /// Applies the profile to one call of `method` in `project`: sleeps the family's latency,
    /// then takes a quota token. Errors: `rateLimitExceeded` (403 or 429) when the project's
    /// quota for this kind of call is used up; the call must then change nothing.
    pub async fn admit(&self, project: &str, method: &str) -> Result<(), ApiError> {
        let (latency, rate, code) = {
            let p = self.profile.lock().expect("slow cloud poisoned");
            let write = !is_reading(method);
            let rate = if write {
                p.quota.writes_per_second
            } else {
                p.quota.reads_per_second
            };
            (
                p.latency_ms.of(Family::of(method)),
                rate,
                p.quota.code.unwrap_or(403),
            )
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        if rate <= 0.0 {
            return Ok(());
        }
        let write = !is_reading(method);
        let now = Instant::now();
        let admitted = self
            .buckets
            .lock()
            .expect("slow cloud poisoned")
            .entry((project.to_string(), write))
            .or_insert_with(|| Bucket::full(rate, now))
            .take(rate, now);
        if admitted {
            return Ok(());
        }
        let (counter, metric) = if write {
            (&self.refused_writes, "Write requests")
        } else {
            (&self.refused_reads, "Read requests")
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Err(ApiError::new(
            code,
            "rateLimitExceeded",
            format!(
                "Quota exceeded for quota metric '{metric}' and limit '{metric} per second' of service 'compute.googleapis.com' for consumer 'project:{project}' ({rate} per second): {method}"
            ),
        ))
    }

    /// `(pending, running)` of a new Operation in the given scope, or `None` when the profile
    /// leaves Operation times alone (then `--operation-latency-ms` applies).
    pub fn operation_phases(&self, zonal: bool) -> Option<(Duration, Duration)> {
        let p = self.profile.lock().expect("slow cloud poisoned");
        let phases = if zonal {
            p.operations.zonal
        } else {
            p.operations.global
        };
        (!phases.is_zero()).then(|| phases.durations())
    }

    /// `{"profile": {...}, "refused": {"writes": N, "reads": N}}` for the admin API.
    pub fn to_json(&self) -> Value {
        json!({
            "profile": self.profile(),
            "refused": {
                "writes": self.refused_writes.load(Ordering::Relaxed),
                "reads": self.refused_reads.load(Ordering::Relaxed),
            },
        })
    }
}

/// The project of an API path (`projects/{project}/...`), empty when there is none.
pub fn project_of(path: &str) -> &str {
    path.strip_prefix("projects/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_method_ids() {
        let cases = [
            ("compute.urlMaps.get", Family::Get),
            ("compute.backendServices.getHealth", Family::Get),
            ("compute.urlMaps.list", Family::List),
            (
                "compute.networkEndpointGroups.listNetworkEndpoints",
                Family::List,
            ),
            (
                "compute.networkEndpointGroups.aggregatedList",
                Family::AggregatedList,
            ),
            ("compute.urlMaps.insert", Family::Insert),
            ("compute.urlMaps.patch", Family::Update),
            ("compute.urlMaps.update", Family::Update),
            ("compute.urlMaps.delete", Family::Delete),
            ("compute.targetHttpProxies.setUrlMap", Family::Verb),
            (
                "compute.networkEndpointGroups.attachNetworkEndpoints",
                Family::Verb,
            ),
            ("compute.globalOperations.get", Family::OperationGet),
            ("compute.zoneOperations.wait", Family::OperationWait),
            ("compute.globalOperations.wait", Family::OperationWait),
        ];
        for (method, family) in cases {
            assert_eq!(Family::of(method), family, "{method}");
        }
    }

    #[test]
    fn a_bucket_admits_its_rate_and_refills() {
        let t0 = Instant::now();
        let mut b = Bucket::full(20.0, t0);
        let admitted = (0..25).filter(|_| b.take(20.0, t0)).count();
        assert_eq!(admitted, 20, "one second's worth at once");
        assert!(!b.take(20.0, t0 + Duration::from_millis(40)), "0.8 token");
        assert!(
            b.take(20.0, t0 + Duration::from_millis(50)),
            "1 token after 50 ms"
        );
        // Idle for a minute: still at most one second's worth.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..30).filter(|_| b.take(20.0, later)).count(), 20);
        // Below one a second, a single call still gets through once refilled.
        let mut slow = Bucket::full(0.5, t0);
        assert!(slow.take(0.5, t0));
        assert!(!slow.take(0.5, t0 + Duration::from_secs(1)));
        assert!(slow.take(0.5, t0 + Duration::from_secs(2)));
    }

    #[tokio::test]
    async fn the_write_quota_refuses_writes_only_and_counts_them() {
        let cloud = SlowCloud::new(Profile {
            quota: Quota {
                writes_per_second: 2.0,
                ..Quota::default()
            },
            ..Profile::default()
        });
        for _ in 0..2 {
            cloud.admit("p", "compute.urlMaps.insert").await.unwrap();
        }
        let err = cloud
            .admit("p", "compute.urlMaps.delete")
            .await
            .unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (403, "rateLimitExceeded"));
        // Reads and other projects have their own buckets.
        for _ in 0..10 {
            cloud.admit("p", "compute.urlMaps.get").await.unwrap();
        }
        cloud.admit("q", "compute.urlMaps.insert").await.unwrap();
        assert_eq!(cloud.to_json()["refused"], json!({"writes": 1, "reads": 0}));
        cloud.set(Profile::default());
        assert_eq!(cloud.to_json()["refused"], json!({"writes": 0, "reads": 0}));
    }

    #[test]
    fn profiles_parse_from_presets_and_json() {
        assert_eq!(Profile::parse("realistic").unwrap(), Profile::realistic());
        assert_eq!(Profile::parse("off").unwrap(), Profile::default());
        assert_eq!(
            Profile::parse("uniform:200").unwrap().latency_ms.delete,
            200
        );
        let p = Profile::parse(
            r#"{"preset":"realistic","quota":{"writesPerSecond":20,"code":429},"operations":{"zonal":{"runningMs":7}}}"#,
        )
        .unwrap();
        assert_eq!(p.quota.writes_per_second, 20.0);
        assert_eq!(p.quota.code, Some(429));
        assert_eq!(p.operations.zonal.running_ms, 7);
        assert_eq!(p.operations.zonal.pending_ms, 300, "kept from the preset");
        assert_eq!(p.latency_ms, Profile::realistic().latency_ms);
        for bad in [
            "fast",
            "uniform:x",
            r#"{"latencyMs":{"gets":1}}"#,
            r#"{"quota":{"code":500}}"#,
            "[1]",
        ] {
            assert!(Profile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn operation_phases_by_scope() {
        let cloud = SlowCloud::new(Profile::realistic());
        assert_eq!(
            cloud.operation_phases(false),
            Some((Duration::from_millis(500), Duration::from_millis(2500)))
        );
        assert_eq!(
            cloud.operation_phases(true),
            Some((Duration::from_millis(300), Duration::from_millis(1200)))
        );
        assert_eq!(SlowCloud::default().operation_phases(false), None);
        assert_eq!(project_of("projects/p1/global/urlMaps/u"), "p1");
        assert_eq!(project_of("zones"), "");
    }
}
