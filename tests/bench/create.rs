//! Creating an Ingress the way a client library does: one `POST` to the API server, on a
//! connection opened beforehand (issue 26, "Ingress created -> first 200").
//!
//! `kubectl apply` costs ~0.1-0.3 s of process start-up, discovery and a `GET` before its
//! create, on the machine the benchmark shares with the operator; that is the user's tool, not
//! the controller. So the one-at-a-time rows start their clock just before this client sends
//! the create request (an upper bound of "the API server accepted the create", by the request's
//! own trip) and also report when the response came back. Credentials and the CA come from the
//! local API's kubeconfig (bearer token, `certificate-authority-data`).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};

use super::support::System;

/// A client of the local Kubernetes API for creating Ingresses.
pub struct Creator {
    http: reqwest::blocking::Client,
    server: String,
    token: String,
}

impl Creator {
    /// A client with the kubeconfig's server, CA and token; its connection is opened here (one
    /// `GET /version`), so a create pays no TLS handshake.
    pub fn new(sys: &System) -> Result<Creator> {
        let config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&sys.kubeconfig)?)?;
        let cluster = &config["clusters"][0]["cluster"];
        let server = cluster["server"]
            .as_str()
            .context("the kubeconfig names a server")?
            .trim_end_matches('/')
            .to_string();
        let ca = base64::engine::general_purpose::STANDARD.decode(
            cluster["certificate-authority-data"]
                .as_str()
                .context("the kubeconfig has certificate-authority-data")?,
        )?;
        let token = config["users"][0]["user"]["token"]
            .as_str()
            .context("the kubeconfig has a token")?
            .to_string();
        let http = reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
            .timeout(Duration::from_secs(30))
            .build()?;
        let creator = Creator {
            http,
            server,
            token,
        };
        let resp = creator
            .http
            .get(format!("{}/version", creator.server))
            .bearer_auth(&creator.token)
            .send()?;
        if !resp.status().is_success() {
            bail!("GET /version: {}", resp.status());
        }
        Ok(creator)
    }

    /// Creates Ingress `default/name` routing `name.example` to Service `svc` port 80, as
    /// [`super::first200::ingress_yaml`] does. Returns the instant just before the request was
    /// sent and the seconds until the API server's response.
    pub fn create_ingress(&self, name: &str, svc: &str) -> Result<(Instant, f64)> {
        let body = ingress(name, svc);
        let url = format!(
            "{}/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            self.server
        );
        let request = self.http.post(url).bearer_auth(&self.token).json(&body);
        let start = Instant::now();
        let resp = request.send()?;
        let took = start.elapsed().as_secs_f64();
        if !resp.status().is_success() {
            bail!(
                "creating Ingress {name}: {} {}",
                resp.status(),
                resp.text()?
            );
        }
        Ok((start, took))
    }
}

fn ingress(name: &str, svc: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name},
        "spec": {
            "ingressClassName": "gce",
            "rules": [{
                "host": format!("{name}.example"),
                "http": {"paths": [{
                    "path": "/",
                    "pathType": "Prefix",
                    "backend": {"service": {"name": svc, "port": {"number": 80}}}
                }]}
            }]
        }
    })
}
