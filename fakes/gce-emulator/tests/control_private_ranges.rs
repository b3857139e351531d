//! `--private-ranges`: instances (and so NEG endpoints) in RFC 1918 space where the host routes
//! it, as a VPC-native GKE node holds its Pods' addresses (its alias IP range); loopback only
//! without the flag; public ranges refused as flag values (`network/ranges.rs`).

mod control_support;

use control_support::Emulator;
use serde_json::{json, Value};

const P: &str = "projects/p1";
const Z: &str = "us-central1-a";

/// A GKE-like node: primary address in the subnet range, Pod CIDR as alias range `pods`.
async fn node(emu: &Emulator, name: &str, ip: &str, pods: &str) -> (u16, Value) {
    let vm = json!({"name": name, "machineType": format!("zones/{Z}/machineTypes/e2-medium"),
        "disks": [{"boot": true, "initializeParams": {}}],
        "networkInterfaces": [{"networkIP": ip,
            "aliasIpRanges": [{"ipCidrRange": pods, "subnetworkRangeName": "pods"}]}]});
    emu.post(&format!("{P}/zones/{Z}/instances"), &vm).await
}

async fn neg_and_attach(emu: &Emulator, ip: &str) -> (u16, Value) {
    let (code, body) = emu
        .post(
            &format!("{P}/zones/{Z}/networkEndpointGroups"),
            &json!({"name": "neg", "defaultPort": 8080}),
        )
        .await;
    assert!(code == 200 || code == 409, "{body}");
    emu.post(
        &format!("{P}/zones/{Z}/networkEndpointGroups/neg/attachNetworkEndpoints"),
        &json!({"networkEndpoints": [{"ipAddress": ip, "instance": "node-1"}]}),
    )
    .await
}

#[tokio::test]
async fn a_private_range_is_accepted_when_configured() {
    let emu = Emulator::start(&["--private-ranges", "10.128.0.0/20,10.244.0.0/16"]);
    let (code, body) = node(&emu, "node-1", "10.128.0.2", "10.244.0.0/24").await;
    assert_eq!(code, 200, "{body}");
    let (code, vm) = emu.get(&format!("{P}/zones/{Z}/instances/node-1")).await;
    assert_eq!(code, 200, "{vm}");
    assert_eq!(vm["networkInterfaces"][0]["networkIP"], "10.128.0.2");
    assert_eq!(
        vm["networkInterfaces"][0]["aliasIpRanges"][0]["ipCidrRange"],
        "10.244.0.0/24"
    );
    // A Pod address of the node is attached and listed as sent.
    let (code, body) = neg_and_attach(&emu, "10.244.0.5").await;
    assert_eq!(code, 200, "{body}");
    let (_, list) = emu
        .post(
            &format!("{P}/zones/{Z}/networkEndpointGroups/neg/listNetworkEndpoints"),
            &json!({}),
        )
        .await;
    assert_eq!(
        list["items"][0]["networkEndpoint"],
        json!({"ipAddress": "10.244.0.5", "port": 8080, "instance": "node-1"})
    );
    // Inside the configured ranges but not the node's: still refused, as the real API words it.
    let (code, body) = neg_and_attach(&emu, "10.244.1.5").await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid value for field 'resource.ipAddress': '10.244.1.5'. Specified IP address 10.244.1.5 doesn't belong to the (sub)network default or to the instance node-1."
    );
    // An instance address outside every configured range is refused.
    let (code, body) = node(&emu, "node-2", "192.168.0.2", "10.244.1.0/24").await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid value for field 'resource.networkInterfaces[0].networkIP': '192.168.0.2'. The emulator only uses loopback addresses and its --private-ranges (10.128.0.0/20, 10.244.0.0/16): give an address or range inside 127.0.0.0/8 or one of those."
    );
}

#[tokio::test]
async fn a_private_range_is_refused_when_not_configured() {
    let emu = Emulator::start(&[]);
    let (code, body) = node(&emu, "node-1", "10.128.0.2", "10.244.0.0/24").await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"]["errors"][0]["reason"], "invalid");
    assert_eq!(
        body["error"]["message"],
        "Invalid value for field 'resource.networkInterfaces[0].networkIP': '10.128.0.2'. The emulator only uses loopback addresses: give an address or range inside 127.0.0.0/8, or start it with --private-ranges naming the RFC 1918 range that holds this one."
    );
    // So no instance holds a Pod address there, and its endpoint is refused.
    let (code, body) = emu
        .post(
            &format!("{P}/zones/{Z}/networkEndpointGroups"),
            &json!({"name": "neg", "defaultPort": 8080}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = emu
        .post(
            &format!("{P}/zones/{Z}/networkEndpointGroups/neg/attachNetworkEndpoints"),
            &json!({"networkEndpoints": [{"ipAddress": "10.244.0.5"}]}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid value for field 'resource.ipAddress': '10.244.0.5'. Specified IP address 10.244.0.5 doesn't belong to the (sub)network default."
    );
}

#[test]
fn a_public_range_is_refused_as_a_flag_value() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--private-ranges",
            "10.244.0.0/16,35.191.0.0/16",
        ])
        .output()
        .expect("run gce-emulator");
    assert!(!out.status.success(), "a public range was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"35.191.0.0/16\" is not inside RFC 1918 private space"),
        "{err}"
    );
}
