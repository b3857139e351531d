//! `cdnPolicy` compiled: cache keys, what may be stored and for how long (Cloud CDN docs,
//! "Cache modes", "Cacheable content", "Use negative caching", "Set TTLs").
//!
//! - `CACHE_ALL_STATIC` (default): responses with explicit freshness (`max-age`, `s-maxage`,
//!   `Expires`) for their TTL capped at `maxTtl` (default 86400 s), and static content (images,
//!   video, audio, fonts, CSS, JavaScript, PDF) without directives for `defaultTtl` (3600 s);
//! - `USE_ORIGIN_HEADERS`: only responses with explicit freshness, for their own TTL;
//! - `FORCE_CACHE_ALL`: every cacheable status for `defaultTtl`, ignoring `private`,
//!   `no-store` and `no-cache`;
//! - cacheable statuses 200, 203, 204, 206, 300, 301, 308; with `negativeCaching`, 404, 405,
//!   410, 421, 451, 501 too (120 s) and 300, 301, 308 (600 s), or the TTLs of
//!   `negativeCachingPolicy`;
//! - `clientTtl` caps the `max-age` clients are told in CACHE_ALL_STATIC and FORCE_CACHE_ALL.
//!
//! RFC 9111 freshness and storability of `USE_ORIGIN_HEADERS` and explicit-directive responses
//! come from `http-cache-semantics` (as a shared cache).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, SET_COOKIE, VARY};
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use serde_json::Value;

/// `cdnPolicy.cacheMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// `CACHE_ALL_STATIC`.
    CacheAllStatic,
    /// `USE_ORIGIN_HEADERS`.
    UseOriginHeaders,
    /// `FORCE_CACHE_ALL`.
    ForceCacheAll,
}

/// A compiled `cdnPolicy`.
#[derive(Clone, Debug)]
pub struct CdnPolicy {
    /// `cacheMode`.
    pub mode: CacheMode,
    /// `defaultTtl`.
    pub default_ttl: Duration,
    /// `maxTtl`.
    pub max_ttl: Duration,
    /// `clientTtl`.
    pub client_ttl: Option<Duration>,
    /// `negativeCaching`.
    pub negative_caching: bool,
    /// `negativeCachingPolicy`: status -> TTL.
    pub negative_policy: HashMap<u16, Duration>,
    /// `serveWhileStale`.
    pub serve_while_stale: Duration,
    /// `requestCoalescing` (default true).
    pub request_coalescing: bool,
    /// `bypassCacheOnRequestHeaders`.
    pub bypass_headers: Vec<HeaderName>,
    include_protocol: bool,
    include_host: bool,
    include_query: bool,
    query_whitelist: Vec<String>,
    query_blacklist: Vec<String>,
    key_headers: Vec<HeaderName>,
    key_cookies: Vec<String>,
}

