//! `fake-kube-apiserver`: serves the local Kubernetes API over HTTPS, writes a kubeconfig, prints
//! the server URL as the first stdout line, and runs the local controllers.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use fake_kube_apiserver::local::{self, LocalOptions};
use fake_kube_apiserver::server::{self, ServerOptions};

/// Local Kubernetes API server for tests and demos.
#[derive(Parser, Debug)]
#[command(name = "fake-kube-apiserver", version)]
struct Args {
    /// Listen address (loopback only); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig for clients.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Persist the objects in this file across restarts.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// CIDR (within 127.0.0.0/8, /24 or wider) for local Pod IPs; each Node gets a /24 of it.
    #[arg(long, default_value = "127.64.0.0/10")]
    pod_ip_range: String,
    /// The local Nodes: a comma-separated list of zones, one Node per entry
    /// (`local-node-1`, `local-node-2`, ...), e.g. `us-central1-a,us-central1-b,us-central1-c`.
    #[arg(long, default_value = fake_kube_apiserver::local::nodes::DEFAULT_ZONE)]
    nodes: String,
    /// Project in the Nodes' `spec.providerID` (`gce://PROJECT/ZONE/NAME`).
    #[arg(long, default_value = "local-project")]
    project: String,
    /// Number of changes kept for watch resumption; watches from older resourceVersions get
    /// 410 Expired.
    #[arg(long, default_value_t = fake_kube_apiserver::store::HISTORY_LIMIT)]
    watch_history: usize,
    /// Append one JSON line per request to this file, in the audit.k8s.io/v1 `Event` shape of
    /// a real server's `--audit-log-path` at level Metadata (docs/kube-apiserver.md).
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// How long the local kubelet's Pod status writes lag what causes them (milliseconds; a
    /// real kubelet takes tens). 0 makes them immediate.
    #[arg(long, default_value_t = local::DEFAULT_KUBELET_STATUS_DELAY.as_millis() as u64)]
    kubelet_status_delay_ms: u64,
    /// How long the local EndpointSlice controller lags the Pods it reacts to (milliseconds; a
    /// real kube-controller-manager takes tens). 0 makes it immediate.
    #[arg(long, default_value_t = local::DEFAULT_ENDPOINT_SLICE_DELAY.as_millis() as u64)]
    endpoint_slice_delay_ms: u64,
    /// Do not run the local EndpointSlice controller and kubelet.
    #[arg(long)]
    no_local_controllers: bool,
    /// Register each local Node as a Compute Engine instance through this Compute API root
    /// (e.g. the gce-emulator's `http://127.0.0.1:PORT`), as a GKE node pool creates its VMs.
    #[arg(long)]
    compute_endpoint: Option<String>,
    /// Bearer token for those calls (an emulator run with `--iam` requires one; its admin API
    /// issues it: `POST /_emulator/iam/serviceAccounts/EMAIL/tokens`).
    #[arg(long, env = "COMPUTE_TOKEN", hide_env_values = true)]
    compute_token: Option<String>,
    /// The cluster's VPC network (name) the instances are on.
    #[arg(long, default_value = "default")]
    network: String,
    /// The project owning the network (a Shared VPC host); default: `--project`.
    #[arg(long)]
    network_project: Option<String>,
    /// Network tags of every Node's instance (comma-separated), the targets of the load
    /// balancer's firewall rule.
    #[arg(long, default_value = "gke-local-node", value_delimiter = ',')]
    node_tags: Vec<String>,
    /// `IMAGE=COMMAND`: containers of this image (exact, or any tag of the repository) run
    /// `sh -c COMMAND` on this machine, which must listen on `127.0.0.1:$PORT`; the container's
    /// port on the Pod IP forwards to it (repeatable; docs/kube-apiserver-local.md).
    #[arg(long = "image-command")]
    image_commands: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A workspace build unifies rustls features (ring from kube, aws-lc-rs from the Google
    // crates), and rustls then cannot choose a provider by itself: choose ring explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let zones = fake_kube_apiserver::local::nodes::parse_zones(&args.nodes)?;
    let image_commands = local::user_command::ImageCommands::parse(&args.image_commands)?;
    let running = server::start(ServerOptions {
        listen: args.listen,
        kubeconfig_out: args.kubeconfig_out.clone(),
        state_file: args.state_file.clone(),
        watch_history: args.watch_history,
        audit_log: args.audit_log.clone(),
    })
    .await
    .context("starting fake-kube-apiserver")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", running.url)?;
        out.flush()?;
    }
    if !args.no_local_controllers {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&running.kubeconfig)
            .context("parsing the kubeconfig just written")?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .context("client configuration")?;
        let client =
            kube::Client::try_from(config).context("building the local controllers' client")?;
        let options = LocalOptions {
            image_commands,
            pod_ip_range: args.pod_ip_range.clone(),
            zones,
            kubelet_status_delay: std::time::Duration::from_millis(args.kubelet_status_delay_ms),
            endpoint_slice_delay: std::time::Duration::from_millis(args.endpoint_slice_delay_ms),
            project: args.project.clone(),
            instances: args.compute_endpoint.clone().map(|endpoint| {
                let host = args.network_project.as_deref().unwrap_or(&args.project);
                local::instances::InstanceOptions {
                    endpoint,
                    project: args.project.clone(),
                    network: format!("projects/{host}/global/networks/{}", args.network),
                    tags: args.node_tags.clone(),
                    token: args.compute_token.clone(),
                }
            }),
        };
        tokio::spawn(async move {
            if let Err(e) = local::run(client, options).await {
                tracing::error!(error = %e, "local controllers stopped");
            }
        });
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = running.task => r.context("server task")?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
        _ = terminate.recv() => tracing::info!("terminated"),
    }
    if let Some(path) = &args.state_file {
        fake_kube_apiserver::state_file::save(&running.store, path)
            .context("saving the state file")?;
    }
    Ok(())
}
