//! Request logs of backend services with `logConfig.enable` (Compute API v1
//! `BackendServiceLogConfig`; Cloud Load Balancing docs, "External Application Load Balancer
//! logging and monitoring"): each sampled request becomes a Cloud Logging `LogEntry` with
//! `resource.type: http_load_balancer`, kept in memory ([`Store`], the newest
//! [`MAX_ENTRIES`]) and read through the Cloud Logging API `entries.list`
//! (`POST /v2/entries:list`, `crate::logging_api`), so `gcloud logging read` works against the
//! emulator with `CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING`.
//!
//! - `sampleRate` (0.0-1.0, default 1.0): each request is logged with that probability;
//! - `optionalMode`: `EXCLUDE_ALL_OPTIONAL` (default for the classic load balancer),
//!   `INCLUDE_ALL_OPTIONAL`, or `CUSTOM` with `optionalFields`; the optional fields the
//!   emulator knows are `tls.protocol`, `tls.earlyDataRequest` and `tls.cipher` (only
//!   `tls.protocol` has a value locally).
//!
//! The backend service's `logConfig` is read in [`config`]; the entry's shape is in [`entry`];
//! the filter language in [`filter`].

pub mod config;
pub mod entry;
pub mod filter;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use http::Request;
use serde_json::Value;

pub use self::config::{LogConfig, Optional};
pub use self::entry::Source;
use crate::dataplane::access_log::AccessRecord;
use crate::dataplane::exchange::ConnInfo;

/// Entries kept; older ones are dropped first.
pub const MAX_ENTRIES: usize = 100_000;

/// Draws the sample for one request: when it is in, the request gets a record (if it has none
/// yet) marked for Cloud Logging.
pub fn sample<B>(
    l: &LogConfig,
    rule: &str,
    conn: &ConnInfo,
    req: &Request<B>,
    rec: &mut Option<Box<AccessRecord>>,
) {
    if l.sample_rate <= 0.0 || (l.sample_rate < 1.0 && rand::random::<f64>() >= l.sample_rate) {
        return;
    }
    rec.get_or_insert_with(|| Box::new(AccessRecord::new(rule, conn, req)))
        .cloud_log = true;
}

/// The in-memory log.
#[derive(Debug, Default)]
pub struct Store {
    entries: Mutex<VecDeque<Value>>,
    seq: AtomicU64,
}

impl Store {
    /// Adds the entry of one finished request.
    pub fn record(&self, src: &Source<'_>, rec: &AccessRecord) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let e = entry::log_entry(src, rec, seq);
        let mut q = self.entries.lock().expect("poisoned");
        if q.len() >= MAX_ENTRIES {
            q.pop_front();
        }
        q.push_back(e);
    }

    /// Entries of `projects` matching `filter`, oldest first (or newest first with `desc`).
    /// Errors: a filter the emulator cannot parse (the message says where).
    pub fn query(
        &self,
        projects: &[String],
        filter: &str,
        desc: bool,
    ) -> Result<Vec<Value>, String> {
        let f = filter::Filter::parse(filter)?;
        let q = self.entries.lock().expect("poisoned");
        let mut out: Vec<Value> = q
            .iter()
            .filter(|e| {
                let name = e["logName"].as_str().unwrap_or("");
                projects
                    .iter()
                    .any(|p| name.starts_with(&format!("{p}/logs/")))
                    && f.matches(e)
            })
            .cloned()
            .collect();
        if desc {
            out.reverse();
        }
        Ok(out)
    }

    /// Removes every entry.
    pub fn clear(&self) {
        self.entries.lock().expect("poisoned").clear();
    }
}
