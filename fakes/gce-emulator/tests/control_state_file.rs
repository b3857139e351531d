//! `--state-file`: everything survives a restart (resources, NEG endpoints, allocated
//! addresses, the reference index), with selfLinks rebased onto the new port.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::json;

const G: &str = "projects/p1/global";

#[tokio::test]
async fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    let file_s = file.to_str().unwrap();
    let mut emu = Emulator::start(&["--state-file", file_s]);
    assert_eq!(
        emu.post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc1", "type": "HTTP"})
        )
        .await
        .0,
        200
    );
    assert_eq!(
        emu.post(
            "projects/p1/zones/us-central1-b/networkEndpointGroups",
            &json!({"name": "neg1", "defaultPort": 8080})
        )
        .await
        .0,
        200
    );
    // The endpoint's VM: attachNetworkEndpoints finds it by the address.
    let vm = json!({"name": "vm1", "machineType": "zones/us-central1-b/machineTypes/e2-small",
        "disks": [{"boot": true, "initializeParams": {}}], "networkInterfaces": [{"networkIP": "127.0.0.20"}]});
    assert_eq!(
        emu.post("projects/p1/zones/us-central1-b/instances", &vm)
            .await
            .0,
        200
    );
    let attach = json!({"networkEndpoints": [{"ipAddress": "127.0.0.20"}]});
    assert_eq!(
        emu.post(
            "projects/p1/zones/us-central1-b/networkEndpointGroups/neg1/attachNetworkEndpoints",
            &attach
        )
        .await
        .0,
        200
    );
    let bs = json!({"name": "bs1", "healthChecks": [format!("{G}/healthChecks/hc1")], "backends": [{"group": "zones/us-central1-b/networkEndpointGroups/neg1"}]});
    assert_eq!(emu.post(&format!("{G}/backendServices"), &bs).await.0, 200);
    assert_eq!(
        emu.post(&format!("{G}/addresses"), &json!({"name": "a1"}))
            .await
            .0,
        200
    );
    let (_, addr) = emu.get(&format!("{G}/addresses/a1")).await;
    let old_base = emu.base.clone();
    // The file is complete once the mutation has answered (no waiting needed).
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(saved["resources"][format!("{G}/addresses/a1")].is_object());
    emu.stop();

    let emu2 = Emulator::start(&["--state-file", file_s]);
    assert_ne!(emu2.base, old_base);
    let (c, bs) = emu2.get(&format!("{G}/backendServices/bs1")).await;
    assert_eq!(c, 200);
    assert_eq!(
        bs["selfLink"],
        format!("{}{G}/backendServices/bs1", emu2.base)
    );
    assert_eq!(
        bs["healthChecks"][0],
        format!("{}{G}/healthChecks/hc1", emu2.base)
    );
    let (_, a) = emu2.get(&format!("{G}/addresses/a1")).await;
    assert_eq!(a["address"], addr["address"]);
    let (_, eps) = emu2
        .post(
            "projects/p1/zones/us-central1-b/networkEndpointGroups/neg1/listNetworkEndpoints",
            &json!({}),
        )
        .await;
    assert_eq!(
        eps["items"][0]["networkEndpoint"],
        json!({"ipAddress": "127.0.0.20", "port": 8080, "instance": "vm1"})
    );
    // The reference index was rebuilt: the health check is still in use.
    assert_eq!(
        emu2.send(Method::DELETE, &format!("{G}/healthChecks/hc1"), "")
            .await
            .0,
        400
    );
    // An admin reset is persisted too.
    emu2.admin(Method::POST, "reset", &json!({})).await;
    assert_eq!(emu2.get(&format!("{G}/backendServices/bs1")).await.0, 404);
}

#[test]
fn an_unwritable_state_file_fails_at_start_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("missing-dir").join("state.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--state-file",
            bad.to_str().unwrap(),
            "--dataplane-threads",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing-dir"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
