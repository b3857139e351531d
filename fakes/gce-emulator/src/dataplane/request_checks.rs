//! What the data plane refuses from clients before it routes a request, beyond what hyper's
//! HTTP/1 parser (httparse, in its strict defaults) already refuses, and Google's error page
//! for the answers the proxy itself gives.
//!
//! hyper refuses with 400 what no HTTP/1.1 recipient may accept: whitespace between a field
//! name and its colon, obs-fold, control bytes (NUL, bare CR) in the request line or a field,
//! conflicting `Content-Length` values, a `Transfer-Encoding` whose last coding is not
//! `chunked`, `Transfer-Encoding` on HTTP/1.0; with 431 a head larger than its buffer, and it
//! times out a head that does not arrive (listener.rs). [`check`] adds the rules of RFC 9112
//! that hyper leaves to the application, as nginx applies them:
//!
//! - an HTTP/1.1 request without `Host`, with more than one `Host` field line, or with a `Host`
//!   that is not an authority (`host[:port]`): 400 (RFC 9112 section 3.2);
//! - more than one `Transfer-Encoding` field line: 400; a transfer coding other than exactly
//!   `chunked` (`identity, chunked` passes hyper, which checks only the last coding): 501, as
//!   nginx answers (RFC 9112 section 6.1: "SHOULD respond with 501 (Not Implemented)");
//! - a request target longer than [`MAX_REQUEST_TARGET_BYTES`]: 414 (a head beyond the 64 KiB
//!   buffer is hyper's 431 before the target can be seen);
//! - identical duplicate `Content-Length` lines, and `Content-Length` with `Transfer-Encoding`
//!   in either order: 400, as nginx answers (RFC 9112 section 6.1 allows refusing them). hyper
//!   resolves both while parsing (it keeps one length, or drops the length and reads the chunked
//!   body) and leaves no trace in the request, so the connection's head tap (head_tap.rs) sees
//!   them in the bytes and marks the request with [`AmbiguousFraming`]; the answer closes the
//!   connection. Either way no endpoint sees a request boundary the proxy did not, since the
//!   proxy re-frames what it forwards (`tests/dataplane_hostile_clients.rs` proves it).
//!
//! A request body that breaks its framing midway (an invalid or overflowing chunk size) is
//! found only while it is forwarded: [`client_body_failed`] tells the proxy that the failure
//! was the client's, which answers 400 instead of 502.

use std::error::Error as StdError;

use bytes::Bytes;
use http::header::{HOST, TRANSFER_ENCODING};
use http::{Request, StatusCode, Version};

use crate::dataplane::head_tap::AmbiguousFraming;
use crate::dataplane::upstream::UpstreamError;

/// Longest request target (path and query, or absolute URI) accepted, in bytes (16 KiB; nginx
/// allows an 8 KiB request line by default, hyper up to 64 KiB).
pub const MAX_REQUEST_TARGET_BYTES: usize = 16 * 1024;

/// Why a request is refused: the status, Cloud Logging's `statusDetails` and a sentence for
/// the error page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Status answered.
    pub status: StatusCode,
    /// The `statusDetails` value the load balancer logs would carry (`client_error`...).
    pub status_details: &'static str,
    /// What was wrong, naming the header or part of the request.
    pub why: String,
    /// Whether the answer closes the connection (`Connection: close`): after a head whose
    /// framing was ambiguous, as nginx closes after such a 400.
    pub close_connection: bool,
}

fn refuse(status: StatusCode, status_details: &'static str, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        status_details,
        why: why.into(),
        close_connection: false,
    }
}

/// Whether `v` is a valid `Host` value: an authority without user information
/// (`uri-host [ ":" port ]`, RFC 9112 section 3.2, RFC 3986 section 3.2.2).
///
/// Most `Host` values are a plain name or IPv4 address with an optional port, which
/// [`plain_host`] accepts in one pass over the bytes; only the rest are parsed as an
/// `Authority`, which copied the value into a new buffer and searched it for the host (about
/// 1,400 instructions of a request's ~33,000, `make bench-instructions`).
fn valid_host(v: &[u8]) -> bool {
    plain_host(v) || valid_authority_host(v)
}

