//! The network behind the load balancer, as the control plane checks it: NEG endpoints against
//! their instances (Compute API reference, `NetworkEndpoint`: the instance in the NEG's zone,
//! the IP its primary address or in an alias range), Shared VPC credentials (`--iam-grant`),
//! and a new `default` network with the default network's rules.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const P: &str = "projects/p1";
const A: &str = "us-central1-a";
const B: &str = "us-central1-b";

async fn attach(emu: &Emulator, zone: &str, eps: Value) -> (u16, Value) {
    emu.post(
        &format!("{P}/zones/{zone}/networkEndpointGroups/neg/attachNetworkEndpoints"),
        &json!({ "networkEndpoints": eps }),
    )
    .await
}

async fn node(emu: &Emulator, zone: &str, name: &str, ip: &str, pods: &str) {
    let vm = json!({"name": name, "machineType": format!("zones/{zone}/machineTypes/e2-small"),
        "disks": [{"boot": true, "initializeParams": {}}],
        "networkInterfaces": [{"networkIP": ip, "aliasIpRanges": [{"ipCidrRange": pods}]}]});
    let (code, body) = emu.post(&format!("{P}/zones/{zone}/instances"), &vm).await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn neg_endpoints_must_be_held_by_an_instance_of_the_negs_zone_and_network() {
    let emu = Emulator::start(&[]);
    node(&emu, A, "node-a", "127.32.0.10", "127.64.1.0/24").await;
    node(&emu, B, "node-b", "127.32.0.11", "127.64.2.0/24").await;
    for zone in [A, B] {
        let (code, body) = emu
            .post(
                &format!("{P}/zones/{zone}/networkEndpointGroups"),
                &json!({"name": "neg", "defaultPort": 8080}),
            )
            .await;
        assert_eq!(code, 200, "{body}");
    }
    // A Pod of node-b (zone b) put in zone a's NEG: its instance is not found in that zone.
    let (code, body) = attach(
        &emu,
        A,
        json!([{"ipAddress": "127.64.2.5", "instance": "node-b"}]),
    )
    .await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(
        body["error"]["message"],
        format!("The resource '{P}/zones/{A}/instances/node-b' was not found")
    );
    // An address outside the instance's primary IP and alias ranges.
    let (code, body) = attach(
        &emu,
        A,
        json!([{"ipAddress": "127.64.2.5", "instance": "node-a"}]),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"]["errors"][0]["reason"], "invalid");
    assert_eq!(
        body["error"]["message"],
        "Invalid value for field 'resource.ipAddress': '127.64.2.5'. Specified IP address 127.64.2.5 doesn't belong to the (sub)network default or to the instance node-a."
    );
    // A failed attach changes nothing; a valid one is kept, with its instance found by the
    // address when the request names none, and the primary address when it names no IP.
    let (code, body) = attach(
        &emu,
        B,
        json!([{"ipAddress": "127.64.2.5", "instance": "node-b"}, {"ipAddress": "127.64.2.6"},
               {"instance": "node-b", "port": 9000}]),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (_, list) = emu
        .post(
            &format!("{P}/zones/{B}/networkEndpointGroups/neg/listNetworkEndpoints"),
            &json!({}),
        )
        .await;
    let eps: Vec<Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["networkEndpoint"].clone())
        .collect();
    assert_eq!(
        eps,
        vec![
            json!({"ipAddress": "127.32.0.11", "port": 9000, "instance": "node-b"}),
            json!({"ipAddress": "127.64.2.5", "port": 8080, "instance": "node-b"}),
            json!({"ipAddress": "127.64.2.6", "port": 8080, "instance": "node-b"}),
        ]
    );
    let (_, a_list) = emu
        .post(
            &format!("{P}/zones/{A}/networkEndpointGroups/neg/listNetworkEndpoints"),
            &json!({}),
        )
        .await;
    assert!(
        a_list["items"].as_array().is_none_or(|a| a.is_empty()),
        "{a_list}"
    );

    // An instance on another network does not hold addresses for the NEG's network.
    emu.post(&format!("{P}/global/networks"), &json!({"name": "other"}))
        .await;
    let (code, body) = emu
        .post(
            &format!("{P}/zones/{A}/networkEndpointGroups"),
            &json!({"name": "neg-other", "defaultPort": 8080, "network": "global/networks/other"}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = emu
        .post(
            &format!("{P}/zones/{A}/networkEndpointGroups/neg-other/attachNetworkEndpoints"),
            &json!({"networkEndpoints": [{"ipAddress": "127.64.1.5", "instance": "node-a"}]}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("doesn't belong to the (sub)network other or to the instance node-a"),
        "{body}"
    );
}

#[tokio::test]
async fn without_validation_any_endpoint_is_accepted() {
    let emu = Emulator::start(&["--validate-neg-endpoints=false"]);
    emu.post(
        &format!("{P}/zones/{A}/networkEndpointGroups"),
        &json!({"name": "neg", "defaultPort": 8080}),
    )
    .await;
    let (code, body) = attach(
        &emu,
        A,
        json!([{"ipAddress": "127.9.9.9", "instance": "nowhere"}]),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn service_project_credentials_may_not_write_the_host_firewall() {
    let emu = Emulator::start(&[
        "--iam-grant",
        "svc-token=svc",
        "--iam-grant",
        "admin-token=host,svc",
    ]);
    let send = async |token: &str, method: Method, path: &str, body: Value| -> (u16, Value) {
        let r = emu
            .http
            .request(method, format!("{}{path}", emu.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    };
    let fw = json!({"name": "k8s-fw-l7--x", "network": "global/networks/default",
        "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"], "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}]});
    let (code, body) = send(
        "svc-token",
        Method::POST,
        "projects/host/global/firewalls",
        fw.clone(),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["error"]["errors"][0]["reason"], "forbidden");
    assert_eq!(
        body["error"]["message"],
        "Required 'compute.firewalls.create' permission for 'projects/host/global/firewalls/k8s-fw-l7--x'"
    );
    // Reading is allowed; nothing was written.
    let (code, _) = send(
        "svc-token",
        Method::GET,
        "projects/host/global/firewalls/k8s-fw-l7--x",
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    // The service project's own resources, and the host's admin in the host, are fine.
    let (code, body) = send(
        "svc-token",
        Method::POST,
        "projects/svc/global/healthChecks",
        json!({"name": "hc", "type": "TCP"}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(
        "admin-token",
        Method::POST,
        "projects/host/global/firewalls",
        fw,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(
        "svc-token",
        Method::DELETE,
        "projects/host/global/firewalls/k8s-fw-l7--x",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Required 'compute.firewalls.delete' permission for 'projects/host/global/firewalls/k8s-fw-l7--x'"
    );
}

#[tokio::test]
async fn a_new_default_network_gets_the_default_rules() {
    let emu = Emulator::start(&[]);
    for rule in ["icmp", "internal", "rdp", "ssh"] {
        let (code, body) = emu
            .send(
                Method::DELETE,
                &format!("{P}/global/firewalls/default-allow-{rule}"),
                "",
            )
            .await;
        assert_eq!(code, 200, "{body}");
    }
    let (code, body) = emu
        .send(Method::DELETE, &format!("{P}/global/networks/default"), "")
        .await;
    assert_eq!(code, 200, "{body}");
    assert!(emu.keys("p1").await.is_empty());
    let (code, body) = emu
        .post(&format!("{P}/global/networks"), &json!({"name": "default"}))
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(emu.keys("p1").await, Emulator::initial_keys("p1"));
}