/// Whether a response is stored.
#[derive(Debug, PartialEq, Eq)]
pub enum Storable {
    /// Stored for this long.
    Yes(Duration),
    /// Not stored, and why (logged as `cacheDecision`).
    No(&'static str),
}

fn secs(v: &Value, f: &str) -> Option<Duration> {
    v.get(f)
        .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
        .map(Duration::from_secs)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn is_static(content_type: &str) -> bool {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    ["image/", "video/", "audio/", "font/"]
        .iter()
        .any(|p| ct.starts_with(p))
        || matches!(
            ct.as_str(),
            "text/css"
                | "text/javascript"
                | "text/ecmascript"
                | "application/javascript"
                | "application/x-javascript"
                | "application/ecmascript"
                | "application/pdf"
                | "application/wasm"
                | "application/font-woff"
                | "application/x-font-ttf"
                | "application/vnd.ms-fontobject"
        )
}

impl CdnPolicy {
    /// Compiles `cdnPolicy` (absent fields take the API's defaults).
    pub fn compile(p: &Value) -> CdnPolicy {
        let mode = match p.get("cacheMode").and_then(Value::as_str) {
            Some("USE_ORIGIN_HEADERS") => CacheMode::UseOriginHeaders,
            Some("FORCE_CACHE_ALL") => CacheMode::ForceCacheAll,
            _ => CacheMode::CacheAllStatic,
        };
        let k = p.get("cacheKeyPolicy");
        let kb = |f: &str| {
            k.and_then(|k| k.get(f))
                .and_then(Value::as_bool)
                .unwrap_or(true)
        };
        CdnPolicy {
            mode,
            default_ttl: secs(p, "defaultTtl").unwrap_or(Duration::from_secs(3600)),
            max_ttl: secs(p, "maxTtl").unwrap_or(Duration::from_secs(86400)),
            client_ttl: secs(p, "clientTtl"),
            negative_caching: p
                .get("negativeCaching")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            negative_policy: p
                .get("negativeCachingPolicy")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|n| {
                    let code = n.get("code")?.as_u64()? as u16;
                    Some((code, secs(n, "ttl").unwrap_or_default()))
                })
                .collect(),
            serve_while_stale: secs(p, "serveWhileStale").unwrap_or_default(),
            request_coalescing: p
                .get("requestCoalescing")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            bypass_headers: p
                .get("bypassCacheOnRequestHeaders")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| {
                    HeaderName::from_bytes(h.get("headerName")?.as_str()?.as_bytes()).ok()
                })
                .collect(),
            include_protocol: kb("includeProtocol"),
            include_host: kb("includeHost"),
            include_query: kb("includeQueryString"),
            query_whitelist: strings(k.and_then(|k| k.get("queryStringWhitelist"))),
            query_blacklist: strings(k.and_then(|k| k.get("queryStringBlacklist"))),
            key_headers: strings(k.and_then(|k| k.get("includeHttpHeaders")))
                .iter()
                .filter_map(|h| HeaderName::from_bytes(h.as_bytes()).ok())
                .collect(),
            key_cookies: strings(k.and_then(|k| k.get("includeNamedCookies"))),
        }
    }

