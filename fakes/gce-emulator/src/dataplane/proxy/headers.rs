//! The headers the proxy rewrites (Compute docs, "HTTP(S) load balancing headers"):
//! hop-by-hop headers removed (RFC 9110 section 7.6.1), `X-Forwarded-For`, `X-Forwarded-Proto`,
//! `Via: 1.1 google`, the request host, and the variables of custom request and response
//! headers.

use http::header::{HeaderName, HeaderValue, CONNECTION, HOST};
use http::Request;
use hyper::body::Incoming;

use crate::dataplane::exchange::ConnInfo;

pub(super) static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(super) static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// Hop-by-hop headers (RFC 9110 section 7.6.1) a proxy must not forward, then `Connection`.
pub(super) static HOP_BY_HOP: [HeaderName; 7] = [
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::PROXY_AUTHENTICATE,
    CONNECTION,
];

/// The index of `name` in [`HOP_BY_HOP`]. A `match` on the string compiles to a switch on its
/// length, so the usual names are passed over at once.
pub(super) fn hop_by_hop_index(name: &str) -> Option<usize> {
    match name {
        "keep-alive" => Some(0),
        "proxy-connection" => Some(1),
        "te" => Some(2),
        "trailer" => Some(3),
        "transfer-encoding" => Some(4),
        "proxy-authenticate" => Some(5),
        "connection" => Some(6),
        _ => None,
    }
}

/// What one pass over a request's header names found: the hop-by-hop headers to remove, and
/// whether `Upgrade`, `Host` and `X-Forwarded-For` are present, so the proxy needs no hashed
/// lookup for any of them.
#[derive(Debug, Default)]
pub(super) struct Seen {
    hop_by_hop: [bool; HOP_BY_HOP.len()],
    /// `Upgrade` is present (WebSocket).
    pub upgrade: bool,
    /// `Host` is present.
    pub host: bool,
    /// `X-Forwarded-For` is present.
    pub forwarded_for: bool,
}

/// One pass over the names present in `h` (a handful on most messages).
pub(super) fn scan(h: &http::HeaderMap) -> Seen {
    let mut seen = Seen::default();
    for k in h.keys() {
        let k = k.as_str();
        match hop_by_hop_index(k) {
            Some(i) => seen.hop_by_hop[i] = true,
            None => match k {
                "host" => seen.host = true,
                "upgrade" => seen.upgrade = true,
                "x-forwarded-for" => seen.forwarded_for = true,
                _ => {}
            },
        }
    }
    seen
}

/// Removes the hop-by-hop headers `seen` found in `h`, and `Connection` too unless
/// `keep_connection` (an upgrade needs it): only those cost a hashed removal.
pub(super) fn remove_seen(h: &mut http::HeaderMap, seen: &Seen, keep_connection: bool) {
    let mut found = seen.hop_by_hop;
    found[HOP_BY_HOP.len() - 1] &= !keep_connection;
    for (n, _) in HOP_BY_HOP.iter().zip(found).filter(|(_, f)| *f) {
        h.remove(n);
    }
}

/// Removes hop-by-hop headers, and `Connection` too unless `keep_connection` (an upgrade needs
/// it). One pass over the names present (a handful on most messages) notes which to remove, so
/// only those cost a hashed removal; a lookup per hop-by-hop name cost more than all the rest
/// of the header rewriting.
pub(super) fn remove_hop_by_hop(h: &mut http::HeaderMap, keep_connection: bool) {
    let seen = scan(h);
    remove_seen(h, &seen, keep_connection);
}

/// The request host as sent: the URI authority (HTTP/2, absolute form) or the `Host` header.
/// Returned as a cheap clone of the request's bytes so the request can be changed afterwards.
pub(super) fn request_host(req: &Request<Incoming>) -> Option<HeaderValue> {
    match req.uri().authority() {
        Some(a) => HeaderValue::from_str(a.as_str()).ok(),
        None => req.headers().get(HOST).cloned(),
    }
}

/// `host` without its `:port` (an IPv6 literal keeps its brackets).
pub(crate) fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map(|(h, _)| &host[..h.len() + 1])
            .unwrap_or(host);
    }
    // The last colon followed by digits only: walk back over the trailing digits (a byte loop;
    // a reverse search for the colon cost about 200 instructions a request).
    let b = host.as_bytes();
    let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    match b.len().checked_sub(digits + 1) {
        Some(colon) if b[colon] == b':' => &host[..colon],
        _ => host,
    }
}

/// Substitutes the custom header variables that make sense locally; geographic ones are empty
/// (the value Google uses when it cannot determine them).
pub(super) fn expand(template: &str, conn: &ConnInfo, version: http::Version) -> String {
    if !template.contains('{') {
        return template.to_string();
    }
    let proto = match version {
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    template
        .replace("{client_region}", "")
        .replace("{client_region_subdivision}", "")
        .replace("{client_city}", "")
        .replace("{client_city_lat_long}", "")
        .replace("{client_rtt_msec}", "0")
        .replace(
            "{client_encrypted}",
            if conn.https { "true" } else { "false" },
        )
        .replace("{client_protocol}", proto)
        .replace("{client_ip_address}", &conn.client.ip().to_string())
        .replace("{tls_sni_hostname}", conn.sni.as_deref().unwrap_or(""))
        .replace("{tls_version}", conn.tls_version.as_deref().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_ports() {
        assert_eq!(strip_port("shop.example:8080"), "shop.example");
        assert_eq!(strip_port("shop.example"), "shop.example");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        // Only the digits after the last colon are a port; an empty one is stripped too.
        for (host, want) in [
            ("a:", "a"),
            ("a:8x", "a:8x"),
            ("a:b:80", "a:b"),
            ("8080", "8080"),
            (":80", ""),
            ("", ""),
        ] {
            assert_eq!(strip_port(host), want, "{host:?}");
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
            .collect()
    }

    fn names(h: &http::HeaderMap) -> Vec<&str> {
        let mut n: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        n.sort_unstable();
        n
    }

    #[test]
    fn hop_by_hop_index_matches_the_name_list() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name.as_str()), Some(i), "{name}");
        }
        assert_eq!(hop_by_hop_index("host"), None);
        assert_eq!(hop_by_hop_index("upgrade"), None);
    }

    #[test]
    fn one_scan_finds_upgrade_host_and_forwarded_for() {
        let h = headers(&[
            ("host", "shop.example"),
            ("upgrade", "websocket"),
            ("x-forwarded-for", "1.2.3.4"),
        ]);
        let seen = scan(&h);
        assert!(seen.host && seen.upgrade && seen.forwarded_for);
        let seen = scan(&headers(&[("accept", "*/*")]));
        assert!(!seen.host && !seen.upgrade && !seen.forwarded_for);
    }

    #[test]
    fn removes_only_hop_by_hop_headers() {
        let mut h = headers(&[
            ("host", "shop.example"),
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("x-request-id", "7"),
        ]);
        remove_hop_by_hop(&mut h, false);
        assert_eq!(names(&h), ["host", "x-request-id"]);

        // An upgrade keeps `Connection: upgrade`; the other hop-by-hop headers still go.
        let mut h = headers(&[
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
        ]);
        remove_hop_by_hop(&mut h, true);
        assert_eq!(names(&h), ["connection", "upgrade"]);

        // Nothing to remove: untouched.
        let mut h = headers(&[("host", "shop.example"), ("accept", "*/*")]);
        remove_hop_by_hop(&mut h, false);
        assert_eq!(names(&h), ["accept", "host"]);
    }
}
