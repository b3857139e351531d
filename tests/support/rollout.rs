//! The load balancer the rollout tests (tests/rollout_e2e.rs, tests/workloads_e2e.rs) roll
//! Pods behind: one Service `web` behind one Ingress, health-checked fast enough that a
//! rollout sees endpoints turn HEALTHY within seconds.

/// IngressClass `gce`, BackendConfig `web` (HTTP health check on `/healthz` every
/// `hc_interval_sec` seconds, timeout 1 s, thresholds 2; draining 1 s), Service `web` (80 ->
/// 8080, selector `app: web`, bound to the BackendConfig) and Ingress `web` to it.
pub fn service_and_ingress(hc_interval_sec: u64) -> String {
    format!(
        r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: gce
spec:
  controller: k8s.io/ingress-gce
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: web
spec:
  healthCheck:
    type: HTTP
    requestPath: /healthz
    checkIntervalSec: {hc_interval_sec}
    timeoutSec: 1
    healthyThreshold: 2
    unhealthyThreshold: 2
  connectionDraining:
    drainingTimeoutSec: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    cloud.google.com/backend-config: '{{"default": "web"}}'
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  ingressClassName: gce
  defaultBackend:
    service:
      name: web
      port:
        number: 80
"#
    )
}
