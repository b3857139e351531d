//! Optional access log: one JSON object per request and line, appended to a file by a
//! dedicated thread so the request path never blocks on disk. Records carry the forwarding
//! rule, the matched URL map rule, the backend service and endpoint, like the `jsonPayload` of
//! Cloud Logging's load balancer request logs, with `statusDetails` on the responses the proxy
//! makes itself (`failed_to_pick_backend`, `failed_to_connect_to_backend`, ...). The same record
//! feeds the Cloud Logging entries of backend services with `logConfig.enable`
//! (`dataplane/logging/`).

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;

use http::Request;
use serde::Serialize;

use crate::dataplane::exchange::ConnInfo;

/// A response extension naming Cloud Logging's `statusDetails` for responses the proxy made
/// itself (`failed_to_pick_backend`, `denied_by_security_policy`, `response_from_cache`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusDetails(pub &'static str);

/// The cache fields of a request served by a Cloud CDN-enabled backend service (Cloud
/// Logging's `httpRequest.cacheLookup`, `cacheHit`, `cacheValidatedWithOriginServer`,
/// `cacheFillBytes`, and `jsonPayload.cacheDecision`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheLog {
    /// The cache was looked up.
    pub cache_lookup: bool,
    /// Served from the cache.
    pub cache_hit: bool,
    /// A stale entry was revalidated with the backend.
    pub cache_validated_with_origin_server: bool,
    /// Bytes stored in the cache by this request.
    pub cache_fill_bytes: u64,
    /// Why the response was or was not cached (e.g. `RESPONSE_HAS_SET_COOKIE`).
    pub cache_decision: Vec<&'static str>,
}

/// `rateLimitAction` of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RateLimitLog {
    /// The key the request was counted under.
    pub key: String,
    /// RATE_LIMIT_THRESHOLD_CONFORM, RATE_LIMIT_THRESHOLD_EXCEED or BAN_THRESHOLD_EXCEED.
    pub outcome: &'static str,
}

/// `enforcedSecurityPolicy` / `previewSecurityPolicy` of Cloud Logging's load balancer log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyLog {
    /// The policy name.
    pub name: String,
    /// The deciding rule's priority.
    pub priority: i64,
    /// ALLOW, DENY, REDIRECT, THROTTLE, RATE_BASED_BAN.
    pub configured_action: &'static str,
    /// ACCEPT or DENY.
    pub outcome: &'static str,
    /// Preconfigured WAF signatures that matched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preconfigured_expr_ids: Vec<String>,
    /// For rate-limited rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_action: Option<RateLimitLog>,
}

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
    /// Cloud Logging's `statusDetails`: why the proxy answered itself (a 502's reason,
    /// `denied_by_security_policy`, `response_from_cache`, ...), else
    /// `response_sent_by_backend`.
    pub status_details: &'static str,
    /// The URL map rule that matched, e.g. `pathMatchers[web].pathRules[0]`.
    pub url_map_rule: String,
    /// The backend service, if any.
    pub backend_service: String,
    /// The endpoint `ip:port`, if any.
    pub endpoint: String,
    /// Milliseconds to response headers.
    pub latency_ms: f64,
    /// `User-Agent`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// `Referer`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub referer: String,
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub protocol: String,
    /// `Content-Length` of the response, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_size: Option<u64>,
    /// The Cloud Armor rule that decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforced_security_policy: Option<PolicyLog>,
    /// The first preview rule that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_security_policy: Option<PolicyLog>,
    /// Cloud CDN fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheLog>,
    /// Whether the backend service's `logConfig` sampled this request into Cloud Logging.
    #[serde(skip)]
    pub cloud_log: bool,
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
            user_agent: header(req, http::header::USER_AGENT),
            referer: header(req, http::header::REFERER),
            protocol: format!("{:?}", req.version()),
            response_size: None,
            enforced_security_policy: None,
            preview_security_policy: None,
            cache: None,
            cloud_log: false,
        }
    }

    /// Fills what the response tells: `statusDetails` (from its [`StatusDetails`] extension,
    /// else `response_sent_by_backend`) and its size when it has a `Content-Length`.
    pub fn finish<B>(&mut self, resp: &http::Response<B>) {
        self.status_details = resp
            .extensions()
            .get::<StatusDetails>()
            .map_or("response_sent_by_backend", |d| d.0);
        self.response_size = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
    }
}

fn header<B>(req: &Request<B>, name: http::HeaderName) -> String {
    req.headers()
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default()
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
