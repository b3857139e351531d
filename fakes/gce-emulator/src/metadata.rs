//! A GCE metadata server (`--metadata-listen`): what a workload on a GCE VM reads from
//! `http://metadata.google.internal/computeMetadata/v1/`, for clients that take their project,
//! zone and OAuth token from it, such as GKE's Ingress controller (`glbc`), whose Compute client
//! gets its token from the default service account unless gce.conf names a `token-url`. Go's
//! `cloud.google.com/go/compute/metadata` (and Python's google-auth) reach it through
//! `GCE_METADATA_HOST=ADDR`.
//!
//! Served, per the metadata server's documentation ("About VM metadata", "Default metadata
//! keys"): `project/project-id`, `project/numeric-project-id`, `instance/zone`
//! (`projects/NUM/zones/ZONE`), `instance/name`, `instance/id`, `instance/hostname`,
//! `instance/network-interfaces/0/network`, `instance/service-accounts/default/{email,scopes,
//! token}` (also under the account's email), `universe/universe-domain`. Every request must
//! carry `Metadata-Flavor: Google` (403 otherwise, as the real server answers); answers carry
//! `Metadata-Flavor: Google`. It is served on the API's own port too, so
//! `GCE_METADATA_HOST=127.0.0.1:PORT` points any client's ADC chain at it.
//!
//! The token: the one `--require-token` asks for, if it names one; otherwise a fresh access
//! token of the account from the emulator's identity provider (identity.rs), with its
//! `--token-lifetime-sec` as `expires_in`, as the real server answers "Get an access token".
//! The account is `--metadata-service-account` (with Workload Identity, the Google service
//! account the Kubernetes ServiceAccount impersonates), by default the project's Compute
//! Engine default service account.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Issues an access token for an email: `(token, expires_in seconds)`.
pub type Issuer = Arc<dyn Fn(&str) -> (String, u64) + Send + Sync>;

/// The identity the metadata server describes.
#[derive(Clone, Debug)]
pub struct Metadata {
    /// `project/project-id`.
    pub project: String,
    /// `project/numeric-project-id` (digits).
    pub numeric_project: String,
    /// The VM's zone (`us-central1-a`).
    pub zone: String,
    /// The VM's name (`instance/name`).
    pub instance: String,
    /// A fixed OAuth access token to hand out (`--require-token TOKEN`); `None`: fresh tokens
    /// from the identity provider.
    pub token: Option<String>,
    /// The default account's email (`--metadata-service-account`); `None`: the Compute Engine
    /// default service account.
    pub account: Option<String>,
}

impl Default for Metadata {
    fn default() -> Metadata {
        Metadata {
            project: "p1".into(),
            numeric_project: "100000000001".into(),
            zone: "us-central1-a".into(),
            instance: "gce-emulator-vm".into(),
            token: None,
            account: None,
        }
    }
}

impl Metadata {
    /// The default service account's email (`--metadata-service-account`, else
    /// `PROJECT_NUMBER-compute@developer.gserviceaccount.com`).
    pub fn email(&self) -> String {
        self.account.clone().unwrap_or_else(|| {
            format!(
                "{}-compute@developer.gserviceaccount.com",
                self.numeric_project
            )
        })
    }

    /// The value of a metadata key under `computeMetadata/v1/`, `None` if not served.
    pub fn value(&self, key: &str) -> Option<String> {
        let key = key.trim_end_matches('/');
        let account = key
            .strip_prefix("instance/service-accounts/")
            .and_then(|rest| rest.split_once('/'))
            .filter(|(who, _)| *who == "default" || *who == self.email());
        if let Some((_, item)) = account {
            return match item {
                "email" => Some(self.email()),
                "scopes" => Some("https://www.googleapis.com/auth/cloud-platform".into()),
                "aliases" => Some("default".into()),
                // A fixed token (`--require-token TOKEN`); fresh ones come from the router's issuer.
                "token" => self.token.as_ref().map(|t| {
                    serde_json::json!({"access_token": t, "expires_in": 3599, "token_type": "Bearer"})
                        .to_string()
                }),
                _ => None,
            };
        }
        Some(match key {
            "project/project-id" => self.project.clone(),
            "universe/universe-domain" => "googleapis.com".into(),
            "project/numeric-project-id" => self.numeric_project.clone(),
            "instance/zone" => format!("projects/{}/zones/{}", self.numeric_project, self.zone),
            "instance/name" => self.instance.clone(),
            "instance/hostname" => format!(
                "{}.{}.c.{}.internal",
                self.instance, self.zone, self.project
            ),
            "instance/id" => "4520031799277581759".into(),
            "instance/network-interfaces/0/network" => {
                format!("projects/{}/networks/default", self.numeric_project)
            }
            "instance/service-accounts" => "default/\n".to_string() + &self.email() + "/\n",
            _ => return None,
        })
    }
}

