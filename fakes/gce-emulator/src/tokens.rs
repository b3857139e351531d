//! OAuth 2.0 access tokens and service account keys: the emulator as identity provider.
//!
//! Three ways a principal gets a token the API accepts, as Google's own (Google Identity,
//! "Using OAuth 2.0 for Server to Server Applications"; metadata server, "Get an access
//! token"; AIP-4111 "Self-signed JWT"):
//! - the metadata server's `instance/service-accounts/default/token` ([`Tokens::issue`]):
//!   an opaque access token for the VM's (or, with Workload Identity, the Kubernetes
//!   ServiceAccount's) Google service account;
//! - the OAuth token endpoint (`POST /token`, the key file's `token_uri`) answering the JWT
//!   bearer grant (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, RFC 7523): the
//!   assertion is an RS256 JWT signed with a key this emulator issued ([`Tokens::create_key`]),
//!   `iss` the account's email, `aud` the token endpoint ([`Tokens::exchange`]);
//! - a self-signed JWT sent as the bearer token itself (AIP-4111; what google-cloud-auth's
//!   service account credentials send: `iss` = `sub` = the email, `kid` the key id, a `scope`
//!   claim, one hour's `exp`), verified against the issued key ([`Tokens::principal`]).
//!
//! Issued access tokens live `lifetime` (`--token-lifetime-sec`, default 3600 s as Google's);
//! a short lifetime makes clients refresh during a test. An expired or unknown token is 401.
//! Private keys are returned once, in the key file, and never kept or logged: only the public
//! half stays, to verify signatures.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine as _;
use serde_json::{json, Value};

/// Why a token or an assertion is refused (each answered 401 `authError`, or 400
/// `invalid_grant` at the token endpoint).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token this emulator issued, nor a JWT signed with a key it issued.
    #[error("the access token is not one this emulator issued (get one from its metadata server or its token endpoint)")]
    Unknown,
    /// An issued token past its lifetime.
    #[error("the access token expired {0} s ago; refresh it")]
    Expired(u64),
    /// A JWT whose `kid` names no key this emulator issued.
    #[error("JWT header kid {0:?} names no service account key this emulator issued")]
    UnknownKey(String),
    /// A JWT that fails verification (signature, `exp`, `iss`, `aud`).
    #[error("JWT rejected: {0}")]
    BadJwt(String),
}

struct Key {
    email: String,
    /// PKCS#1 `RSAPublicKey` DER.
    public: Vec<u8>,
}

/// Issued tokens and keys. Not thread-safe by itself: the emulator keeps it behind a mutex.
pub struct Tokens {
    lifetime: Duration,
    /// The token endpoint's URL (`http://127.0.0.1:PORT/token`), the key files' `token_uri`
    /// and the `aud` their assertions must carry.
    token_uri: String,
    issued: HashMap<String, (String, Instant)>,
    keys: HashMap<String, Key>,
    count: u64,
    by_email: std::collections::BTreeMap<String, u64>,
}

/// The JWT claims checked (RFC 7519; AIP-4111).
#[derive(serde::Deserialize)]
struct Claims {
    iss: String,
    #[serde(default)]
    aud: Option<String>,
}

impl Tokens {
    /// A token store whose access tokens live `lifetime` and whose key files name `token_uri`.
    pub fn new(lifetime: Duration, token_uri: impl Into<String>) -> Tokens {
        Tokens {
            lifetime,
            token_uri: token_uri.into(),
            issued: HashMap::new(),
            keys: HashMap::new(),
            count: 0,
            by_email: Default::default(),
        }
    }

    /// How many access tokens were issued so far (a client that refreshes takes several).
    pub fn issued_count(&self) -> u64 {
        self.count
    }

    /// Access tokens issued so far, per account email.
    pub fn issued_by(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.by_email
    }

    /// Forgets every access token issued so far (`POST /_emulator/iam/tokens:revokeAll`), as
    /// a revocation or a server that lost its sessions would: each is answered 401 from now
    /// on, until its holder gets a new one. Returns how many were live. Key files and the
    /// self-signed JWTs they sign stay valid.
    pub fn revoke_all(&mut self) -> usize {
        let now = Instant::now();
        let live = self.issued.values().filter(|(_, exp)| *exp > now).count();
        self.issued.clear();
        live
    }

    /// A new opaque access token for `email`: `(token, expires_in seconds)`, seconds as the
    /// metadata server and the token endpoint answer `expires_in` (the lifetime less one,
    /// rounded down as the real server counts).
    pub fn issue(&mut self, email: &str) -> (String, u64) {
        self.issue_for(email, self.lifetime)
    }

