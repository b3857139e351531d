//! End to end: the network behind the load balancer (issue 28). The emulator enforces the VPC
//! firewall on health-check probes and proxied connections, the local Nodes are instances, and
//! the operator tells users when the firewall blocks Google's health checkers and proxies:
//! - Shared VPC: the operator's firewall insert in the host project is refused (403) ->
//!   endpoints UNHEALTHY, requests 502, the XPN Event with the exact command -> the command run
//!   with gcloud as the host project's admin -> HEALTHY, 200 (the third use on the design card);
//! - a deleted rule, then a higher-priority deny rule on one port;
//! - a three-zone cluster, every endpoint in its own zone's NEG;
//! - deleting many Ingresses at once sends at most one `firewalls.delete`.

mod support;

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use support::*;

const HOST: &str = "host-project";
const HOST_ADMIN: &str = "host-admin-token";
const SERVICE_TOKEN: &str = "service-project-token";

fn examples() -> std::path::PathBuf {
    repo_root().join("docs/examples")
}

/// The health states of every endpoint of every NEG in `zone` of `PROJECT`, sorted, as
/// `listNetworkEndpoints` with `healthStatus: SHOW` reports them.
fn endpoint_health(sys: &System, zone: &str) -> Result<Vec<String>> {
    let list = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups"
    ))?;
    let mut states = Vec::new();
    for neg in item_names(&list) {
        let eps = sys.compute_post(
            &format!("compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
            &json!({"healthStatus": "SHOW"}),
        )?;
        for item in eps["items"].as_array().into_iter().flatten() {
            for h in item["healths"].as_array().into_iter().flatten() {
                states.push(h["healthState"].as_str().unwrap_or("?").to_string());
            }
        }
    }
    states.sort();
    Ok(states)
}

/// Waits until the Ingress's five endpoints (products x2, discounted x2, default backend) are
/// attached and all in `state`.
fn wait_for_all(sys: &System, state: &str) -> Result<()> {
    wait_for(&format!("5 endpoints {state}"), DEADLINE, || {
        let states = endpoint_health(sys, ZONE)?;
        if states == vec![state.to_string(); 5] {
            Ok(Some(()))
        } else {
            Err(anyhow!("endpoint states: {states:?}"))
        }
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))
}

/// The first Event of `my-ingress` with `prefix` ("Normal XPN", "Warning Firewall") whose
/// message contains `needle`, waited for.
fn wait_for_event(sys: &System, prefix: &str, needle: &str) -> Result<String> {
    event_after_touches(sys, None, prefix, needle)
}

/// Like [`wait_for_event`], touching the Ingress every 2 s (annotation values from `first` on)
/// until the Event comes: the operator reuses its listing of the network's firewall rules for
/// `LISTING_TTL` (10 s), so a sync soon after a rule changed may not see the change yet.
fn touch_until_event(sys: &System, first: u32, prefix: &str, needle: &str) -> Result<String> {
    event_after_touches(sys, Some(first), prefix, needle)
}

/// [`wait_for_event`], touching the Ingress every 2 s from annotation value `first` if given.
fn event_after_touches(
    sys: &System,
    first: Option<u32>,
    prefix: &str,
    needle: &str,
) -> Result<String> {
    let mut next = first;
    let mut touched: Option<std::time::Instant> = None;
    wait_for(
        &format!("a {prefix} Event with {needle:?}"),
        DEADLINE,
        || {
            if let Some(n) = next {
                if touched.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(2)) {
                    touch(sys, n)?;
                    next = Some(n + 1);
                    touched = Some(std::time::Instant::now());
                }
            }
            let events = sys.events_for("default", "Ingress", "my-ingress")?;
            Ok(events
                .into_iter()
                .find(|e| e.starts_with(&format!("{prefix}:")) && e.contains(needle)))
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))
}

/// The gcloud command between the backquotes of an Event message.
fn command_in(event: &str) -> Result<String> {
    event
        .split('`')
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no `command` in {event}"))
}

