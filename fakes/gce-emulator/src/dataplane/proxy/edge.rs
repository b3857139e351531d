//! The edge steps of a request between routing and the endpoint, for a backend service of
//! the classic Application Load Balancer: the `logConfig` sample (`dataplane/logging/`), the
//! Cloud CDN cache (`dataplane/cdn/`: signed requests, then a hit answers), then on a miss the
//! backend security policy (`dataplane/armor/`) and IAP (`dataplane/iap/`). A backend
//! service's `securityPolicy` is a backend security policy (type `CLOUD_ARMOR`), which filters
//! requests "before they hit the origin servers": a request served from the cache never
//! reaches it; only an edge security policy, which the emulator does not run, filters before
//! the cache (Compute API reference, `SecurityPolicy.type`).

use std::sync::Arc;

use http::header::{HeaderName, HeaderValue};
use http::{Request, Response};
use hyper::body::Incoming;

use crate::dataplane::access_log::AccessRecord;
use crate::dataplane::backend_service::BackendService;
use crate::dataplane::exchange::{Body, ConnInfo};
use crate::dataplane::proxy_context::ProxyContext;
use crate::dataplane::{armor, cdn, iap, logging};

/// Request facts the edge steps read besides the request itself.
#[derive(Debug)]
pub(super) struct Facts<'a> {
    /// The forwarding rule (the log record's `forwarding_rule`).
    pub rule: &'a str,
    /// Host as sent, with its port.
    pub host: &'a str,
    /// The normalized path.
    pub path: &'a str,
    /// The query, if any.
    pub query: Option<&'a str>,
}

/// What the edge steps leave for the forward step.
#[derive(Debug, Default)]
pub(super) struct Edge {
    /// Headers to set on the upstream request (Cloud Armor's `headerAction`, IAP's identity
    /// headers), replacing any the client sent.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The cache entry the backend's response fills, when the CDN looked it up and missed.
    pub fill: Option<Box<cdn::Fill>>,
}

/// Whether `bs` has any edge feature (else [`apply`] is skipped): decided when it was compiled.
pub(super) fn enabled(bs: &BackendService) -> bool {
    bs.edge
}

/// Runs the edge steps for `req` on `bs`: what the forward step needs, or the response that
/// ends the request (a denial, a redirect, IAP's sign-in, a cache hit). Decisions go to `rec`.
pub(super) async fn apply(
    ctx: &ProxyContext,
    conn: &ConnInfo,
    bs: &Arc<BackendService>,
    f: &Facts<'_>,
    req: &Request<Incoming>,
    rec: &mut Option<Box<AccessRecord>>,
) -> Result<Edge, Response<Body>> {
    let mut edge = Edge::default();
    if let Some(l) = &bs.log_config {
        logging::sample(l, f.rule, conn, req, rec);
        if let Some(r) = rec.as_mut() {
            r.backend_service.clone_from(&bs.key);
        }
    }
    if let Some(cdn) = &bs.cdn {
        let facts = cdn::Facts {
            https: conn.https,
            host: f.host,
            path: f.path,
            query: f.query,
        };
        match cdn.lookup(&ctx.cdn, req, &facts, rec).await {
            cdn::Lookup::Respond(resp) => return Err(resp),
            cdn::Lookup::Fill(fill) => edge.fill = Some(Box::new(fill)),
            cdn::Lookup::Bypass => {}
        }
    }
    if let Some(policy) = &bs.security_policy {
        let facts = armor::enforce::Facts {
            conn,
            path: f.path,
            query: f.query,
        };
        edge.headers =
            armor::enforce::enforce(&ctx.armor, policy, &facts, req, rec).map_err(|resp| *resp)?;
    }
    if let Some(iap) = &bs.iap {
        let h = iap::authorize(&ctx.iap, iap, req, f.path, f.query).map_err(|resp| *resp)?;
        edge.headers.extend(h);
    }
    Ok(edge)
}
