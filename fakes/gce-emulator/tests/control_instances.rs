//! Instances and Shared VPC in the emulator's control plane, against the real binary: what the
//! Compute API stores and what it refuses, and gcloud's `compute instances create/list/describe`
//! and `compute shared-vpc` commands working unchanged.

mod control_support;

use std::process::Command;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const Z: &str = "projects/p1/zones/us-central1-a";

fn vm(name: &str, nic: Value) -> Value {
    json!({"name": name, "machineType": "zones/us-central1-a/machineTypes/e2-medium",
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
        "networkInterfaces": [nic],
        "tags": {"items": ["node", "gke-e2e"]},
        "serviceAccounts": [{"email": "default", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]})
}

#[tokio::test]
async fn instances_are_stored_as_the_api_returns_them() {
    let emu = Emulator::start(&[]);
    let (c, op) = emu
        .post(
            &format!("{Z}/instances"),
            &vm(
                "node-a",
                json!({"networkIP": "127.0.1.1", "aliasIpRanges": [{"ipCidrRange": "127.64.1.0/24", "subnetworkRangeName": "pods"}]}),
            ),
        )
        .await;
    assert_eq!(c, 200, "{op}");
    assert_eq!(op["kind"], "compute#operation");
    assert!(op["zone"]
        .as_str()
        .unwrap()
        .ends_with("/zones/us-central1-a"));
    let (c, v) = emu.get(&format!("{Z}/instances/node-a")).await;
    assert_eq!(c, 200);
    assert_eq!(v["kind"], "compute#instance");
    assert_eq!(v["status"], "RUNNING");
    assert_eq!(
        v["machineType"],
        format!("{}{Z}/machineTypes/e2-medium", emu.base)
    );
    let nic = &v["networkInterfaces"][0];
    assert_eq!(nic["name"], "nic0");
    assert_eq!(nic["networkIP"], "127.0.1.1");
    assert_eq!(
        nic["network"],
        format!("{}projects/p1/global/networks/default", emu.base)
    );
    assert_eq!(
        nic["subnetwork"],
        format!(
            "{}projects/p1/regions/us-central1/subnetworks/default",
            emu.base
        )
    );
    assert_eq!(nic["aliasIpRanges"][0]["ipCidrRange"], "127.64.1.0/24");
    assert_eq!(v["disks"][0]["boot"], true);
    assert_eq!(
        v["disks"][0]["source"],
        format!("{}{Z}/disks/node-a", emu.base)
    );
    assert!(v["disks"][0].get("initializeParams").is_none());
    assert_eq!(v["tags"]["items"], json!(["gke-e2e", "node"]));
    let email = v["serviceAccounts"][0]["email"].as_str().unwrap();
    assert!(
        email.ends_with("-compute@developer.gserviceaccount.com"),
        "'default' is the project's default service account: {email}"
    );
    for f in [
        "fingerprint",
        "labelFingerprint",
        "id",
        "creationTimestamp",
        "selfLink",
        "zone",
    ] {
        assert!(v.get(f).is_some(), "{f} missing: {v}");
    }

    // A second instance without networkIP gets one allocated; list and aggregatedList see both.
    let (c, _) = emu
        .post(
            "projects/p1/zones/us-central1-b/instances",
            &json!({"name": "node-b", "machineType": "zones/us-central1-b/machineTypes/e2-medium",
                    "disks": [{"boot": true, "initializeParams": {}}]}),
        )
        .await;
    assert_eq!(c, 200);
    let (_, b) = emu
        .get("projects/p1/zones/us-central1-b/instances/node-b")
        .await;
    assert_eq!(b["networkInterfaces"][0]["networkIP"], "127.32.0.2");
    let (_, list) = emu.get(&format!("{Z}/instances")).await;
    assert_eq!(list["kind"], "compute#instanceList");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let (_, agg) = emu.get("projects/p1/aggregated/instances").await;
    assert_eq!(agg["kind"], "compute#instanceAggregatedList");
    assert_eq!(
        agg["items"]["zones/us-central1-a"]["instances"][0]["name"],
        "node-a"
    );
    assert_eq!(
        agg["items"]["zones/us-central1-b"]["instances"][0]["name"],
        "node-b"
    );

    // setTags needs the current tags fingerprint.
    let (c, e) = emu
        .post(
            &format!("{Z}/instances/node-a/setTags"),
            &json!({"items": ["x"], "fingerprint": "stale"}),
        )
        .await;
    assert_eq!(c, 412, "{e}");
    assert_eq!(e["error"]["errors"][0]["reason"], "conditionNotMet");
    let (c, _) = emu
        .post(
            &format!("{Z}/instances/node-a/setTags"),
            &json!({"items": []}),
        )
        .await;
    assert_eq!(c, 412, "a missing fingerprint is refused too");
    let fp = v["tags"]["fingerprint"].clone();
    let (c, op) = emu
        .post(
            &format!("{Z}/instances/node-a/setTags"),
            &json!({"items": ["web"], "fingerprint": fp}),
        )
        .await;
    assert_eq!((c, op["operationType"].as_str()), (200, Some("setTags")));
    let (_, v2) = emu.get(&format!("{Z}/instances/node-a")).await;
    assert_eq!(v2["tags"]["items"], json!(["web"]));
    assert_ne!(v2["tags"]["fingerprint"], fp);

    // The network is in use by the instance.
    let (c, e) = emu
        .send(Method::DELETE, "projects/p1/global/networks/default", "")
        .await;
    assert_eq!(c, 400, "{e}");
    assert_eq!(
        e["error"]["errors"][0]["reason"],
        "resourceInUseByAnotherResource"
    );
    let (c, _) = emu
        .send(Method::DELETE, &format!("{Z}/instances/node-a"), "")
        .await;
    assert_eq!(c, 200);
    assert_eq!(emu.get(&format!("{Z}/instances/node-a")).await.0, 404);
}

#[tokio::test]
async fn instances_refuse_what_the_api_refuses() {
    let emu = Emulator::start(&[]);
    let ok = |name: &str| {
        vm(
            name,
            json!({"networkIP": "127.0.1.1", "aliasIpRanges": [{"ipCidrRange": "127.64.1.0/24"}]}),
        )
    };
    assert_eq!(emu.post(&format!("{Z}/instances"), &ok("a")).await.0, 200);
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            {
                let mut v = ok("b");
                v.as_object_mut().unwrap().remove("machineType");
                v
            },
            400,
            "resource.machineType",
        ),
        (
            {
                let mut v = ok("b");
                v["machineType"] = json!("zones/us-central1-b/machineTypes/e2-medium");
                v
            },
            400,
            "resource.machineType",
        ),
        (
            {
                let mut v = ok("b");
                v.as_object_mut().unwrap().remove("disks");
                v
            },
            400,
            "resource.disks",
        ),
        (
            {
                let mut v = ok("b");
                v["disks"][0]["boot"] = json!(false);
                v
            },
            400,
            "resource.disks[0].boot",
        ),
        (
            vm("b", json!({"networkIP": "127.0.1.1"})),
            400,
            "resource.networkInterfaces[0].networkIP",
        ),
        (
            vm(
                "b",
                json!({"aliasIpRanges": [{"ipCidrRange": "127.64.0.0/16"}]}),
            ),
            400,
            "resource.networkInterfaces[0].aliasIpRanges[0].ipCidrRange",
        ),
        (
            vm("b", json!({"networkIP": "10.0.0.5"})),
            400,
            "resource.networkInterfaces[0].networkIP",
        ),
        (
            vm("b", json!({"network": "global/networks/nope"})),
            404,
            "resource.networkInterfaces[0].network",
        ),
        (
            vm(
                "b",
                json!({"network": "projects/other/global/networks/default"}),
            ),
            400,
            "resource.networkInterfaces[0].network",
        ),
        (
            {
                let mut v = vm("b", json!({}));
                v["tags"]["items"] = json!(["Bad_Tag"]);
                v
            },
            400,
            "resource.tags.items[0]",
        ),
        (ok("a"), 409, ""),
    ];
    for (body, code, field) in cases {
        let (c, e) = emu.post(&format!("{Z}/instances"), &body).await;
        assert_eq!(c, code, "{body} -> {e}");
        if !field.is_empty() {
            let msg = e["error"]["message"].as_str().unwrap_or_default();
            assert!(msg.contains(&format!("'{field}'")), "{field}: {msg}");
        }
    }
    let (_, e) = emu
        .post(
            &format!("{Z}/instances"),
            &vm(
                "b",
                json!({"network": "projects/other/global/networks/default"}),
            ),
        )
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("Cross-project references for this resource are not allowed."),
        "{e}"
    );
    assert_eq!(
        emu.post("projects/p1/zones/mars-1-a/instances", &ok("c"))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn shared_vpc_lets_attached_service_projects_use_host_networks() {
    let emu = Emulator::start(&[]);
    let (c, _) = emu
        .post("projects/host/global/networks", &json!({"name": "shared"}))
        .await;
    assert_eq!(c, 200);
    let neg = json!({"name": "neg", "networkEndpointType": "GCE_VM_IP_PORT",
        "network": "projects/host/global/networks/shared", "defaultPort": 8080});
    let svc_vm = vm(
        "node",
        json!({"network": "projects/host/global/networks/shared"}),
    );
    // Not attached yet: cross-project references are refused.
    assert_eq!(
        emu.post(
            "projects/svc/zones/us-central1-a/networkEndpointGroups",
            &neg
        )
        .await
        .0,
        400
    );
    assert_eq!(
        emu.post("projects/svc/zones/us-central1-a/instances", &svc_vm)
            .await
            .0,
        400
    );
    // enableXpnResource needs a host.
    let attach = json!({"xpnResource": {"id": "svc", "type": "PROJECT"}});
    assert_eq!(
        emu.post("projects/host/enableXpnResource", &attach).await.0,
        400
    );
    let (c, op) = emu.post("projects/host/enableXpnHost", &json!({})).await;
    assert_eq!(
        (c, op["operationType"].as_str()),
        (200, Some("enableXpnHost"))
    );
    assert_eq!(
        emu.post("projects/host/enableXpnResource", &attach).await.0,
        200
    );
    let (_, host) = emu.get("projects/svc/getXpnHost").await;
    assert_eq!(
        (host["name"].as_str(), host["xpnProjectStatus"].as_str()),
        (Some("host"), Some("HOST"))
    );
    let (_, res) = emu.get("projects/host/getXpnResources").await;
    assert_eq!(res["resources"], json!([{"id": "svc", "type": "PROJECT"}]));
    assert_eq!(
        emu.post(
            "projects/svc/zones/us-central1-a/networkEndpointGroups",
            &neg
        )
        .await
        .0,
        200
    );
    assert_eq!(
        emu.post("projects/svc/zones/us-central1-a/instances", &svc_vm)
            .await
            .0,
        200
    );
    // A firewall rule lives in the network's own project only.
    let fw = json!({"name": "fw", "network": "projects/host/global/networks/shared",
        "allowed": [{"IPProtocol": "tcp"}], "sourceRanges": ["130.211.0.0/22"]});
    let (c, e) = emu.post("projects/svc/global/firewalls", &fw).await;
    assert_eq!(c, 400, "{e}");
    assert_eq!(emu.post("projects/host/global/firewalls", &fw).await.0, 200);
    // A host with attached projects cannot stop being one.
    assert_eq!(
        emu.post("projects/host/disableXpnHost", &json!({})).await.0,
        400
    );
}

#[tokio::test]
async fn a_new_project_has_the_default_network_and_its_rules() {
    let emu = Emulator::start(&[]);
    let (_, list) = emu.get("projects/fresh/global/firewalls").await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default-allow-icmp",
            "default-allow-internal",
            "default-allow-rdp",
            "default-allow-ssh"
        ]
    );
    let (_, ssh) = emu
        .get("projects/fresh/global/firewalls/default-allow-ssh")
        .await;
    assert_eq!(ssh["priority"], 65534);
    assert_eq!(
        ssh["allowed"],
        json!([{"IPProtocol": "tcp", "ports": ["22"]}])
    );
    assert_eq!(ssh["sourceRanges"], json!(["0.0.0.0/0"]));
    let (_, p) = emu.get("projects/fresh").await;
    assert_eq!(p["kind"], "compute#project");
    // A user-created network gets no rules.
    emu.post("projects/fresh/global/networks", &json!({"name": "custom"}))
        .await;
    let (_, list) = emu
        .get("projects/fresh/global/firewalls?filter=network%3A%22custom%22")
        .await;
    assert!(
        list["items"].as_array().is_none_or(|a| a.is_empty()),
        "{list}"
    );
}

