//! End to end, issue 17: an Ingress keeps its IP for its whole life. Adding TLS, removing it,
//! restarting the operator, `allow-http: "false"` and back, and a forwarding rule deleted behind
//! the operator's back all leave the IP alone, and not one request through the load balancer
//! fails while TLS comes and goes (the load generator of the rollout tests, on port 80). Only the
//! `kubernetes.io/ingress.global-static-ip-name` annotation moves the IP, with an `IPChanged`
//! Event each time.

mod support;

use std::time::Duration;

use anyhow::{Context, Result};
use support::load::Load;
use support::*;

const NS: &str = "default";
const HOST: &str = "web.example";
const STATIC_IP: &str = "kubernetes.io/ingress.global-static-ip-name";

/// Service `web` with two echo Pods (as in tests/tls_e2e.rs).
fn web_app() -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n---\n",
    );
    for i in 0..2 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-{i}\n  labels: {{app: web}}\n  annotations: {{local.gclb-operator.dev/run: echo}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {{name: http, containerPort: 8080}}\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n---\n"
        ));
    }
    yaml
}

/// A TLS Secret for [`HOST`].
fn tls_secret() -> Result<String> {
    use base64::Engine as _;
    let ck = rcgen::generate_simple_self_signed(vec![HOST.to_string()])?;
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web-tls}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    ))
}

/// Ingress `web` (default backend `web:80`) with `annotations`, and a `tls:` entry when `tls`.
fn ingress(annotations: &[(&str, &str)], tls: bool) -> String {
    let mut yaml =
        String::from("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n");
    yaml.push_str("  annotations:\n    kubernetes.io/ingress.class: gce\n");
    for (k, v) in annotations {
        yaml.push_str(&format!("    {k}: '{v}'\n"));
    }
    yaml.push_str("spec:\n  defaultBackend:\n    service: {name: web, port: {number: 80}}\n");
    if tls {
        yaml.push_str(&format!(
            "  tls:\n  - hosts: [{HOST}]\n    secretName: web-tls\n"
        ));
    }
    yaml
}

