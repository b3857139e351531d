//! `gclb-operator`: `run` (the Ingress controller), `crds` (CRD YAML) and `default-backend`
//! (GKE's 404 default backend). Command-line contract: docs/architecture.md; user guide:
//! docs/operator.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand};
use gclb_operator::compute::{Compute, ComputeConfig, ComputeMetrics};
use gclb_operator::controller::leader_election::{LeaderElector, Timings};
use gclb_operator::controller::{self, metrics::HttpState, ControllerMetrics, Stores};
use gclb_operator::readiness;
use gclb_operator::translate::{Mode, TranslateConfig};
use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use prometheus_client::registry::Registry;

#[derive(Parser)]
#[command(
    name = "gclb-operator",
    version,
    about = "Google Cloud HTTP(S) load balancers from Kubernetes Ingress objects"
)]
struct Cli {
    /// Log as JSON lines instead of text (filter with RUST_LOG, default `info`).
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the Ingress controller.
    Run(Box<RunArgs>),
    /// Print the CRDs as YAML, or write one file per CRD into --out-dir.
    Crds {
        /// Directory to write `<plural>.<group>.yaml` files into.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Serve GKE's default backend: `default backend - 404` on every path, `ok` on /healthz.
    DefaultBackend {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0:8080")]
        listen: SocketAddr,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Google Cloud project that holds the load balancers.
    #[arg(long, env = "GCLB_PROJECT")]
    project: String,
    /// Pin the NEG zones (repeat, or comma-separate): NEGs in exactly these zones, endpoints in
    /// other zones in none (a Warning Event). Default: the zones of the cluster's Nodes
    /// (`topology.kubernetes.io/zone`), followed as Nodes come and go.
    #[arg(long = "zone", env = "GCLB_ZONES", value_delimiter = ',')]
    zones: Vec<String>,
    /// VPC network name.
    #[arg(long, env = "GCLB_NETWORK", default_value = "default")]
    network: String,
    /// Project that owns the network, its subnetworks and firewall rules: the host project of
    /// a Shared VPC cluster. Default: --project.
    #[arg(long, env = "GCLB_NETWORK_PROJECT")]
    network_project: Option<String>,
    /// Subnetwork (name, in the network project) the NEGs name; unset: the API picks the
    /// network's subnetwork of each zone.
    #[arg(long)]
    subnetwork: Option<String>,
    /// Region of the internal and regional external load balancers (classes `gce-internal`,
    /// `gce-regional-external`; docs/internal-load-balancers.md). Default: the region of the
    /// NEG zones (`--zone`, else the Nodes' zones).
    #[arg(long, env = "GCLB_REGION")]
    region: Option<String>,
    /// Class of the internal load balancers (annotation `kubernetes.io/ingress.class` or
    /// IngressClass name). Default: `gce-internal` with --takeover, else `gclb-internal`.
    #[arg(long, env = "GCLB_INTERNAL_INGRESS_CLASS")]
    internal_ingress_class: Option<String>,
    /// Class of the regional external load balancers (EXTERNAL_MANAGED, regional resources).
    /// Default: `gce-regional-external` with --takeover, else `gclb-regional-external`.
    #[arg(long, env = "GCLB_REGIONAL_EXTERNAL_INGRESS_CLASS")]
    regional_external_ingress_class: Option<String>,
    /// Cluster name (informational).
    #[arg(long, env = "GCLB_CLUSTER_NAME")]
    cluster_name: String,
    /// Compute API host root, e.g. http://127.0.0.1:PORT (the emulator). Unset: the real API.
    #[arg(long)]
    compute_endpoint: Option<String>,
    /// What the Google clients authenticate with, whatever the endpoint: `adc` (Application
    /// Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, then the metadata server, reached
    /// through GCE_METADATA_HOST when set) or `anonymous` (no credentials: an emulator without
    /// --iam).
    #[arg(long, env = "GCLB_COMPUTE_CREDENTIALS", default_value = "adc")]
    compute_credentials: gclb_operator::compute::CredentialsMode,
    /// Kubeconfig file; unset: KUBECONFIG, ~/.kube/config or the in-cluster config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Serve class `gce` in place of GKE's Ingress controller (its HttpLoadBalancing add-on
    /// disabled): IngressClass controller `k8s.io/ingress-gce`, Ingresses without a class when
    /// no default IngressClass exists, GKE's finalizer and GKE's resource names, so load
    /// balancers GKE built are adopted. Default: beside GKE's controller, with class `gclb`,
    /// controller `gclb-operator.dev/gclb`, finalizer `gclb-operator.dev/ingress-finalizer`
    /// and `gclb-` names (docs/install.md).
    #[arg(long, env = "GCLB_TAKEOVER", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    takeover: bool,
    /// With --takeover: name backends, v1 frontends and the L7 firewall rule after GKE's
    /// cluster UID, read once at start from ConfigMap `kube-system/ingress-uid` (else from an
    /// Ingress's `ingress.kubernetes.io/forwarding-rule` annotation), as GKE's controller named
    /// them. Needs `get` on that ConfigMap (deploy/components/takeover grants it and sets this).
    /// Off: the operator's own 8-character cluster UID.
    #[arg(long, env = "GCLB_GKE_UID_FROM_CONFIGMAP", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    gke_uid_from_configmap: bool,
    /// IngressClass name / `kubernetes.io/ingress.class` value this operator owns (default:
    /// `gclb`, or `gce` with --takeover); a comma-separated list serves each class in it
    /// (Contour's `--ingress-class-name`).
    #[arg(long, env = "GCLB_INGRESS_CLASS")]
    ingress_class: Option<String>,
    /// Address published in every Ingress's `status.loadBalancer` instead of its load
    /// balancer IP: an IP, or a DNS name (published as `hostname`), e.g. a name that points at
    /// the static addresses (Contour's `--ingress-status-address`).
    #[arg(long, env = "GCLB_INGRESS_STATUS_ADDRESS")]
    ingress_status_address: Option<String>,
    /// Seconds between full resyncs of every Ingress.
    #[arg(long, default_value_t = 600)]
    resync_period: u64,
    /// Ingresses reconciled at the same time. A reconcile mostly waits on Compute Operations
    /// (seconds each on the real API), so many run at once; the project's rate quota, not this
    /// number, bounds the calls (they are paced on rateLimitExceeded; docs/performance.md).
    #[arg(long, default_value_t = 64)]
    workers: u16,
    /// Address of /metrics, /healthz and /readyz (use 127.0.0.1:0 for an ephemeral port; the
    /// bound address is printed on stdout as `metrics listening on http://ADDR`).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_listen: SocketAddr,
    /// System default backend Service (`namespace/name`) for Ingresses without
    /// spec.defaultBackend (default: `<POD_NAMESPACE>/gclb-default-backend`, deploy/'s own; with
    /// --takeover GKE's `kube-system/default-http-backend`).
    #[arg(long, env = "GCLB_DEFAULT_BACKEND_SERVICE")]
    default_backend_service: Option<String>,
    /// Port (name or number) of the default backend Service.
    #[arg(long, default_value = "http")]
    default_backend_port: String,
    /// Milliseconds between Operation polls.
    #[arg(long, default_value_t = 500)]
    operation_poll_interval_ms: u64,
    /// Network tags of the nodes: targetTags of the L7 firewall rule (comma-separated).
    #[arg(long, env = "GCLB_FIREWALL_TARGET_TAGS", value_delimiter = ',')]
    firewall_target_tags: Vec<String>,
    /// Manage the `cloud.google.com/load-balancer-neg-ready` readiness gate of Pods.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    readiness_gates: bool,
    /// Run the ManagedCertificate controller (gke-managed-certs) in this process. `false` leaves
    /// ManagedCertificates to a controller run elsewhere (on GKE it is a separate component);
    /// Ingresses still read their `status.certificateName`.
    #[arg(long, env = "GCLB_MANAGED_CERTIFICATES", default_value_t = true, action = ArgAction::Set)]
    managed_certificates: bool,
    /// Seconds after Pod creation when the readiness gate opens without a health state.
    #[arg(long, default_value_t = 600)]
    neg_ready_timeout: u64,
    /// Serve the readiness-gate admission webhook (HTTPS) on this address (deploy/webhook).
    #[arg(long, requires_all = ["webhook_tls_cert", "webhook_tls_key"])]
    webhook_listen: Option<SocketAddr>,
    /// PEM certificate chain of the webhook.
    #[arg(long)]
    webhook_tls_cert: Option<PathBuf>,
    /// PEM private key of the webhook.
    #[arg(long)]
    webhook_tls_key: Option<PathBuf>,
    /// Run for the leader Lease, so that only one of several replicas reconciles (the others
    /// stand by and take over when it stops renewing). deploy/ turns it on.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    leader_election_namespace: String,
    /// Name of the leader Lease (coordination.k8s.io/v1).
    #[arg(long, default_value = "gclb-operator")]
    leader_election_id: String,
    /// This replica's holderIdentity; default: the host name (the Pod name in a cluster) and a
    /// random suffix.
    #[arg(long)]
    leader_election_identity: Option<String>,
    /// Seconds a Lease that is not renewed keeps standbys out (renew deadline and retry period
    /// follow with client-go's ratios: 2/3 and 2/15 of it).
    #[arg(long, default_value_t = 15)]
    leader_election_lease_duration: u64,
    /// Run the Gateway API controller (Gateway, HTTPRoute, TLSRoute; docs/gateway-api.md).
    /// Needs the Gateway API CRDs (deploy/gateway).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    gateway_api: bool,
    /// `spec.controllerName` of the GatewayClasses the Gateway controller owns.
    #[arg(long, default_value = gclb_operator::gateway::DEFAULT_CONTROLLER_NAME)]
    gateway_controller_name: String,
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    // Both ring (kube) and aws-lc-rs (Google clients) are compiled in; pick one explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::Run(args) => run(*args).await,
        Command::Crds { out_dir } => crds(out_dir),
        Command::DefaultBackend { listen } => default_backend(listen).await,
    }
}

fn crds(out_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let files = gclb_operator::crd::crds_yaml();
    match out_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, yaml) in files {
                let path = dir.join(file);
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        None => {
            for yaml in files.values() {
                println!("---\n{}", yaml.trim_end());
            }
        }
    }
    Ok(())
}

