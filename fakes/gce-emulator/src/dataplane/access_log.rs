//! Optional access log: one JSON object per request and line, appended to a file by a
//! dedicated thread so the request path never blocks on disk. Records carry the forwarding
//! rule, the matched URL map rule, the backend service and endpoint, like the `jsonPayload` of
//! Cloud Logging's load balancer request logs, with `statusDetails` on the responses the proxy
//! makes itself (`failed_to_pick_backend`, `failed_to_connect_to_backend`, ...).

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;

use http::Request;
use serde::Serialize;

use crate::dataplane::proxy::ConnInfo;

/// One access log line.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessRecord {
    /// RFC 3339 time the request arrived.
    pub time: String,
    /// The forwarding rule (global or regional).
    pub forwarding_rule: String,
    /// Client `ip:port`.
    pub remote_addr: String,
    /// Method.
    pub method: String,
    /// Host (authority or `Host`).
    pub host: String,
    /// Path and query.
    pub path: String,
    /// Response status.
    pub status: u16,
    /// Why the proxy answered itself (a 502's reason, as Cloud Logging's `statusDetails`);
    /// absent on responses from endpoints.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub status_details: &'static str,
    /// The URL map rule that matched, e.g. `pathMatchers[web].pathRules[0]`.
    pub url_map_rule: String,
    /// The backend service, if any.
    pub backend_service: String,
    /// The endpoint `ip:port`, if any.
    pub endpoint: String,
    /// Milliseconds to response headers.
    pub latency_ms: f64,
}

impl AccessRecord {
    /// A record for `req` on `rule` (status and outcome filled in later).
    pub fn new<B>(rule: &str, conn: &ConnInfo, req: &Request<B>) -> AccessRecord {
        AccessRecord {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            forwarding_rule: rule.to_string(),
            remote_addr: conn.client.to_string(),
            method: req.method().to_string(),
            host: req
                .uri()
                .authority()
                .map(|a| a.to_string())
                .or_else(|| {
                    req.headers()
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string)
                })
                .unwrap_or_default(),
            path: req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            status: 0,
            status_details: "",
            url_map_rule: String::new(),
            backend_service: String::new(),
            endpoint: String::new(),
            latency_ms: 0.0,
        }
    }
}

/// Sender side of the access log.
#[derive(Debug)]
pub struct AccessLog {
    tx: mpsc::SyncSender<AccessRecord>,
}

impl AccessLog {
    /// Opens (appends to) `path` and starts the writer thread.
    pub fn open(path: &Path) -> std::io::Result<AccessLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let (tx, rx) = mpsc::sync_channel::<AccessRecord>(65536);
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || {
                let mut w = std::io::BufWriter::new(file);
                while let Ok(rec) = rx.recv() {
                    let mut next = Some(rec);
                    while let Some(r) = next {
                        if serde_json::to_writer(&mut w, &r).is_ok() {
                            let _ = w.write_all(b"\n");
                        }
                        next = rx.try_recv().ok();
                    }
                    let _ = w.flush();
                }
            })?;
        Ok(AccessLog { tx })
    }

    /// Queues a record; drops it when the writer is more than 65536 lines behind.
    pub fn write(&self, rec: AccessRecord) {
        let _ = self.tx.try_send(rec);
    }
}
