//! `gclb-operator`: `run` (the Ingress controller), `crds` (CRD YAML) and `default-backend`
//! (GKE's 404 default backend). Command-line contract: docs/architecture.md; user guide:
//! docs/operator.md.

mod cli;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use gclb_operator::compute::{Compute, ComputeConfig, ComputeMetrics};
use gclb_operator::controller::leader_election::{LeaderElector, Timings};
use gclb_operator::controller::{self, metrics::HttpState, ControllerMetrics, Stores};
use gclb_operator::readiness;
use gclb_operator::translate::{Mode, TranslateConfig};
use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use prometheus_client::registry::Registry;

use cli::{Cli, Command, RunArgs};

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
        // The Compute client's credentials: a token refused with 401 is rebuilt once for both.
        let netsvc =
            gclb_operator::gateway::network_services::NetworkServicesApi::with_credentials(
                &args.project,
                args.compute_endpoint.as_deref(),
                compute.credentials().clone(),
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
