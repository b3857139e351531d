//! Global addresses and forwarding rules over real HTTP: promoting an in-use ephemeral IP to a
//! reserved address (the Compute API's documented way to keep an IP), two rules sharing one
//! reserved IP on different ports, and what the API refuses (sharing an ephemeral IP, the same
//! IP and port twice, reserving an IP another address holds, deleting an address in use).

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

async fn ok(emu: &Emulator, path: &str, body: Value) -> Value {
    let (code, v) = emu.post(path, &body).await;
    assert_eq!(code, 200, "POST {path} {body}: {v}");
    v
}

async fn refused(emu: &Emulator, path: &str, body: Value, mentions: &str) {
    let (code, v) = emu.post(path, &body).await;
    assert_eq!(code, 400, "POST {path} {body} should be refused: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(mentions),
        "{msg:?} should mention {mentions:?}"
    );
}

async fn get(emu: &Emulator, path: &str) -> Value {
    let (code, v) = emu.get(path).await;
    assert_eq!(code, 200, "GET {path}: {v}");
    v
}

#[tokio::test]
async fn an_in_use_ephemeral_ip_is_promoted_and_shared_across_ports() {
    let emu = Emulator::start(&[]);
    ok(
        &emu,
        &format!("{G}/healthChecks"),
        json!({"name": "hc", "type": "HTTP"}),
    )
    .await;
    ok(
        &emu,
        &format!("{G}/backendServices"),
        json!({"name": "bs", "healthChecks": [format!("{G}/healthChecks/hc")]}),
    )
    .await;
    ok(
        &emu,
        &format!("{G}/urlMaps"),
        json!({"name": "um", "defaultService": format!("{G}/backendServices/bs")}),
    )
    .await;
    ok(
        &emu,
        &format!("{G}/targetHttpProxies"),
        json!({"name": "tp", "urlMap": format!("{G}/urlMaps/um")}),
    )
    .await;
    let target = format!("{G}/targetHttpProxies/tp");
    ok(
        &emu,
        &format!("{G}/forwardingRules"),
        json!({"name": "fr80", "target": target, "portRange": "80"}),
    )
    .await;
    let ip = get(&emu, &format!("{G}/forwardingRules/fr80")).await["IPAddress"]
        .as_str()
        .unwrap()
        .to_owned();

    // An ephemeral IP cannot be given to a second rule.
    refused(
        &emu,
        &format!("{G}/forwardingRules"),
        json!({"name": "fr8080", "target": target, "portRange": "8080", "IPAddress": ip}),
        "neither a reserved global address",
    )
    .await;

    // Promotion: the address takes the rule's IP and is in use by it at once.
    ok(
        &emu,
        &format!("{G}/addresses"),
        json!({"name": "kept", "address": ip}),
    )
    .await;
    let addr = get(&emu, &format!("{G}/addresses/kept")).await;
    assert_eq!(addr["address"], ip.as_str(), "{addr}");
    assert_eq!(addr["status"], "IN_USE", "{addr}");
    assert!(
        addr["users"][0]
            .as_str()
            .unwrap_or_default()
            .ends_with("/forwardingRules/fr80"),
        "{addr}"
    );
    let fr = get(&emu, &format!("{G}/forwardingRules/fr80")).await;
    assert_eq!(fr["IPAddress"], ip.as_str(), "the rule is untouched: {fr}");

    // Reserved, the IP serves a second rule on another port, not on the same one.
    ok(
        &emu,
        &format!("{G}/forwardingRules"),
        json!({"name": "fr8080", "target": target, "portRange": "8080", "IPAddress": ip}),
    )
    .await;
    refused(
        &emu,
        &format!("{G}/forwardingRules"),
        json!({"name": "again80", "target": target, "portRange": "80", "IPAddress": ip}),
        "already in use by forwarding rule",
    )
    .await;
    let addr = get(&emu, &format!("{G}/addresses/kept")).await;
    assert_eq!(addr["users"].as_array().map(Vec::len), Some(2), "{addr}");

    // One IP, one reservation.
    refused(
        &emu,
        &format!("{G}/addresses"),
        json!({"name": "twice", "address": ip}),
        "already reserved by",
    )
    .await;

    // Still in use: no delete. Without users it is RESERVED and keeps its IP for a new rule.
    let (code, body) = emu
        .send(Method::DELETE, &format!("{G}/addresses/kept"), "")
        .await;
    assert_eq!(code, 400, "{body}");
    for fr in ["fr80", "fr8080"] {
        let (code, body) = emu
            .send(Method::DELETE, &format!("{G}/forwardingRules/{fr}"), "")
            .await;
        assert_eq!(code, 200, "{body}");
    }
    let addr = get(&emu, &format!("{G}/addresses/kept")).await;
    assert_eq!(addr["status"], "RESERVED", "{addr}");
    assert!(addr.get("users").is_none(), "{addr}");
    ok(
        &emu,
        &format!("{G}/forwardingRules"),
        json!({"name": "back", "target": target, "portRange": "80", "IPAddress": format!("{G}/addresses/kept")}),
    )
    .await;
    let fr = get(&emu, &format!("{G}/forwardingRules/back")).await;
    assert_eq!(fr["IPAddress"], ip.as_str(), "{fr}");
}
