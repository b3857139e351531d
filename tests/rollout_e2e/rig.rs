//! The system each rollout runs on: one Service `web` (its manifests) behind one Ingress, the
//! real binaries around it ([`Rig`]), and what the emulator says of its NEG's endpoints.

use super::*;

/// A Pod of Service `web` as docs/readiness-gates.md recommends: the gate, a readiness probe
/// (on `/ready`, a different path from the load balancer's `/healthz`), a preStop sleep longer
/// than the endpoint detach plus `drainingTimeoutSec` ([`PRE_STOP_SEC`]), and a grace period
/// longer than the preStop sleep. `on-sigterm: exit` makes the local kubelet stop the server
/// right after the preStop sleep, so only the preStop sleep keeps it serving while the load
/// balancer drains.
/// `fail_paths` (local kubelet control) makes the server answer those paths with 500.
pub(super) fn pod(name: &str, fail_paths: Option<&str>) -> String {
    let fail = fail_paths
        .map(|p| format!("\n    local.gclb-operator.dev/fail-paths: \"{p}\""))
        .unwrap_or_default();
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    app: web
  annotations:
    local.gclb-operator.dev/run: echo
    local.gclb-operator.dev/on-sigterm: exit{fail}
spec:
  terminationGracePeriodSeconds: 10
  readinessGates:
  - conditionType: {GATE}
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    args: ["netexec", "--http-port=8080"]
    ports:
    - name: http
      containerPort: 8080
    readinessProbe:
      httpGet:
        path: /ready
        port: 8080
      periodSeconds: 1
    lifecycle:
      preStop:
        sleep:
          seconds: {PRE_STOP_SEC}
"#
    )
}

/// A running system serving Service `web` through Ingress `web`, with `replicas` Pods `old-*`
/// Ready and HEALTHY behind the load balancer.
pub(super) struct Rig {
    pub(super) sys: System,
    /// Pods behind the Service.
    pub(super) replicas: usize,
    /// The load balancer's socket (port 80 mapped to an ephemeral loopback port).
    pub(super) socket: String,
    /// Name of the Service's NEG.
    pub(super) neg: String,
    pub(super) clock: PodClock,
}

impl Rig {
    pub(super) fn start(operator_flags: &[&str]) -> Result<Rig> {
        Rig::start_with(operator_flags, REPLICAS, &[])
    }

    /// [`Rig::start`] with `replicas` Pods and extra fake-kube-apiserver flags.
    pub(super) fn start_with(
        operator_flags: &[&str],
        replicas: usize,
        apiserver_args: &[&str],
    ) -> Result<Rig> {
        let mut sys = System::start_with(Options {
            emulator_args: &["--port-map", "80=0,443=0"],
            apiserver_args,
            ..Options::default()
        })?;
        sys.apply_path(&repo_root().join("crds/backendconfigs.cloud.google.com.yaml"))?;
        sys.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd/backendconfigs.cloud.google.com",
            "--timeout=60s",
        ])?;
        sys.apply(&rollout::service_and_ingress(HC_INTERVAL_SEC))?;
        let clock = PodClock::start(&sys.kubeconfig)?;
        for i in 0..replicas {
            sys.apply(&pod(&format!("old-{i}"), None))?;
        }
        sys.start_operator(operator_flags)?;
        let socket = sys.wait_for_ingress_socket(NS, "web")?;
        let neg = wait_for("the NEG of Service web", DEADLINE, || {
            Ok(sys
                .neg_names()?
                .into_iter()
                .find(|n| n.contains("-default-web-80-")))
        })
        .with_context(|| sys.logs())?;
        let rig = Rig {
            sys,
            replicas,
            socket,
            neg,
            clock,
        };
        let olds = rig.pod_names("old", replicas);
        rig.wait_ready(&olds)?;
        let ips: Vec<String> = olds
            .iter()
            .map(|p| rig.clock.ip(p))
            .collect::<Result<_>>()?;
        wait_for("every old Pod HEALTHY in the NEG", DEADLINE, || {
            let eps = neg_endpoints(&rig.sys, &rig.neg)?;
            Ok(ips
                .iter()
                .all(|ip| eps.get(ip).is_some_and(|h| h == "HEALTHY"))
                .then_some(()))
        })
        .with_context(|| rig.sys.logs())?;
        rig.sys
            .wait_for_response(&rig.socket, HOST, "/", 200, "\"pod\"")?;
        Ok(rig)
    }

    pub(super) fn pod_names(&self, prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    pub(super) fn wait_ready(&self, pods: &[String]) -> Result<()> {
        let mut args = vec!["wait", "--for=condition=Ready", "--timeout=90s"];
        let refs: Vec<String> = pods.iter().map(|p| format!("pod/{p}")).collect();
        args.extend(refs.iter().map(String::as_str));
        self.sys
            .kubectl_ok(&args)
            .map(drop)
            .with_context(|| self.sys.logs())
    }

    /// Replaces every `old-*` Pod with a `new-*` Pod the way a Deployment with `maxSurge: 1,
    /// maxUnavailable: 0` does: create a new Pod, wait for it to be Ready, delete an old one
    /// (with its grace period); finally wait until the old Pods are gone. Returns the new Pods.
    pub(super) fn rolling_update(&self) -> Result<Vec<String>> {
        let olds = self.pod_names("old", self.replicas);
        let news = self.pod_names("new", self.replicas);
        for (old, new) in olds.iter().zip(&news) {
            self.sys.apply(&pod(new, None))?;
            self.wait_ready(std::slice::from_ref(new))?;
            self.sys
                .kubectl_ok(&["delete", "pod", old, "--wait=false"])?;
        }
        let mut args = vec!["wait", "--for=delete", "--timeout=90s"];
        let refs: Vec<String> = olds.iter().map(|p| format!("pod/{p}")).collect();
        args.extend(refs.iter().map(String::as_str));
        self.sys
            .kubectl_ok(&args)
            .with_context(|| self.sys.logs())?;
        Ok(news)
    }
}

/// Endpoints of one NEG as `ip -> health` (`HEALTHY`, `UNHEALTHY`, or `""` without a health
/// entry), from `listNetworkEndpoints` with `healthStatus: SHOW`.
pub(super) fn neg_endpoints(sys: &System, neg: &str) -> Result<HashMap<String, String>> {
    let list = sys.compute_post(
        &format!(
            "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups/{neg}/listNetworkEndpoints"
        ),
        &json!({"healthStatus": "SHOW"}),
    )?;
    Ok(endpoint_health(&list))
}

pub(super) fn endpoint_health(list: &Value) -> HashMap<String, String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let ip = item["networkEndpoint"]["ipAddress"].as_str()?.to_string();
            let health = item["healths"][0]["healthState"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Some((ip, health))
        })
        .collect()
}
