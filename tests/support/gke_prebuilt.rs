//! What GKE's Ingress controller (glbc v1.23, ingress-gce `pkg/utils/namer`, `pkg/translator`,
//! `pkg/backends`, `pkg/loadbalancers`, `pkg/firewalls`) builds for the demo Ingress
//! (docs/examples `30-my-ingress.yaml`), built in the emulator the way it builds it, for the
//! takeover tests (tests/takeover_e2e.rs; under exactly deploy/iam's role,
//! tests/iam_role_exact_e2e.rs): names and fields as its source defines them and as glbc v1.23
//! wrote them on this stack (docs/gke-controller.md): three health checks, NEGs with the Pods'
//! endpoints, backend services, the L7 firewall rule, the URL map, the target HTTP proxy and
//! the forwarding rule with an ephemeral IP; in the cluster, GKE's `kube-system/ingress-uid`
//! ConfigMap and the Ingress with GKE's finalizer and status IP ([`install`]).
//!
//! Both of GKE's frontend schemes: v2 (`k8s2-...`, the finalizer
//! `networking.gke.io/ingress-finalizer-V2`, what GKE builds since 1.17) and v1
//! (`k8s-um-default-my-ingress--<uid>`, what glbc builds without `--enable-v2-frontend-namer`).
//! The names are computed here from GKE's algorithms (v2) or copied from what glbc built (v1),
//! not by the operator's namer.
//!
//! Then [`Prebuilt`] checks what takeover must show: the Ingress served through GKE's IP,
//! no insert and no delete (the emulator's per-method call counts, `GET /_emulator/calls`),
//! no other write than the URL map's path-rule order, no Warning Event; and, once the Ingress
//! is deleted, every one of GKE's resources collected.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use md5::Md5;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{repo_root, wait_for, System, DEADLINE, NODE_TAG, PROJECT, ZONE};

/// GKE's cluster UID, as GKE's controller generated it (16 hex characters) for this cluster.
pub const GKE_UID: &str = "adfa97d7ec938d15";
/// The demo Ingress's host (docs/examples/30-my-ingress.yaml).
pub const HOST: &str = "your-store.example";
/// The operator's flags for a takeover install (deploy/components/takeover): GKE's cluster
/// UID from the `kube-system/ingress-uid` ConfigMap (`--takeover` the harness adds itself).
pub const OPERATOR_FLAGS: &[&str] = &["--gke-uid-from-configmap"];
/// (namespace, Service, port, backend name, health check path), backend names as glbc v1.23
/// built them with [`GKE_UID`].
pub const BACKENDS: [(&str, &str, i32, &str, &str); 3] = [
    (
        "kube-system",
        "default-http-backend",
        80,
        "k8s1-adfa97d7-kube-system-default-http-backend-80-eeff6155",
        "/healthz",
    ),
    (
        "default",
        "my-products",
        60000,
        "k8s1-adfa97d7-default-my-products-60000-75994091",
        "/",
    ),
    (
        "default",
        "my-discounted-products",
        80,
        "k8s1-adfa97d7-default-my-discounted-products-80-d54dcc94",
        "/",
    ),
];

/// GKE's `ContentHash` (ingress-gce `pkg/utils/common`): each of the first `n` bytes of
/// SHA-256(`s`) modulo 36 picks one of `0-9a-z`.
fn content_hash(s: &str, n: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    Sha256::digest(s.as_bytes())
        .iter()
        .take(n)
        .map(|b| ALPHABET[usize::from(*b) % 36] as char)
        .collect()
}

/// The frontend names GKE gives `default/my-ingress`: (URL map, target HTTP proxy, forwarding
/// rule, finalizer); `v1` the v1 namer, else v2 (which hashes `kube_system_uid`).
pub fn frontend_names(v1: bool, kube_system_uid: &str) -> [String; 4] {
    if v1 {
        let lb = format!("default-my-ingress--{GKE_UID}");
        return [
            format!("k8s-um-{lb}"),
            format!("k8s-tp-{lb}"),
            format!("k8s-fw-{lb}"),
            "networking.gke.io/ingress-finalizer".into(),
        ];
    }
    // V2IngressFrontendNamer: <ContentHash(kube-system UID, 8)>-<ns>-<name>-<ContentHash(
    // "<kube-system UID>;<ns>;<name>", 8)> (namespace and name are short: nothing trimmed).
    let lb = format!(
        "{}-default-my-ingress-{}",
        content_hash(kube_system_uid, 8),
        content_hash(&format!("{kube_system_uid};default;my-ingress"), 8)
    );
    [
        format!("k8s2-um-{lb}"),
        format!("k8s2-tp-{lb}"),
        format!("k8s2-fr-{lb}"),
        "networking.gke.io/ingress-finalizer-V2".into(),
    ]
}