    /// The cache key of a request.
    pub fn cache_key(
        &self,
        scheme: &str,
        host: &str,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> String {
        let mut key = String::new();
        if self.include_protocol {
            key.push_str(scheme);
            key.push_str("://");
        }
        if self.include_host {
            key.push_str(&host.to_ascii_lowercase());
        }
        key.push_str(path);
        if let (true, Some(q)) = (self.include_query, query) {
            let kept: Vec<&str> = q
                .split('&')
                .filter(|kv| {
                    let name = kv.split('=').next().unwrap_or("");
                    if !self.query_whitelist.is_empty() {
                        self.query_whitelist.iter().any(|w| w == name)
                    } else {
                        !self.query_blacklist.iter().any(|b| b == name)
                    }
                })
                .collect();
            if !kept.is_empty() {
                key.push('?');
                key.push_str(&kept.join("&"));
            }
        }
        for h in &self.key_headers {
            key.push_str(&format!(
                "\n{h}:{}",
                headers
                    .get(h)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()))
                    .unwrap_or_default()
            ));
        }
        for c in &self.key_cookies {
            let v = headers
                .get_all(COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|kv| kv.trim().split_once('='))
                .find(|(k, _)| k == c)
                .map(|(_, v)| v.to_string())
                .unwrap_or_default();
            key.push_str(&format!("\ncookie {c}={v}"));
        }
        key
    }

    fn status_ttl(&self, status: u16) -> Option<Option<Duration>> {
        // Some(None): cacheable, TTL from the mode; Some(Some(t)): negative caching TTL.
        match status {
            200 | 203 | 204 | 206 => Some(None),
            300 | 301 | 308 => Some(self.negative_caching.then(|| {
                *self
                    .negative_policy
                    .get(&status)
                    .unwrap_or(&Duration::from_secs(600))
            })),
            404 | 405 | 410 | 421 | 451 | 501 if self.negative_caching => Some(Some(
                *self
                    .negative_policy
                    .get(&status)
                    .unwrap_or(&Duration::from_secs(120)),
            )),
            _ => None,
        }
    }

    /// Whether and for how long `resp` (fetched at `now`) is stored.
    pub fn decide<B>(&self, resp: &Response<B>, now: SystemTime) -> Storable {
        let h = resp.headers();
        if h.contains_key(SET_COOKIE) {
            return Storable::No("RESPONSE_HAS_SET_COOKIE");
        }
        if let Some(v) = h.get(VARY).and_then(|v| v.to_str().ok()) {
            let ok = v.split(',').map(str::trim).all(|x| {
                x.eq_ignore_ascii_case("accept")
                    || x.eq_ignore_ascii_case("accept-encoding")
                    || x.eq_ignore_ascii_case("origin")
            });
            if !ok {
                return Storable::No("RESPONSE_VARY_NOT_SUPPORTED");
            }
        }
        let Some(negative) = self.status_ttl(resp.status().as_u16()) else {
            return Storable::No("RESPONSE_STATUS_NOT_CACHEABLE");
        };
        let cc = h
            .get_all(CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|d| d.trim().to_ascii_lowercase())
            .collect::<Vec<_>>();
        let has = |d: &str| cc.iter().any(|x| x == d || x.starts_with(&format!("{d}=")));
        if self.mode == CacheMode::ForceCacheAll {
            return Storable::Yes(negative.unwrap_or(self.default_ttl));
        }
        if has("private") {
            return Storable::No("RESPONSE_CACHE_CONTROL_PRIVATE");
        }
        if has("no-store") {
            return Storable::No("RESPONSE_CACHE_CONTROL_NO_STORE");
        }
        if has("no-cache") {
            return Storable::No("RESPONSE_CACHE_CONTROL_NO_CACHE");
        }
        let explicit = has("max-age") || has("s-maxage") || h.contains_key(http::header::EXPIRES);
        if explicit {
            let req = http::Request::get("/").body(()).expect("valid request");
            let rfc = http_cache_semantics::CachePolicy::new(&req, resp);
            if !rfc.is_storable() {
                return Storable::No("RESPONSE_NOT_STORABLE");
            }
            let ttl = rfc.time_to_live(now);
            if ttl.is_zero() {
                return Storable::No("RESPONSE_EXPIRED");
            }
            return Storable::Yes(match self.mode {
                CacheMode::CacheAllStatic => ttl.min(self.max_ttl),
                _ => ttl,
            });
        }
        if let Some(t) = negative {
            if self.mode != CacheMode::UseOriginHeaders {
                return Storable::Yes(t);
            }
        }
        match self.mode {
            CacheMode::UseOriginHeaders => Storable::No("RESPONSE_HAS_NO_CACHE_DIRECTIVES"),
            _ => {
                let ct = h
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                if is_static(ct) {
                    Storable::Yes(self.default_ttl)
                } else {
                    Storable::No("RESPONSE_CONTENT_NOT_STATIC")
                }
            }
        }
    }

    /// Caps the `max-age` clients see at `clientTtl` (CACHE_ALL_STATIC and FORCE_CACHE_ALL).
    pub fn client_cache_control(&self, h: &mut HeaderMap) {
        let (Some(client), false) = (self.client_ttl, self.mode == CacheMode::UseOriginHeaders)
        else {
            return;
        };
        let max_age = h
            .get(CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split(',')
                    .find_map(|d| d.trim().strip_prefix("max-age=")?.parse::<u64>().ok())
            });
        let capped = max_age.map_or(client.as_secs(), |m| m.min(client.as_secs()));
        if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={capped}")) {
            h.insert(CACHE_CONTROL, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resp(headers: &[(&'static str, &'static str)], status: u16) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
        for (k, v) in headers {
            r.headers_mut().append(*k, HeaderValue::from_static(v));
        }
        r
    }

    #[test]
    fn modes_and_never_cached() {
        let now = SystemTime::now();
        let all_static = CdnPolicy::compile(&json!({"defaultTtl": 100, "maxTtl": 50}));
        assert_eq!(
            all_static.decide(&resp(&[("content-type", "image/png")], 200), now),
            Storable::Yes(Duration::from_secs(100))
        );
        assert_eq!(
            all_static.decide(&resp(&[("content-type", "text/html")], 200), now),
            Storable::No("RESPONSE_CONTENT_NOT_STATIC")
        );
        assert_eq!(
            all_static.decide(&resp(&[("cache-control", "max-age=600")], 200), now),
            Storable::Yes(Duration::from_secs(50))
        );
        assert_eq!(
            all_static.decide(
                &resp(
                    &[("cache-control", "max-age=600"), ("set-cookie", "a=b")],
                    200
                ),
                now
            ),
            Storable::No("RESPONSE_HAS_SET_COOKIE")
        );
        assert_eq!(
            all_static.decide(
                &resp(&[("cache-control", "private, max-age=600")], 200),
                now
            ),
            Storable::No("RESPONSE_CACHE_CONTROL_PRIVATE")
        );
        assert_eq!(
            all_static.decide(&resp(&[("cache-control", "no-store")], 200), now),
            Storable::No("RESPONSE_CACHE_CONTROL_NO_STORE")
        );
        assert_eq!(
            all_static.decide(&resp(&[("content-type", "image/png")], 404), now),
            Storable::No("RESPONSE_STATUS_NOT_CACHEABLE")
        );

        let origin = CdnPolicy::compile(&json!({"cacheMode": "USE_ORIGIN_HEADERS"}));
        assert_eq!(
            origin.decide(&resp(&[("content-type", "image/png")], 200), now),
            Storable::No("RESPONSE_HAS_NO_CACHE_DIRECTIVES")
        );
        assert_eq!(
            origin.decide(&resp(&[("cache-control", "s-maxage=30")], 200), now),
            Storable::Yes(Duration::from_secs(30))
        );

        let force = CdnPolicy::compile(
            &json!({"cacheMode": "FORCE_CACHE_ALL", "defaultTtl": 7, "negativeCaching": true, "negativeCachingPolicy": [{"code": 404, "ttl": 9}]}),
        );
        assert_eq!(
            force.decide(&resp(&[("cache-control", "private")], 200), now),
            Storable::Yes(Duration::from_secs(7))
        );
        assert_eq!(
            force.decide(&resp(&[("set-cookie", "a=b")], 200), now),
            Storable::No("RESPONSE_HAS_SET_COOKIE")
        );
        assert_eq!(
            force.decide(&resp(&[], 404), now),
            Storable::Yes(Duration::from_secs(9))
        );
        assert_eq!(
            force.decide(&resp(&[], 410), now),
            Storable::Yes(Duration::from_secs(120))
        );
        assert_eq!(
            force.decide(&resp(&[], 500), now),
            Storable::No("RESPONSE_STATUS_NOT_CACHEABLE")
        );
    }

    #[test]
    fn cache_keys() {
        let h = HeaderMap::new();
        let p = CdnPolicy::compile(&json!({}));
        assert_eq!(
            p.cache_key("http", "Shop.example", "/a", Some("x=1&y=2"), &h),
            "http://shop.example/a?x=1&y=2"
        );
        let p = CdnPolicy::compile(
            &json!({"cacheKeyPolicy": {"includeHost": false, "includeProtocol": false, "queryStringWhitelist": ["y"]}}),
        );
        assert_eq!(
            p.cache_key("http", "shop.example", "/a", Some("x=1&y=2"), &h),
            "/a?y=2"
        );
        let p = CdnPolicy::compile(&json!({"cacheKeyPolicy": {"includeQueryString": false}}));
        assert_eq!(
            p.cache_key("https", "h", "/a", Some("x=1"), &h),
            "https://h/a"
        );
        let p = CdnPolicy::compile(
            &json!({"cacheKeyPolicy": {"queryStringBlacklist": ["x"], "includeNamedCookies": ["lang"]}}),
        );
        let mut h = HeaderMap::new();
        h.insert("cookie", "lang=fr; other=1".parse().unwrap());
        assert_eq!(
            p.cache_key("http", "h", "/a", Some("x=1&y=2"), &h),
            "http://h/a?y=2\ncookie lang=fr"
        );
    }
}
