//! The slow cloud over real HTTP: `--slow-cloud realistic` is served back by the admin API;
//! Operations read PENDING, then RUNNING, and `wait` answers once DONE; global and zonal
//! Operations follow their own phases; the write quota refuses with `rateLimitExceeded` and
//! changes nothing, while reads go on; bad profiles are refused with a message.
//!
//! No timing is asserted: phases are either an hour (the state cannot have moved on) or short
//! enough that `wait` (which blocks up to two minutes) must come back DONE.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";
const Z: &str = "projects/p1/zones/us-central1-a";
const HOUR: u64 = 3_600_000;

async fn put_profile(emu: &Emulator, profile: Value) -> Value {
    let (code, body) = emu.admin(Method::PUT, "slow-cloud", &profile).await;
    assert_eq!(code, 200, "{body}");
    body
}

#[tokio::test]
async fn operations_go_pending_running_done_and_the_quota_refuses_writes() {
    let emu = Emulator::start(&["--slow-cloud", "realistic"]);
    let state = emu.admin_get("slow-cloud").await;
    assert_eq!(
        state["profile"]["operations"],
        json!({"global": {"pendingMs": 500, "runningMs": 2500},
               "zonal": {"pendingMs": 300, "runningMs": 1200}}),
        "{state}"
    );
    assert_eq!(state["profile"]["latencyMs"]["get"], 120, "{state}");

    // Global Operations pending for an hour, zonal ones running for an hour; no latency.
    put_profile(
        &emu,
        json!({"operations": {"global": {"pendingMs": HOUR}, "zonal": {"runningMs": HOUR}}}),
    )
    .await;
    let (code, op) = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc1", "type": "TCP"}),
        )
        .await;
    assert_eq!(code, 200, "{op}");
    assert_eq!(op["status"], "PENDING", "{op}");
    assert!(
        op["startTime"].is_null() && op["insertTime"].is_string(),
        "{op}"
    );
    let name = op["name"].as_str().unwrap().to_string();
    let (_, polled) = emu.get(&format!("{G}/operations/{name}")).await;
    assert_eq!(polled["status"], "PENDING", "{polled}");

    let (code, zonal) = emu
        .post(
            &format!("{Z}/networkEndpointGroups"),
            &json!({"name": "neg1", "networkEndpointType": "GCE_VM_IP_PORT", "defaultPort": 80}),
        )
        .await;
    assert_eq!(code, 200, "{zonal}");
    assert_eq!(zonal["status"], "RUNNING", "{zonal}");
    assert!(zonal["startTime"].is_string() && zonal["endTime"].is_null());

    // Short phases: `wait` blocks until DONE (it may block up to two minutes).
    put_profile(
        &emu,
        json!({"operations": {"global": {"pendingMs": 100, "runningMs": 200}}}),
    )
    .await;
    let (_, op) = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc2", "type": "TCP"}),
        )
        .await;
    assert_ne!(op["status"], "DONE", "{op}");
    let name = op["name"].as_str().unwrap();
    let (code, waited) = emu
        .send(Method::POST, &format!("{G}/operations/{name}/wait"), "")
        .await;
    assert_eq!(
        (code, waited["status"].as_str()),
        (200, Some("DONE")),
        "{waited}"
    );
    assert_eq!(waited["progress"], 100, "{waited}");
    assert!(waited["endTime"].is_string(), "{waited}");

    // A write quota that cannot refill within the test: the second write is refused.
    put_profile(
        &emu,
        json!({"quota": {"writesPerSecond": 0.001, "code": 429}}),
    )
    .await;
    let first = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc3", "type": "TCP"}),
        )
        .await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first.1["status"], "DONE", "phases are back to zero");
    let (code, refused) = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc4", "type": "TCP"}),
        )
        .await;
    assert_eq!(code, 429, "{refused}");
    assert_eq!(refused["error"]["errors"][0]["reason"], "rateLimitExceeded");
    assert_eq!(refused["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(emu.get(&format!("{G}/healthChecks/hc4")).await.0, 404);
    for _ in 0..5 {
        assert_eq!(emu.get(&format!("{G}/healthChecks/hc3")).await.0, 200);
    }
    let state = emu.admin_get("slow-cloud").await;
    assert_eq!(
        state["refused"],
        json!({"writes": 1, "reads": 0}),
        "{state}"
    );

    // The default code is Compute's 403.
    put_profile(&emu, json!({"quota": {"readsPerSecond": 0.001}})).await;
    assert_eq!(emu.get(&format!("{G}/healthChecks/hc3")).await.0, 200);
    let (code, refused) = emu.get(&format!("{G}/healthChecks/hc3")).await;
    assert_eq!(
        (code, &refused["error"]["errors"][0]["reason"]),
        (403, &json!("rateLimitExceeded")),
        "{refused}"
    );

    // Bad profiles are refused and leave the profile alone; DELETE turns it off.
    for bad in [
        json!({"latencyMs": {"gets": 1}}),
        json!({"preset": "instant"}),
        json!({"quota": {"code": 500}}),
    ] {
        let (code, body) = emu.admin(Method::PUT, "slow-cloud", &bad).await;
        assert_eq!(code, 400, "{bad} -> {body}");
        assert!(
            body["error"].as_str().unwrap().contains("slow-cloud"),
            "{body}"
        );
    }
    let (code, off) = emu.admin(Method::DELETE, "slow-cloud", &json!({})).await;
    assert_eq!(code, 200);
    assert_eq!(off["profile"]["quota"]["readsPerSecond"], 0.0, "{off}");
    assert_eq!(emu.get(&format!("{G}/healthChecks/hc3")).await.0, 200);
}
