//! Which credentials the operator's Google clients send (`--compute-credentials`).
//!
//! [`CredentialsMode::Adc`] (the default) is Application Default Credentials, whatever the
//! endpoint: google-cloud-auth's own chain (`google_cloud_auth::credentials::Builder`, crate
//! docs "Application Default Credentials"): `GOOGLE_APPLICATION_CREDENTIALS` (a service
//! account key file, an external account), gcloud's ADC file, then the metadata server
//! (reached through `GCE_METADATA_HOST` when set, as GKE's Workload Identity serves it). The
//! crate caches the token and refreshes it before it expires (its token cache refreshes four
//! minutes ahead, every ten seconds once a token has less left). Against the emulator the same
//! chain runs: its metadata server and OAuth token endpoint issue the tokens (docs/emulator.md,
//! "Credentials and IAM").
//!
//! [`CredentialsMode::Anonymous`] sends no `Authorization` header, for an emulator run without
//! IAM (`gce-emulator` without `--iam`).
//!
//! A 401 (the token was revoked, or the server forgot it) is not something the libraries
//! handle: google-cloud-gax-internal 0.7 sends whatever headers the credentials give and maps
//! a 401 to an error like any other status (`http.rs`, `request_attempt`), and
//! google-cloud-auth 1.18's token cache offers no way to drop a token before it expires
//! (`token_cache.rs` refreshes on its own schedule only). [`RefreshableCredentials`] fills
//! that gap the only way the libraries allow: it builds the credentials again through
//! google-cloud-auth's own builder (a new token cache, whose first act is to fetch a token);
//! the Compute seam calls [`RefreshableCredentials::refresh`] once on a 401 and retries once.

use std::str::FromStr;
use std::sync::{Arc, RwLock};

use google_cloud_auth::credentials::{CacheableResource, Credentials, CredentialsProvider};
use google_cloud_auth::errors::CredentialsError;

/// `--compute-credentials adc|anonymous`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CredentialsMode {
    /// Application Default Credentials (the module docs give the chain).
    #[default]
    Adc,
    /// No credentials at all.
    Anonymous,
}

/// A `--compute-credentials` value that is neither `adc` nor `anonymous`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--compute-credentials {0:?}: expected `adc` (Application Default Credentials, the default) or `anonymous` (no credentials, for an emulator without --iam)")]
pub struct CredentialsModeError(pub String);

impl FromStr for CredentialsMode {
    type Err = CredentialsModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "adc" => Ok(CredentialsMode::Adc),
            "anonymous" => Ok(CredentialsMode::Anonymous),
            other => Err(CredentialsModeError(other.into())),
        }
    }
}

impl std::fmt::Display for CredentialsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CredentialsMode::Adc => "adc",
            CredentialsMode::Anonymous => "anonymous",
        })
    }
}

impl CredentialsMode {
    /// The credentials for this mode.
    ///
    /// Errors: the ADC chain's own error text (e.g. a `GOOGLE_APPLICATION_CREDENTIALS` file that
    /// cannot be read or parsed), for the caller to wrap with its client's name.
    pub fn build(self) -> Result<Credentials, String> {
        match self {
            CredentialsMode::Anonymous => {
                Ok(google_cloud_auth::credentials::anonymous::Builder::new().build())
            }
            CredentialsMode::Adc => google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| format!("Application Default Credentials: {e}")),
        }
    }
}

/// Builds the credentials anew: [`CredentialsMode::build`] in production.
pub type BuildCredentials = dyn Fn() -> Result<Credentials, String> + Send + Sync;

/// Credentials the operator's Google clients share, which a 401 can make it build again.
///
/// It is a google-cloud-auth [`CredentialsProvider`] that hands every request the headers of
/// the credentials built last; [`RefreshableCredentials::refresh`] replaces those with newly
/// built ones (so their token cache fetches a fresh token), once per generation however many
/// calls saw the same 401 at the same time. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct RefreshableCredentials {
    build: Arc<BuildCredentials>,
    /// `(generation, credentials)`: the generation counts rebuilds.
    current: Arc<RwLock<(u64, Credentials)>>,
}

impl std::fmt::Debug for RefreshableCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshableCredentials")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl RefreshableCredentials {
    /// The credentials of `mode`, built now.
    ///
    /// Errors: [`CredentialsMode::build`]'s.
    pub fn new(mode: CredentialsMode) -> Result<Self, String> {
        Self::with_builder(Arc::new(move || mode.build()))
    }

    /// Credentials from `build`, called now and on each [`Self::refresh`].
    ///
    /// Errors: `build`'s.
    pub fn with_builder(build: Arc<BuildCredentials>) -> Result<Self, String> {
        let first = build()?;
        Ok(Self {
            build,
            current: Arc::new(RwLock::new((0, first))),
        })
    }

    /// How many times the credentials were built again; read it before a call and hand it
    /// to [`Self::refresh`] when that call gets a 401.
    pub fn generation(&self) -> u64 {
        self.current.read().expect("credentials poisoned").0
    }

    /// Builds the credentials again unless they were rebuilt since `seen` (another call that
    /// got the same 401 did it already). Returns whether this call rebuilt them.
    ///
    /// Errors: the builder's (the ADC chain's text); the old credentials stay in use then.
    pub fn refresh(&self, seen: u64) -> Result<bool, String> {
        if self.generation() != seen {
            return Ok(false);
        }
        let fresh = (self.build)()?;
        let mut current = self.current.write().expect("credentials poisoned");
        if current.0 != seen {
            return Ok(false);
        }
        *current = (seen + 1, fresh);
        Ok(true)
    }

    /// `call`, and once more with the credentials built again ([`Self::refresh`]) when it was
    /// refused with HTTP 401 (a revoked or forgotten token; google-cloud-gax maps it to an
    /// error like any other status, see the module docs); a second 401 is `call`'s error. For
    /// the clients that send these credentials outside the Compute seam (which retries a 401
    /// in its own loop, beside its rate pacing): the readiness NEG health reads and the
    /// Gateway's Network Services calls. When building the credentials again fails, that is
    /// logged and the first 401 returned.
    pub async fn retry_unauthenticated<T, Fut>(
        &self,
        call: impl Fn() -> Fut,
    ) -> Result<T, google_cloud_gax::error::Error>
    where
        Fut: std::future::Future<Output = Result<T, google_cloud_gax::error::Error>>,
    {
        let generation = self.generation();
        match call().await {
            Err(e) if e.http_status_code() == Some(401) => {
                if let Err(message) = self.refresh(generation) {
                    tracing::warn!(%message, "building the credentials again after a 401");
                    return Err(e);
                }
                tracing::info!(error = %e, "credentials refused; retrying once with a fresh token");
                call().await
            }
            other => other,
        }
    }

    /// These credentials as the `Credentials` the Google clients take.
    pub fn credentials(&self) -> Credentials {
        Credentials::from(self.clone())
    }

    fn latest(&self) -> Credentials {
        self.current.read().expect("credentials poisoned").1.clone()
    }
}