fn gcloud(emu: &Emulator, dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let token = dir.join("token");
    std::fs::write(&token, "fake-token").unwrap();
    let out = Command::new("gcloud")
        .args(args)
        .env("CLOUDSDK_CONFIG", dir.join("cfg"))
        .env("CLOUDSDK_CORE_PROJECT", "p1")
        .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
        .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
        .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
        .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token)
        .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", &emu.base)
        .output()
        .expect("run gcloud");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn gcloud_creates_lists_and_describes_instances() {
    let emu = Emulator::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &["compute", "instances", "create", "node-a", "--zone=us-central1-a", "--tags=gke-node",
          "--network-interface=network=default,private-network-ip=127.0.1.1,aliases=pods:127.64.1.0/24"],
    );
    assert!(ok, "{out}");
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &[
            "compute",
            "instances",
            "list",
            "--format=value(name,zone.basename(),networkInterfaces[0].networkIP,status)",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "node-a\tus-central1-a\t127.0.1.1\tRUNNING");
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &[
            "compute",
            "instances",
            "describe",
            "node-a",
            "--zone=us-central1-a",
            "--format=json",
        ],
    );
    assert!(ok, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tags"]["items"], json!(["gke-node"]));
    assert_eq!(
        v["networkInterfaces"][0]["aliasIpRanges"][0]["ipCidrRange"],
        "127.64.1.0/24"
    );
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &[
            "compute",
            "instances",
            "add-tags",
            "node-a",
            "--zone=us-central1-a",
            "--tags=web",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &[
            "compute",
            "instances",
            "create",
            "node-b",
            "--zone=us-central1-a",
            "--private-network-ip=127.0.1.1",
        ],
    );
    assert!(!ok && out.contains("already being used"), "{out}");

    // Shared VPC through gcloud.
    for args in [
        vec!["compute", "shared-vpc", "enable", "host"],
        vec![
            "compute",
            "shared-vpc",
            "associated-projects",
            "add",
            "p1",
            "--host-project=host",
        ],
    ] {
        let (ok, out) = gcloud(&emu, dir.path(), &args);
        assert!(ok, "{args:?}: {out}");
    }
    let (ok, out) = gcloud(
        &emu,
        dir.path(),
        &[
            "compute",
            "shared-vpc",
            "get-host-project",
            "p1",
            "--format=value(name)",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "host");
}
