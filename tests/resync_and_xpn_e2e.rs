//! End to end: a resync with nothing changed writes nothing to the Compute API, and on a Shared
//! VPC cluster (firewall writes refused with 403) the operator still serves the Ingress and
//! hands the security admin the exact gcloud command (issue 5's acceptance list).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use support::*;

fn examples() -> std::path::PathBuf {
    repo_root().join("docs/examples")
}

/// Waits until every example Pod is Ready and every NEG holds its two (or one) endpoints.
fn wait_until_settled(sys: &System, socket: &str) -> Result<()> {
    sys.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "--timeout=90s",
    ])?;
    sys.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "-n",
        "kube-system",
        "--timeout=90s",
    ])?;
    sys.wait_for_response(socket, "your-store.example", "/products", 200, "products-")?;
    sys.wait_for_response(
        socket,
        "your-store.example",
        "/discounted",
        200,
        "discounted-products-",
    )?;
    wait_for("5 endpoints attached across the NEGs", DEADLINE, || {
        let mut total = 0;
        for neg in sys.neg_names()? {
            let eps = sys.compute_post(
                &format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
                &json!({}),
            )?;
            total += eps["items"].as_array().map_or(0, |a| a.len());
        }
        Ok((total == 5).then_some(()))
    })
}

#[test]
fn a_resync_with_nothing_changed_sends_zero_mutating_compute_calls() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_path(&examples())?;
    sys.start_operator(&["--resync-period", "2"])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    wait_until_settled(&sys, &socket)?;

    // Let any write the settling triggered finish, then take the baseline.
    let mut before = sys.compute_get("_emulator/calls")?;
    wait_for(
        "the mutating call count to stay put for one resync period",
        DEADLINE,
        || {
            std::thread::sleep(Duration::from_secs(3));
            let now = sys.compute_get("_emulator/calls")?;
            let stable = now["mutating"] == before["mutating"];
            before = now;
            Ok(stable.then_some(()))
        },
    )?;

    // Several periodic resyncs happen (the operator reads the load balancer back each time)...
    let start = Instant::now();
    let reads_before = before["reading"].as_u64().unwrap_or(0);
    let after = wait_for("three resync periods with reads", DEADLINE, || {
        let now = sys.compute_get("_emulator/calls")?;
        let reads = now["reading"].as_u64().unwrap_or(0);
        Ok((start.elapsed() > Duration::from_secs(7) && reads >= reads_before + 15).then_some(now))
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;

    // ...and none of them wrote anything.
    if after["mutating"] != before["mutating"] {
        let changed: Vec<String> = after["methods"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| before["methods"][k.as_str()] != **v)
            .map(|(k, v)| format!("{k}: {} -> {v}", before["methods"][k.as_str()]))
            .collect();
        bail!(
            "a no-op resync sent mutating calls: {changed:?}\n{}",
            sys.logs()
        );
    }
    Ok(())
}

/// Environment for running the installed gcloud against the emulator.
fn gcloud(sys: &System, shell_command: &str) -> Result<std::process::Output> {
    let cfg = sys.dir.path().join("gcloud");
    std::fs::create_dir_all(&cfg)?;
    let token = sys.dir.path().join("token.txt");
    std::fs::write(&token, "fake-token")?;
    Command::new("bash")
        .args(["-c", shell_command])
        .env("CLOUDSDK_CONFIG", &cfg)
        .env("CLOUDSDK_CORE_PROJECT", PROJECT)
        .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
        .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
        .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
        .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
        .env(
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
            format!("{}compute/v1/", sys.compute_url),
        )
        .output()
        .context("running gcloud")
}

#[test]
fn shared_vpc_firewall_refusal_gives_the_xpn_hint_and_its_command_works() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    // The Shared VPC case: the cluster's service account may not write firewall rules.
    sys.compute_post(
        "_emulator/faults",
        &json!([{"method": "compute.firewalls.insert", "code": 403, "message": "Required 'compute.firewalls.create' permission"},
                {"method": "compute.firewalls.update", "code": 403},
                {"method": "compute.firewalls.patch", "code": 403}]),
    )?;
    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;

    // The load balancer is still built and serves traffic: the sync counts as successful.
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    assert!(
        sys.created_firewalls()?.is_empty(),
        "the firewall rule was created despite the 403"
    );

    // kubectl describe shows a Normal XPN event with the command for the security admin.
    let describe = wait_for("the XPN event in kubectl describe", DEADLINE, || {
        let out = sys.kubectl_ok(&["describe", "ingress", "my-ingress"])?;
        Ok(out
            .contains("Firewall change required by security admin")
            .then_some(out))
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    let events = sys.events_for("default", "Ingress", "my-ingress")?;
    let xpn = events
        .iter()
        .find(|e| e.contains("Firewall change required by security admin"))
        .ok_or_else(|| anyhow!("no XPN event in {events:?}\n{describe}"))?;
    assert!(
        xpn.starts_with("Normal XPN:"),
        "the hint is a Normal event with reason XPN: {xpn}"
    );
    let command = xpn
        .split('`')
        .nth(1)
        .ok_or_else(|| anyhow!("no `command` in the hint: {xpn}"))?
        .to_string();
    assert!(
        command.starts_with("gcloud compute firewall-rules create k8s-fw-l7--"),
        "{command}"
    );
    for part in [
        "--network default",
        "--allow tcp:",
        "--source-ranges 130.211.0.0/22,35.191.0.0/16",
        &format!("--project {PROJECT}"),
    ] {
        assert!(command.contains(part), "{part:?} missing from {command}");
    }
    assert!(
        command.contains("tcp:8080") && command.contains("tcp:50000"),
        "NEG target ports: {command}"
    );

    // The security admin runs it (the operator is stopped so that it does not race them).
    sys.stop_operator();
    let client = reqwest::blocking::Client::new();
    client
        .delete(format!("{}_emulator/faults", sys.compute_url))
        .send()?
        .error_for_status()?;
    let out = gcloud(&sys, &command)?;
    if !out.status.success() {
        bail!(
            "{command} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let name = command
        .split_whitespace()
        .nth(4)
        .unwrap_or_default()
        .to_string();
    assert_eq!(sys.created_firewalls()?, vec![name.clone()]);
    let rule = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/firewalls/{name}"
    ))?;
    assert_eq!(
        rule["sourceRanges"],
        json!(["130.211.0.0/22", "35.191.0.0/16"]),
        "{rule}"
    );
    Ok(())
}