    /// [`Tokens::issue`] with a lifetime of its own (the admin API's long-lived tokens for
    /// helper clients).
    pub fn issue_for(&mut self, email: &str, lifetime: Duration) -> (String, u64) {
        let now = Instant::now();
        self.issued.retain(|_, (_, exp)| *exp > now);
        self.count += 1;
        *self.by_email.entry(email.to_string()).or_default() += 1;
        let token = format!("ya29.emulator-{}", hex::encode(rand::random::<[u8; 16]>()));
        self.issued
            .insert(token.clone(), (email.to_string(), now + lifetime));
        // `expires_in` counts the whole seconds left, rounded down, as the metadata server
        // answers 3599 for a fresh hour-long token: a client that trusts it to the second
        // never sends a token the emulator already counts as expired.
        (token, lifetime.as_secs().saturating_sub(1).max(1))
    }

    /// Creates an RSA 2048 key for service account `email` in `project` and returns the key
    /// file, as `gcloud iam service-accounts keys create` writes it (type `service_account`,
    /// `private_key_id`, PKCS#8 PEM `private_key`, `client_email`, `token_uri` = this
    /// emulator's token endpoint).
    ///
    /// Errors: the crypto library's, if key generation fails.
    pub fn create_key(&mut self, email: &str, project: &str) -> Result<Value, String> {
        let kp = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .map_err(|e| format!("RSA key generation: {e}"))?;
        let pkcs8 = kp.as_der().map_err(|e| format!("PKCS#8 encoding: {e}"))?;
        let b64 = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END PRIVATE KEY-----\n");
        let kid = hex::encode(rand::random::<[u8; 20]>());
        self.keys.insert(
            kid.clone(),
            Key {
                email: email.to_string(),
                public: kp.public_key().as_ref().to_vec(),
            },
        );
        Ok(json!({
            "type": "service_account",
            "project_id": project,
            "private_key_id": kid,
            "private_key": pem,
            "client_email": email,
            "client_id": (rand::random::<u64>() >> 1).to_string(),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.token_uri,
            "universe_domain": "googleapis.com",
        }))
    }

    /// Verifies an RS256 JWT signed with an issued key; `aud`, when given, must match.
    /// Returns the account's email.
    fn verify_jwt(&self, jwt: &str, aud: Option<&str>) -> Result<String, TokenError> {
        let header =
            jsonwebtoken::decode_header(jwt).map_err(|e| TokenError::BadJwt(e.to_string()))?;
        let kid = header.kid.unwrap_or_default();
        let key = self
            .keys
            .get(&kid)
            .ok_or_else(|| TokenError::UnknownKey(kid.clone()))?;
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        v.validate_aud = false;
        v.set_required_spec_claims(&["exp", "iss"]);
        v.set_issuer(&[&key.email]);
        let data = jsonwebtoken::decode::<Claims>(
            jwt,
            &jsonwebtoken::DecodingKey::from_rsa_der(&key.public),
            &v,
        )
        .map_err(|e| TokenError::BadJwt(e.to_string()))?;
        if let Some(want) = aud {
            if data.claims.aud.as_deref() != Some(want) {
                return Err(TokenError::BadJwt(format!(
                    "aud {:?} is not the token endpoint {want:?}",
                    data.claims.aud
                )));
            }
        }
        Ok(data.claims.iss)
    }

    /// The JWT bearer grant (RFC 7523 section 2.1): verifies `assertion` (RS256, an issued
    /// key, `iss` its account, `aud` the token endpoint, not expired) and issues an access
    /// token for the account: `{"access_token", "expires_in", "token_type": "Bearer"}`.
    ///
    /// Errors: [`TokenError`] naming what failed.
    pub fn exchange(&mut self, assertion: &str) -> Result<Value, TokenError> {
        let aud = self.token_uri.clone();
        let email = self.verify_jwt(assertion, Some(&aud))?;
        let (token, expires_in) = self.issue(&email);
        Ok(json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}))
    }

    /// The principal (`serviceAccount:EMAIL`) a bearer token stands for: an issued access
    /// token within its lifetime, or a self-signed JWT of an issued key.
    ///
    /// Errors: [`TokenError`].
    pub fn principal(&self, token: &str) -> Result<String, TokenError> {
        if let Some((email, exp)) = self.issued.get(token) {
            let now = Instant::now();
            if *exp <= now {
                return Err(TokenError::Expired((now - *exp).as_secs()));
            }
            return Ok(format!("serviceAccount:{email}"));
        }
        if token.split('.').count() == 3 && !token.starts_with("ya29.") {
            return self
                .verify_jwt(token, None)
                .map(|e| format!("serviceAccount:{e}"));
        }
        Err(TokenError::Unknown)
    }
}

