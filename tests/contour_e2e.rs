//! End to end, issue 22 (what Contour users rely on, reference 004): the operator runs with a
//! list of ingress classes (`--ingress-class gce,contour,nsx`, Contour's comma-separated
//! `--ingress-class-name`) and a status address override (`--ingress-status-address`, a DNS
//! name published as `hostname`). Ingresses of each listed class, by annotation and by
//! `ingressClassName` without an IngressClass object, are served (real requests through the
//! emulated load balancer) and carry the published name; an Ingress of another class gets
//! nothing.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::*;

const PUBLISHED: &str = "lb.example.com";

fn ingress(name: &str, class: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n{class}spec:\n  defaultBackend:\n    service: {{name: web, port: {{number: 80}}}}\n---\n"
    )
}

/// The socket of the HTTP listener of an Ingress, found from the forwarding rule it names
/// (its status shows the published name, not the IP).
fn socket_of(sys: &System, name: &str) -> Result<String> {
    let rule = wait_for(&format!("a forwarding rule for {name}"), DEADLINE, || {
        let ing = sys.get_json(&["ingress", name])?;
        Ok(
            ing["metadata"]["annotations"]["ingress.kubernetes.io/forwarding-rule"]
                .as_str()
                .map(str::to_string),
        )
    })
    .with_context(|| sys.logs())?;
    let rule = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/forwardingRules/{rule}"
    ))?;
    let ip = rule["IPAddress"]
        .as_str()
        .ok_or_else(|| anyhow!("no IPAddress: {rule}"))?;
    sys.wait_for_listener(ip, 80)
}

fn published(sys: &System, name: &str) -> Result<Option<Value>> {
    let ing = sys.get_json(&["ingress", name])?;
    Ok(Some(ing["status"]["loadBalancer"]["ingress"].clone()).filter(|v| !v.is_null()))
}

#[test]
fn class_list_and_status_address() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[
        "--ingress-class",
        "gce,contour,nsx",
        "--ingress-status-address",
        PUBLISHED,
    ])?;
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: NodePort\n  selector: {app: web}\n  ports:\n  - {name: http, protocol: TCP, port: 80, targetPort: 8080}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  labels: {app: web}\n  annotations: {local.gclb-operator.dev/run: echo}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {name: http, containerPort: 8080}\n    readinessProbe:\n      httpGet: {path: /, port: 8080}\n      periodSeconds: 1\n---\n",
    );
    yaml += &ingress(
        "by-annotation",
        "  annotations: {kubernetes.io/ingress.class: contour}\n",
    );
    yaml += &ingress("by-name", "");
    yaml = yaml.replace(
        "name: by-name\nspec:\n",
        "name: by-name\nspec:\n  ingressClassName: nsx\n",
    );
    yaml += &ingress(
        "other",
        "  annotations: {kubernetes.io/ingress.class: nginx}\n",
    );
    sys.apply(&yaml)?;

    for name in ["by-annotation", "by-name"] {
        let status = wait_for(&format!("status of {name}"), DEADLINE, || {
            published(&sys, name)
        })
        .with_context(|| sys.logs())?;
        assert_eq!(
            status,
            serde_json::json!([{ "hostname": PUBLISHED }]),
            "{name}"
        );
        let socket = socket_of(&sys, name)?;
        sys.wait_for_response(&socket, "any.example", "/", 200, "web-1")?;
    }
    // Both listed Ingresses are served by now; the nginx one was never taken.
    let other = sys.get_json(&["ingress", "other"])?;
    assert!(other["metadata"]["finalizers"].is_null(), "{other}");
    assert!(
        other["status"]["loadBalancer"]["ingress"].is_null(),
        "{other}"
    );
    let maps = sys.compute_names("urlMaps")?;
    assert_eq!(maps.len(), 2, "one URL map per served Ingress: {maps:?}");
    Ok(())
}
