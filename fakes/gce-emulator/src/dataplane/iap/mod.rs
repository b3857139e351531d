//! Identity-Aware Proxy on backend services with `iap.enabled` (Compute API v1
//! `BackendServiceIAP`; IAP docs, "Securing your app with signed headers", "Getting the user's
//! identity", "Managing access to IAP-secured resources").
//!
//! - A request without a valid IAP session cookie is redirected (302) to a sign-in page the
//!   load balancer serves itself under `/_gcp_iap/` (Google's own sign-in is not reachable
//!   locally): a form asking for an e-mail address, whose submission
//!   (`GET /_gcp_iap/authenticate?email=...&continue=...`) sets the session cookie
//!   [`SESSION_COOKIE`] and redirects back. `/_gcp_iap/clear_login_cookie` signs out.
//! - The identity must be allowed by the emulator's admin API (`PUT /_emulator/iap/accessors`,
//!   what granting `roles/iap.httpsResourceAccessor` does in IAM), for every backend service or
//!   for one; any other identity gets 403.
//! - Allowed requests reach the backend with `x-goog-iap-jwt-assertion`: an ES256 JWT signed
//!   with the emulator's key (header `kid`), claims `iss: https://cloud.google.com/iap`,
//!   `aud: /projects/PROJECT_NUMBER/global/backendServices/SERVICE_ID`, `sub` and `email`,
//!   `iat`, `exp` (10 minutes later), `google` (empty `access_levels`); and with
//!   `x-goog-authenticated-user-email: accounts.google.com:EMAIL` and
//!   `x-goog-authenticated-user-id: accounts.google.com:ID`. Values a client sends in these
//!   headers are replaced, never passed on. The public key is published as a JWK set at
//!   `GET /_emulator/iap/public_key-jwk` (Google's is at gstatic.com/iap/verify/public_key-jwk).
//! - A signed header is reused for the same user and backend service for up to
//!   [`ASSERTION_REUSE_SECS`] (so `iat` is at most that old and `exp` at least 9 minutes
//!   ahead, what a backend checks): an ES256 signature costs about 400,000 instructions, 15
//!   times a whole proxied request (docs/emulator-dataplane.md, the per-feature cost table).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::dataplane::access_log::StatusDetails;
use crate::dataplane::exchange::{local, Body};

/// The session cookie the sign-in page sets.
pub const SESSION_COOKIE: &str = "GCP_IAP_AUTH_TOKEN";
/// Lifetime of a session, in seconds.
pub const SESSION_SECS: u64 = 3600;
/// Lifetime of a signed header JWT, in seconds (Google's are valid 10 minutes).
pub const ASSERTION_SECS: u64 = 600;
/// How long a signed header is reused for the same user and audience, in seconds.
pub const ASSERTION_REUSE_SECS: u64 = 60;
/// Signed headers (one per user and backend service signed in the last
/// [`ASSERTION_REUSE_SECS`]) and checked session cookies kept; each cache is emptied when full.
const ASSERTION_CACHE_MAX: usize = 10_000;
/// `iss` of the signed header.
pub const ISSUER: &str = "https://cloud.google.com/iap";

static ASSERTION: HeaderName = HeaderName::from_static("x-goog-iap-jwt-assertion");
static USER_EMAIL: HeaderName = HeaderName::from_static("x-goog-authenticated-user-email");
static USER_ID: HeaderName = HeaderName::from_static("x-goog-authenticated-user-id");

/// IAP on one backend service.
#[derive(Debug, Clone)]
pub struct Iap {
    /// The backend service key.
    pub service: String,
    /// `/projects/NUMBER/global/backendServices/ID`.
    pub audience: String,
}

impl Iap {
    /// IAP of backend service `key` (wire JSON `v`), when `iap.enabled`.
    pub fn compile(key: &str, v: &Value) -> Option<Iap> {
        if v.pointer("/iap/enabled").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        let project = key
            .strip_prefix("projects/")
            .and_then(|k| k.split('/').next())
            .unwrap_or("");
        let id = v.get("id").and_then(Value::as_str).unwrap_or("0");
        Some(Iap {
            service: key.to_string(),
            audience: format!(
                "/projects/{}/global/backendServices/{id}",
                crate::project_number::number(project)
            ),
        })
    }
}

/// Claims of the signed header.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// Audience.
    pub aud: String,
    /// `accounts.google.com:ID`.
    pub sub: String,
    /// The user's e-mail.
    pub email: String,
    /// Issued at (Unix seconds).
    pub iat: u64,
    /// Expires (Unix seconds).
    pub exp: u64,
    /// Google's extra claims.
    pub google: Value,
}

