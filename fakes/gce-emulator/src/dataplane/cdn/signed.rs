//! Cloud CDN signed URLs and signed cookies (Cloud CDN docs, "Use signed URLs", "Use signed
//! cookies"): HMAC-SHA1 with a 128-bit key added by `backendServices.addSignedUrlKey`, the
//! signature base64url-encoded (RFC 4648 §5, with padding).
//!
//! - Signed URL: `URL?...&Expires=EXP&KeyName=NAME&Signature=SIG`; the signed string is the
//!   whole URL (scheme, host, path, query) up to and including `KeyName=NAME`.
//! - Signed URL with a prefix: `?URLPrefix=B64URL&Expires=EXP&KeyName=NAME&Signature=SIG`; the
//!   signed string is `URLPrefix=...&Expires=...&KeyName=...`, and the request URL must start
//!   with the decoded prefix.
//! - Signed cookie: `Cloud-CDN-Cookie=URLPrefix=B64URL:Expires=EXP:KeyName=NAME:Signature=SIG`;
//!   the signed string is `URLPrefix=...:Expires=...:KeyName=...`.
//!
//! `Expires` is in seconds since the Unix epoch; a request after it is refused, as is one with an
//! unknown key name or a wrong signature.

use base64::Engine as _;

/// The signed-request cookie's name.
pub const COOKIE: &str = "Cloud-CDN-Cookie";

/// Why a signed request is refused (logged; the client gets 403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No signature in the URL and no signed cookie.
    Unsigned,
    /// A parameter is missing or malformed.
    Malformed(&'static str),
    /// `Expires` has passed.
    Expired,
    /// `KeyName` is not one of the backend service's keys.
    UnknownKey,
    /// The signature does not match.
    BadSignature,
    /// The URL is outside the signed `URLPrefix`.
    OutsidePrefix,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE
}

/// `base64url(HMAC-SHA1(key, data))`.
pub fn sign(key: &[u8], data: &str) -> String {
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    b64().encode(ring::hmac::sign(&k, data.as_bytes()).as_ref())
}

fn verify(keys: &[(String, Vec<u8>)], name: &str, data: &str, sig: &str) -> Result<(), Refusal> {
    let (_, key) = keys
        .iter()
        .find(|(n, _)| n == name)
        .ok_or(Refusal::UnknownKey)?;
    let given = b64()
        .decode(sig)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(sig))
        .map_err(|_| Refusal::BadSignature)?;
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    ring::hmac::verify(&k, data.as_bytes(), &given).map_err(|_| Refusal::BadSignature)
}

fn check_expiry(exp: &str, now_unix: u64) -> Result<(), Refusal> {
    let exp: u64 = exp.parse().map_err(|_| Refusal::Malformed("Expires"))?;
    if now_unix > exp {
        return Err(Refusal::Expired);
    }
    Ok(())
}

fn decode_prefix(p: &str) -> Result<String, Refusal> {
    b64()
        .decode(p)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(p))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or(Refusal::Malformed("URLPrefix"))
}

/// Checks the signature of a request for `url` (`scheme://host/path?query`, as the client sent
/// it) with cookie header values `cookies`, at `now_unix`. `Ok(())` when signed correctly.
pub fn check(
    keys: &[(String, Vec<u8>)],
    url: &str,
    cookies: &[&str],
    now_unix: u64,
) -> Result<(), Refusal> {
    if let Some(i) = url.find("&Signature=").or_else(|| url.find("?Signature=")) {
        let signed = &url[..i];
        let sig = url[i + 11..].split('&').next().unwrap_or("");
        let query = signed.split_once('?').map_or("", |(_, q)| q);
        let param = |k: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
        };
        let name = param("KeyName").ok_or(Refusal::Malformed("KeyName"))?;
        check_expiry(
            param("Expires").ok_or(Refusal::Malformed("Expires"))?,
            now_unix,
        )?;
        if let Some(prefix) = param("URLPrefix") {
            let data = &query[query.find("URLPrefix=").unwrap_or(0)..];
            verify(keys, name, data, sig)?;
            if !url.starts_with(&decode_prefix(prefix)?) {
                return Err(Refusal::OutsidePrefix);
            }
            return Ok(());
        }
        return verify(keys, name, signed, sig);
    }
    let cookie = cookies
        .iter()
        .flat_map(|c| c.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim_matches('"'));
    let Some(cookie) = cookie else {
        return Err(Refusal::Unsigned);
    };
    let (data, sig) = cookie
        .rsplit_once(":Signature=")
        .ok_or(Refusal::Malformed("Signature"))?;
    let field = |k: &str| {
        data.split(':')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
    };
    let name = field("KeyName").ok_or(Refusal::Malformed("KeyName"))?;
    check_expiry(
        field("Expires").ok_or(Refusal::Malformed("Expires"))?,
        now_unix,
    )?;
    let prefix = decode_prefix(field("URLPrefix").ok_or(Refusal::Malformed("URLPrefix"))?)?;
    verify(keys, name, data, sig)?;
    if !url.starts_with(&prefix) {
        return Err(Refusal::OutsidePrefix);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<(String, Vec<u8>)> {
        vec![("k1".into(), b"0123456789abcdef".to_vec())]
    }

    #[test]
    fn signed_urls() {
        let k = &keys()[0].1;
        let base = "http://cdn.example/a.png?Expires=2000&KeyName=k1";
        let url = format!("{base}&Signature={}", sign(k, base));
        assert_eq!(check(&keys(), &url, &[], 1000), Ok(()));
        assert_eq!(check(&keys(), &url, &[], 2001), Err(Refusal::Expired));
        let tampered = url.replace("/a.png", "/b.png");
        assert_eq!(
            check(&keys(), &tampered, &[], 1000),
            Err(Refusal::BadSignature)
        );
        let other = url.replace("KeyName=k1", "KeyName=k2");
        assert_eq!(check(&keys(), &other, &[], 1000), Err(Refusal::UnknownKey));
        assert_eq!(
            check(&keys(), "http://cdn.example/a.png", &[], 1000),
            Err(Refusal::Unsigned)
        );

        let prefix = b64().encode("http://cdn.example/img/");
        let data = format!("URLPrefix={prefix}&Expires=2000&KeyName=k1");
        let url = format!(
            "http://cdn.example/img/x.png?{data}&Signature={}",
            sign(k, &data)
        );
        assert_eq!(check(&keys(), &url, &[], 1000), Ok(()));
        let outside = format!(
            "http://cdn.example/other.png?{data}&Signature={}",
            sign(k, &data)
        );
        assert_eq!(
            check(&keys(), &outside, &[], 1000),
            Err(Refusal::OutsidePrefix)
        );
    }

    #[test]
    fn signed_cookies() {
        let k = &keys()[0].1;
        let prefix = b64().encode("http://cdn.example/");
        let data = format!("URLPrefix={prefix}:Expires=2000:KeyName=k1");
        let cookie = format!("a=b; {COOKIE}={data}:Signature={}", sign(k, &data));
        assert_eq!(
            check(&keys(), "http://cdn.example/x", &[&cookie], 1000),
            Ok(())
        );
        let bad = cookie.replace("Expires=2000", "Expires=2999");
        assert_eq!(
            check(&keys(), "http://cdn.example/x", &[&bad], 1000),
            Err(Refusal::BadSignature)
        );
    }
}