fn global(kind: &str, name: &str) -> String {
    format!("projects/{PROJECT}/global/{kind}/{name}")
}

/// Inserts one resource through the Compute API and waits for nothing (the emulator's
/// operations are done when answered).
fn insert(sys: &System, collection: &str, body: Value) -> Result<()> {
    sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/{collection}"),
        &body,
    )
    .map(drop)
}

/// What GKE's controller builds for the demo Ingress, built the way it builds it; returns the
/// forwarding rule's IP.
fn build_as_gke(sys: &System, v1: bool, kube_system_uid: &str) -> Result<String> {
    let [url_map, proxy, rule, _] = frontend_names(v1, kube_system_uid);
    let zone = format!("zones/{ZONE}");
    for (ns, svc, port, name, path) in BACKENDS {
        // The Services' Pods have a readiness probe (period 2 s, timeout 1 s) that glbc copies;
        // GKE's default backend has none (only a liveness probe), so it gets glbc's NEG
        // defaults (15 s, 15 s) on /healthz.
        let (interval, timeout, description) = if svc == "default-http-backend" {
            (
                15,
                15,
                "Default kubernetes L7 Loadbalancing health check for NEG.",
            )
        } else {
            (
                2,
                1,
                "Kubernetes L7 health check generated with readiness probe settings.",
            )
        };
        insert(
            sys,
            "global/healthChecks",
            json!({
                "name": name, "type": "HTTP", "checkIntervalSec": interval, "timeoutSec": timeout,
                "healthyThreshold": 1, "unhealthyThreshold": 2,
                "description": description,
                "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": path},
            }),
        )?;
        insert(
            sys,
            &format!("{zone}/networkEndpointGroups"),
            json!({
                "name": name, "networkEndpointType": "GCE_VM_IP_PORT",
                "network": global("networks", "default"),
                "description": format!(
                    r#"{{"cluster-uid":"{kube_system_uid}","namespace":"{ns}","service-name":"{svc}","port":"{port}"}}"#
                ),
            }),
        )?;
        let endpoints = service_endpoints(sys, ns, svc)?;
        sys.compute_post(
            &format!("compute/v1/projects/{PROJECT}/{zone}/networkEndpointGroups/{name}/attachNetworkEndpoints"),
            &json!({"networkEndpoints": endpoints}),
        )?;
        let service = sys.get_json(&["service", "-n", ns, svc])?;
        let node_port = service["spec"]["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["port"] == port))
            .and_then(|p| p["nodePort"].as_i64())
            .unwrap_or(0);
        // The default backend is named by its port name `http` (ServiceBackendPort.String()).
        let port_ref = if svc == "default-http-backend" {
            "Name:http,Number:0".to_string()
        } else {
            format!("Name:,Number:{port}")
        };
        let mut backend_service = json!({
            "name": name, "protocol": "HTTP", "portName": format!("port{node_port}"),
            "loadBalancingScheme": "EXTERNAL", "timeoutSec": 30,
            "connectionDraining": {"drainingTimeoutSec": 0},
            "sessionAffinity": "NONE", "affinityCookieTtlSec": 0,
            "logConfig": {"enable": true, "sampleRate": 1.0},
            "description": format!(
                r#"{{"kubernetes.io/service-name":"{ns}/{svc}","kubernetes.io/service-port":"\u0026ServiceBackendPort{{{port_ref},}}","x-features":["NEG"]}}"#
            ),
            "healthChecks": [global("healthChecks", name)],
            "backends": [{
                "group": format!("projects/{PROJECT}/{zone}/networkEndpointGroups/{name}"),
                "balancingMode": "RATE", "maxRatePerEndpoint": 1.0, "capacityScaler": 1.0,
            }],
        });
        if node_port > 0 {
            backend_service["port"] = json!(node_port);
        }
        insert(sys, "global/backendServices", backend_service)?;
    }
    insert(
        sys,
        "global/firewalls",
        json!({
            "name": firewall_name(), "description": "GCE L7 firewall rule",
            "network": global("networks", "default"), "direction": "INGRESS", "priority": 1000,
            "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
            "allowed": [{"IPProtocol": "tcp", "ports": ["50000", "8080"]}],
            "targetTags": [NODE_TAG],
        }),
    )?;
    let service = |i: usize| global("backendServices", BACKENDS[i].3);
    // getNameForPathMatcher: "host" + hex MD5 of the host.
    let matcher = format!("host{}", hex::encode(Md5::digest(HOST.as_bytes())));
    insert(
        sys,
        "global/urlMaps",
        json!({
            "name": url_map, "defaultService": service(0),
            "hostRules": [{"hosts": [HOST], "pathMatcher": matcher}],
            "pathMatchers": [{
                "name": matcher, "defaultService": service(0),
                "pathRules": [
                    {"paths": ["/products"], "service": service(1)},
                    {"paths": ["/discounted"], "service": service(2)},
                ],
            }],
        }),
    )?;
    let description = r#"{"kubernetes.io/ingress-name": "default/my-ingress"}"#;
    insert(
        sys,
        "global/targetHttpProxies",
        json!({"name": proxy, "urlMap": global("urlMaps", &url_map), "description": description}),
    )?;
    insert(
        sys,
        "global/forwardingRules",
        json!({
            "name": rule, "IPProtocol": "TCP", "portRange": "80-80",
            "loadBalancingScheme": "EXTERNAL", "description": description,
            "target": global("targetHttpProxies", &proxy),
        }),
    )?;
    let created = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/forwardingRules/{rule}"
    ))?;
    created["IPAddress"]
        .as_str()
        .map(str::to_string)
        .context("the forwarding rule has an IP")
}

