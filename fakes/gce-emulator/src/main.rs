//! `gce-emulator`: serves the Compute Engine API v1 emulator (see docs/emulator.md).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use gce_emulator::ca::LocalCa;
use gce_emulator::dataplane::{DataPlane, DataPlaneConfig};
use gce_emulator::emulator::{Config, Emulator};
use gce_emulator::options::{parse_address_range, parse_port_map, Options};
use gce_emulator::store::State;
use gce_emulator::{api, state_file};

/// mimalloc instead of glibc malloc: the data plane allocates and frees small buffers, header
/// maps and futures on every request, where glibc's arenas cost measurably more CPU. The `v2`
/// line (Cargo.toml): its allocation path took 690 instructions per proxied request against
/// v3's 1,115 (callgrind, keep-alive benchmark).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A workspace build unifies rustls features (ring from kube, aws-lc-rs from the Google
    // crates), and rustls then cannot choose a provider by itself: choose ring explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("explain") {
        return gce_emulator::explain_cli::run(args[1..].to_vec()).await;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let opts = Options::parse();
    if let Some(ip) = opts.loopback_for {
        let lo = gce_emulator::dataplane::internal::loopback_for(ip.into());
        println!("{ip} is served on {lo}");
        return Ok(());
    }
    // One file descriptor per client and upstream connection: start with the most allowed.
    match gce_emulator::open_files::raise_limit() {
        Ok(n) => tracing::debug!(open_files = n, "RLIMIT_NOFILE"),
        Err(e) => tracing::warn!(error = %e, "cannot raise RLIMIT_NOFILE"),
    }
    let port_map = parse_port_map(&opts.port_map)?;
    let address_range = parse_address_range(&opts.address_range)?;

    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("cannot listen on {}", opts.listen))?;
    let addr = listener.local_addr()?;
    let root = format!("http://{addr}/");
    let base = format!("{root}compute/v1/");

    let loaded = match &opts.state_file {
        Some(p) => state_file::load(p, &base)?,
        None => None,
    };
    let (state, saved_ca) = match loaded {
        Some(l) => (l.state, l.ca),
        None => (State::new(base.clone()), None),
    };
    let ca = match saved_ca {
        Some((cert, key)) => LocalCa::from_pem_pair(&cert, &key),
        None => LocalCa::generate(),
    };
    let ca = ca.map_err(|e| tracing::warn!(error = %e, "no local CA: MANAGED certificates will stay PROVISIONING")).ok();

    let config = Config {
        address_range,
        operation_latency: Duration::from_millis(opts.operation_latency_ms),
        managed_cert_provisioning: Duration::from_millis(opts.managed_cert_provisioning_ms),
        require_token: opts
            .require_token
            .clone()
            .map(|t| Some(t).filter(|t| !t.is_empty())),
        state_file: opts.state_file.clone(),
        validate_neg_endpoints: opts.validate_neg_endpoints,
        private_ranges: opts.private_ranges.clone(),
        grants: gce_emulator::iam::Grants::parse(&opts.iam_grants)?,
        slow_cloud: opts.slow_cloud.clone(),
        iam: opts.iam,
        token_lifetime: Duration::from_secs(opts.token_lifetime_sec.max(2)),
        metadata: gce_emulator::metadata::Metadata {
            project: opts.metadata_project.clone(),
            zone: opts.metadata_zone.clone(),
            token: opts.require_token.clone().filter(|t| !t.is_empty()),
            account: opts.metadata_service_account.clone(),
            ..Default::default()
        },
    };
    let emu: Arc<Emulator> = Emulator::new(config, base, state, ca);
    let dp_config = DataPlaneConfig {
        port_map,
        access_log: opts.access_log.clone(),
        worker_threads: opts.dataplane_threads,
        enforce_firewall: opts.enforce_firewall,
        header_read_timeout: Some(Duration::from_secs(opts.header_read_timeout_sec)),
    };
    let dp = DataPlane::start(dp_config, emu.subscribe(), Arc::clone(&emu.health));
    let _ = emu.dataplane.set(dp);
    if let Some(p) = &opts.state_file {
        // Write once now, so an unwritable path fails at start rather than on the first change.
        let snap = emu.subscribe().borrow().clone();
        state_file::save(
            p,
            &emu.base,
            &snap,
            emu.ca.as_ref().map(|c| c.to_pem_pair()),
        )?;
        state_file::spawn_writer(Arc::clone(&emu), p.clone());
    }

    let metadata = match opts.metadata_listen {
        Some(at) => {
            let l = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("cannot listen on {at} (--metadata-listen)"))?;
            let md = emu.config.metadata.clone();
            let issuer_emu = Arc::clone(&emu);
            let issue: gce_emulator::metadata::Issuer =
                Arc::new(move |email| issuer_emu.identity.issue(email));
            let addr = l.local_addr()?;
            tokio::spawn(async move {
                let _ = axum::serve(l, gce_emulator::metadata::standalone(md, issue)).await;
            });
            Some(addr)
        }
        None => None,
    };
    let mut out = std::io::stdout();
    writeln!(out, "{root}")?;
    if let Some(addr) = metadata {
        writeln!(out, "metadata http://{addr}/")?;
    }
    out.flush()?;
    tracing::info!(%addr, "gce-emulator serving");
    axum::serve(listener, api::router(emu)).await?;
    Ok(())
}
