//! The command line of `gclb-operator`: the subcommands and the flags of `run` (docs/operator.md;
//! the contract is in docs/architecture.md).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgAction, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gclb-operator",
    version,
    about = "Google Cloud HTTP(S) load balancers from Kubernetes Ingress objects"
)]
pub(crate) struct Cli {
    /// Log as JSON lines instead of text (filter with RUST_LOG, default `info`).
    #[arg(long, global = true)]
    pub(crate) log_json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
pub(crate) struct RunArgs {
    /// Google Cloud project that holds the load balancers.
    #[arg(long, env = "GCLB_PROJECT")]
    pub(crate) project: String,
    /// Pin the NEG zones (repeat, or comma-separate): NEGs in exactly these zones, endpoints in
    /// other zones in none (a Warning Event). Default: the zones of the cluster's Nodes
    /// (`topology.kubernetes.io/zone`), followed as Nodes come and go.
    #[arg(long = "zone", env = "GCLB_ZONES", value_delimiter = ',')]
    pub(crate) zones: Vec<String>,
    /// VPC network name.
    #[arg(long, env = "GCLB_NETWORK", default_value = "default")]
    pub(crate) network: String,
    /// Project that owns the network, its subnetworks and firewall rules: the host project of
    /// a Shared VPC cluster. Default: --project.
    #[arg(long, env = "GCLB_NETWORK_PROJECT")]
    pub(crate) network_project: Option<String>,
    /// Subnetwork (name, in the network project) the NEGs name; unset: the API picks the
    /// network's subnetwork of each zone.
    #[arg(long)]
    pub(crate) subnetwork: Option<String>,
    /// Region of the internal and regional external load balancers (classes `gce-internal`,
    /// `gce-regional-external`; docs/internal-load-balancers.md). Default: the region of the
    /// NEG zones (`--zone`, else the Nodes' zones).
    #[arg(long, env = "GCLB_REGION")]
    pub(crate) region: Option<String>,
    /// Class of the internal load balancers (annotation `kubernetes.io/ingress.class` or
    /// IngressClass name). Default: `gce-internal` with --takeover, else `gclb-internal`.
    #[arg(long, env = "GCLB_INTERNAL_INGRESS_CLASS")]
    pub(crate) internal_ingress_class: Option<String>,
    /// Class of the regional external load balancers (EXTERNAL_MANAGED, regional resources).
    /// Default: `gce-regional-external` with --takeover, else `gclb-regional-external`.
    #[arg(long, env = "GCLB_REGIONAL_EXTERNAL_INGRESS_CLASS")]
    pub(crate) regional_external_ingress_class: Option<String>,
    /// Cluster name (informational).
    #[arg(long, env = "GCLB_CLUSTER_NAME")]
    pub(crate) cluster_name: String,
    /// Compute API host root, e.g. http://127.0.0.1:PORT (the emulator). Unset: the real API.
    #[arg(long)]
    pub(crate) compute_endpoint: Option<String>,
    /// What the Google clients authenticate with, whatever the endpoint: `adc` (Application
    /// Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, then the metadata server, reached
    /// through GCE_METADATA_HOST when set) or `anonymous` (no credentials: an emulator without
    /// --iam).
    #[arg(long, env = "GCLB_COMPUTE_CREDENTIALS", default_value = "adc")]
    pub(crate) compute_credentials: gclb_operator::compute::CredentialsMode,
    /// Kubeconfig file; unset: KUBECONFIG, ~/.kube/config or the in-cluster config.
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Serve class `gce` in place of GKE's Ingress controller (its HttpLoadBalancing add-on
    /// disabled): IngressClass controller `k8s.io/ingress-gce`, Ingresses without a class when
    /// no default IngressClass exists, GKE's finalizer and GKE's resource names, so load
    /// balancers GKE built are adopted. Default: beside GKE's controller, with class `gclb`,
    /// controller `gclb-operator.dev/gclb`, finalizer `gclb-operator.dev/ingress-finalizer`
    /// and `gclb-` names (docs/install.md).
    #[arg(long, env = "GCLB_TAKEOVER", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) takeover: bool,
    /// With --takeover: name backends, v1 frontends and the L7 firewall rule after GKE's
    /// cluster UID, read once at start from ConfigMap `kube-system/ingress-uid` (else from an
    /// Ingress's `ingress.kubernetes.io/forwarding-rule` annotation), as GKE's controller named
    /// them. Needs `get` on that ConfigMap (deploy/components/takeover grants it and sets this).
    /// Off: the operator's own 8-character cluster UID.
    #[arg(long, env = "GCLB_GKE_UID_FROM_CONFIGMAP", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) gke_uid_from_configmap: bool,
    /// IngressClass name / `kubernetes.io/ingress.class` value this operator owns (default:
    /// `gclb`, or `gce` with --takeover); a comma-separated list serves each class in it
    /// (Contour's `--ingress-class-name`).
    #[arg(long, env = "GCLB_INGRESS_CLASS")]
    pub(crate) ingress_class: Option<String>,
    /// Address published in every Ingress's `status.loadBalancer` instead of its load
    /// balancer IP: an IP, or a DNS name (published as `hostname`), e.g. a name that points at
    /// the static addresses (Contour's `--ingress-status-address`).
    #[arg(long, env = "GCLB_INGRESS_STATUS_ADDRESS")]
    pub(crate) ingress_status_address: Option<String>,
    /// Seconds between full resyncs of every Ingress.
    #[arg(long, default_value_t = 600)]
    pub(crate) resync_period: u64,
    /// Ingresses reconciled at the same time. A reconcile mostly waits on Compute Operations
    /// (seconds each on the real API), so many run at once; the project's rate quota, not this
    /// number, bounds the calls (they are paced on rateLimitExceeded; docs/performance.md).
    #[arg(long, default_value_t = 64)]
    pub(crate) workers: u16,
    /// Address of /metrics, /healthz and /readyz (use 127.0.0.1:0 for an ephemeral port; the
    /// bound address is printed on stdout as `metrics listening on http://ADDR`).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub(crate) metrics_listen: SocketAddr,
    /// System default backend Service (`namespace/name`) for Ingresses without
    /// spec.defaultBackend (default: `<POD_NAMESPACE>/gclb-default-backend`, deploy/'s own; with
    /// --takeover GKE's `kube-system/default-http-backend`).
    #[arg(long, env = "GCLB_DEFAULT_BACKEND_SERVICE")]
    pub(crate) default_backend_service: Option<String>,
    /// Port (name or number) of the default backend Service.
    #[arg(long, default_value = "http")]
    pub(crate) default_backend_port: String,
    /// Milliseconds between Operation polls.
    #[arg(long, default_value_t = 500)]
    pub(crate) operation_poll_interval_ms: u64,
    /// Network tags of the nodes: targetTags of the L7 firewall rule (comma-separated).
    #[arg(long, env = "GCLB_FIREWALL_TARGET_TAGS", value_delimiter = ',')]
    pub(crate) firewall_target_tags: Vec<String>,
    /// Manage the `cloud.google.com/load-balancer-neg-ready` readiness gate of Pods.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub(crate) readiness_gates: bool,
    /// Run the ManagedCertificate controller (gke-managed-certs) in this process. `false` leaves
    /// ManagedCertificates to a controller run elsewhere (on GKE it is a separate component);
    /// Ingresses still read their `status.certificateName`.
    #[arg(long, env = "GCLB_MANAGED_CERTIFICATES", default_value_t = true, action = ArgAction::Set)]
    pub(crate) managed_certificates: bool,
    /// Seconds after Pod creation when the readiness gate opens without a health state.
    #[arg(long, default_value_t = 600)]
    pub(crate) neg_ready_timeout: u64,
    /// Serve the readiness-gate admission webhook (HTTPS) on this address (deploy/webhook).
    #[arg(long, requires_all = ["webhook_tls_cert", "webhook_tls_key"])]
    pub(crate) webhook_listen: Option<SocketAddr>,
    /// PEM certificate chain of the webhook.
    #[arg(long)]
    pub(crate) webhook_tls_cert: Option<PathBuf>,
    /// PEM private key of the webhook.
    #[arg(long)]
    pub(crate) webhook_tls_key: Option<PathBuf>,
    /// Run for the leader Lease, so that only one of several replicas reconciles (the others
    /// stand by and take over when it stops renewing). deploy/ turns it on.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub(crate) leader_election_namespace: String,
    /// Name of the leader Lease (coordination.k8s.io/v1).
    #[arg(long, default_value = "gclb-operator")]
    pub(crate) leader_election_id: String,
    /// This replica's holderIdentity; default: the host name (the Pod name in a cluster) and a
    /// random suffix.
    #[arg(long)]
    pub(crate) leader_election_identity: Option<String>,
    /// Seconds a Lease that is not renewed keeps standbys out (renew deadline and retry period
    /// follow with client-go's ratios: 2/3 and 2/15 of it).
    #[arg(long, default_value_t = 15)]
    pub(crate) leader_election_lease_duration: u64,
    /// Run the Gateway API controller (Gateway, HTTPRoute, TLSRoute; docs/gateway-api.md).
    /// Needs the Gateway API CRDs (deploy/gateway).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) gateway_api: bool,
    /// `spec.controllerName` of the GatewayClasses the Gateway controller owns.
    #[arg(long, default_value = gclb_operator::gateway::DEFAULT_CONTROLLER_NAME)]
    pub(crate) gateway_controller_name: String,
}
