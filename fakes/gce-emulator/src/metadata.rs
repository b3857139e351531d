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
//! token}` (also under the account's email). Every request must carry `Metadata-Flavor: Google`
//! (403 otherwise, as the real server answers); answers carry `Metadata-Flavor: Google`. The
//! token is the one `--require-token` asks for, so the API accepts it.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

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
    /// The OAuth access token handed out (`instance/service-accounts/default/token`).
    pub token: String,
}

impl Metadata {
    /// The default service account's email (`PROJECT_NUMBER-compute@developer.gserviceaccount.com`).
    pub fn email(&self) -> String {
        format!(
            "{}-compute@developer.gserviceaccount.com",
            self.numeric_project
        )
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
                // Seconds to expiry as the real server counts; the emulator never expires it.
                "token" => Some(
                    serde_json::json!({"access_token": self.token, "expires_in": 3599, "token_type": "Bearer"})
                        .to_string(),
                ),
                _ => None,
            };
        }
        Some(match key {
            "project/project-id" => self.project.clone(),
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

/// The metadata server's router.
pub fn router(md: Metadata) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/computeMetadata/v1/{*key}", get(key))
        .with_state(Arc::new(md))
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
    State(md): State<Arc<Metadata>>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !has_flavor(&headers) {
        return flavored(
            StatusCode::FORBIDDEN,
            "Missing Metadata-Flavor:Google header.\n".into(),
        );
    }
    match md.value(&key) {
        Some(v) => flavored(StatusCode::OK, v),
        None => flavored(StatusCode::NOT_FOUND, format!("{key} is not served\n")),
    }
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
            token: "t0k".into(),
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
    }
}
