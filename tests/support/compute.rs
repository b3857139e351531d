//! The harness's Compute side: the emulator's REST API (as the local admin when IAM is on),
//! its admin API (listeners, call counts, CA), and HTTP requests through a load balancer's
//! listener.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::regional::{REGION, REGIONAL};
use super::{item_names, wait_for, System, DEADLINE, PROJECT, ZONE};

/// The global collections the operator writes for its Ingress and Gateway load balancers, users
/// before what they use (the order a clean-up deletes them in).
pub const GLOBAL: &[&str] = &[
    "forwardingRules",
    "targetHttpProxies",
    "targetHttpsProxies",
    "targetTcpProxies",
    "targetSslProxies",
    "urlMaps",
    "backendServices",
    "healthChecks",
    "sslCertificates",
    "securityPolicies",
    "addresses",
    "firewalls",
];

impl System {
    /// `rb` with [`System::admin_token`] as its bearer token, if any.
    fn authed(&self, rb: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
        match &self.admin_token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// GET on the emulator (path relative to its base URL) as JSON.
    pub fn compute_get(&self, path: &str) -> Result<Value> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.get(&url)).send()?;
        let status = resp.status();
        let body: Value = resp.json().unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("GET {url}: {status} {body}");
        }
        Ok(body)
    }

    /// POST JSON to the emulator (path relative to its base URL).
    pub fn compute_post(&self, path: &str, body: &Value) -> Result<Value> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.post(&url)).json(body).send()?;
        let status = resp.status();
        let text = resp.text()?;
        if !status.is_success() {
            bail!("POST {url}: {status} {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// DELETE on the emulator (path relative to its base URL).
    pub fn compute_delete(&self, path: &str) -> Result<()> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.delete(&url)).send()?;
        if !resp.status().is_success() {
            bail!("DELETE {url}: {}", resp.status());
        }
        Ok(())
    }

    /// Names of the resources in one global collection of the test project
    /// (`urlMaps`, `backendServices`, `healthChecks`, `firewalls`, ...).
    pub fn compute_names(&self, collection: &str) -> Result<Vec<String>> {
        let list = self.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/{collection}"
        ))?;
        Ok(item_names(&list))
    }

    /// Names of the firewall rules in the test project except the four a new project's
    /// `default` network starts with (`default-allow-icmp`, `-internal`, `-rdp`, `-ssh`).
    pub fn created_firewalls(&self) -> Result<Vec<String>> {
        Ok(self
            .compute_names("firewalls")?
            .into_iter()
            .filter(|n| {
                !matches!(
                    n.as_str(),
                    "default-allow-icmp"
                        | "default-allow-internal"
                        | "default-allow-rdp"
                        | "default-allow-ssh"
                )
            })
            .collect())
    }

    /// Names of the NEGs in the test zone.
    pub fn neg_names(&self) -> Result<Vec<String>> {
        let list = self.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups"
        ))?;
        Ok(item_names(&list))
    }

    /// Everything in the project's [`GLOBAL`] collections, the [`REGIONAL`] collections of
    /// [`REGION`] and the NEGs of [`ZONE`], as `global/{collection}/{name}`,
    /// `regions/{collection}/{name}` and `zones/networkEndpointGroups/{name}`, sorted: what the
    /// operator may have made, with what the test made itself and the network's defaults
    /// (compare with a baseline).
    pub fn project_resources(&self) -> Result<Vec<String>> {
        let p = format!("compute/v1/projects/{PROJECT}");
        let mut paths: Vec<(String, String)> = GLOBAL
            .iter()
            .map(|c| (format!("global/{c}"), format!("{p}/global/{c}")))
            .collect();
        for c in REGIONAL {
            paths.push((format!("regions/{c}"), format!("{p}/regions/{REGION}/{c}")));
        }
        paths.push((
            "zones/networkEndpointGroups".into(),
            format!("{p}/zones/{ZONE}/networkEndpointGroups"),
        ));
        let mut out = Vec::new();
        for (label, path) in paths {
            let list = self.compute_get(&path)?;
            out.extend(
                item_names(&list)
                    .into_iter()
                    .map(|n| format!("{label}/{n}")),
            );
        }
        out.sort();
        Ok(out)
    }

    /// The emulator's count of mutating API calls so far (admin API `/_emulator/calls`).
    pub fn mutating_calls(&self) -> Result<u64> {
        let calls = self.compute_get("_emulator/calls")?;
        calls["mutating"]
            .as_u64()
            .ok_or_else(|| anyhow!("no `mutating` in /_emulator/calls: {calls}"))
    }

    /// The emulator's listener socket for a forwarding rule address and port
    /// (admin API `/_emulator/listeners`), as `ip:port`.
    pub fn listener_for(&self, ip: &str, port: u16) -> Result<Option<String>> {
        let listeners = self.compute_get("_emulator/listeners")?;
        let items = listeners
            .as_array()
            .cloned()
            .or_else(|| listeners["listeners"].as_array().cloned())
            .unwrap_or_default();
        Ok(items
            .iter()
            .find(|l| l["ipAddress"] == ip && l["port"].as_u64() == Some(port as u64))
            .and_then(|l| l["localAddr"].as_str().map(str::to_string)))
    }

    /// Waits until the Ingress has an IP in its status, and its HTTP listener is open.
    /// Returns the socket to send requests to.
    pub fn wait_for_ingress_socket(&self, namespace: &str, name: &str) -> Result<String> {
        let ip = wait_for(
            &format!("an IP on Ingress {namespace}/{name}"),
            DEADLINE,
            || {
                let ing = self.get_json(&["ingress", "-n", namespace, name])?;
                Ok(ing["status"]["loadBalancer"]["ingress"][0]["ip"]
                    .as_str()
                    .map(str::to_string))
            },
        )
        .with_context(|| self.logs())?;
        wait_for(&format!("a listener on {ip}:80"), DEADLINE, || {
            self.listener_for(&ip, 80)
        })
        .with_context(|| self.logs())
    }

    /// Sends `GET http://{host}{path}` to `socket` and returns (status, body).
    pub fn http_get(&self, socket: &str, host: &str, path: &str) -> Result<(u16, String)> {
        let resp = self
            .http
            .get(format!("http://{socket}{path}"))
            .header(reqwest::header::HOST, host)
            .send()?;
        Ok((resp.status().as_u16(), resp.text()?))
    }

    /// Polls until `GET host+path` through `socket` answers `status` with a body containing
    /// `needle`; returns the body.
    pub fn wait_for_response(
        &self,
        socket: &str,
        host: &str,
        path: &str,
        status: u16,
        needle: &str,
    ) -> Result<String> {
        wait_for(
            &format!("{status} with {needle:?} from http://{host}{path}"),
            DEADLINE,
            || {
                let (s, body) = self.http_get(socket, host, path)?;
                if s == status && body.contains(needle) {
                    Ok(Some(body))
                } else {
                    Err(anyhow!(
                        "got {s}: {}",
                        body.chars().take(300).collect::<String>()
                    ))
                }
            },
        )
        .with_context(|| self.logs())
    }

    /// Polls until the emulator serves `ip:port`; returns the local socket.
    pub fn wait_for_listener(&self, ip: &str, port: u16) -> Result<String> {
        wait_for(&format!("a listener on {ip}:{port}"), DEADLINE, || {
            self.listener_for(ip, port)
        })
        .with_context(|| self.logs())
    }

    /// Reserves a global address `name` in the emulator and returns its IP.
    pub fn reserve_global_address(&self, name: &str) -> Result<String> {
        self.compute_post(
            &format!("compute/v1/projects/{PROJECT}/global/addresses"),
            &serde_json::json!({ "name": name }),
        )?;
        wait_for(&format!("global address {name}"), DEADLINE, || {
            let a = self.compute_get(&format!(
                "compute/v1/projects/{PROJECT}/global/addresses/{name}"
            ))?;
            Ok(a["address"].as_str().map(str::to_string))
        })
    }

    /// The emulator's local CA (PEM) that signs MANAGED certificates.
    pub fn emulator_ca_pem(&self) -> Result<String> {
        let url = format!("{}_emulator/ca.pem", self.compute_url);
        let resp = self.http.get(&url).send()?;
        if !resp.status().is_success() {
            bail!("GET {url}: {}", resp.status());
        }
        Ok(resp.text()?)
    }
}

/// Waits until `GET http://{socket}{path}` with `Host: {host}` answers `status` with
/// `Location: https://{host}{path}` (FrontendConfig `redirectToHttps` with its
/// `responseCodeName`, global or regional; Google's "Set up HTTP-to-HTTPS redirect" pages),
/// `what` naming the rule in the timeout's message.
///
/// Errors: no such answer within [`DEADLINE`] (the last status and Location).
pub fn wait_for_https_redirect(
    what: &str,
    socket: &str,
    host: &str,
    path: &str,
    status: u16,
) -> Result<()> {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()?;
    wait_for(&format!("a {status} to https on {what}"), DEADLINE, || {
        let r = client
            .get(format!("http://{socket}{path}"))
            .header("host", host)
            .send()?;
        let got = r.status().as_u16();
        let location = r
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if got == status && location == format!("https://{host}{path}") {
            Ok(Some(()))
        } else {
            Err(anyhow!("got {got} Location {location:?}"))
        }
    })
}
