//! GKE's own Ingress controller side by side (issue 18): `BENCH_GLBC=PATH` names a `glbc` binary
//! (kubernetes/ingress-gce, built by the user from its public source; the repository ships no
//! glbc), and the benchmark runs the same workload through it and then through this operator,
//! each on a fresh local API and emulator, and prints both and their ratio.
//!
//! The workload: `BENCH_GLBC_INGRESSES` Ingresses (default 100) created at once, each routing its
//! own host to one of `BENCH_SERVICES` Services (two echo Pods each). As GKE's controller needs:
//! Services annotated `cloud.google.com/neg: '{"ingress": true}'` (container-native load
//! balancing), Ingresses of class `gce` by the `kubernetes.io/ingress.class` annotation (glbc
//! 1.2x reads the annotation, not `spec.ingressClassName`), and a gce.conf whose `api-endpoint`
//! is the emulator's Compute root; glbc finds its project and zone on the emulator's metadata
//! server (`GCE_METADATA_HOST`, `--metadata-listen`). The operator gets the same objects.
//!
//! Per controller: seconds from creating the Ingresses to every one answering 200 through its
//! own forwarding rule's listener, the Compute calls (writes, reads) counted by the emulator
//! over that time, and the controller's CPU seconds and peak RSS over it.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::support::{Proc, System, NODE_TAG, PROJECT, ZONE};
use super::{calls, calls_by_method, cluster, first200, procstat, zero_calls};

/// What one controller cost on the workload.
pub struct Outcome {
    /// Seconds from the Ingresses' creation to the last one's first 200.
    pub serving: f64,
    pub p50: f64,
    pub writes: u64,
    pub reads: u64,
    pub cpu: f64,
    pub peak_mib: f64,
    pub load: (f64, f64),
}

fn services_yaml(services: usize) -> String {
    let mut y = String::new();
    for s in 0..services {
        let _ = write!(
            y,
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{s}, namespace: default, annotations: \
             {{cloud.google.com/neg: '{{\"ingress\": true}}'}}}}\n\
             spec: {{type: NodePort, selector: {{app: svc-{s}}}, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n"
        );
        for p in 0..2 {
            let _ = write!(
                y,
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: svc-{s}-{p}, namespace: default, labels: {{app: svc-{s}}}, \
                 annotations: {{local.gclb-operator.dev/run: echo}}}}\n\
                 spec: {{containers: [{{name: echo, image: echo, ports: [{{containerPort: 8080}}]}}]}}\n---\n"
            );
        }
    }
    y
}

fn ingresses_yaml(ingresses: usize, services: usize) -> String {
    let mut y = String::new();
    for i in 0..ingresses {
        let s = i % services;
        let _ = write!(
            y,
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing-{i}, namespace: default, \
             annotations: {{kubernetes.io/ingress.class: gce}}}}\n\
             spec: {{defaultBackend: {{service: {{name: svc-{s}, port: {{number: 80}}}}}}, \
             rules: [{{host: ing-{i}.example, http: {{paths: \
             [{{path: /, pathType: Prefix, backend: {{service: {{name: svc-{s}, port: {{number: 80}}}}}}}}]}}}}]}}\n---\n"
        );
    }
    y
}

/// Starts glbc against `sys`, whose emulator serves the metadata server on `metadata`
/// (`HOST:PORT`).
fn start_glbc(sys: &System, binary: &Path, metadata: &str) -> Result<Proc> {
    let conf = sys.dir.path().join("gce.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nproject-id = {PROJECT}\nlocal-zone = {ZONE}\nnetwork-name = default\n\
             node-tags = {NODE_TAG}\napi-endpoint = {}compute/v1/\n",
            sys.compute_url
        ),
    )?;
    let log = sys.dir.path().join("glbc.log");
    let child = Command::new(binary)
        .arg(format!("--kubeconfig={}", sys.kubeconfig.display()))
        .arg(format!("--config-file-path={}", conf.display()))
        .args([
            "--running-in-cluster=false",
            "--default-backend-service=kube-system/default-http-backend",
            "--healthz-port=0",
            "--leader-elect=false",
            "--v=2",
            "--sync-period=600s",
        ])
        .env("GCE_METADATA_HOST", metadata)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(sys.dir.path().join("glbc.err"))?)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    Ok(Proc {
        name: "glbc".into(),
        child,
        log,
    })
}