impl CredentialsProvider for RefreshableCredentials {
    fn headers(
        &self,
        extensions: http::Extensions,
    ) -> impl std::future::Future<
        Output = Result<CacheableResource<http::HeaderMap>, CredentialsError>,
    > + Send {
        let latest = self.latest();
        async move { latest.headers(extensions).await }
    }

    fn universe_domain(&self) -> impl std::future::Future<Output = Option<String>> + Send {
        let latest = self.latest();
        async move { latest.universe_domain().await }
    }
}

/// Who the operator is to IAM, for the hint a refusal's Event gives: `serviceAccount:EMAIL`.
///
/// - anonymous ([`CredentialsMode::Anonymous`]): `None`.
/// - ADC with `GOOGLE_APPLICATION_CREDENTIALS` naming a service account key file: its
///   `client_email` (only that field is read; the key is never logged).
/// - ADC otherwise: the metadata server's `instance/service-accounts/default/email` (at
///   `GCE_METADATA_HOST`, else `metadata.google.internal`; "About VM metadata"), asked once,
///   with a two-second timeout; `None` when it does not answer.
pub async fn principal(mode: CredentialsMode) -> Option<String> {
    if mode == CredentialsMode::Anonymous {
        return None;
    }
    if let Some(path) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS") {
        let text = std::fs::read_to_string(path).ok()?;
        let key: serde_json::Value = serde_json::from_str(&text).ok()?;
        return key["client_email"]
            .as_str()
            .map(|e| format!("serviceAccount:{e}"));
    }
    let host = std::env::var("GCE_METADATA_HOST")
        .unwrap_or_else(|_| "metadata.google.internal".to_string());
    let url = format!("http://{host}/computeMetadata/v1/instance/service-accounts/default/email");
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(2))
        .build()
        .ok()?;
    let resp = http
        .get(url)
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let email = resp.text().await.ok()?;
    let email = email.trim();
    (!email.is_empty()).then(|| format!("serviceAccount:{email}"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn status(code: u16) -> google_cloud_gax::error::Error {
        google_cloud_gax::error::Error::http(code, http::HeaderMap::new(), Default::default())
    }

    /// Credentials that count how often they were built.
    fn counted() -> (RefreshableCredentials, Arc<AtomicU32>) {
        let builds = Arc::new(AtomicU32::new(0));
        let b = builds.clone();
        let creds = RefreshableCredentials::with_builder(Arc::new(move || {
            b.fetch_add(1, Ordering::SeqCst);
            CredentialsMode::Anonymous.build()
        }))
        .unwrap();
        (creds, builds)
    }

    /// Runs `retry_unauthenticated` over the scripted answers (one per call, in order);
    /// returns the result's status (`None`: Ok), the calls made and the credential builds.
    async fn scripted(answers: &[u16]) -> (Option<u16>, usize, u32) {
        let (creds, builds) = counted();
        let calls = AtomicU32::new(0);
        let result = creds
            .retry_unauthenticated(|| {
                let n = calls.fetch_add(1, Ordering::SeqCst) as usize;
                let code = answers[n];
                async move {
                    match code {
                        200 => Ok(()),
                        c => Err(status(c)),
                    }
                }
            })
            .await;
        (
            result.err().and_then(|e| e.http_status_code()),
            calls.load(Ordering::SeqCst) as usize,
            builds.load(Ordering::SeqCst),
        )
    }

    #[tokio::test]
    async fn a_401_builds_the_credentials_again_and_retries_once() {
        assert_eq!(
            scripted(&[401, 200]).await,
            (None, 2, 2),
            "refreshed, then ok"
        );
        assert_eq!(
            scripted(&[401, 401]).await,
            (Some(401), 2, 2),
            "a second 401 is the error; no third call"
        );
        assert_eq!(
            scripted(&[403]).await,
            (Some(403), 1, 1),
            "only a 401 retries"
        );
        assert_eq!(scripted(&[200]).await, (None, 1, 1));
    }

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("adc".parse::<CredentialsMode>(), Ok(CredentialsMode::Adc));
        assert_eq!(
            "anonymous".parse::<CredentialsMode>(),
            Ok(CredentialsMode::Anonymous)
        );
        assert_eq!(CredentialsMode::default(), CredentialsMode::Adc);
        let e = "none".parse::<CredentialsMode>().unwrap_err();
        assert!(e.to_string().contains("`adc`"), "{e}");
        assert_eq!(CredentialsMode::Anonymous.to_string(), "anonymous");
    }
}
