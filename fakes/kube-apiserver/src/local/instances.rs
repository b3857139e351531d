//! The local cluster's Nodes as Compute Engine instances, the way a GKE node pool creates a VM
//! for each Node: the local kubelet registers one instance per Node it serves through the
//! Compute API (the bundled `gce-emulator`, or any endpoint speaking Compute API v1), and
//! deletes it when the Node goes.
//!
//! Each instance (Compute API v1 reference, `instances.insert`) is named like its Node, lives in
//! the Node's zone, and has one network interface on the cluster's network whose `networkIP` is
//! the Node's InternalIP and whose alias IP range (`aliasIpRanges`, range name `pods`) is the
//! Node's Pod CIDR, as on a VPC-native GKE cluster; it carries the cluster's network tags
//! (GKE: `gke-<cluster>-<hash>-node`, the L7 firewall rule's `targetTags`) and the project's
//! default service account. So NEG endpoints (Pod IPs) name an instance that holds their
//! address, and the emulator's firewall rules apply to them as on Google Cloud.

use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::nodes::NodeConfig;

/// Where and how instances are registered (`fake-kube-apiserver --compute-endpoint ...`).
/// Its `Debug` leaves the token out (logs never carry it).
#[derive(Clone, PartialEq, Eq)]
pub struct InstanceOptions {
    /// Compute API root, e.g. `http://127.0.0.1:41234` (requests go to `/compute/v1/...`).
    pub endpoint: String,
    /// Project of the instances (the Nodes' `spec.providerID` project).
    pub project: String,
    /// The cluster's network, `projects/{host}/global/networks/{name}` (a Shared VPC host's
    /// network for a service project's cluster).
    pub network: String,
    /// Network tags of every Node.
    pub tags: Vec<String>,
    /// Bearer token sent with every call (`--compute-token`), for an emulator run with `--iam`
    /// (an access token from its admin API, `POST /_emulator/iam/serviceAccounts/EMAIL/tokens`).
    pub token: Option<String>,
}

impl std::fmt::Debug for InstanceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceOptions")
            .field("endpoint", &self.endpoint)
            .field("project", &self.project)
            .field("network", &self.network)
            .field("tags", &self.tags)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Registers and deletes the Nodes' instances.
#[derive(Clone, Debug)]
pub struct Instances {
    http: reqwest::Client,
    options: InstanceOptions,
}

/// The `compute#instance` body for `node` (see the module docs).
pub fn instance_body(options: &InstanceOptions, node: &NodeConfig) -> Value {
    json!({
        "name": node.name,
        "machineType": format!("zones/{}/machineTypes/e2-medium", node.zone),
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {
            "sourceImage": "projects/cos-cloud/global/images/family/cos-stable", "diskSizeGb": "100"}}],
        "networkInterfaces": [{
            "network": options.network,
            "networkIP": node.internal_ip.to_string(),
            "aliasIpRanges": [{"ipCidrRange": node.pod_cidr, "subnetworkRangeName": "pods"}],
        }],
        "tags": {"items": options.tags},
        "serviceAccounts": [{"email": "default",
            "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "labels": {"goog-gke-node": ""},
    })
}