#[derive(Debug, Serialize, Deserialize)]
struct Session {
    email: String,
    exp: u64,
}

/// IAP state shared by the data plane and the admin API: the signing key and who may pass.
pub struct State {
    signing: jsonwebtoken::EncodingKey,
    session_key: jsonwebtoken::EncodingKey,
    session_check: jsonwebtoken::DecodingKey,
    kid: String,
    jwks: Value,
    accessors: RwLock<BTreeMap<String, BTreeSet<String>>>,
    /// (email, audience) -> (`iat`, the signed header) of the newest one.
    assertions: Mutex<HashMap<(String, String), (u64, String)>>,
    /// Session cookies whose signature checked -> (email, `exp`): the check is the same for
    /// the same token, so only `exp` is read again.
    sessions: Mutex<HashMap<String, (String, u64)>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("iap::State")
            .field("kid", &self.kid)
            .finish()
    }
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The user id IAP reports for `email` (a stable 21-digit number derived from it).
pub fn user_id(email: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(email.to_ascii_lowercase().as_bytes());
    let n = u128::from_be_bytes(h[..16].try_into().expect("16 bytes"));
    format!("{:021}", n % 10u128.pow(21))
}

impl State {
    /// A new key pair (ECDSA P-256) and session secret; nobody allowed yet.
    pub fn new() -> State {
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .expect("P-256 key generation");
        let raw = kp.public_key_raw();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let kid = {
            use sha2::Digest;
            hex::encode(&sha2::Sha256::digest(raw)[..10])
        };
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": b64.encode(&raw[1..33]), "y": b64.encode(&raw[33..65]),
        }]});
        let secret: [u8; 32] = rand::random();
        State {
            signing: jsonwebtoken::EncodingKey::from_ec_der(&kp.serialize_der()),
            session_key: jsonwebtoken::EncodingKey::from_secret(&secret),
            session_check: jsonwebtoken::DecodingKey::from_secret(&secret),
            kid,
            jwks,
            accessors: RwLock::default(),
            assertions: Mutex::default(),
            sessions: Mutex::default(),
        }
    }

    /// The public keys as a JWK set (`{"keys": [...]}`).
    pub fn jwks(&self) -> Value {
        self.jwks.clone()
    }

    /// Replaces who may pass: (member, backend service key or `*` for all). Members are
    /// `user:EMAIL` (a bare e-mail is taken as `user:`).
    pub fn set_accessors(&self, bindings: Vec<(String, String)>) {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (member, service) in bindings {
            let email = member
                .strip_prefix("user:")
                .unwrap_or(&member)
                .to_ascii_lowercase();
            m.entry(service).or_default().insert(email);
        }
        *self.accessors.write().expect("poisoned") = m;
    }

    /// The bindings, as `{"bindings": [{"member", "backendService"}]}`.
    pub fn accessors(&self) -> Value {
        let m = self.accessors.read().expect("poisoned");
        let b: Vec<Value> = m
            .iter()
            .flat_map(|(s, emails)| {
                emails
                    .iter()
                    .map(move |e| json!({"member": format!("user:{e}"), "backendService": s}))
            })
            .collect();
        json!({"bindings": b})
    }

    fn allowed(&self, service: &str, email: &str) -> bool {
        let m = self.accessors.read().expect("poisoned");
        let e = email.to_ascii_lowercase();
        ["*", service]
            .iter()
            .any(|s| m.get(*s).is_some_and(|set| set.contains(&e)))
    }

    /// A signed header for `email` and `audience`, valid [`ASSERTION_SECS`]: the one signed
    /// for them in the last [`ASSERTION_REUSE_SECS`], else a new one.
    pub fn assertion(&self, email: &str, audience: &str) -> String {
        self.assertion_at(email, audience, now())
    }

    /// [`State::assertion`] at `now` (Unix seconds).
    fn assertion_at(&self, email: &str, audience: &str, now: u64) -> String {
        let key = (email.to_string(), audience.to_string());
        if let Some((iat, jwt)) = self.assertions.lock().expect("poisoned").get(&key) {
            if now >= *iat && now - iat < ASSERTION_REUSE_SECS {
                return jwt.clone();
            }
        }
        let jwt = self.sign(email, audience, now);
        let mut cache = self.assertions.lock().expect("poisoned");
        if cache.len() >= ASSERTION_CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, (now, jwt.clone()));
        jwt
    }

    fn sign(&self, email: &str, audience: &str, iat: u64) -> String {
        let claims = Claims {
            iss: ISSUER.into(),
            aud: audience.into(),
            sub: format!("accounts.google.com:{}", user_id(email)),
            email: email.into(),
            iat,
            exp: iat + ASSERTION_SECS,
            google: json!({"access_levels": []}),
        };
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&h, &claims, &self.signing).expect("ES256 signing")
    }

    fn session(&self, email: &str) -> String {
        let s = Session {
            email: email.into(),
            exp: now() + SESSION_SECS,
        };
        jsonwebtoken::encode(&jsonwebtoken::Header::default(), &s, &self.session_key)
            .expect("HS256 signing")
    }

    fn session_email(&self, headers: &http::HeaderMap) -> Option<String> {
        let token = headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == SESSION_COOKIE)?
            .1;
        let now = now();
        if let Some((email, exp)) = self.sessions.lock().expect("poisoned").get(token) {
            // jsonwebtoken's rule without leeway: expired once `exp` is behind the clock.
            return (*exp >= now).then(|| email.clone());
        }
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        v.required_spec_claims = ["exp".to_string()].into();
        v.leeway = 0;
        let claims = jsonwebtoken::decode::<Session>(token, &self.session_check, &v)
            .ok()?
            .claims;
        let mut cache = self.sessions.lock().expect("poisoned");
        if cache.len() >= ASSERTION_CACHE_MAX {
            cache.clear();
        }
        cache.insert(token.to_string(), (claims.email.clone(), claims.exp));
        Some(claims.email)
    }
}