/// Whether `v` is `name[:port]` with a non-empty name of ASCII letters, digits, `.` and `-` and
/// a port of one or more digits: a subset of what [`valid_authority_host`] accepts (such a value
/// is an `Authority` with one colon and no user information, brackets or `%`), checked without
/// parsing.
///
/// One loop over the name's bytes with a table lookup each: a search for the colon and then a
/// check of each byte by comparisons cost about 250 instructions per request for
/// `shop.example`.
fn plain_host(v: &[u8]) -> bool {
    let name = v.iter().take_while(|&&b| NAME_BYTE[b as usize]).count();
    match v.get(name) {
        _ if name == 0 => false,
        None => true,
        // The first byte that is not a name byte must be the colon before the port.
        Some(b':') => {
            let port = &v[name + 1..];
            !port.is_empty() && port.iter().all(u8::is_ascii_digit)
        }
        Some(_) => false,
    }
}

/// The bytes of a plain host name: ASCII letters, digits, `.` and `-`.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
        i += 1;
    }
    t
};

/// [`valid_host`] for any value: parsed as an `Authority`.
fn valid_authority_host(v: &[u8]) -> bool {
    if v.is_empty() || v.contains(&b'@') {
        return false;
    }
    let Ok(a) = http::uri::Authority::try_from(v) else {
        return false;
    };
    // `Authority` takes any characters after the last colon; a port is digits only.
    let host = a.host();
    let rest = &a.as_str()[a.as_str().find(host).unwrap_or(0) + host.len()..];
    rest.strip_prefix(':')
        .map_or(rest.is_empty(), |p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The checks of this module on a parsed request head. Errors: the [`Refusal`] to answer.
/// HTTP/2 requests pass: their framing leaves no room for these ambiguities, and `:authority`
/// replaces `Host`.
pub fn check<B>(req: &Request<B>) -> Result<(), Refusal> {
    let version = req.version();
    if version != Version::HTTP_11 && version != Version::HTTP_10 {
        return Ok(());
    }
    if let Some(AmbiguousFraming(why)) = req.extensions().get() {
        let mut r = refuse(StatusCode::BAD_REQUEST, "client_error", *why);
        r.close_connection = true;
        return Err(r);
    }
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len())
        + req.uri().authority().map_or(0, |a| a.as_str().len());
    if target > MAX_REQUEST_TARGET_BYTES {
        return Err(refuse(
            StatusCode::URI_TOO_LONG,
            "client_error",
            format!("request target of {target} bytes; at most {MAX_REQUEST_TARGET_BYTES}"),
        ));
    }
    let mut hosts = req.headers().get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if version == Version::HTTP_11 => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "client_error",
                "HTTP/1.1 request without a Host header",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "client_error",
                "more than one Host header",
            ))
        }
        (Some(h), None) if !valid_host(h.as_bytes()) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "client_error",
                "the Host header is not a valid host[:port]",
            ))
        }
        _ => {}
    }
    let mut codings = req.headers().get_all(TRANSFER_ENCODING).iter();
    match (codings.next(), codings.next()) {
        (Some(_), Some(_)) => Err(refuse(
            StatusCode::BAD_REQUEST,
            "client_error",
            "more than one Transfer-Encoding header",
        )),
        (Some(te), None) if !te.as_bytes().trim_ascii().eq_ignore_ascii_case(b"chunked") => {
            Err(refuse(
                StatusCode::NOT_IMPLEMENTED,
                "client_error",
                "a transfer coding other than chunked",
            ))
        }
        _ => Ok(()),
    }
}

/// Whether a failed upstream exchange failed because the client's request body broke its own
/// framing (an invalid or overflowing chunk size, a body cut short): hyper's client reports
/// the body it was sending as a user error whose cause is the server side's read error, an
/// I/O error of kind `InvalidData`, `InvalidInput` or `UnexpectedEof`.
pub fn client_body_failed(e: &UpstreamError) -> bool {
    match e {
        UpstreamError::Http(h) => caused_by_client_body(h),
        UpstreamError::Client(c) => caused_by_client_body(c),
        _ => false,
    }
}

