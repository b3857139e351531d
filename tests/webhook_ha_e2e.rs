//! The readiness-gate webhook in high availability (issue 15, "Webhook that works in HA").
//!
//! Two operator replicas with leader election and the webhook, as deploy/ runs them. Admission
//! reviews go to both, as the webhook Service spreads them: each replica answers from its own
//! caches, the standby as well as the leader, and reports ready only once it does. Then the
//! leader is killed (SIGKILL: no Lease release) and reviews go to the survivor only, as the
//! Service's endpoints would after the kill: it keeps adding the gate while no replica holds
//! the Lease and after it becomes the leader. A Pod behind no Ingress is a control: it is
//! admitted unchanged, so the answers are real decisions.

mod support;

use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};
use support::*;

const WEB: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
"#;

/// A replica: its process and webhook address.
struct Replica {
    identity: &'static str,
    proc: Proc,
    webhook: String,
}

fn start_replica(sys: &System, identity: &'static str, cert: &str, key: &str) -> Result<Replica> {
    let proc = sys.spawn_operator(
        &[
            "--leader-elect",
            "--leader-election-lease-duration",
            "3",
            "--leader-election-identity",
            identity,
            "--webhook-listen",
            "127.0.0.1:0",
            "--webhook-tls-cert",
            cert,
            "--webhook-tls-key",
            key,
        ],
        identity,
    )?;
    let webhook = wait_for(&format!("{identity}'s webhook address"), DEADLINE, || {
        Ok(std::fs::read_to_string(&proc.log)?
            .lines()
            .find_map(|l| l.strip_prefix("webhook listening on https://"))
            .map(|a| a.trim().to_string()))
    })?;
    Ok(Replica {
        identity,
        proc,
        webhook,
    })
}

/// `GET /readyz` of a replica is 200.
fn ready(replica: &Replica) -> Result<bool> {
    let url = replica.proc.metrics_url()?.replace("/metrics", "/readyz");
    Ok(reqwest::blocking::get(url)?.status().is_success())
}

fn lease_holder(sys: &System) -> Result<String> {
    let out = sys.kubectl(&[
        "get",
        "lease",
        "gclb-operator",
        "-n",
        OPERATOR_NAMESPACE,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Sends a Pod CREATE review (labels `app: <app>`) to a webhook; returns the JSON patch ops it
/// answered with (empty: admitted unchanged).
fn review(client: &reqwest::blocking::Client, webhook: &str, app: &str) -> Result<Vec<Value>> {
    let uid = format!("{app}-{}", Instant::now().elapsed().as_nanos());
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": format!("{app}-"), "labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}
            }
        }
    });
    let port = webhook.rsplit(':').next().unwrap_or_default();
    let resp = client
        .post(format!("https://webhook.test:{port}/mutate-pods"))
        .json(&body)
        .send()
        .with_context(|| format!("review to {webhook}"))?;
    if !resp.status().is_success() {
        bail!("{webhook} answered {}", resp.status());
    }
    let answer: Value = resp.json()?;
    let response = &answer["response"];
    if response["uid"] != uid || response["allowed"] != true {
        bail!("bad answer from {webhook}: {answer}");
    }
    match response["patch"].as_str() {
        None => Ok(Vec::new()),
        Some(b64) => {
            let raw = base64::engine::general_purpose::STANDARD.decode(b64)?;
            Ok(serde_json::from_slice(&raw)?)
        }
    }
}

fn gate_patch() -> Vec<Value> {
    vec![json!({"op": "add", "path": "/spec/readinessGates",
        "value": [{"conditionType": "cloud.google.com/load-balancer-neg-ready"}]})]
}

#[test]
fn admission_keeps_adding_the_gate_while_the_leader_fails_over() -> Result<()> {
    let sys = System::start(&[])?;
    sys.apply_basics()?;
    sys.apply(WEB)?;
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec!["webhook.test".to_string()])?.self_signed(&key)?;
    let (cert_path, key_path) = (
        sys.dir.path().join("tls.crt"),
        sys.dir.path().join("tls.key"),
    );
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    let (cert_arg, key_arg) = (
        cert_path.to_string_lossy().into_owned(),
        key_path.to_string_lossy().into_owned(),
    );

    let replicas = vec![
        start_replica(&sys, "replica-a", &cert_arg, &key_arg)?,
        start_replica(&sys, "replica-b", &cert_arg, &key_arg)?,
    ];
    let mut builder = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes())?)
        .timeout(std::time::Duration::from_secs(5));
    // One name for both replicas' certificate; each request names its replica's port.
    builder = builder.resolve("webhook.test", "127.0.0.1:0".parse()?);
    let client = builder.build()?;

    for r in &replicas {
        wait_for(&format!("{} ready", r.identity), DEADLINE, || {
            Ok(ready(r)?.then_some(()))
        })
        .with_context(|| std::fs::read_to_string(&r.proc.log).unwrap_or_default())?;
    }
    let leader = wait_for("a leader", DEADLINE, || {
        let holder = lease_holder(&sys)?;
        Ok((!holder.is_empty()).then_some(holder))
    })?;
    let (mut dead, survivor): (Vec<Replica>, Vec<Replica>) =
        replicas.into_iter().partition(|r| r.identity == leader);
    let survivor = survivor.into_iter().next().context("two replicas")?;

    // Both replicas answer, the standby from its own caches; the control Pod is left alone.
    for round in 0..10 {
        for r in dead.iter().chain(std::iter::once(&survivor)) {
            assert_eq!(
                review(&client, &r.webhook, "web")?,
                gate_patch(),
                "round {round}: {} ({}) did not add the gate",
                r.identity,
                if r.identity == leader {
                    "leader"
                } else {
                    "standby"
                }
            );
            assert!(
                review(&client, &r.webhook, "other")?.is_empty(),
                "{} gated a Pod behind no Ingress",
                r.identity
            );
        }
    }

    // The leader dies without releasing the Lease; the survivor alone serves admission.
    let killed = dead.pop().context("the leader")?;
    drop(killed);
    let mut while_leaderless = 0;
    let mut after = 0;
    let start = Instant::now();
    while after < 10 {
        if start.elapsed() > DEADLINE {
            return Err(anyhow!(
                "{} never took the Lease; its log:\n{}",
                survivor.identity,
                survivor.proc.log_text()
            ));
        }
        let leading = lease_holder(&sys)? == survivor.identity;
        assert_eq!(
            review(&client, &survivor.webhook, "web")?,
            gate_patch(),
            "{} stopped adding the gate ({} since the kill)",
            survivor.identity,
            if leading { "leader" } else { "no leader" }
        );
        if leading {
            after += 1;
        } else {
            while_leaderless += 1;
        }
    }
    assert!(
        while_leaderless > 0,
        "no review was sent while no replica held the Lease"
    );
    assert!(ready(&survivor)?, "the survivor is not ready");
    Ok(())
}
