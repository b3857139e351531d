//! The Node side of the local kubelet: registers the configured Nodes, keeps them alive as a
//! kubelet does, adopts Nodes created later with `local.gclb-operator.dev/run: "kubelet"`, and
//! cleans up after a deleted Node.
//!
//! - Registration (kubelet `registerWithAPIServer`): create the Node ([`nodes::node_object`]),
//!   or adopt an existing one of the same name (after a restart from `--state-file`) keeping
//!   its `spec.podCIDR` and InternalIP, then write `nodes/status`.
//! - Heartbeats (kubelet node lease controller and `nodeStatusReportFrequency`): the Lease
//!   `kube-node-lease/<node>` is renewed every [`LEASE_RENEW`] (a quarter of its 40 s
//!   duration), the Node status (conditions' `lastHeartbeatTime`) every [`STATUS_REPORT`].
//! - A Node created by someone else with the annotation above is served like the configured
//!   ones: the agent fills what the node IPAM controller and the cloud provider would
//!   (`spec.podCIDR`, `spec.providerID`, the region labels from its zone label) and the status.
//! - A served Node that is deleted stops being served; its Pods are deleted at once (as the
//!   Pod garbage collector deletes Pods bound to a Node that no longer exists) and its Lease
//!   with them (a real cluster's garbage collector follows the Lease's ownerReference).
//! - With a Compute endpoint, each served Node is first registered as an instance
//!   ([`super::instances`]), and a deleted Node's instance is deleted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::node_set::{LocalNode, NodeSet};
use super::nodes::{self, NodeConfig};

/// How often the node Lease is renewed (the kubelet's `renewInterval`: 25 % of 40 s).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How often the Node status is re-reported without a change (`nodeStatusReportFrequency`).
pub const STATUS_REPORT: Duration = Duration::from_secs(300);
/// The annotation value that makes the local kubelet serve a Node created by someone else.
pub const RUN_KUBELET: &str = "kubelet";
/// The field manager of the agent's writes.
const FIELD_MANAGER: &str = "kubelet";

/// What the agent needs to know.
#[derive(Clone, Debug)]
pub struct NodeAgentOptions {
    /// Project of `spec.providerID` (`gce://PROJECT/ZONE/NAME`).
    pub project: String,
    /// One Node per entry, named `local-node-1`, `local-node-2`, ...
    pub zones: Vec<String>,
    /// The cluster's Pod range; each Node gets a /24 of it.
    pub pod_ip_range: String,
    /// Registers each served Node as a Compute Engine instance, if set.
    pub instances: Option<super::instances::Instances>,
}

struct Agent {
    client: Client,
    options: NodeAgentOptions,
    set: Arc<NodeSet>,
    heartbeats: HashMap<String, JoinHandle<()>>,
}