/// Asks for a sync of my-ingress (an annotation change), as any change to the Ingress, its
/// Services or Pods, the health refresh while a backend is not HEALTHY, or the periodic resync
/// would: the firewall check runs at each sync.
fn touch(sys: &System, n: u32) -> Result<()> {
    sys.kubectl_ok(&[
        "annotate",
        "ingress",
        "my-ingress",
        &format!("e2e.example/touch={n}"),
        "--overwrite",
    ])
    .map(drop)
}

/// One request through the load balancer, sent once (never retried through a 502).
fn status_of(sys: &System, socket: &str, path: &str) -> Result<(u16, String)> {
    sys.http_get(socket, "your-store.example", path)
}

#[test]
fn shared_vpc_refusal_gives_502_until_the_host_admin_runs_the_xpn_command() -> Result<()> {
    let mut sys = System::start_with(Options {
        emulator_args: &[
            "--port-map",
            "80=0,443=0",
            // The operator (anonymous credentials here) and the service project's own
            // credentials may change the service project only; the host's admin the host.
            "--iam-grant",
            &format!("anonymous={PROJECT}"),
            "--iam-grant",
            &format!("{SERVICE_TOKEN}={PROJECT}"),
            "--iam-grant",
            &format!("{HOST_ADMIN}={HOST}"),
        ],
        shared_vpc: Some((HOST, HOST_ADMIN)),
        ..Options::default()
    })?;
    sys.apply_path(&examples())?;
    // Anonymous, so that `--iam-grant anonymous=...` restricts the operator to the service
    // project (with its default ADC the operator would call as the metadata server's account).
    sys.start_operator(&[
        "--network-project",
        HOST,
        "--compute-credentials",
        "anonymous",
    ])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;

    // The Nodes' instances (service project) and the NEGs sit on the host's network.
    let host_network = format!(
        "{}compute/v1/projects/{HOST}/global/networks/default",
        sys.compute_url
    );
    let vm = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/local-node-1"
    ))?;
    assert_eq!(
        vm["networkInterfaces"][0]["network"],
        json!(host_network),
        "{vm}"
    );
    let negs = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups"
    ))?;
    for neg in negs["items"].as_array().into_iter().flatten() {
        assert_eq!(neg["network"], json!(host_network), "{neg}");
    }

    // The insert was refused: the XPN Event names the host project, the endpoints never pass
    // a probe, and requests get 502.
    let xpn = wait_for_event(
        &sys,
        "Normal XPN",
        "Firewall change required by security admin",
    )?;
    let command = command_in(&xpn)?;
    assert!(
        command.starts_with("gcloud compute firewall-rules create k8s-fw-l7--"),
        "{command}"
    );
    for part in [
        "--network default",
        // Takeover mode: ports in GKE's order (its controller sorts them as strings).
        "--allow tcp:50000,tcp:8080",
        "--source-ranges 130.211.0.0/22,35.191.0.0/16",
        &format!("--target-tags {NODE_TAG}"),
        &format!("--project {HOST}"),
    ] {
        assert!(command.contains(part), "{part:?} missing from {command}");
    }
    wait_for_all(&sys, "UNHEALTHY")?;
    let (code, body) = status_of(&sys, &socket, "/products")?;
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("failed_to_pick_backend"), "{body}");
    // The operator says why, with the same command.
    let warning = wait_for_event(
        &sys,
        "Warning Firewall",
        "Service default/my-products port 60000",
    )?;
    assert_eq!(command_in(&warning)?, command, "{warning}");
    assert!(sys.created_firewalls()?.is_empty());

    // The service project's own credentials cannot write the host's firewall either.
    let out = sys.gcloud_as(SERVICE_TOKEN, &command)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = command.split_whitespace().nth(4).unwrap_or_default();
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Required 'compute.firewalls.create' permission for 'projects/{HOST}/global/firewalls/{name}'"
        )),
        "{stderr}"
    );

    // The host project's admin runs it: endpoints turn HEALTHY and requests get 200.
    let out = sys.gcloud_as(HOST_ADMIN, &command)?;
    if !out.status.success() {
        bail!(
            "{command} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rule = sys.compute_get(&format!(
        "compute/v1/projects/{HOST}/global/firewalls/{name}"
    ))?;
    assert_eq!(rule["targetTags"], json!([NODE_TAG]), "{rule}");
    wait_for_all(&sys, "HEALTHY")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    sys.wait_for_response(
        &socket,
        "your-store.example",
        "/discounted",
        200,
        "discounted-products-",
    )?;
    Ok(())
}

