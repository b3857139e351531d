//! The `LogEntry` of one request, as Cloud Logging shows an external Application Load Balancer's
//! request log (Cloud Load Balancing docs, "What is logged"; Cloud Logging API v2 `LogEntry`,
//! `HttpRequest`):
//!
//! ```text
//! logName      projects/P/logs/requests
//! resource     {type: http_load_balancer, labels: {project_id, zone: global, url_map_name,
//!               target_proxy_name, forwarding_rule_name, backend_service_name}}
//! httpRequest  {requestMethod, requestUrl, status, responseSize, userAgent, referer, remoteIp,
//!               serverIp, latency: "0.012s", protocol, cacheLookup, cacheHit,
//!               cacheValidatedWithOriginServer, cacheFillBytes}
//! jsonPayload  {@type: type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry,
//!               statusDetails, backendTargetProjectNumber, remoteIp, cacheDecision,
//!               enforcedSecurityPolicy, previewSecurityPolicy, tls (optional fields)}
//! severity     INFO below 400, WARNING for 4xx, ERROR for 5xx
//! ```

use serde_json::{json, Map, Value};

use super::config::LogConfig;
use crate::dataplane::access_log::AccessRecord;

fn name_of(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

fn project_of(key: &str) -> &str {
    key.strip_prefix("projects/")
        .and_then(|k| k.split('/').next())
        .unwrap_or("")
}

/// Where a logged request was served: the load balancer's resources (the entry's `resource`
/// labels) and the backend service's `logConfig`. Plain values, so that request logging does
/// not depend on the compiled frontend or backend service types above it.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The forwarding rule key.
    pub rule: &'a str,
    /// Whether the target proxy is a target HTTPS proxy.
    pub https: bool,
    /// The forwarding rule's `IPAddress`.
    pub ip: std::net::IpAddr,
    /// Its port.
    pub port: u16,
    /// The URL map key.
    pub url_map: &'a str,
    /// The target proxy key.
    pub target_proxy: &'a str,
    /// The backend service key.
    pub backend_service: &'a str,
    /// The backend service's `logConfig`.
    pub log_config: Option<&'a LogConfig>,
}

/// The entry of `rec`, served at `src`; `seq` makes `insertId` unique.
pub fn log_entry(src: &Source<'_>, rec: &AccessRecord, seq: u64) -> Value {
    let project = project_of(src.rule);
    let scheme = if src.https { "https" } else { "http" };
    let mut http_request = json!({
        "requestMethod": rec.method,
        "requestUrl": format!("{scheme}://{}{}", rec.host, rec.path),
        "status": rec.status,
        "remoteIp": rec.remote_addr.rsplit_once(':').map_or(rec.remote_addr.as_str(), |(ip, _)| ip).trim_matches(['[', ']']),
        "serverIp": src.ip.to_string(),
        "latency": format!("{:.6}s", rec.latency_ms / 1000.0),
        "protocol": rec.protocol,
    });
    let h = http_request.as_object_mut().expect("object");
    if let Some(n) = rec.response_size {
        h.insert("responseSize".into(), json!(n.to_string()));
    }
    if !rec.user_agent.is_empty() {
        h.insert("userAgent".into(), json!(rec.user_agent));
    }
    if !rec.referer.is_empty() {
        h.insert("referer".into(), json!(rec.referer));
    }
    let mut payload = Map::new();
    payload.insert(
        "@type".into(),
        json!("type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry"),
    );
    payload.insert("statusDetails".into(), json!(rec.status_details));
    payload.insert(
        "backendTargetProjectNumber".into(),
        json!(format!(
            "projects/{}",
            crate::project_number::number(project)
        )),
    );
    payload.insert("remoteIp".into(), h["remoteIp"].clone());
    if let Some(c) = &rec.cache {
        h.insert("cacheLookup".into(), json!(c.cache_lookup));
        if c.cache_hit {
            h.insert("cacheHit".into(), json!(true));
        }
        if c.cache_validated_with_origin_server {
            h.insert("cacheValidatedWithOriginServer".into(), json!(true));
        }
        if c.cache_fill_bytes > 0 {
            h.insert(
                "cacheFillBytes".into(),
                json!(c.cache_fill_bytes.to_string()),
            );
        }
        if !c.cache_decision.is_empty() {
            payload.insert("cacheDecision".into(), json!(c.cache_decision));
        }
    }
    if let Some(p) = &rec.enforced_security_policy {
        payload.insert("enforcedSecurityPolicy".into(), json!(p));
    }
    if let Some(p) = &rec.preview_security_policy {
        payload.insert("previewSecurityPolicy".into(), json!(p));
    }
    if let Some(l) = src.log_config {
        let mut tls = Map::new();
        if l.includes("tls.protocol") {
            let v = if scheme == "https" {
                rec.protocol.as_str()
            } else {
                ""
            };
            tls.insert("protocol".into(), json!(v));
        }
        if l.includes("tls.earlyDataRequest") {
            tls.insert("earlyDataRequest".into(), json!(false));
        }
        if !tls.is_empty() {
            payload.insert("tls".into(), Value::Object(tls));
        }
    }
    let severity = match rec.status {
        500.. => "ERROR",
        400..=499 => "WARNING",
        _ => "INFO",
    };
    json!({
        "insertId": format!("{:x}{seq:08x}", src.port),
        "logName": format!("projects/{project}/logs/requests"),
        "resource": {
            "type": "http_load_balancer",
            "labels": {
                "project_id": project,
                "zone": "global",
                "url_map_name": name_of(src.url_map),
                "target_proxy_name": name_of(src.target_proxy),
                "forwarding_rule_name": name_of(src.rule),
                "backend_service_name": name_of(src.backend_service),
            }
        },
        "httpRequest": http_request,
        "jsonPayload": Value::Object(payload),
        "severity": severity,
        "timestamp": rec.time,
        "receiveTimestamp": rec.time,
    })
}