/// Registers the configured Nodes (returns once they are served), then keeps them alive and
/// follows Node changes on a background task.
///
/// Errors: `--pod-ip-range` cannot hold a /24 per Node (at once, before anything is written).
pub async fn start(
    client: Client,
    options: NodeAgentOptions,
    set: Arc<NodeSet>,
) -> anyhow::Result<()> {
    nodes::pick_pod_cidr(&options.pod_ip_range, &BTreeSet::new())?;
    let mut agent = Agent {
        client,
        options,
        set,
        heartbeats: HashMap::new(),
    };
    let zones = agent.options.zones.clone();
    for (index, zone) in zones.iter().enumerate() {
        let name = nodes::node_name(index + 1);
        loop {
            match agent.register(&name, zone).await {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(node = %name, %error, "cannot register Node; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
    tokio::spawn(agent.follow());
    Ok(())
}

impl Agent {
    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Addresses and CIDRs the Nodes in the API already hold.
    async fn taken(&self) -> Result<(BTreeSet<String>, BTreeSet<std::net::Ipv4Addr>), kube::Error> {
        let mut cidrs = BTreeSet::new();
        let mut ips = BTreeSet::new();
        for node in self.nodes().list(&ListParams::default()).await?.items {
            if let Some(cidr) = node.spec.as_ref().and_then(|s| s.pod_cidr.clone()) {
                cidrs.insert(cidr);
            }
            ips.extend(internal_ip(&node));
        }
        Ok((cidrs, ips))
    }

    /// Creates or adopts the configured Node `name` in `zone` and starts serving it.
    async fn register(&mut self, name: &str, zone: &str) -> anyhow::Result<()> {
        let existing = self.nodes().get_opt(name).await?;
        let (cidrs, ips) = self.taken().await?;
        let pod_cidr = match existing
            .as_ref()
            .and_then(|n| n.spec.as_ref()?.pod_cidr.clone())
        {
            Some(cidr) => cidr,
            None => nodes::pick_pod_cidr(&self.options.pod_ip_range, &cidrs)?,
        };
        let internal_ip = match existing.as_ref().and_then(internal_ip) {
            Some(ip) => ip,
            None => nodes::pick_node_ip(&ips),
        };
        let config = NodeConfig {
            name: name.to_string(),
            zone: zone.to_string(),
            pod_cidr,
            internal_ip,
        };
        let body = nodes::node_object(&self.options.project, &config);
        let node = match existing {
            None => {
                let node: Node = serde_json::from_value(body)?;
                self.nodes().create(&PostParams::default(), &node).await?
            }
            Some(_) => {
                self.nodes()
                    .patch(name, &self.params(), &Patch::Merge(&body))
                    .await?
            }
        };
        tracing::info!(node = %name, zone, pod_cidr = %config.pod_cidr, internal_ip = %config.internal_ip, "Node registered");
        self.serve(node, config).await
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        }
    }

    /// Registers the Node's instance (if configured), writes the status, starts the heartbeats
    /// and adds the Node to the served set: Pods land on it only once its instance exists.
    async fn serve(&mut self, node: Node, config: NodeConfig) -> anyhow::Result<()> {
        if let Some(instances) = &self.options.instances {
            instances.register(&config).await?;
        }
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        self.nodes()
            .patch_status(
                &config.name,
                &self.params(),
                &Patch::Merge(nodes::node_status(&config, &now, &now)),
            )
            .await?;
        let labels: BTreeMap<String, String> = node.labels().clone();
        let served = LocalNode::new(config.clone(), labels)?;
        let uid = node.uid().unwrap_or_default();
        let task = tokio::spawn(heartbeat(self.client.clone(), config, uid, now));
        if let Some(old) = self.heartbeats.insert(served.name().to_string(), task) {
            old.abort();
        }
        self.set.insert(served);
        Ok(())
    }

    /// Follows Node changes: adopts annotated Nodes, forgets deleted ones.
    async fn follow(mut self) {
        let mut events = watcher(self.nodes(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relisted: BTreeSet<String> = BTreeSet::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => relisted.clear(),
                Ok(watcher::Event::InitApply(node)) => {
                    relisted.insert(node.name_any());
                    self.observe(node).await;
                }
                Ok(watcher::Event::InitDone) => {
                    for node in self.set.all() {
                        if !relisted.contains(node.name()) {
                            self.forget(node.name()).await;
                        }
                    }
                }
                Ok(watcher::Event::Apply(node)) => self.observe(node).await,
                Ok(watcher::Event::Delete(node)) => self.forget(&node.name_any()).await,
                Err(error) => tracing::debug!(%error, "Node watch interrupted"),
            }
        }
    }

    async fn observe(&mut self, node: Node) {
        let name = node.name_any();
        if self.set.get(&name).is_some() || node.metadata.deletion_timestamp.is_some() {
            return;
        }
        let wanted = node
            .annotations()
            .get(super::annotations::RUN)
            .is_some_and(|v| v == RUN_KUBELET);
        if !wanted {
            return;
        }
        if let Err(error) = self.adopt(node).await {
            tracing::warn!(node = %name, %error, "cannot serve the annotated Node");
        }
    }

    /// Fills in what the node IPAM controller and the cloud provider would, then serves it.
    async fn adopt(&mut self, node: Node) -> anyhow::Result<()> {
        let name = node.name_any();
        let Some(zone) = node.labels().get(nodes::ZONE_LABEL).cloned() else {
            anyhow::bail!(
                "Node {name}: label {} is missing; give the Node a zone (e.g. us-central1-d) to run it locally",
                nodes::ZONE_LABEL
            );
        };
        let region = nodes::region_of(&zone)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "Node {name}: label {}={zone:?} is not a zone name like us-central1-d",
                    nodes::ZONE_LABEL
                )
            })?
            .to_string();
        let (cidrs, ips) = self.taken().await?;
        let spec = node.spec.clone().unwrap_or_default();
        let pod_cidr = match spec.pod_cidr.clone() {
            Some(cidr) => cidr,
            None => nodes::pick_pod_cidr(&self.options.pod_ip_range, &cidrs)?,
        };
        let config = NodeConfig {
            name: name.clone(),
            zone: zone.clone(),
            pod_cidr: pod_cidr.clone(),
            internal_ip: internal_ip(&node).unwrap_or_else(|| nodes::pick_node_ip(&ips)),
        };
        let mut patch = json!({"metadata": {"labels": {
            nodes::REGION_LABEL: region, nodes::BETA_REGION_LABEL: region, nodes::BETA_ZONE_LABEL: zone,
        }}});
        if spec.pod_cidr.is_none() {
            patch["spec"]["podCIDR"] = json!(pod_cidr);
            patch["spec"]["podCIDRs"] = json!([pod_cidr]);
        }
        if spec.provider_id.is_none() {
            patch["spec"]["providerID"] = json!(nodes::provider_id(&self.options.project, &config));
        }
        let node = self
            .nodes()
            .patch(&name, &self.params(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(node = %name, %zone, pod_cidr = %config.pod_cidr, "Node adopted");
        self.serve(node, config).await
    }

    async fn forget(&mut self, name: &str) {
        let Some(node) = self.set.remove(name) else {
            return;
        };
        if let Some(task) = self.heartbeats.remove(name) {
            task.abort();
        }
        tracing::info!(node = %name, zone = %node.config.zone, "Node deleted; deleting its Pods");
        if let Err(error) = delete_pods_of(&self.client, name).await {
            tracing::warn!(node = %name, %error, "cannot delete the Pods of a deleted Node");
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), nodes::LEASE_NAMESPACE);
        let _ = leases.delete(name, &DeleteParams::default()).await;
        if let Some(instances) = &self.options.instances {
            if let Err(error) = instances.delete(name, &node.config.zone).await {
                tracing::warn!(node = %name, %error, "cannot delete the instance of a deleted Node");
            }
        }
    }
}

/// The Node's InternalIP.
fn internal_ip(node: &Node) -> Option<std::net::Ipv4Addr> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")?
        .address
        .parse()
        .ok()
}