fn html(status: StatusCode, body: String) -> Response<Body> {
    let mut r = local(status, body);
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r.extensions_mut()
        .insert(StatusDetails("handled_by_identity_aware_proxy"));
    r
}

fn redirect(to: &str) -> Response<Body> {
    let mut r = html(StatusCode::FOUND, String::new());
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The one IAP step of the request path: the identity headers to set on the request (they
/// replace any a client sent), or the response that ends it (sign-in page, redirect, 403).
pub fn authorize<B>(
    state: &State,
    iap: &Iap,
    req: &Request<B>,
    path: &str,
    query: Option<&str>,
) -> Result<Vec<(HeaderName, HeaderValue)>, Box<Response<Body>>> {
    if let Some(page) = path.strip_prefix("/_gcp_iap/") {
        return Err(Box::new(match page {
            "sign_in" => {
                let cont = query_param(query, "continue").unwrap_or_else(|| "/".into());
                html(
                    StatusCode::OK,
                    format!(
                        "<!doctype html><title>Sign in - Identity-Aware Proxy (gce-emulator)</title>\n\
                         <h1>Sign in</h1><p>to continue to the application protected by Identity-Aware Proxy.</p>\n\
                         <form method=\"get\" action=\"/_gcp_iap/authenticate\">\n\
                         <input type=\"hidden\" name=\"continue\" value=\"{}\">\n\
                         <label>Email <input type=\"email\" name=\"email\" required></label>\n\
                         <button type=\"submit\">Next</button></form>\n",
                        escape(&cont)
                    ),
                )
            }
            "authenticate" => {
                let Some(email) = query_param(query, "email").filter(|e| e.contains('@')) else {
                    return Err(Box::new(html(
                        StatusCode::BAD_REQUEST,
                        "<p>An e-mail address is required.</p>\n".into(),
                    )));
                };
                let cont = query_param(query, "continue")
                    .filter(|c| c.starts_with('/') && !c.starts_with("//"))
                    .unwrap_or_else(|| "/".into());
                let mut r = redirect(&cont);
                let cookie = format!(
                    "{SESSION_COOKIE}={}; Path=/; Max-Age={SESSION_SECS}; HttpOnly; SameSite=Lax",
                    state.session(&email)
                );
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    r.headers_mut().insert(SET_COOKIE, v);
                }
                r
            }
            "clear_login_cookie" => {
                let mut r = html(StatusCode::OK, "<p>Signed out.</p>\n".into());
                r.headers_mut().insert(
                    SET_COOKIE,
                    HeaderValue::from_static("GCP_IAP_AUTH_TOKEN=; Path=/; Max-Age=0"),
                );
                r
            }
            _ => html(StatusCode::NOT_FOUND, "<p>Not found.</p>\n".into()),
        }));
    }
    let Some(email) = state.session_email(req.headers()) else {
        let here = match query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        let to: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("continue", &here)
            .finish();
        return Err(Box::new(redirect(&format!("/_gcp_iap/sign_in?{to}"))));
    };
    if !state.allowed(&iap.service, &email) {
        return Err(Box::new(html(
            StatusCode::FORBIDDEN,
            format!(
                "<h1>You don't have access</h1><p>{} is not allowed to access this application (grant roles/iap.httpsResourceAccessor with PUT /_emulator/iap/accessors).</p>\n",
                escape(&email)
            ),
        )));
    }
    let jwt = state.assertion(&email, &iap.audience);
    Ok([
        (&ASSERTION, jwt),
        (&USER_EMAIL, format!("accounts.google.com:{email}")),
        (&USER_ID, format!("accounts.google.com:{}", user_id(&email))),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.clone(), HeaderValue::from_str(&value).ok()?)))
    .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assertion_verifies_with_the_published_key() {
        let s = State::new();
        let jwt = s.assertion("alice@example.com", "/projects/1/global/backendServices/2");
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(s.jwks()).unwrap();
        let header = jsonwebtoken::decode_header(&jwt).unwrap();
        let jwk = jwks.find(header.kid.as_deref().unwrap()).unwrap();
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        v.set_audience(&["/projects/1/global/backendServices/2"]);
        v.set_issuer(&[ISSUER]);
        let c = jsonwebtoken::decode::<Claims>(&jwt, &key, &v)
            .unwrap()
            .claims;
        assert_eq!(c.email, "alice@example.com");
        assert_eq!(
            c.sub,
            format!("accounts.google.com:{}", user_id("alice@example.com"))
        );
        assert_eq!(c.exp - c.iat, ASSERTION_SECS);
        // Another emulator's key does not verify it.
        let other: jsonwebtoken::jwk::JwkSet = serde_json::from_value(State::new().jwks()).unwrap();
        let k2 = jsonwebtoken::DecodingKey::from_jwk(&other.keys[0]).unwrap();
        assert!(jsonwebtoken::decode::<Claims>(&jwt, &k2, &v).is_err());
    }

    fn cookie(token: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        let v = format!("other=1; {SESSION_COOKIE}={token}");
        h.insert(COOKIE, HeaderValue::from_str(&v).unwrap());
        h
    }

    #[test]
    fn session_cookies_are_checked_once_and_expire_from_the_cache_too() {
        let s = State::new();
        let token = s.session("alice@example.com");
        assert_eq!(
            s.session_email(&cookie(&token)).as_deref(),
            Some("alice@example.com")
        );
        // The second look is the cache's: it answers the same.
        assert_eq!(
            s.session_email(&cookie(&token)).as_deref(),
            Some("alice@example.com")
        );
        // A token whose signature does not check is refused, cached tokens or not.
        let forged = format!("{}x", &token[..token.len() - 1]);
        assert_eq!(s.session_email(&cookie(&forged)), None);
        // Expired, whether checked now or cached earlier.
        let expired = jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &Session {
                email: "bob@example.com".into(),
                exp: now() - 1,
            },
            &s.session_key,
        )
        .unwrap();
        assert_eq!(s.session_email(&cookie(&expired)), None);
        s.sessions
            .lock()
            .unwrap()
            .get_mut(&token)
            .expect("cached")
            .1 = now() - 1;
        assert_eq!(s.session_email(&cookie(&token)), None);
    }

    #[test]
    fn a_signed_header_is_reused_for_a_minute_per_user_and_audience() {
        let s = State::new();
        let (alice, aud) = ("alice@example.com", "/projects/1/global/backendServices/2");
        let t = 1_900_000_000;
        let first = s.assertion_at(alice, aud, t);
        assert_eq!(
            s.assertion_at(alice, aud, t + ASSERTION_REUSE_SECS - 1),
            first
        );
        // ECDSA signatures are randomized: a new signature is a different string.
        assert_ne!(s.assertion_at("bob@example.com", aud, t), first);
        assert_ne!(
            s.assertion_at(alice, "/projects/1/global/backendServices/3", t),
            first
        );
        let later = s.assertion_at(alice, aud, t + ASSERTION_REUSE_SECS);
        assert_ne!(later, first);
        let claims = |jwt: &str| -> Claims {
            let payload = jwt.split('.').nth(1).unwrap();
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap();
            serde_json::from_slice(&raw).unwrap()
        };
        assert_eq!(claims(&later).iat, t + ASSERTION_REUSE_SECS);
        assert_eq!(claims(&first).iat, t);
    }
}