async fn default_backend(listen: SocketAddr) -> anyhow::Result<()> {
    use axum::http::StatusCode;
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .fallback(|| async { (StatusCode::NOT_FOUND, "default backend - 404") });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    println!("default backend listening on http://{addr}");
    tracing::info!(%addr, "default backend listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn kube_client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no Kubernetes config: pass --kubeconfig, set KUBECONFIG or run in a cluster",
        )?,
    };
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(gclb_operator::USER_AGENT),
    ));
    Client::try_from(config).context("building the Kubernetes client")
}

/// The default backend Service a mode uses when `--default-backend-service` is not given:
/// GKE's in takeover mode, else the operator's own in its namespace (deploy/default-backend.yaml).
fn default_backend_service(mode: Mode) -> String {
    match mode {
        Mode::Takeover => "kube-system/default-http-backend".to_owned(),
        Mode::Coexist => {
            let namespace =
                std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "gclb-operator".to_owned());
            format!("{namespace}/gclb-default-backend")
        }
    }
}

/// GKE's cluster UIDs in takeover mode, as GKE's controller finds them (ingress-gce
/// `cmd/glbc/app/namer.go` `getClusterUID`, `getFirewallName`): the `uid` and `provider-uid` of
/// ConfigMap `kube-system/ingress-uid`; without the ConfigMap, the UID at the end of the
/// `ingress.kubernetes.io/forwarding-rule` annotation of an Ingress that has an IP (a v1
/// name); else `fallback` (the operator's own 8-character cluster UID). GKE's controller would
/// generate a random UID and store it in the ConfigMap; the operator writes no ConfigMap and
/// logs the UID it uses (docs/install.md says how to store it).
async fn gke_cluster_uid(
    client: &Client,
    fallback: &str,
) -> anyhow::Result<(String, Option<String>)> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::networking::v1::Ingress;
    let configmap = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get_opt("ingress-uid")
        .await
        .context("reading ConfigMap kube-system/ingress-uid (GKE's cluster UID)")?;
    let data = configmap.and_then(|c| c.data).unwrap_or_default();
    if let Some(uid) = data.get("uid") {
        tracing::info!(uid, "cluster UID from ConfigMap kube-system/ingress-uid");
        return Ok((uid.clone(), data.get("provider-uid").cloned()));
    }
    let ingresses = Api::<Ingress>::all(client.clone())
        .list(&Default::default())
        .await
        .context("listing Ingresses (GKE's cluster UID from a forwarding-rule annotation)")?;
    let from_rule = ingresses
        .items
        .iter()
        .filter(|i| {
            i.status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .is_some_and(|lb| !lb.ingress.as_deref().unwrap_or_default().is_empty())
        })
        .filter_map(|i| {
            i.metadata
                .annotations
                .as_ref()?
                .get("ingress.kubernetes.io/forwarding-rule")
        })
        .find_map(|name| name.rsplit_once("--").map(|(_, uid)| uid.to_owned()));
    if let Some(uid) = from_rule {
        tracing::info!(
            uid,
            "cluster UID from an Ingress's forwarding-rule annotation"
        );
        return Ok((uid, None));
    }
    tracing::info!(
        uid = fallback,
        "no ConfigMap kube-system/ingress-uid: GKE's names use the operator's cluster UID"
    );
    Ok((fallback.to_owned(), None))
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = kube_client(args.kubeconfig.as_ref()).await?;
    let kube_system = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .context("reading Namespace kube-system (its UID names this cluster's resources)")?;
    let kube_system_uid = kube_system
        .metadata
        .uid
        .context("Namespace kube-system has no metadata.uid")?;

    let zones: Vec<&str> = args.zones.iter().map(String::as_str).collect();
    let mut translate = TranslateConfig::new(
        &args.project,
        &args.network,
        &zones,
        &args.cluster_name,
        &kube_system_uid,
    );
    let mode = if args.takeover {
        Mode::Takeover
    } else {
        Mode::Coexist
    };
    translate = translate.with_mode(mode);
    if mode == Mode::Takeover && args.gke_uid_from_configmap {
        let (uid, provider_uid) = gke_cluster_uid(&client, &translate.cluster_uid).await?;
        translate = translate.with_gke_uid(&uid, provider_uid.as_deref());
    }
    if let Some(class) = &args.ingress_class {
        translate.ingress_class = class.clone();
    }
    translate.firewall_target_tags = args.firewall_target_tags.clone();
    if let Some(host) = &args.network_project {
        translate.network_project = host.clone();
    }
    translate.subnetwork = args.subnetwork.clone();
    translate.region = args.region.clone();
    if let Some(class) = &args.internal_ingress_class {
        translate.internal_class = class.clone();
    }
    if let Some(class) = &args.regional_external_ingress_class {
        translate.regional_external_class = class.clone();
    }
    let default_backend = args
        .default_backend_service
        .clone()
        .unwrap_or_else(|| default_backend_service(mode));
    let (db_ns, db_name) = default_backend
        .split_once('/')
        .context("--default-backend-service must be namespace/name")?;
    translate.default_backend = Some((
        db_ns.to_string(),
        db_name.to_string(),
        args.default_backend_port.clone(),
    ));
    tracing::info!(
        ?mode,
        ingress_class = %translate.ingress_class,
        controller = mode.controller(),
        finalizer = controller::finalizer_for(mode),
        default_backend = %default_backend,
        project = %args.project,
        network = %translate.network_ref(),
        cluster_uid = %translate.cluster_uid,
        gke_uid = %translate.gke_uid,
        firewall = %translate.l7_firewall_name(),
        "starting"
    );

    let mut registry = Registry::default();
    let compute_metrics = ComputeMetrics::default();
    compute_metrics.register(&mut registry);
    let controller_metrics = ControllerMetrics::default();
    controller_metrics.register(&mut registry);
    let readiness_metrics = Arc::new(readiness::metrics::ReadinessMetrics::default());
    readiness_metrics.register(&mut registry);

    let mut compute_config = ComputeConfig::new(&args.project, args.compute_endpoint.clone());
    compute_config.credentials = args.compute_credentials;
    compute_config.operation_poll_interval = Duration::from_millis(args.operation_poll_interval_ms);
    let compute = Arc::new(
        Compute::new(compute_config, compute_metrics)
            .await
            .context("connecting to the Compute API")?,
    );

    // The readiness-gate webhook serves on every replica, leader or standby, from its own
    // caches (the decision is read-only): started before leader election.
    let webhook = match (
        &args.webhook_listen,
        &args.webhook_tls_cert,
        &args.webhook_tls_key,
    ) {
        (Some(listen), Some(cert), Some(key)) => {
            let serving = gclb_operator::webhook::start(
                client.clone(),
                translate.clone(),
                *listen,
                cert,
                key,
            )
            .await
            .context("starting the readiness-gate webhook")?;
            println!("webhook listening on https://{}", serving.addr);
            Some(serving)
        }
        _ => None,
    };
    let stores_slot: Arc<std::sync::OnceLock<Stores>> = Arc::default();
    // Ready: the webhook (when served) answers from synced caches, and the controller's stores
    // have synced, or this replica stands by (leader election on, Lease held by another): a
    // standby is healthy, serves the webhook and must not hold up a rolling update.
    let standby = Arc::new(std::sync::atomic::AtomicBool::new(args.leader_elect));
    let ready = {
        let slot = stores_slot.clone();
        let standby = standby.clone();
        let webhook = webhook.clone();
        Arc::new(move || {
            webhook.as_ref().is_none_or(|w| w.is_ready())
                && (standby.load(std::sync::atomic::Ordering::Relaxed)
                    || slot.get().is_some_and(Stores::is_ready))
        }) as Arc<dyn Fn() -> bool + Send + Sync>
    };
    let addr = controller::metrics::serve(
        args.metrics_listen,
        HttpState {
            registry: Arc::new(registry),
            ready,
        },
    )
    .await
    .with_context(|| format!("binding --metrics-listen {}", args.metrics_listen))?;
    println!("metrics listening on http://{addr}");
    tracing::info!(%addr, "metrics listening");

    let mut elector = if args.leader_elect {
        let identity = args.leader_election_identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gclb-operator".into());
            format!("{host}_{:08x}", rand::random::<u32>())
        });
        let mut elector = LeaderElector::new(
            client.clone(),
            &args.leader_election_namespace,
            &args.leader_election_id,
            &identity,
            Timings::from_lease_seconds(args.leader_election_lease_duration),
        );
        tokio::select! {
            _ = elector.acquire() => {}
            _ = shutdown_signal() => {
                tracing::info!("stopped before becoming the leader");
                return Ok(());
            }
        }
        standby.store(false, std::sync::atomic::Ordering::Relaxed);
        Some(elector)
    } else {
        None
    };

    let health = readiness::ComputeNegHealth::connect(
        &args.project,
        args.compute_endpoint.as_deref(),
        args.compute_credentials,
    )
    .await
    .context("connecting the readiness-gate poller to the Compute API")?;
    let readiness_config = readiness::Config {
        timeout: Duration::from_secs(args.neg_ready_timeout),
        bypass: !args.readiness_gates,
        ..readiness::Config::default()
    };
    let config = controller::Config {
        translate: translate.clone(),
        resync_period: Duration::from_secs(args.resync_period.max(1)),
        workers: args.workers.max(1),
        status_address: args.ingress_status_address.clone(),
        principal: gclb_operator::compute::credentials::principal(args.compute_credentials).await,
    };
    // ManagedCertificate controller (gke-managed-certs): off by itself when the CRD is absent.
    if args.managed_certificates {
        let mut mcrt_config = gclb_operator::managed_certificates::Config::new(&kube_system_uid);
        mcrt_config.resync_period = Duration::from_secs(args.resync_period.max(1));
        tokio::spawn(gclb_operator::managed_certificates::run(
            client.clone(),
            compute.clone(),
            mcrt_config,
        ));
    } else {
        tracing::info!(
            "--managed-certificates=false: ManagedCertificates are left to another controller"
        );
    }
    if args.gateway_api {
        let netsvc = gclb_operator::gateway::network_services::NetworkServicesApi::new(
            &args.project,
            args.compute_endpoint.as_deref(),
            args.compute_credentials,
        )
        .await
        .context("connecting to the Network Services API")?;
        tokio::spawn(gclb_operator::gateway::controller::run(
            client.clone(),
            compute.clone(),
            Arc::new(netsvc),
            gclb_operator::gateway::GatewayConfig {
                controller_name: args.gateway_controller_name.clone(),
                translate: translate.clone(),
            },
        ));
    }
    let readiness_client = client.clone();
    let controllers = controller::run(
        client,
        compute,
        config,
        controller_metrics,
        move |stores: Stores| {
            let lookup = readiness::lookup::StoreLookup::new(
                stores.ingresses.clone(),
                stores.services.clone(),
                stores.ingress_classes.clone(),
                translate,
            )
            .with_nodes(stores.nodes.clone());
            let lookup = Arc::new(lookup);
            let ctx = readiness::Context::new(
                readiness_client,
                Arc::new(health),
                lookup,
                readiness_config,
            )
            .with_metrics(readiness_metrics);
            tokio::spawn(readiness::controller::run_with_pods(
                ctx,
                stores.pods.clone(),
            ));
            let _ = stores_slot.set(stores);
        },
    );
    match elector.as_mut() {
        None => controllers.await,
        Some(elector) => {
            let lost = tokio::select! {
                _ = controllers => false,
                _ = elector.hold() => true,
            };
            if lost {
                // Another replica may be reconciling already: stop at once (Kubernetes
                // restarts the container, which then stands by).
                anyhow::bail!(
                    "lost the leader Lease {}/{}; exiting so that only one replica acts",
                    args.leader_election_namespace,
                    args.leader_election_id
                );
            }
            elector.release().await;
        }
    }
    tracing::info!("stopped");
    Ok(())
}
