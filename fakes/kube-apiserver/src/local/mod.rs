//! Local controllers that make the local API behave like a cluster: the EndpointSlice,
//! ReplicaSet ([`replica_set`]), Deployment ([`deployment`]), StatefulSet ([`stateful_set`])
//! and DaemonSet ([`daemon_set`]) controllers, and a local kubelet
//! that registers the cluster's Nodes (one by default, several across zones with `--nodes`),
//! schedules every Pod onto them (spreading a workload's replicas across zones) and runs it as
//! built-in servers answering as its images would ([`images`]) on loopback Pod IPs from each
//! Node's Pod CIDR, and registers each Node as a Compute Engine
//! instance when given a Compute endpoint ([`instances`]). They are ordinary API clients
//! (kube-rs) of the local server, so they can serve any API server.
//!
//! Both lag what they react to as a real cluster's do (the kubelet's status write, the
//! EndpointSlice controller's sync; [`LocalOptions`]): an instantaneous fake hides the races a
//! cluster has, such as the window between a readiness gate turning True and the Pod's
//! EndpointSlice entry saying ready (issue 40).

pub mod agnhost;
pub mod annotations;
pub mod controller_history;
pub mod daemon_set;
pub mod deployment;
pub mod deployment_util;
pub mod echo;
pub mod endpoint_slice;
pub mod endpoint_slice_controller;
pub mod expectations;
pub mod hello_app;
pub mod image_commands_config;
pub mod images;
pub mod informer;
pub mod instances;
pub mod kubelet;
pub mod node_agent;
pub mod node_fit;
pub mod node_set;
pub mod nodes;
pub mod owner_refs;
pub mod pod_claims;
pub mod pod_identity;
pub mod pod_ip;
pub mod pod_status;
pub mod probe;
pub mod replica_set;
pub mod stateful_set;
pub mod user_command;
pub mod whereami;

use std::sync::Arc;
use std::time::Duration;

/// How long the local kubelet takes to write a Pod's status after what it reacts to (a probe
/// result, a readiness-gate condition written by another client): a real kubelet's pod worker
/// and status manager take tens of milliseconds (issue 40 measured 21 ms from the gate turning
/// True to the kubelet's `Ready`).
pub const DEFAULT_KUBELET_STATUS_DELAY: Duration = Duration::from_millis(20);

/// How long the local EndpointSlice controller takes from a trigger (a Pod's `Ready` changing)
/// to reading and writing the slices: kube-controller-manager's EndpointSlice controller lags
/// the Pod by its informer, work queue and API write, tens of milliseconds.
pub const DEFAULT_ENDPOINT_SLICE_DELAY: Duration = Duration::from_millis(40);

/// Options of the local controllers.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// CIDR within 127.0.0.0/8, /24 or wider, of the cluster's Pods (`--pod-ip-range`); each
    /// Node gets a random /24 of it as its `spec.podCIDR`.
    pub pod_ip_range: String,
    /// One Node per entry, in that zone (`--nodes`); default one Node in `us-central1-a`.
    pub zones: Vec<String>,
    /// Project named in the Nodes' `spec.providerID` (`--project`).
    pub project: String,
    /// Where each Node is registered as a Compute Engine instance (`--compute-endpoint`);
    /// `None` registers none.
    pub instances: Option<instances::InstanceOptions>,
    /// Images whose containers run a user's program (`--image-command IMAGE=COMMAND`).
    pub image_commands: user_command::ImageCommands,
    /// The kubelet's status write lag ([`DEFAULT_KUBELET_STATUS_DELAY`],
    /// `--kubelet-status-delay-ms`).
    pub kubelet_status_delay: Duration,
    /// The EndpointSlice controller's lag ([`DEFAULT_ENDPOINT_SLICE_DELAY`],
    /// `--endpoint-slice-delay-ms`).
    pub endpoint_slice_delay: Duration,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            pod_ip_range: "127.64.0.0/10".to_string(),
            zones: vec![nodes::DEFAULT_ZONE.to_string()],
            project: "local-project".to_string(),
            instances: None,
            image_commands: user_command::ImageCommands::default(),
            kubelet_status_delay: DEFAULT_KUBELET_STATUS_DELAY,
            endpoint_slice_delay: DEFAULT_ENDPOINT_SLICE_DELAY,
        }
    }
}

/// Registers the Nodes, then runs the EndpointSlice, ReplicaSet, Deployment, StatefulSet and
/// DaemonSet controllers and the local kubelet until the future is dropped.
///
/// Errors: an invalid `pod_ip_range` (returned at once, before anything runs).
pub async fn run(client: kube::Client, options: LocalOptions) -> anyhow::Result<()> {
    let nodes = Arc::new(node_set::NodeSet::default());
    node_agent::start(
        client.clone(),
        node_agent::NodeAgentOptions {
            project: options.project.clone(),
            zones: options.zones.clone(),
            pod_ip_range: options.pod_ip_range.clone(),
            instances: options.instances.clone().map(instances::Instances::new),
        },
        nodes.clone(),
    )
    .await?;
    let image_commands = Arc::new(options.image_commands);
    tokio::join!(
        endpoint_slice_controller::run(client.clone(), options.endpoint_slice_delay),
        replica_set::run(client.clone()),
        deployment::run(client.clone()),
        stateful_set::run(client.clone()),
        daemon_set::run(client.clone()),
        image_commands_config::run(client.clone(), image_commands.clone()),
        kubelet::run(client, nodes, options.kubelet_status_delay, image_commands)
    );
    Ok(())
}
