//! ServiceAccount tokens: JWTs in the shape a real server's TokenRequest issues (claims `iss`,
//! `sub` = `system:serviceaccount:{namespace}:{name}`, `aud`, `exp`, `iat`, `nbf` and the
//! private `kubernetes.io` claim naming the namespace, the ServiceAccount and its uid, and the
//! Pod or Secret the token is bound to), signed with a key generated at start (HS256: only this
//! server verifies them; a real server signs with RS256/ES256 and publishes its keys). Source:
//! k8s.io/kubernetes `pkg/serviceaccount/claims.go`.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The issuer and default audience, as a real cluster's `--service-account-issuer` commonly is.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// An object a token is bound to (its deletion invalidates the token).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BoundRef {
    /// Object name.
    pub name: String,
    /// Object uid.
    pub uid: String,
}

/// The ServiceAccount named in a token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServiceAccountRef {
    /// ServiceAccount name.
    pub name: String,
    /// ServiceAccount uid at issue time.
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubernetesClaim {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// The ServiceAccount.
    pub serviceaccount: ServiceAccountRef,
    /// The Pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<BoundRef>,
    /// The Secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<BoundRef>,
}

/// The claims of a ServiceAccount token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    /// Issuer, [`ISSUER`].
    pub iss: String,
    /// `system:serviceaccount:{namespace}:{name}`.
    pub sub: String,
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issued at, seconds since the epoch.
    pub iat: u64,
    /// Not before, seconds since the epoch.
    pub nbf: u64,
    /// Namespace, ServiceAccount and bound object.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
}

/// Why a token was not accepted (the request then gets 401).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum TokenError {
    /// Not a JWT signed by this server, or expired, or for another audience.
    #[error("invalid bearer token: {0}")]
    Invalid(String),
}

/// Issues and verifies tokens with one signing key.
pub struct TokenIssuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl Default for TokenIssuer {
    fn default() -> Self {
        Self::new()
    }
}

/// Seconds since the epoch now.
pub fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl TokenIssuer {
    /// A fresh random signing key: tokens do not survive a restart of the server.
    pub fn new() -> Self {
        let secret: [u8; 32] = rand::random();
        TokenIssuer {
            encoding: EncodingKey::from_secret(&secret),
            decoding: DecodingKey::from_secret(&secret),
        }
    }

    /// Signs `claims` into a compact JWT.
    pub fn issue(&self, claims: &Claims) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .expect("HS256 signing of serializable claims cannot fail")
    }

    /// Verifies signature, expiry and that one of the token's audiences is `audience`.
    ///
    /// Errors: [`TokenError::Invalid`] naming what failed.
    pub fn verify(&self, token: &str, audience: &str) -> Result<Claims, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[audience]);
        validation.set_issuer(&[ISSUER]);
        validation.leeway = 0;
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map(|d| d.claims)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: u64, aud: &str) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: "system:serviceaccount:ns:sa".into(),
            aud: vec![aud.into()],
            exp,
            iat: now_seconds(),
            nbf: now_seconds(),
            kubernetes: KubernetesClaim {
                namespace: "ns".into(),
                serviceaccount: ServiceAccountRef {
                    name: "sa".into(),
                    uid: "u".into(),
                },
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn round_trip_and_refusals() {
        let issuer = TokenIssuer::new();
        let good = claims(now_seconds() + 600, ISSUER);
        assert_eq!(issuer.verify(&issuer.issue(&good), ISSUER), Ok(good));
        let expired = issuer.issue(&claims(now_seconds() - 10, ISSUER));
        assert!(issuer.verify(&expired, ISSUER).is_err());
        let other_audience = issuer.issue(&claims(now_seconds() + 600, "vault"));
        assert!(issuer.verify(&other_audience, ISSUER).is_err());
        let foreign = TokenIssuer::new().issue(&claims(now_seconds() + 600, ISSUER));
        assert!(issuer.verify(&foreign, ISSUER).is_err());
    }
}