/// GKE's L7 firewall rule for the cluster (ingress-gce `pkg/firewalls`: `k8s-fw-l7--<uid>`).
fn firewall_name() -> String {
    format!("k8s-fw-l7--{GKE_UID}")
}

/// The endpoints GKE's NEG controller attaches for a Service: each ready endpoint of its
/// EndpointSlices, with its node as the instance.
fn service_endpoints(sys: &System, ns: &str, svc: &str) -> Result<Vec<Value>> {
    let selector = format!("kubernetes.io/service-name={svc}");
    let list = wait_for(&format!("endpoints of {ns}/{svc}"), DEADLINE, || {
        let slices = sys.get_json(&["endpointslices", "-n", ns, "-l", &selector])?;
        let mut out = Vec::new();
        for slice in slices["items"].as_array().into_iter().flatten() {
            let port = slice["ports"][0]["port"].as_i64().unwrap_or(0);
            for ep in slice["endpoints"].as_array().into_iter().flatten() {
                if ep["conditions"]["ready"] == false {
                    continue;
                }
                out.push(json!({
                    "ipAddress": ep["addresses"][0], "port": port, "instance": ep["nodeName"],
                }));
            }
        }
        Ok((!out.is_empty()).then_some(out))
    })?;
    Ok(list)
}

/// Per-method call counts of the emulator (`GET /_emulator/calls`): `compute.urlMaps.update`
/// -> calls so far.
pub fn calls(sys: &System) -> Result<BTreeMap<String, u64>> {
    let calls = sys.compute_get("_emulator/calls")?;
    Ok(calls["methods"]
        .as_object()
        .context("methods in /_emulator/calls")?
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect())
}

/// How many garbage collection runs the operator's log shows finished.
fn gc_runs(sys: &System) -> Result<usize> {
    let proc = sys.operator.as_ref().context("the operator runs")?;
    Ok(std::fs::read_to_string(&proc.log)?
        .lines()
        .filter(|l| l.contains("garbage collection run finished"))
        .count())
}

/// GKE's load balancer for the demo Ingress, as [`install`] left it, and the emulator's
/// counts then (before the operator starts).
pub struct Prebuilt {
    /// The forwarding rule's ephemeral IP (also the Ingress's status IP).
    pub ip: String,
    /// URL map, target HTTP proxy, forwarding rule, finalizer ([`frontend_names`]).
    pub names: [String; 4],
    calls: BTreeMap<String, u64>,
    writes: u64,
    resources: Value,
}

/// Builds GKE's state as the harness (the local admin when IAM is on): the `ingress-uid`
/// ConfigMap, [`build_as_gke`]'s resources, the demo Ingress with GKE's finalizer and status
/// IP, and the takeover install's RBAC grant to read the ConfigMap
/// (deploy/components/takeover). The example's Services and Pods
/// (`20-services-and-deployments.yaml`) and GKE's default backend must be applied already.
/// Start the operator with [`OPERATOR_FLAGS`] next.
pub fn install(sys: &System, v1: bool) -> Result<Prebuilt> {
    let kube_system_uid = sys.get_json(&["namespace", "kube-system"])?["metadata"]["uid"]
        .as_str()
        .context("kube-system has a UID")?
        .to_string();
    sys.kubectl_ok(&[
        "create",
        "configmap",
        "ingress-uid",
        "-n",
        "kube-system",
        &format!("--from-literal=uid={GKE_UID}"),
        &format!("--from-literal=provider-uid={GKE_UID}"),
    ])?;
    let ip = build_as_gke(sys, v1, &kube_system_uid)?;
    let names = frontend_names(v1, &kube_system_uid);
    let ingress = std::fs::read_to_string(repo_root().join("docs/examples/30-my-ingress.yaml"))?
        .replace(
            "  name: my-ingress\n",
            &format!("  name: my-ingress\n  finalizers: [{}]\n", names[3]),
        );
    sys.apply(&ingress)?;
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}).to_string();
    sys.kubectl_ok(&[
        "patch",
        "ingress",
        "my-ingress",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ])?;
    let prebuilt = Prebuilt {
        ip,
        names,
        calls: calls(sys)?,
        writes: sys.mutating_calls()?,
        resources: sys.compute_get("_emulator/state")?["resources"].clone(),
    };
    sys.apply_path(&repo_root().join("deploy/components/takeover/ingress-uid-role.yaml"))?;
    Ok(prebuilt)
}