#[test]
fn a_deleted_rule_gives_502_and_a_warning_and_a_deny_rule_blocks_only_its_port() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    wait_for_all(&sys, "HEALTHY")?;
    let rules = sys.created_firewalls()?;
    let [name] = rules.as_slice() else {
        bail!("one L7 rule expected: {rules:?}");
    };

    // Deleting the rule: the probes are dropped, so the endpoints turn UNHEALTHY after the
    // check's unhealthyThreshold, requests get 502, and the operator says why.
    sys.compute_delete(&format!(
        "compute/v1/projects/{PROJECT}/global/firewalls/{name}"
    ))?;
    wait_for_all(&sys, "UNHEALTHY")?;
    let (code, body) = status_of(&sys, &socket, "/discounted")?;
    assert_eq!(code, 502, "{body}");
    let warning = touch_until_event(
        &sys,
        1,
        "Warning Firewall",
        "Service default/my-discounted-products port 80",
    )?;
    assert!(warning.contains("tcp:8080"), "{warning}");
    let command = command_in(&warning)?;
    assert!(
        command.starts_with(&format!("gcloud compute firewall-rules create {name} ")),
        "{command}"
    );
    // Its command restores the rule (the emulator's gcloud, as any user would run it).
    let out = sys.gcloud_as("user-token", &command)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for_all(&sys, "HEALTHY")?;
    sys.wait_for_response(
        &socket,
        "your-store.example",
        "/discounted",
        200,
        "discounted-products-",
    )?;

    // A deny rule ahead of the L7 rule on the products port (50000) blocks that Service only.
    sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/global/firewalls"),
        &json!({"name": "deny-50000", "priority": 900, "sourceRanges": ["0.0.0.0/0"],
                "denied": [{"IPProtocol": "tcp", "ports": ["50000"]}]}),
    )?;
    wait_for(
        "the products endpoints UNHEALTHY, the others HEALTHY",
        DEADLINE,
        || {
            let states = endpoint_health(&sys, ZONE)?;
            let unhealthy = states.iter().filter(|s| *s == "UNHEALTHY").count();
            let healthy = states.iter().filter(|s| *s == "HEALTHY").count();
            Ok((unhealthy == 2 && healthy == 3).then_some(()))
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    let (code, body) = status_of(&sys, &socket, "/products")?;
    assert_eq!(code, 502, "{body}");
    let (code, body) = status_of(&sys, &socket, "/discounted")?;
    assert_eq!(code, 200, "{body}");
    let warning = touch_until_event(&sys, 1000, "Warning Firewall", "deny-50000")?;
    assert!(
        warning.contains("Service default/my-products port 60000"),
        "{warning}"
    );
    let command = command_in(&warning)?;
    for part in [
        "--allow tcp:50000 ",
        "--priority 899",
        &format!("--project {PROJECT}"),
    ] {
        assert!(command.contains(part), "{part:?} missing from {command}");
    }
    Ok(())
}

#[test]
fn a_three_zone_cluster_puts_every_endpoint_in_its_own_zones_neg() -> Result<()> {
    let zones = ["us-central1-a", "us-central1-b", "us-central1-c"];
    let mut sys = System::start_with(Options {
        emulator_args: &["--port-map", "80=0,443=0"],
        nodes: &zones,
        ..Options::default()
    })?;
    sys.apply_path(&examples())?;
    // No --zone: the NEG zones are the Nodes' zones (a pinned list would leave the other
    // zones' endpoints out, with a Warning).
    sys.start_operator(&[])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;

    // Each Node is an instance in its zone holding its Pod CIDR.
    let nodes = sys.get_json(&["nodes"])?;
    let mut node_zone = std::collections::BTreeMap::new();
    for node in nodes["items"].as_array().into_iter().flatten() {
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let zone = node["metadata"]["labels"]["topology.kubernetes.io/zone"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let vm = sys.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/zones/{zone}/instances/{name}"
        ))?;
        assert_eq!(
            vm["networkInterfaces"][0]["aliasIpRanges"][0]["ipCidrRange"], node["spec"]["podCIDR"],
            "{vm}"
        );
        assert_eq!(vm["tags"]["items"], json!([NODE_TAG]), "{vm}");
        node_zone.insert(name, zone);
    }
    assert_eq!(node_zone.len(), 3, "{node_zone:?}");

    // Every Pod's endpoint ends up in the NEG of its Node's zone, naming its Node.
    wait_for("all 5 endpoints attached in their zones", DEADLINE, || {
        let mut attached = 0;
        for zone in zones {
            let list = sys.compute_get(&format!(
                "compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups"
            ))?;
            for neg in item_names(&list) {
                let eps = sys.compute_post(
                    &format!("compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
                    &json!({}),
                )?;
                for item in eps["items"].as_array().into_iter().flatten() {
                    let instance = item["networkEndpoint"]["instance"].as_str().unwrap_or_default();
                    if node_zone.get(instance).map(String::as_str) != Some(zone) {
                        bail!("endpoint {item} in NEG {neg} of {zone}: its instance is in {:?}", node_zone.get(instance));
                    }
                    attached += 1;
                }
            }
        }
        Ok((attached == 5).then_some(()))
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    let pods = sys.get_json(&["pods", "-o", "wide"])?;
    let used: std::collections::BTreeSet<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["spec"]["nodeName"].as_str())
        .collect();
    assert!(used.len() >= 2, "the Pods spread over the Nodes: {used:?}");
    Ok(())
}

#[test]
fn deleting_many_ingresses_at_once_sends_one_firewall_delete() -> Result<()> {
    const INGRESSES: usize = 25;
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc}\n\
         spec: {type: NodePort, selector: {app: svc}, ports: [{port: 80, targetPort: 8080}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: svc-0, labels: {app: svc}, \
         annotations: {local.gclb-operator.dev/run: echo}}\n\
         spec: {containers: [{name: echo, image: echo, ports: [{containerPort: 8080}]}]}\n---\n",
    );
    for i in 0..INGRESSES {
        yaml.push_str(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing-{i}}}\n\
             spec: {{ingressClassName: gce, rules: [{{host: ing-{i}.example, http: {{paths: \
             [{{path: /, pathType: Prefix, backend: {{service: {{name: svc, port: {{number: 80}}}}}}}}]}}}}]}}\n---\n"
        ));
    }
    sys.apply_basics()?;
    sys.apply(&yaml)?;
    sys.start_operator(&[])?;
    wait_for(
        "every Ingress with an IP and the L7 rule",
        DEADLINE * 2,
        || {
            let list = sys.get_json(&["ingress", "-n", "default"])?;
            let with_ip = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["status"]["loadBalancer"]["ingress"][0]["ip"].is_string())
                .count();
            Ok((with_ip == INGRESSES && sys.created_firewalls()?.len() == 1).then_some(()))
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;

    sys.compute_delete("_emulator/calls")?;
    sys.kubectl_ok(&["delete", "ingress", "--all", "--wait=false"])?;
    wait_for(
        "every Ingress gone and the L7 rule deleted",
        DEADLINE * 2,
        || {
            let left = sys.get_json(&["ingress", "-n", "default"])?;
            let none = left["items"].as_array().is_none_or(|a| a.is_empty());
            Ok((none && sys.created_firewalls()?.is_empty()).then_some(()))
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    let calls: Value = sys.compute_get("_emulator/calls")?;
    assert_eq!(
        calls["methods"]["compute.firewalls.delete"],
        json!(1),
        "the shared rule is deleted once, not once per Ingress: {calls}"
    );
    Ok(())
}