/// Signs `claims` as an RS256 JWT with a key file's `private_key` (PKCS#8 PEM), `kid` its
/// `private_key_id`: what a client sends as the JWT bearer grant's assertion or as a
/// self-signed JWT (RFC 7523; AIP-4111). For tests and tools that play the client.
///
/// Errors: a key file without a PKCS#8 RSA `private_key`.
pub fn sign_jwt(key_file: &Value, claims: &Value) -> Result<String, String> {
    let pem = key_file["private_key"].as_str().ok_or("no private_key")?;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("private_key: {e}"))?;
    let kp = aws_lc_rs::rsa::KeyPair::from_pkcs8(&der).map_err(|e| format!("private_key: {e}"))?;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = json!({"alg": "RS256", "typ": "JWT", "kid": key_file["private_key_id"]});
    let input = format!(
        "{}.{}",
        url.encode(header.to_string()),
        url.encode(claims.to_string())
    );
    let mut sig = vec![0; kp.public_modulus_len()];
    kp.sign(
        &aws_lc_rs::signature::RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    )
    .map_err(|e| format!("signing: {e}"))?;
    Ok(format!("{input}.{}", url.encode(sig)))
}

/// Seconds since the Unix epoch (JWT `iat`/`exp`).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(key: &Value, claims: Value) -> String {
        sign_jwt(key, &claims).unwrap()
    }

    #[test]
    fn issued_tokens_name_their_account_and_expire() {
        let mut t = Tokens::new(Duration::from_millis(30), "http://127.0.0.1:1/token");
        let (tok, _) = t.issue("sa@p1.iam.gserviceaccount.com");
        assert_eq!(
            t.principal(&tok).unwrap(),
            "serviceAccount:sa@p1.iam.gserviceaccount.com"
        );
        assert_eq!(t.principal("ya29.other"), Err(TokenError::Unknown));
        let until = Instant::now() + Duration::from_secs(5);
        while t.principal(&tok).is_ok() {
            assert!(Instant::now() < until, "the token never expired");
            std::thread::yield_now();
        }
        assert!(matches!(t.principal(&tok), Err(TokenError::Expired(_))));
        assert_eq!(t.issued_count(), 1);
    }

    #[test]
    fn key_files_sign_grants_and_self_signed_jwts() {
        let uri = "http://127.0.0.1:1/token";
        let mut t = Tokens::new(Duration::from_secs(60), uri);
        let key = t.create_key("op@p1.iam.gserviceaccount.com", "p1").unwrap();
        assert_eq!(key["token_uri"], uri);
        assert!(key["private_key"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let now = unix_now();
        let email = "op@p1.iam.gserviceaccount.com";
        let grant = sign(
            &key,
            json!({"iss": email, "aud": uri, "scope": "https://www.googleapis.com/auth/cloud-platform", "iat": now, "exp": now + 3600}),
        );
        let answer = t.exchange(&grant).unwrap();
        let access = answer["access_token"].as_str().unwrap();
        assert_eq!(
            t.principal(access).unwrap(),
            format!("serviceAccount:{email}")
        );
        assert_eq!(answer["expires_in"], 59);
        // The assertion must be addressed to this token endpoint.
        let wrong_aud = sign(
            &key,
            json!({"iss": email, "aud": "https://oauth2.googleapis.com/token", "iat": now, "exp": now + 3600}),
        );
        assert!(matches!(t.exchange(&wrong_aud), Err(TokenError::BadJwt(_))));
        // A self-signed JWT (AIP-4111) is itself a bearer token.
        let jwt = sign(
            &key,
            json!({"iss": email, "sub": email, "scope": "x", "iat": now, "exp": now + 3600}),
        );
        assert_eq!(
            t.principal(&jwt).unwrap(),
            format!("serviceAccount:{email}")
        );
        // Expired, signed by another key, or claiming another account: refused.
        let expired = sign(
            &key,
            json!({"iss": email, "iat": now - 7200, "exp": now - 3600}),
        );
        assert!(matches!(t.principal(&expired), Err(TokenError::BadJwt(_))));
        let mut other = Tokens::new(Duration::from_secs(60), uri);
        let stranger = other.create_key(email, "p1").unwrap();
        let forged = sign(
            &stranger,
            json!({"iss": email, "iat": now, "exp": now + 3600}),
        );
        assert!(matches!(
            t.principal(&forged),
            Err(TokenError::UnknownKey(_))
        ));
        let mut impostor = stranger.clone();
        impostor["private_key_id"] = key["private_key_id"].clone();
        let forged = sign(
            &impostor,
            json!({"iss": email, "iat": now, "exp": now + 3600}),
        );
        assert!(matches!(t.principal(&forged), Err(TokenError::BadJwt(_))));
        let other_iss = sign(
            &key,
            json!({"iss": "x@p1.iam.gserviceaccount.com", "iat": now, "exp": now + 3600}),
        );
        assert!(matches!(
            t.principal(&other_iss),
            Err(TokenError::BadJwt(_))
        ));
    }
}
