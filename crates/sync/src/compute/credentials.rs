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

use std::str::FromStr;

use google_cloud_auth::credentials::Credentials;

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
    use super::*;

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