/// Deletes (grace period 0) every Pod bound to `node`, as the Pod garbage collector does.
async fn delete_pods_of(client: &Client, node: &str) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    let bound = ListParams::default().fields(&format!("spec.nodeName={node}"));
    for pod in pods.list(&bound).await?.items {
        let namespaced: Api<Pod> =
            Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        match namespaced
            .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Renews the node Lease every [`LEASE_RENEW`] and re-reports the status every
/// [`STATUS_REPORT`]; `ready_since` is the Ready condition's lastTransitionTime.
async fn heartbeat(client: Client, node: NodeConfig, uid: String, ready_since: String) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), nodes::LEASE_NAMESPACE);
    let nodes_api: Api<Node> = Api::all(client);
    let mut lease_tick = tokio::time::interval(LEASE_RENEW);
    let mut status_tick = tokio::time::interval(STATUS_REPORT);
    lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    status_tick.tick().await; // the status was just written
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    loop {
        tokio::select! {
            _ = lease_tick.tick() => {
                if let Err(error) = renew_lease(&leases, &node.name, &uid).await {
                    tracing::warn!(node = %node.name, %error, "cannot renew the node Lease");
                }
            }
            _ = status_tick.tick() => {
                let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
                let status = nodes::node_status(&node, &now, &ready_since);
                if let Err(error) = nodes_api.patch_status(&node.name, &params, &Patch::Merge(status)).await {
                    tracing::warn!(node = %node.name, %error, "cannot report Node status");
                }
            }
        }
    }
}

/// Creates the Lease or moves its `renewTime` to now (PUT with the read resourceVersion, as the
/// kubelet updates it).
async fn renew_lease(leases: &Api<Lease>, name: &str, uid: &str) -> Result<(), kube::Error> {
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let desired = nodes::lease_object(name, uid, &now);
    match leases.get_opt(name).await? {
        None => {
            let lease: Lease = serde_json::from_value(desired).map_err(kube::Error::SerdeError)?;
            leases.create(&PostParams::default(), &lease).await?;
        }
        Some(mut lease) => {
            let spec: Value = desired["spec"].clone();
            lease.spec = Some(serde_json::from_value(spec).map_err(kube::Error::SerdeError)?);
            leases.replace(name, &PostParams::default(), &lease).await?;
        }
    }
    Ok(())
}