fn status_ip(sys: &System) -> Result<Option<String>> {
    let ing = sys.get_json(&["ingress", "-n", NS, "web"])?;
    Ok(ing["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .map(str::to_string))
}

fn rule_ip(sys: &System, rule: &str) -> Result<Option<String>> {
    let path = format!("compute/v1/projects/{PROJECT}/global/forwardingRules/{rule}");
    match sys.compute_get(&path) {
        Ok(v) => Ok(v["IPAddress"].as_str().map(str::to_string)),
        Err(_) => Ok(None),
    }
}

/// Names of the Ingress's HTTP and HTTPS forwarding rules (`k8s2-fr-`, `k8s2-fs-`), from the
/// emulator's list once the HTTP one exists.
fn rule_names(sys: &System) -> Result<(String, String)> {
    let http = wait_for("the HTTP forwarding rule", DEADLINE, || {
        Ok(sys
            .compute_names("forwardingRules")?
            .into_iter()
            .find(|n| n.starts_with("k8s2-fr-")))
    })?;
    let https = http.replacen("k8s2-fr-", "k8s2-fs-", 1);
    Ok((http, https))
}

/// `IPChanged` Events of the Ingress, as the IPs they name.
fn ip_changes(sys: &System) -> Result<Vec<String>> {
    Ok(sys
        .events_for(NS, "Ingress", "web")?
        .into_iter()
        .filter_map(|e| {
            e.split_once("IPChanged: IP is now ")
                .map(|(_, ip)| ip.trim().to_string())
        })
        .collect())
}

/// Waits until the Ingress status shows `ip` again after the operator acted.
fn wait_status(sys: &System, ip: &str) -> Result<()> {
    wait_for(&format!("Ingress status IP {ip}"), DEADLINE, || {
        Ok((status_ip(sys)?.as_deref() == Some(ip)).then_some(()))
    })
    .with_context(|| sys.logs())
}

#[test]
fn the_ip_stays_through_tls_changes_restarts_and_rule_recreation() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_basics()?;
    sys.apply(&web_app())?;
    sys.apply(&tls_secret()?)?;
    sys.apply(&ingress(&[], false))?;
    sys.start_operator(&[])?;
    let ip = sys.wait_for_ingress_ip(NS, "web")?;
    let socket = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&socket, HOST, "/", 200, "\"pod\"")?;
    let (http_rule, https_rule) = rule_names(&sys)?;

    // Traffic on port 80 all along while TLS is added, removed, and the operator restarts.
    let load = Load::start(&socket, HOST, 2, 1_000_000, Duration::from_secs(600));

    sys.apply(&ingress(&[], true))?;
    let tls_socket = sys.wait_for_listener(&ip, 443)?;
    assert!(!tls_socket.is_empty());
    assert_eq!(rule_ip(&sys, &https_rule)?.as_deref(), Some(ip.as_str()));
    assert_eq!(rule_ip(&sys, &http_rule)?.as_deref(), Some(ip.as_str()));

    sys.apply(&ingress(&[], false))?;
    wait_for("the HTTPS forwarding rule to go", DEADLINE, || {
        Ok(rule_ip(&sys, &https_rule)?.is_none().then_some(()))
    })
    .with_context(|| sys.logs())?;
    // The data plane closes the listener when it next compiles the load balancer, a moment
    // after the forwarding rule is gone.
    wait_for("the 443 listener to close", DEADLINE, || {
        Ok(sys.listener_for(&ip, 443)?.is_none().then_some(()))
    })
    .with_context(|| sys.logs())?;

    let before_restart = load.done();
    sys.stop_operator();
    sys.start_operator(&[])?;
    // The restarted operator reconciles the Ingress: its annotations are written again only if
    // they differ, so wait for its first successful sync instead.
    wait_for("the restarted operator's first sync", DEADLINE, || {
        let op = sys.operator.as_ref().context("operator")?;
        Ok((op.ok_syncs()? >= 1).then_some(()))
    })
    .with_context(|| sys.logs())?;
    wait_for("requests after the restart", DEADLINE, || {
        Ok((load.done() > before_restart + 50).then_some(()))
    })?;
    let tally = load.finish();
    assert_eq!(
        tally.failed, 0,
        "requests failed while TLS was added and removed and the operator restarted: {:?} {:?}",
        tally.failures, tally.samples
    );
    assert!(tally.ok >= 100, "too few requests to tell: {tally:?}");
    assert_eq!(status_ip(&sys)?.as_deref(), Some(ip.as_str()));
    assert_eq!(rule_ip(&sys, &http_rule)?.as_deref(), Some(ip.as_str()));

    // HTTPS only, then HTTP again: the IP stays.
    sys.apply(&ingress(
        &[("kubernetes.io/ingress.allow-http", "false")],
        true,
    ))?;
    wait_for("only the HTTPS rule", DEADLINE, || {
        Ok((rule_ip(&sys, &http_rule)?.is_none()
            && rule_ip(&sys, &https_rule)?.as_deref() == Some(ip.as_str()))
        .then_some(()))
    })
    .with_context(|| sys.logs())?;
    sys.apply(&ingress(&[], true))?;
    wait_for("the HTTP rule back on the same IP", DEADLINE, || {
        Ok((rule_ip(&sys, &http_rule)?.as_deref() == Some(ip.as_str())).then_some(()))
    })
    .with_context(|| sys.logs())?;

    // A forwarding rule deleted behind the operator's back comes back on the same IP.
    sys.compute_delete(&format!(
        "compute/v1/projects/{PROJECT}/global/forwardingRules/{http_rule}"
    ))?;
    sys.apply(&ingress(&[("example.com/nudge", "1")], true))?;
    wait_for("the HTTP rule recreated on the same IP", DEADLINE, || {
        Ok((rule_ip(&sys, &http_rule)?.as_deref() == Some(ip.as_str())).then_some(()))
    })
    .with_context(|| sys.logs())?;
    assert_eq!(status_ip(&sys)?.as_deref(), Some(ip.as_str()));
    assert_eq!(
        ip_changes(&sys)?,
        vec![ip.clone()],
        "one IPChanged Event, for the first IP"
    );

    // Only the static-IP annotation moves the IP: to the named address, and away from it to a
    // fresh one when the annotation goes (the user's address is released).
    let reserved = sys.reserve_global_address("mine")?;
    sys.apply(&ingress(&[(STATIC_IP, "mine")], true))?;
    wait_status(&sys, &reserved)?;
    wait_for("both rules on the named address", DEADLINE, || {
        Ok(
            (rule_ip(&sys, &http_rule)?.as_deref() == Some(reserved.as_str())
                && rule_ip(&sys, &https_rule)?.as_deref() == Some(reserved.as_str()))
            .then_some(()),
        )
    })
    .with_context(|| sys.logs())?;
    wait_for("the managed address released", DEADLINE, || {
        Ok((!sys.compute_names("addresses")?.contains(&http_rule)).then_some(()))
    })
    .with_context(|| sys.logs())?;
    sys.apply(&ingress(&[], true))?;
    let fresh = wait_for("a new IP after the annotation went", DEADLINE, || {
        Ok(status_ip(&sys)?.filter(|i| *i != reserved))
    })
    .with_context(|| sys.logs())?;
    assert_ne!(fresh, ip);
    wait_for("every IPChanged Event", DEADLINE, || {
        let got = ip_changes(&sys)?;
        Ok((got.len() >= 3).then_some(got))
    })
    .map(|got| {
        assert_eq!(got, vec![ip.clone(), reserved.clone(), fresh.clone()]);
    })
    .with_context(|| sys.logs())?;
    // The user's address is theirs again: nothing uses it.
    let mine = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/addresses/mine"
    ))?;
    assert_eq!(mine["status"], "RESERVED", "{mine}");
    Ok(())
}
