//! Cloud CDN on backend services with `enableCDN: true` and their `cdnPolicy` (Compute API v1
//! `BackendServiceCdnPolicy`; Cloud CDN docs, "Caching overview", "Cache modes", "Cache keys",
//! "Use negative caching", "Invalidate cached content", "Use signed URLs/cookies").
//!
//! - Only `GET` and `HEAD` requests are looked up; `bypassCacheOnRequestHeaders` skips the
//!   cache for requests carrying one of the named headers.
//! - Cache key (`cacheKeyPolicy`): protocol, host, path and query string by default;
//!   `includeProtocol`, `includeHost`, `includeQueryString` false leave a part out;
//!   `queryStringWhitelist` / `queryStringBlacklist`; `includeHttpHeaders`; `includeNamedCookies`.
//! - What is stored ([`policy::decide`]), per `cacheMode` and RFC 9111 freshness computed by the
//!   `http-cache-semantics` crate; never a response with `Set-Cookie`, never `private` or
//!   `no-store` (except under FORCE_CACHE_ALL, which ignores those directives, as documented),
//!   never a `Vary` on anything but `Accept`, `Accept-Encoding` or `Origin`.
//! - A hit is answered from memory with `Age` (seconds in the cache plus the backend's `Age`);
//!   `serveWhileStale` serves an expired entry for that many seconds more while the next request
//!   refreshes it; `requestCoalescing` (default on) lets one request per key fill the cache
//!   while the others wait for it.
//! - With signed URL keys (`backendServices.addSignedUrlKey`), every request must carry a valid
//!   signed URL or signed cookie ([`signed`]); others get 403.
//! - `urlMaps.invalidateCache` removes entries by host and path ([`store::Store::invalidate`]).
//!
//! Responses through a CDN backend are buffered whole when they may be stored.

pub mod policy;
pub mod signed;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AGE, COOKIE};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};

use self::policy::{CdnPolicy, Storable};
use self::store::{Entry, FillGuard, Store};
use crate::dataplane::access_log::{AccessRecord, CacheLog, StatusDetails};
use crate::dataplane::exchange::{local, Body};

/// How long a coalesced request waits for the fill it joined.
const COALESCE_WAIT: Duration = Duration::from_secs(30);

/// A backend service's Cloud CDN.
#[derive(Debug)]
pub struct Cdn {
    /// The backend service key (the cache's namespace).
    pub service: String,
    /// Its compiled `cdnPolicy`.
    pub policy: CdnPolicy,
    /// Signed URL keys: (name, 16-byte key).
    pub keys: Vec<(String, Vec<u8>)>,
}

/// The request facts the CDN needs.
#[derive(Debug)]
pub struct Facts<'a> {
    /// Whether the client used TLS.
    pub https: bool,
    /// Host as sent (with port).
    pub host: &'a str,
    /// Path (normalized).
    pub path: &'a str,
    /// Query, if any.
    pub query: Option<&'a str>,
}

/// What [`Cdn::lookup`] decided.
#[derive(Debug)]
pub enum Lookup {
    /// Answer with this (a hit, or a refusal).
    Respond(Response<Body>),
    /// Go to the backend; [`Fill::store`] the response.
    Fill(Fill),
    /// Go to the backend; nothing to store.
    Bypass,
}

/// A miss that may fill the cache.
#[derive(Debug)]
pub struct Fill {
    store: Arc<Store>,
    service: String,
    key: String,
    host: String,
    path: String,
    policy: CdnPolicy,
    _guard: Option<FillGuard>,
}

fn hit(e: &Entry, now: SystemTime, head: bool, policy: &CdnPolicy) -> Response<Body> {
    let body = if head { Bytes::new() } else { e.body.clone() };
    let mut r = Response::new(Either::Right(Full::new(body)));
    *r.status_mut() = e.status;
    *r.headers_mut() = e.headers.clone();
    policy.client_cache_control(r.headers_mut());
    r.headers_mut().insert(AGE, HeaderValue::from(e.age(now)));
    r.extensions_mut()
        .insert(StatusDetails("response_from_cache"));
    r
}