/// Runs the workload through one controller on a fresh system: `glbc` names GKE's binary, or
/// `None` for this operator.
fn run(
    glbc: Option<&Path>,
    ingresses: usize,
    services: usize,
    deadline: Duration,
) -> Result<Outcome> {
    // The emulator prints the metadata address after its first line, which the harness reads
    // only at exit: pick a free port here instead.
    let metadata = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string();
    let mut sys = System::start(&[
        "--port-map",
        "80=0,443=0",
        "--metadata-listen",
        &metadata,
        "--metadata-project",
        PROJECT,
    ])?;
    sys.apply_basics()?;
    cluster::create_all(&sys, &[services_yaml(services)])?;
    let controller = match glbc {
        Some(binary) => start_glbc(&sys, binary, &metadata)?,
        None => {
            super::start_operator(&mut sys, &[])?;
            sys.operator.take().context("operator")?
        }
    };
    // Let the controller start (list its caches, create glbc's CRDs) before the clock starts.
    std::thread::sleep(Duration::from_secs(10));
    let pid = controller.child.id();
    zero_calls(&sys)?;
    procstat::reset_peak_rss(pid);
    let meter = procstat::Meter::start(&[("controller", pid)]);
    let start = Instant::now();
    cluster::create_all(&sys, &[ingresses_yaml(ingresses, services)])?;
    let names: Vec<String> = (0..ingresses).map(|i| format!("ing-{i}")).collect();
    let times = first200::first_200(&sys, &names, start, deadline).with_context(|| {
        format!(
            "{}'s log: {}",
            controller.name,
            std::fs::read_to_string(&controller.log)
                .unwrap_or_default()
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let serving = start.elapsed().as_secs_f64();
    let (_, cpu, load) = meter.stop();
    let (writes, reads) = calls(&sys)?;
    eprintln!(
        "converge: {} on {ingresses} Ingresses: {}",
        controller.name,
        calls_by_method(&sys)?
    );
    Ok(Outcome {
        serving,
        p50: first200::percentile(&times, 0.5),
        writes,
        reads,
        cpu: cpu.first().map_or(0.0, |c| c.1),
        peak_mib: procstat::rss_mib(pid).1,
        load,
    })
}

/// The side-by-side table: glbc, this operator and glbc / operator.
pub fn side_by_side(glbc: &Path, deadline: Duration) -> Result<()> {
    let n = super::env_usize("BENCH_GLBC_INGRESSES", 100);
    let services = super::env_usize("BENCH_SERVICES", 5).clamp(1, n.max(1));
    let theirs = run(Some(glbc), n, services, deadline)?;
    let ours = run(None, n, services, deadline)?;
    println!();
    println!(
        "| {n} Ingresses at once over {services} Services | every Ingress serving | p50 first 200 | Compute writes | Compute reads | CPU s | peak RSS | load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (label, o) in [("GKE's glbc", &theirs), ("gclb-operator", &ours)] {
        println!(
            "| {label} | {:.1} s | {:.1} s | {} | {} | {:.1} | {:.0} MiB | {:.1}->{:.1} |",
            o.serving, o.p50, o.writes, o.reads, o.cpu, o.peak_mib, o.load.0, o.load.1
        );
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    println!(
        "| glbc / operator | {:.1}x | {:.1}x | {:.1}x | {:.1}x | {:.1}x | {:.1}x | |",
        ratio(theirs.serving, ours.serving),
        ratio(theirs.p50, ours.p50),
        ratio(theirs.writes as f64, ours.writes as f64),
        ratio(theirs.reads as f64, ours.reads as f64),
        ratio(theirs.cpu, ours.cpu),
        ratio(theirs.peak_mib, ours.peak_mib)
    );
    Ok(())
}