fn caused_by_client_body(e: &(dyn StdError + 'static)) -> bool {
    let mut user = false;
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            user |= h.is_user();
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
            if user && matches!(io.kind(), InvalidData | InvalidInput | UnexpectedEof) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// The title Google's front ends give an error page of `status` (`Error 502 (Server Error)!!1`).
fn title(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        411 => "Length Required",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Server Error",
    }
}

/// The body of an error the load balancer answers itself, in the shape of Google's front-end
/// error pages (an HTML page titled `Error 502 (Server Error)!!1`, "That's an error."), with
/// Cloud Logging's `statusDetails` and the reason in a comment, so a developer sees why
/// without a log. The content type is `text/html; charset=UTF-8`.
pub fn error_page(status: StatusCode, status_details: &str, why: &str) -> Bytes {
    let code = status.as_u16();
    let text = if status.is_client_error() || code == 501 {
        "Your client has issued a malformed or illegal request."
    } else {
        "The server encountered a temporary error and could not complete your request.<p>Please try again in 30 seconds."
    };
    // A comment ends at the first `--`: keep the reason from closing it early.
    let why = why.replace("--", "- -");
    Bytes::from(format!(
        "<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error {code} ({})!!1</title>\n  <p><b>{code}.</b> <ins>That\u{2019}s an error.</ins>\n  <p>{text}  <ins>That\u{2019}s all we know.</ins>\n  <!-- statusDetails: {status_details}: {why} -->\n",
        title(status)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().version(version).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    fn status(r: Result<(), Refusal>) -> u16 {
        r.map_or_else(|e| e.status.as_u16(), |()| 200)
    }

    #[test]
    fn plain_hosts_are_judged_as_the_authority_parse_judges_them() {
        let hosts = [
            "shop.example",
            "shop.example:8080",
            "127.0.0.1:80",
            "a-b.c",
            "-",
            "A.EXAMPLE:1",
            "a:",
            ":80",
            "a::80",
            "a:8x",
            "a:-1",
            "a b",
            "a_b",
            "a%41",
            "u@a",
            "[::1]:80",
            "",
            "a.example:99999999",
            "a/b",
            "a?b",
            "é.example",
        ];
        for h in hosts {
            let plain = plain_host(h.as_bytes());
            let parsed = valid_authority_host(h.as_bytes());
            // The fast path accepts only what the parse accepts...
            assert!(
                !plain || parsed,
                "{h:?}: plain_host accepts what the parse refuses"
            );
            // ...and the verdict is the parse's either way.
            assert_eq!(valid_host(h.as_bytes()), parsed, "{h:?}");
        }
        // The usual values take the fast path.
        for h in ["shop.example", "shop.example:8080", "127.0.0.1:80"] {
            assert!(plain_host(h.as_bytes()), "{h:?}");
        }
    }

    /// The table-driven [`plain_host`] agrees with the definition it replaced (the name before
    /// the first colon of letters, digits, `.` and `-`, non-empty; a port, if any, of one or
    /// more digits) on every value of up to 6 bytes over the bytes that matter.
    #[test]
    fn plain_host_agrees_with_its_definition() {
        let definition = |v: &[u8]| {
            let (name, port) = match v.iter().position(|&b| b == b':') {
                Some(i) => (&v[..i], Some(&v[i + 1..])),
                None => (v, None),
            };
            !name.is_empty()
                && name
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                && port.is_none_or(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
        };
        let alphabet = *b"aZ1.-:_@";
        let mut checked = 0;
        for len in 0..=6u32 {
            for n in 0..alphabet.len().pow(len) {
                let mut k = n;
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        let b = alphabet[k % alphabet.len()];
                        k /= alphabet.len();
                        b
                    })
                    .collect();
                assert_eq!(
                    plain_host(&v),
                    definition(&v),
                    "{:?}",
                    String::from_utf8_lossy(&v)
                );
                checked += 1;
            }
        }
        assert_eq!(checked, (0..=6).map(|l| 8usize.pow(l)).sum::<usize>());
    }

    #[test]
    fn host_rules_of_rfc_9112() {
        let v11 = Version::HTTP_11;
        assert_eq!(status(check(&req(v11, "/", &[("host", "a.example")]))), 200);
        assert_eq!(status(check(&req(v11, "/", &[("host", "a:80")]))), 200);
        assert_eq!(status(check(&req(v11, "/", &[]))), 400);
        assert_eq!(status(check(&req(Version::HTTP_10, "/", &[]))), 200);
        let two = [("host", "a.example"), ("host", "a.example")];
        assert_eq!(status(check(&req(v11, "/", &two))), 400);
        assert_eq!(status(check(&req(Version::HTTP_10, "/", &two))), 400);
        for bad in ["", "u@a.example", "a b", "a/b", "a:x"] {
            assert_eq!(
                status(check(&req(v11, "/", &[("host", bad)]))),
                400,
                "{bad:?}"
            );
        }
        // HTTP/2 carries :authority instead.
        assert_eq!(status(check(&req(Version::HTTP_2, "/", &[]))), 200);
    }

    #[test]
    fn transfer_codings_and_target_length() {
        let h = ("host", "a");
        let te = |v| check(&req(Version::HTTP_11, "/", &[h, ("transfer-encoding", v)]));
        assert_eq!(status(te("chunked")), 200);
        assert_eq!(status(te(" Chunked ")), 200);
        assert_eq!(status(te("identity, chunked")), 501);
        assert_eq!(status(te("gzip")), 501);
        let two = [
            h,
            ("transfer-encoding", "chunked"),
            ("transfer-encoding", "chunked"),
        ];
        assert_eq!(status(check(&req(Version::HTTP_11, "/", &two))), 400);
        let long = format!("/{}", "a".repeat(MAX_REQUEST_TARGET_BYTES));
        assert_eq!(status(check(&req(Version::HTTP_11, &long, &[h]))), 414);
        let fits = format!("/{}", "a".repeat(MAX_REQUEST_TARGET_BYTES - 1));
        assert_eq!(status(check(&req(Version::HTTP_11, &fits, &[h]))), 200);
    }

    #[test]
    fn heads_the_tap_found_ambiguous_are_refused() {
        let mut r = req(Version::HTTP_11, "/", &[("host", "a")]);
        assert_eq!(status(check(&r)), 200);
        r.extensions_mut().insert(AmbiguousFraming("two lengths"));
        let e = check(&r).unwrap_err();
        assert_eq!((e.status.as_u16(), e.why.as_str()), (400, "two lengths"));
        // Its answer closes the connection (the proxy adds `Connection: close`); other
        // refusals keep it open.
        assert!(e.close_connection);
        let no_host = check(&req(Version::HTTP_11, "/", &[])).unwrap_err();
        assert!(!no_host.close_connection);
    }

    #[test]
    fn client_body_errors_are_told_apart() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidInput, "Invalid chunk size");
        // Without a hyper user error around it, an I/O error is the endpoint's.
        assert!(!caused_by_client_body(&io));
        let other = std::io::Error::other("connection reset");
        assert!(!caused_by_client_body(&other));
        assert!(!client_body_failed(&UpstreamError::Drained));
    }

    #[test]
    fn error_pages_have_googles_title_and_the_reason() {
        let p = error_page(StatusCode::GATEWAY_TIMEOUT, "backend_timeout", "a -- b");
        let p = std::str::from_utf8(&p).unwrap();
        assert!(
            p.contains("<title>Error 504 (Gateway Timeout)!!1</title>"),
            "{p}"
        );
        assert!(
            p.contains("statusDetails: backend_timeout: a - - b -->"),
            "{p}"
        );
        let p = error_page(StatusCode::BAD_REQUEST, "client_error", "x");
        assert!(std::str::from_utf8(&p)
            .unwrap()
            .contains("malformed or illegal"));
    }
}
