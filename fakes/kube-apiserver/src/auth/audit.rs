//! `--audit-log PATH`: one JSON line per request, in the shape of a real server's audit log at
//! level `Metadata` (`audit.k8s.io/v1` `Event`, as `--audit-log-path` with a `Metadata` policy
//! writes it), so tools that read real audit logs (for example to derive least-privilege RBAC)
//! read this one unchanged:
//!
//! ```json
//! {"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"…",
//!  "stage":"ResponseComplete","requestURI":"/apis/networking.k8s.io/v1/namespaces/default/ingresses/web/status",
//!  "verb":"patch","user":{"username":"system:serviceaccount:gclb-operator:gclb-operator","uid":"…",
//!  "groups":["system:serviceaccounts","system:serviceaccounts:gclb-operator","system:authenticated"]},
//!  "sourceIPs":["127.0.0.1"],"userAgent":"gclb-operator",
//!  "objectRef":{"resource":"ingresses","namespace":"default","name":"web","apiGroup":"networking.k8s.io",
//!  "apiVersion":"v1","subresource":"status"},
//!  "responseStatus":{"metadata":{},"code":200},
//!  "requestReceivedTimestamp":"…","stageTimestamp":"…",
//!  "annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"…"}}
//! ```
//!
//! `impersonatedUser` is present when the request impersonated; `objectRef` only for resource
//! requests (empty fields left out); failures add `status`, `reason` and `message` to
//! `responseStatus`. Requests that failed authentication have an empty `user`. A watch is
//! logged once, when its response starts (`stage: ResponseStarted`). Lines are written in the
//! order responses are produced.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::user::{RequestContext, UserInfo};
use crate::meta::micro_timestamp;
use crate::status::ApiError;

/// The audit log file (appended to).
pub struct AuditLog {
    file: Mutex<std::fs::File>,
}

/// One finished request, as the audit log records it.
pub struct AuditRecord<'a> {
    /// Authentication, impersonation and request attributes (`None` when authentication failed).
    pub ctx: Option<&'a RequestContext>,
    /// The request URI (path and query).
    pub request_uri: &'a str,
    /// Lower-case HTTP method, the verb of requests that failed authentication.
    pub method: &'a str,
    /// Client address.
    pub source_ip: Option<String>,
    /// `User-Agent` header.
    pub user_agent: Option<&'a str>,
    /// Response code.
    pub code: u16,
    /// The error, for failures.
    pub error: Option<&'a ApiError>,
    /// When the request arrived.
    pub received: DateTime<Utc>,
    /// `true` for watches (logged when the response starts).
    pub watch: bool,
}

fn user_json(u: &UserInfo) -> Value {
    let mut m = Map::new();
    m.insert("username".into(), json!(u.name));
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    m.insert("groups".into(), json!(u.groups));
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

fn audit_id() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// The `Event` object of one request.
pub fn event(r: &AuditRecord<'_>) -> Value {
    let mut e = Map::new();
    e.insert("kind".into(), json!("Event"));
    e.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
    e.insert("level".into(), json!("Metadata"));
    e.insert("auditID".into(), json!(audit_id()));
    e.insert(
        "stage".into(),
        json!(if r.watch {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        }),
    );
    e.insert("requestURI".into(), json!(r.request_uri));
    let verb = r.ctx.map(|c| c.info.verb.as_str()).unwrap_or(r.method);
    e.insert("verb".into(), json!(verb));
    e.insert(
        "user".into(),
        r.ctx
            .map(|c| user_json(&c.authenticated))
            .unwrap_or_else(|| json!({})),
    );
    if let Some(imp) = r.ctx.and_then(|c| c.impersonated.as_ref()) {
        e.insert("impersonatedUser".into(), user_json(imp));
    }
    if let Some(ip) = &r.source_ip {
        e.insert("sourceIPs".into(), json!([ip]));
    }
    if let Some(ua) = r.user_agent {
        e.insert("userAgent".into(), json!(ua));
    }
    if let Some(info) = r.ctx.map(|c| &c.info).filter(|i| i.is_resource_request) {
        let mut o = Map::new();
        for (k, v) in [
            ("resource", &info.resource),
            ("namespace", &info.namespace),
            ("name", &info.name),
            ("apiGroup", &info.api_group),
            ("apiVersion", &info.api_version),
            ("subresource", &info.subresource),
        ] {
            if !v.is_empty() {
                o.insert(k.into(), json!(v));
            }
        }
        e.insert("objectRef".into(), Value::Object(o));
    }
    let mut status = json!({"metadata": {}, "code": r.code});
    if let Some(err) = r.error {
        status["status"] = json!("Failure");
        status["message"] = json!(err.to_string());
        if !err.reason().is_empty() {
            status["reason"] = json!(err.reason());
        }
    }
    e.insert("responseStatus".into(), status);
    e.insert(
        "requestReceivedTimestamp".into(),
        json!(micro_timestamp(r.received)),
    );
    e.insert("stageTimestamp".into(), json!(micro_timestamp(Utc::now())));
    if let Some(ctx) = r.ctx {
        let decision = if ctx.allowed { "allow" } else { "forbid" };
        e.insert(
            "annotations".into(),
            json!({"authorization.k8s.io/decision": decision, "authorization.k8s.io/reason": ctx.reason}),
        );
    }
    Value::Object(e)
}

impl AuditLog {
    /// Opens (creates or appends to) the audit log.
    ///
    /// Errors: the I/O error of opening `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AuditLog {
            file: Mutex::new(file),
        })
    }

    /// Appends one line for `record`. Write errors are logged, never returned to the client.
    pub fn write(&self, record: &AuditRecord<'_>) {
        let mut line = serde_json::to_vec(&event(record)).unwrap_or_default();
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(&line) {
            tracing::warn!(error = %e, "writing the audit log");
        }
    }
}