/// Whether the stored instance `vm` is what `want` asks for (zone is in the path): the same
/// address, alias range, network and tags.
fn matches(vm: &Value, want: &Value) -> bool {
    let nic = |v: &Value, f: &str| v["networkInterfaces"][0][f].clone();
    let network = |v: &Value| {
        v["networkInterfaces"][0]["network"]
            .as_str()
            .and_then(|n| n.find("projects/").map(|i| n[i..].to_string()))
    };
    let alias = |v: &Value| nic(v, "aliasIpRanges")[0]["ipCidrRange"].clone();
    let tags = |v: &Value| {
        let mut t: Vec<String> = v["tags"]["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect();
        t.sort();
        t
    };
    nic(vm, "networkIP") == nic(want, "networkIP")
        && alias(vm) == alias(want)
        && network(vm) == network(want)
        && tags(vm) == tags(want)
}

impl Instances {
    /// A client for `options`.
    pub fn new(options: InstanceOptions) -> Instances {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("fake-kube-apiserver/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a reqwest client with a timeout builds");
        Instances { http, options }
    }

    fn url(&self, zone: &str, rest: &str) -> String {
        format!(
            "{}/compute/v1/projects/{}/zones/{zone}/{rest}",
            self.options.endpoint.trim_end_matches('/'),
            self.options.project
        )
    }

    /// Creates the instance of `node`, or keeps an existing one that matches it; one that does
    /// not (a Node re-created with another Pod CIDR) is replaced. Waits for each Operation.
    ///
    /// Errors: the API's answer (status and body) when a call fails.
    pub async fn register(&self, node: &NodeConfig) -> anyhow::Result<()> {
        let body = instance_body(&self.options, node);
        let existing = self.get(&node.zone, &node.name).await?;
        match existing {
            Some(vm) if matches(&vm, &body) => return Ok(()),
            Some(_) => {
                tracing::info!(instance = %node.name, zone = %node.zone, "instance differs from its Node; replacing it");
                self.delete(&node.name, &node.zone).await?;
            }
            None => {}
        }
        let op = self
            .call(
                reqwest::Method::POST,
                &self.url(&node.zone, "instances"),
                Some(&body),
            )
            .await
            .with_context(|| format!("inserting instance {} in {}", node.name, node.zone))?;
        self.wait(&node.zone, &op).await?;
        tracing::info!(instance = %node.name, zone = %node.zone, pod_cidr = %node.pod_cidr, "instance registered");
        Ok(())
    }

    /// Deletes the instance `name` in `zone`; gone already is fine.
    pub async fn delete(&self, name: &str, zone: &str) -> anyhow::Result<()> {
        let url = self.url(zone, &format!("instances/{name}"));
        match self.call(reqwest::Method::DELETE, &url, None).await {
            Ok(op) => self.wait(zone, &op).await,
            Err(e) if e.to_string().contains(" 404 ") => Ok(()),
            Err(e) => Err(e.context(format!("deleting instance {name} in {zone}"))),
        }
    }

    async fn get(&self, zone: &str, name: &str) -> anyhow::Result<Option<Value>> {
        let url = self.url(zone, &format!("instances/{name}"));
        match self.call(reqwest::Method::GET, &url, None).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.to_string().contains(" 404 ") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits for a zonal Operation to be DONE (`zoneOperations.wait`); its `error` fails.
    async fn wait(&self, zone: &str, op: &Value) -> anyhow::Result<()> {
        let mut op = op.clone();
        for _ in 0..60 {
            if op["status"] == "DONE" {
                if let Some(err) = op.get("error") {
                    bail!("operation {} failed: {err}", op["name"]);
                }
                return Ok(());
            }
            let name = op["name"].as_str().unwrap_or_default().to_string();
            op = self
                .call(
                    reqwest::Method::POST,
                    &self.url(zone, &format!("operations/{name}/wait")),
                    None,
                )
                .await?;
        }
        bail!("operation {} not DONE after 60 waits", op["name"])
    }

    async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self.http.request(method.clone(), url);
        if let Some(t) = &self.options.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("{method} {url}"))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("{method} {url}: {} {text}", status.as_u16());
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn the_instance_holds_the_nodes_address_pod_range_zone_and_tags() {
        let options = InstanceOptions {
            token: None,
            endpoint: "http://127.0.0.1:1".into(),
            project: "svc".into(),
            network: "projects/host/global/networks/shared".into(),
            tags: vec!["gke-local-node".into()],
        };
        let node = NodeConfig {
            name: "local-node-2".into(),
            zone: "us-central1-b".into(),
            pod_cidr: "127.70.3.0/24".into(),
            internal_ip: Ipv4Addr::new(127, 40, 0, 9),
        };
        let body = instance_body(&options, &node);
        assert_eq!(body["name"], "local-node-2");
        assert_eq!(
            body["machineType"],
            "zones/us-central1-b/machineTypes/e2-medium"
        );
        let nic = &body["networkInterfaces"][0];
        assert_eq!(nic["network"], "projects/host/global/networks/shared");
        assert_eq!(nic["networkIP"], "127.40.0.9");
        assert_eq!(nic["aliasIpRanges"][0]["ipCidrRange"], "127.70.3.0/24");
        assert_eq!(body["tags"]["items"], json!(["gke-local-node"]));
        // What the emulator stores (full URLs, sorted tags) matches; another range does not.
        let mut stored = body.clone();
        stored["networkInterfaces"][0]["network"] =
            json!("http://127.0.0.1:9/compute/v1/projects/host/global/networks/shared");
        assert!(matches(&stored, &body));
        stored["networkInterfaces"][0]["aliasIpRanges"][0]["ipCidrRange"] = json!("127.70.4.0/24");
        assert!(!matches(&stored, &body));
    }
}