impl Cdn {
    /// Looks `req` up. Records the cache fields in `rec`.
    pub async fn lookup<B>(
        &self,
        store: &Arc<Store>,
        req: &Request<B>,
        f: &Facts<'_>,
        rec: &mut Option<Box<AccessRecord>>,
    ) -> Lookup {
        let scheme = if f.https { "https" } else { "http" };
        if !self.keys.is_empty() {
            let url = match f.query {
                Some(q) => format!("{scheme}://{}{}?{q}", f.host, f.path),
                None => format!("{scheme}://{}{}", f.host, f.path),
            };
            let cookies: Vec<&str> = req
                .headers()
                .get_all(COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            if let Err(why) = signed::check(&self.keys, &url, &cookies, now) {
                let mut r = local(
                    StatusCode::FORBIDDEN,
                    format!("403 Forbidden: signed request refused: {why:?}\n"),
                );
                r.extensions_mut()
                    .insert(StatusDetails("denied_by_signed_request_check"));
                return Lookup::Respond(r);
            }
        }
        let method = req.method();
        let cacheable_method = method == http::Method::GET || method == http::Method::HEAD;
        let bypass = self
            .policy
            .bypass_headers
            .iter()
            .any(|h| req.headers().contains_key(h));
        let log = rec.as_mut().map(|r| r.cache.insert(CacheLog::default()));
        if !cacheable_method || bypass {
            if let Some(l) = log {
                l.cache_decision.push(if bypass {
                    "REQUEST_HAS_BYPASS_CACHE_HEADER"
                } else {
                    "REQUEST_METHOD_NOT_CACHEABLE"
                });
            }
            return Lookup::Bypass;
        }
        if let Some(l) = log {
            l.cache_lookup = true;
        }
        let key = self
            .policy
            .cache_key(scheme, f.host, f.path, f.query, req.headers());
        let head = method == http::Method::HEAD;
        let mut guard = None;
        for attempt in 0..2 {
            let now = SystemTime::now();
            if let Some(e) = store.get(&self.service, &key) {
                let fresh = e.fresh(now);
                if fresh || e.within_stale_window(now, self.policy.serve_while_stale) {
                    if !fresh {
                        // Served stale; the next request refreshes it.
                        store.remove(&self.service, &key);
                    }
                    if let Some(c) = rec.as_mut().and_then(|r| r.cache.as_mut()) {
                        c.cache_hit = true;
                    }
                    return Lookup::Respond(hit(&e, now, head, &self.policy));
                }
                store.remove(&self.service, &key);
            }
            if attempt == 0 && self.policy.request_coalescing {
                match store.begin_fill(&self.service, &key, COALESCE_WAIT).await {
                    Some(g) => {
                        guard = Some(g);
                        break;
                    }
                    None => continue,
                }
            }
        }
        Lookup::Fill(Fill {
            store: store.clone(),
            service: self.service.clone(),
            key,
            host: f.host.to_string(),
            path: f.path.to_string(),
            policy: self.policy.clone(),
            _guard: guard,
        })
    }
}

impl Fill {
    /// Stores `resp` when the policy allows it (buffering its body), and returns the response
    /// for the client.
    pub async fn store(
        self,
        resp: Response<Body>,
        rec: &mut Option<Box<AccessRecord>>,
    ) -> Response<Body> {
        let now = SystemTime::now();
        let decision = self.policy.decide(&resp, now);
        let log = rec.as_mut().and_then(|r| r.cache.as_mut());
        let ttl = match decision {
            Storable::Yes(ttl) => ttl,
            Storable::No(why) => {
                if let Some(l) = log {
                    l.cache_decision.push(why);
                }
                return resp;
            }
        };
        let (mut parts, body) = resp.into_parts();
        let bytes = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                tracing::debug!(error = %e, "response body failed while filling the cache");
                return bad_fill();
            }
        };
        if let Some(l) = log {
            l.cache_fill_bytes = bytes.len() as u64;
            l.cache_decision.push("CACHED");
        }
        let origin_age = parts
            .headers
            .get(AGE)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let mut headers = parts.headers.clone();
        for h in [HeaderName::from_static("via"), AGE] {
            headers.remove(h);
        }
        self.store.put(
            &self.service,
            self.key,
            Entry {
                status: parts.status,
                headers,
                body: bytes.clone(),
                stored: now,
                origin_age,
                ttl,
                host: self.host,
                path: self.path,
            },
        );
        self.policy.client_cache_control(&mut parts.headers);
        Response::from_parts(parts, Either::Right(Full::new(bytes)))
    }
}

fn bad_fill() -> Response<Body> {
    let mut r = local(
        StatusCode::BAD_GATEWAY,
        "502 Bad Gateway: backend_connection_closed_before_data_sent_to_client\n",
    );
    r.extensions_mut().insert(StatusDetails(
        "backend_connection_closed_before_data_sent_to_client",
    ));
    r
}
