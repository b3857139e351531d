//! The emulator's dashboard (docs/dashboard.md), on the API port:
//! - `GET /_emulator/dashboard`: the page, every load balancer as its chain forwarding rule ->
//!   target proxy -> URL map rules -> backend services -> NEGs -> endpoints colored by health;
//! - `GET /_emulator/dashboard/lbs`: the load balancer list alone (the page swaps it in when
//!   the topology changes, without a reload);
//! - `GET /_emulator/dashboard/events`: server-sent events: `health` (endpoint id -> state, on
//!   every change, checked every [`TICK`]), `stats` (request rates and counts per forwarding
//!   rule and backend service from the data plane's counters, and the recent status codes of
//!   each forwarding rule from the access log when `--access-log` is set; every second) and
//!   `topology` (the snapshot version, on every change);
//! - `GET /_emulator/dashboard/iam`: who may do what ([`iam`]): bindings per project, a
//!   principal's permissions, the recent IAM refusals.

pub mod iam;
pub mod page;
pub mod topology;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use futures::Stream;
use serde_json::{json, Value};

use crate::emulator::Emulator;

/// How often the event stream looks for health and topology changes.
pub const TICK: Duration = Duration::from_millis(250);
/// Status codes kept per forwarding rule.
const RECENT: usize = 12;
/// How much of the access log's end is read for recent status codes.
const TAIL_BYTES: u64 = 256 * 1024;

/// Adds the dashboard's routes to the admin router (paths relative to `/_emulator`).
pub fn routes(r: Router<Arc<Emulator>>) -> Router<Arc<Emulator>> {
    r.route("/dashboard", get(whole_page))
        .route("/dashboard/", get(whole_page))
        .route("/dashboard/lbs", get(lbs))
        .route("/dashboard/events", get(events))
        .route("/dashboard/iam", get(iam::page))
}

fn current(emu: &Emulator) -> (Vec<topology::LoadBalancer>, u64) {
    let snap = emu.subscribe().borrow().clone();
    (topology::load_balancers(&snap, &emu.health), snap.version)
}

async fn whole_page(State(emu): State<Arc<Emulator>>) -> impl IntoResponse {
    let (lbs, version) = current(&emu);
    Html(page::page(&lbs, version))
}

async fn lbs(State(emu): State<Arc<Emulator>>) -> impl IntoResponse {
    let (lbs, version) = current(&emu);
    Html(page::load_balancers_html(&lbs, version))
}

/// What one event stream last sent.
struct Feed {
    emu: Arc<Emulator>,
    health: HashMap<String, &'static str>,
    version: Option<u64>,
    totals: HashMap<String, u64>,
    last_stats: Option<Instant>,
    first: bool,
}

impl Feed {
    fn health_event(&mut self) -> Option<Event> {
        let now: HashMap<String, &'static str> = self
            .emu
            .health
            .entries()
            .into_iter()
            .map(|(k, s)| (topology::endpoint_id(&k), s.as_str()))
            .collect();
        if now == self.health && !self.first {
            return None;
        }
        self.health = now;
        Some(
            Event::default()
                .event("health")
                .data(json!(self.health).to_string()),
        )
    }

    fn topology_event(&mut self) -> Option<Event> {
        let v = self.emu.subscribe().borrow().version;
        if self.version == Some(v) {
            return None;
        }
        self.version = Some(v);
        Some(
            Event::default()
                .event("topology")
                .data(json!({"version": v}).to_string()),
        )
    }

    fn stats_event(&mut self) -> Option<Event> {
        let now = Instant::now();
        if self
            .last_stats
            .is_some_and(|t| now - t < Duration::from_secs(1))
        {
            return None;
        }
        let secs = self.last_stats.map_or(1.0, |t| (now - t).as_secs_f64());
        self.last_stats = Some(now);
        let mut rules = BTreeMap::new();
        let mut services = BTreeMap::new();
        let mut rate = |key: &str, counts: [u64; 5], into: &mut BTreeMap<String, Value>| {
            let total: u64 = counts.iter().sum();
            let prev = self.totals.insert(key.to_string(), total).unwrap_or(total);
            let r = total.saturating_sub(prev) as f64 / secs;
            into.insert(
                key.to_string(),
                json!({"rate": r, "total": total, "byClass": counts}),
            );
        };
        if let Some(dp) = self.emu.dataplane.get() {
            let fes = dp.frontends();
            for (k, fe) in fes.iter() {
                rate(k, fe.metrics.counts(), &mut rules);
            }
            if let Some(fe) = fes.values().next() {
                for bs in fe.services.iter() {
                    rate(&bs.key, bs.metrics.counts(), &mut services);
                }
            }
        }
        let recent = self
            .emu
            .dataplane
            .get()
            .and_then(|dp| dp.access_log_path())
            .map(|p| recent_statuses(&p))
            .unwrap_or_default();
        let data = json!({"rules": rules, "services": services, "recent": recent});
        Some(Event::default().event("stats").data(data.to_string()))
    }
}

/// The last [`RECENT`] status codes per forwarding rule in the access log at `path`.
pub fn recent_statuses(path: &std::path::Path) -> BTreeMap<String, Vec<u16>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut out: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    let Ok(mut f) = std::fs::File::open(path) else {
        return out;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(TAIL_BYTES);
    let mut text = String::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_string(&mut text).is_err() {
        return out;
    }
    // A partial first line (when the tail starts mid-line) does not parse and is skipped.
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(rule), Some(status)) = (v["forwardingRule"].as_str(), v["status"].as_u64())
        else {
            continue;
        };
        let codes = out.entry(rule.to_string()).or_default();
        codes.push(status as u16);
        if codes.len() > RECENT {
            codes.remove(0);
        }
    }
    out
}

async fn events(
    State(emu): State<Arc<Emulator>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let feed = Feed {
        emu,
        health: HashMap::new(),
        version: None,
        totals: HashMap::new(),
        last_stats: None,
        first: true,
    };
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        if !feed.first {
            tokio::time::sleep(TICK).await;
        }
        let mut batch = Vec::new();
        batch.extend(feed.topology_event());
        batch.extend(feed.health_event());
        batch.extend(feed.stats_event());
        feed.first = false;
        Some((futures::stream::iter(batch.into_iter().map(Ok)), feed))
    });
    use futures::StreamExt;
    Sse::new(stream.flatten()).keep_alive(KeepAlive::default())
}
