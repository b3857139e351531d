//! The Compute API's v1, beta and alpha surfaces over one store, over real HTTP: a resource
//! written through one version is read through the others, each answer's links and Operations
//! are in the version asked for, version-only fields are kept and shown only where the version
//! has them, and gcloud's `beta` and `alpha` compute commands work unchanged. Also the
//! collections GKE's Ingress controller lists beside the global ones: zonal instanceGroups and
//! the regional twins of urlMaps and backendServices (list and get; writes refused).

mod control_support;

use std::process::Command;

use control_support::Emulator;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

/// `method {root}compute/{version}/{path}` -> (status, JSON).
async fn call(
    emu: &Emulator,
    method: reqwest::Method,
    version: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut rb = emu
        .http
        .request(method, format!("{}compute/{version}/{path}", emu.root));
    if let Some(b) = body {
        rb = rb.json(b);
    }
    let r = rb.send().await.expect("request");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn get(emu: &Emulator, version: &str, path: &str) -> (u16, Value) {
    call(emu, reqwest::Method::GET, version, path, None).await
}

async fn post(emu: &Emulator, version: &str, path: &str, body: &Value) -> (u16, Value) {
    call(emu, reqwest::Method::POST, version, path, Some(body)).await
}

fn link(emu: &Emulator, version: &str, path: &str) -> String {
    format!("{}compute/{version}/{path}", emu.root)
}

#[tokio::test]
async fn a_resource_written_through_one_version_is_read_through_the_others() {
    let emu = Emulator::start(&[]);
    // Inserted through beta: the Operation and its links are beta's.
    let (c, op) = post(
        &emu,
        "beta",
        &format!("{G}/healthChecks"),
        &json!({"name": "hc", "type": "HTTP", "httpHealthCheck": {"port": 8080}}),
    )
    .await;
    assert_eq!(c, 200, "{op}");
    assert_eq!(op["kind"], "compute#operation");
    let op_path = format!("{G}/operations/{}", op["name"].as_str().unwrap());
    assert_eq!(op["selfLink"], link(&emu, "beta", &op_path));
    assert_eq!(
        op["targetLink"],
        link(&emu, "beta", &format!("{G}/healthChecks/hc"))
    );
    // The same Operation polled through v1 is v1's.
    let (c, op_v1) = post(&emu, "v1", &format!("{op_path}/wait"), &json!({})).await;
    assert_eq!(c, 200, "{op_v1}");
    assert_eq!(op_v1["status"], "DONE");
    assert_eq!(op_v1["selfLink"], link(&emu, "v1", &op_path));
    // Read through v1 and alpha.
    let (c, hc) = get(&emu, "v1", &format!("{G}/healthChecks/hc")).await;
    assert_eq!(c, 200, "{hc}");
    assert_eq!(hc["httpHealthCheck"]["port"], 8080);
    assert_eq!(
        hc["selfLink"],
        link(&emu, "v1", &format!("{G}/healthChecks/hc"))
    );
    assert!(
        hc.get("selfLinkWithId").is_none(),
        "v1 has no selfLinkWithId"
    );
    let (c, hc_alpha) = get(&emu, "alpha", &format!("{G}/healthChecks/hc")).await;
    assert_eq!(c, 200);
    assert_eq!(hc_alpha["id"], hc["id"]);
    assert_eq!(
        hc_alpha["selfLinkWithId"],
        link(
            &emu,
            "alpha",
            &format!("{G}/healthChecks/{}", hc["id"].as_str().unwrap())
        )
    );

    // The reverse: inserted through v1 with a beta reference; read through beta, where its
    // references are beta's, and listed through alpha.
    let (c, v) = post(
        &emu,
        "v1",
        &format!("{G}/backendServices"),
        &json!({"name": "bs", "healthChecks": [link(&emu, "beta", &format!("{G}/healthChecks/hc"))]}),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    let (c, bs) = get(&emu, "beta", &format!("{G}/backendServices/bs")).await;
    assert_eq!(c, 200, "{bs}");
    assert_eq!(
        bs["healthChecks"][0],
        link(&emu, "beta", &format!("{G}/healthChecks/hc"))
    );
    assert_eq!(
        bs["selfLink"],
        link(&emu, "beta", &format!("{G}/backendServices/bs"))
    );
    let (c, list) = get(&emu, "alpha", &format!("{G}/backendServices")).await;
    assert_eq!(c, 200, "{list}");
    assert_eq!(
        list["selfLink"],
        link(&emu, "alpha", &format!("{G}/backendServices"))
    );
    assert_eq!(list["items"][0]["name"], "bs");
    assert_eq!(
        list["items"][0]["healthChecks"][0],
        link(&emu, "alpha", &format!("{G}/healthChecks/hc"))
    );
    // Stored once: the state holds v1 links only.
    let state = emu.admin_get("state").await;
    let stored = &state["resources"]["projects/p1/global/backendServices/bs"];
    assert_eq!(
        stored["healthChecks"][0],
        link(&emu, "v1", &format!("{G}/healthChecks/hc"))
    );
    // Other versions do not exist.
    let (c, _) = get(&emu, "v2", &format!("{G}/healthChecks/hc")).await;
    assert_eq!(c, 404);
}

#[tokio::test]
async fn version_only_fields_are_kept_and_shown_only_where_the_version_has_them() {
    let emu = Emulator::start(&[]);
    let bs_path = format!("{G}/backendServices/bs");
    // `dynamicForwarding` exists in beta and alpha, not in v1; `vpcNetworkScope` only in alpha.
    let (c, v) = post(
        &emu,
        "v1",
        &format!("{G}/backendServices"),
        &json!({"name": "bs", "dynamicForwarding": {"ipPortSelection": {"enabled": true}}}),
    )
    .await;
    assert_eq!(c, 400, "v1 has no dynamicForwarding: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"dynamicForwarding\""),
        "{v}"
    );
    let (c, v) = post(
        &emu,
        "beta",
        &format!("{G}/backendServices"),
        &json!({"name": "bs", "dynamicForwarding": {"ipPortSelection": {"enabled": true}}}),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    let (_, beta) = get(&emu, "beta", &bs_path).await;
    assert_eq!(
        beta["dynamicForwarding"]["ipPortSelection"]["enabled"],
        true
    );
    let (_, v1) = get(&emu, "v1", &bs_path).await;
    assert!(v1.get("dynamicForwarding").is_none(), "{v1}");
    // A PUT through v1 keeps what v1 cannot see.
    let mut body = v1.clone();
    body["description"] = json!("updated through v1");
    let (c, v) = call(&emu, reqwest::Method::PUT, "v1", &bs_path, Some(&body)).await;
    assert_eq!(c, 200, "{v}");
    let (_, beta) = get(&emu, "beta", &bs_path).await;
    assert_eq!(beta["description"], "updated through v1");
    assert_eq!(
        beta["dynamicForwarding"]["ipPortSelection"]["enabled"], true,
        "{beta}"
    );
    // A patch through beta may not set an alpha-only field; through alpha it may.
    let scope = json!({"vpcNetworkScope": "GLOBAL_VPC_NETWORK"});
    let (c, _) = call(&emu, reqwest::Method::PATCH, "beta", &bs_path, Some(&scope)).await;
    assert_eq!(c, 400);
    let (c, v) = call(
        &emu,
        reqwest::Method::PATCH,
        "alpha",
        &bs_path,
        Some(&scope),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    let (_, alpha) = get(&emu, "alpha", &bs_path).await;
    assert_eq!(alpha["vpcNetworkScope"], "GLOBAL_VPC_NETWORK");
    let (_, beta) = get(&emu, "beta", &bs_path).await;
    assert!(beta.get("vpcNetworkScope").is_none(), "{beta}");
}

#[tokio::test]
async fn instance_groups_and_regional_collections_answer_list_and_get() {
    let emu = Emulator::start(&[]);
    let igs = "projects/p1/zones/us-central1-a/instanceGroups";
    for version in ["v1", "beta", "alpha"] {
        let (c, v) = get(&emu, version, igs).await;
        assert_eq!(c, 200, "{v}");
        assert_eq!(v["kind"], "compute#instanceGroupList");
        assert_eq!(v["selfLink"], link(&emu, version, igs));
        for coll in ["urlMaps", "backendServices"] {
            let path = format!("projects/p1/regions/us-central1/{coll}");
            let (c, v) = get(&emu, version, &path).await;
            assert_eq!(c, 200, "{path}: {v}");
            assert_eq!(v["items"].as_array().map_or(0, Vec::len), 0);
            let (c, _) = get(&emu, version, &format!("{path}/k8s2-um-x")).await;
            assert_eq!(c, 404);
        }
    }
    let (c, _) = get(&emu, "v1", &format!("{igs}/k8s-ig--uid")).await;
    assert_eq!(c, 404);
    let (c, v) = get(&emu, "v1", "projects/p1/regions/mars-north1/urlMaps").await;
    assert_eq!(c, 404, "an unknown region: {v}");
    // Writes are refused with a message that says what to use.
    let (c, v) = post(&emu, "v1", igs, &json!({"name": "ig"})).await;
    assert_eq!(c, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("network endpoint groups"),
        "{v}"
    );
    // Regional backend services exist for the regional Application Load Balancers only.
    let (c, v) = post(
        &emu,
        "beta",
        "projects/p1/regions/us-central1/backendServices",
        &json!({"name": "bs", "loadBalancingScheme": "EXTERNAL"}),
    )
    .await;
    assert_eq!(c, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("INTERNAL_MANAGED or EXTERNAL_MANAGED"),
        "{v}"
    );
    // Instance-group backends stay refused.
    let (c, v) = post(
        &emu,
        "v1",
        &format!("{G}/backendServices"),
        &json!({"name": "bs", "backends": [{"group": format!("{igs}/k8s-ig--uid")}]}),
    )
    .await;
    assert_eq!(c, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("networkEndpointGroups"),
        "{v}"
    );
}

/// Runs `gcloud {track} compute ARGS --format=json` against `endpoint`.
fn gcloud(cfg: &std::path::Path, endpoint: &str, track: &str, args: &[&str]) -> Value {
    let token = cfg.join("token");
    std::fs::write(&token, "fake-token").unwrap();
    let mut cmd = Command::new("gcloud");
    if !track.is_empty() {
        cmd.arg(track);
    }
    let out = cmd
        .arg("compute")
        .args(args)
        .arg("--format=json")
        .env("CLOUDSDK_CONFIG", cfg)
        .env("CLOUDSDK_CORE_PROJECT", "p1")
        .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
        .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
        .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
        .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
        .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", endpoint)
        .output()
        .expect("gcloud is required for this test (see make deps)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gcloud {track} compute {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(if stdout.trim().is_empty() {
        "null"
    } else {
        &stdout
    })
    .expect("gcloud printed JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gclouds_beta_and_alpha_compute_commands_work_against_the_emulator() {
    let emu = Emulator::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    // The override is the emulator's root: gcloud appends each track's own path
    // (/compute/beta/, /compute/alpha/); an override with a path is used as is for every track.
    let root = emu.root.clone();
    let created = gcloud(
        dir.path(),
        &root,
        "beta",
        &["health-checks", "create", "http", "hc1", "--port=8080"],
    );
    assert_eq!(
        created[0]["selfLink"],
        link(&emu, "beta", &format!("{G}/healthChecks/hc1"))
    );
    gcloud(
        dir.path(),
        &root,
        "alpha",
        &["health-checks", "create", "tcp", "hc2", "--port=9000"],
    );
    let listed = gcloud(dir.path(), &root, "alpha", &["health-checks", "list"]);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hc1", "hc2"]);
    assert!(listed[0]["selfLinkWithId"]
        .as_str()
        .unwrap()
        .contains("/compute/alpha/"));
    let described = gcloud(dir.path(), &root, "", &["health-checks", "describe", "hc2"]);
    assert_eq!(described["tcpHealthCheck"]["port"], 9000);
    assert_eq!(
        described["selfLink"],
        link(&emu, "v1", &format!("{G}/healthChecks/hc2"))
    );
    let (c, v) = get(&emu, "v1", "projects/p1/zones/us-central1-a/instanceGroups").await;
    assert_eq!(c, 200, "{v}");
    let igs = gcloud(
        dir.path(),
        &root,
        "beta",
        &[
            "instance-groups",
            "unmanaged",
            "list",
            "--zones=us-central1-a",
        ],
    );
    assert_eq!(igs, json!([]));
    // Two resources in one command: gcloud's batch, POST /batch/compute/beta.
    gcloud(
        dir.path(),
        &root,
        "beta",
        &["health-checks", "delete", "hc1", "hc2", "--quiet"],
    );
    let (_, v) = get(&emu, "v1", &format!("{G}/healthChecks")).await;
    assert_eq!(v["items"].as_array().map_or(0, Vec::len), 0, "{v}");
    let calls = emu.admin_get("calls").await;
    assert_eq!(
        calls["methods"]["compute.healthChecks.delete"], 2,
        "{calls}"
    );
}