/// The metadata server's router; `issue` hands out fresh tokens when `md.token` is `None`.
pub fn router<S>(md: Metadata, issue: Issuer) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/computeMetadata/v1/{*key}", get(key))
        .with_state(Arc::new((md, issue)))
}

/// [`router`] plus `GET /`, for a metadata server on a port of its own (`--metadata-listen`).
pub fn standalone(md: Metadata, issue: Issuer) -> Router {
    router(md, issue).route("/", get(root))
}

fn flavored(status: StatusCode, body: String) -> Response {
    (status, [("Metadata-Flavor", "Google")], body).into_response()
}

fn has_flavor(headers: &HeaderMap) -> bool {
    headers.get("Metadata-Flavor").and_then(|v| v.to_str().ok()) == Some("Google")
}

/// `GET /`: clients probe it to learn they run on GCE (only the response header matters).
async fn root() -> Response {
    flavored(StatusCode::OK, "computeMetadata/\n".into())
}

async fn key(
    State(state): State<Arc<(Metadata, Issuer)>>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (md, issue) = &*state;
    if !has_flavor(&headers) {
        return flavored(
            StatusCode::FORBIDDEN,
            "Missing Metadata-Flavor:Google header.\n".into(),
        );
    }
    if md.token.is_none() && is_token_key(md, &key) {
        let (token, expires_in) = issue(&md.email());
        let body = serde_json::json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"});
        return flavored(StatusCode::OK, body.to_string());
    }
    match md.value(&key) {
        Some(v) => flavored(StatusCode::OK, v),
        None => flavored(StatusCode::NOT_FOUND, format!("{key} is not served\n")),
    }
}

/// Whether `key` is the token of the default account (by `default` or by its email).
fn is_token_key(md: &Metadata, key: &str) -> bool {
    key.trim_end_matches('/')
        .strip_prefix("instance/service-accounts/")
        .and_then(|rest| rest.strip_suffix("/token"))
        .is_some_and(|who| who == "default" || who == md.email())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_metadata_server() {
        let md = Metadata {
            project: "p1".into(),
            numeric_project: "123".into(),
            zone: "us-central1-a".into(),
            instance: "node-1".into(),
            token: Some("t0k".into()),
            account: None,
        };
        assert_eq!(md.value("project/project-id").unwrap(), "p1");
        assert_eq!(
            md.value("instance/zone").unwrap(),
            "projects/123/zones/us-central1-a"
        );
        let token: serde_json::Value =
            serde_json::from_str(&md.value("instance/service-accounts/default/token").unwrap())
                .unwrap();
        assert_eq!(token["access_token"], "t0k");
        assert_eq!(
            md.value("instance/service-accounts/123-compute@developer.gserviceaccount.com/email")
                .unwrap(),
            md.email()
        );
        assert_eq!(md.value("instance/service-accounts/other/token"), None);
        assert_eq!(md.value("instance/attributes/kube-env"), None);
        assert_eq!(
            md.value("universe/universe-domain").unwrap(),
            "googleapis.com"
        );
        assert!(is_token_key(&md, "instance/service-accounts/default/token"));
        assert!(!is_token_key(
            &md,
            "instance/service-accounts/default/email"
        ));
        let wi = Metadata {
            account: Some("gclb-operator@p1.iam.gserviceaccount.com".into()),
            token: None,
            ..md
        };
        assert_eq!(wi.email(), "gclb-operator@p1.iam.gserviceaccount.com");
        assert_eq!(wi.value("instance/service-accounts/default/token"), None);
        assert!(is_token_key(
            &wi,
            "instance/service-accounts/gclb-operator@p1.iam.gserviceaccount.com/token"
        ));
    }
}