impl Prebuilt {
    /// Waits until the running operator reconciled the Ingress and finished a garbage
    /// collection run, then checks the takeover: the Ingress serves `/products` and
    /// `/discounted` through GKE's IP (and the default backend other hosts), its status keeps
    /// that IP, and since [`install`] the emulator saw no insert and no delete and at most one
    /// write, `urlMaps.update` (GKE writes path rules in the Ingress's order, the operator
    /// sorted: Compute matches the longest path whatever the order), the same set of
    /// resources, and no Warning Event on the Ingress.
    ///
    /// Errors: what differs, with every process's log.
    pub fn check_adopted(&self, sys: &System) -> Result<()> {
        let operator = sys.operator.as_ref().context("the operator runs")?;
        wait_for("the Ingress reconciled and a GC run", DEADLINE, || {
            Ok((operator.ok_syncs()? >= 1 && gc_runs(sys)? > 0).then_some(()))
        })
        .with_context(|| sys.logs())?;
        let socket = sys.wait_for_listener(&self.ip, 80)?;
        let (code, body) = sys.http_get(&socket, HOST, "/products")?;
        anyhow::ensure!(code == 200, "/products: {code} {body}");
        let (code, body) = sys.http_get(&socket, HOST, "/discounted")?;
        anyhow::ensure!(code == 200, "/discounted: {code} {body}");
        // The default backend answers other hosts (once its 15 s health check has probed it).
        sys.wait_for_response(&socket, "other.example", "/", 404, "default backend")?;
        let ip = sys.wait_for_ingress_ip("default", "my-ingress")?;
        anyhow::ensure!(ip == self.ip, "the Ingress moved from {} to {ip}", self.ip);

        let after = calls(sys)?;
        let delta: BTreeMap<&String, u64> = after
            .iter()
            .map(|(k, v)| (k, v - self.calls.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        if delta
            .keys()
            .any(|k| k.ends_with(".insert") || k.ends_with(".delete"))
        {
            bail!(
                "takeover created or deleted instead of adopting: {delta:?}\n{}",
                sys.logs()
            );
        }
        let writes = sys.mutating_calls()? - self.writes;
        let url_map_updates = delta.get(&"compute.urlMaps.update".to_string()).copied();
        if !(writes == 0 || (writes == 1 && url_map_updates == Some(1))) {
            bail!("takeover changed what GKE built: {delta:?}\n{}", sys.logs());
        }
        let keys = |v: &Value| -> Vec<String> {
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        let resources = sys.compute_get("_emulator/state")?["resources"].clone();
        anyhow::ensure!(
            keys(&resources) == keys(&self.resources),
            "the resources changed: {:?} -> {:?}",
            keys(&self.resources),
            keys(&resources)
        );
        let warnings: Vec<String> = sys
            .events_for("default", "Ingress", "my-ingress")?
            .into_iter()
            .filter(|e| e.starts_with("Warning"))
            .collect();
        anyhow::ensure!(warnings.is_empty(), "Warning Events: {warnings:?}");
        Ok(())
    }

    /// Which of GKE's resources are still in the project, as `collection/name` (URL map,
    /// proxy, forwarding rule, the L7 firewall rule, and each backend's health check, NEG and
    /// backend service); empty once garbage collection removed them all.
    pub fn remaining(&self, sys: &System) -> Result<Vec<String>> {
        let [url_map, proxy, rule, _] = &self.names;
        let mut wanted: Vec<(&str, String)> = vec![
            ("forwardingRules", rule.clone()),
            ("targetHttpProxies", proxy.clone()),
            ("urlMaps", url_map.clone()),
            ("firewalls", firewall_name()),
        ];
        for (_, _, _, name, _) in BACKENDS {
            for c in ["backendServices", "healthChecks", "networkEndpointGroups"] {
                wanted.push((c, name.to_string()));
            }
        }
        let mut out = Vec::new();
        for (c, name) in wanted {
            let present = match c {
                "networkEndpointGroups" => sys.neg_names()?,
                _ => sys.compute_names(c)?,
            };
            if present.contains(&name) {
                out.push(format!("{c}/{name}"));
            }
        }
        Ok(out)
    }
}
