//! The installed `gcloud` builds a complete HTTP load balancer against the emulator by hand, as
//! the GCE docs do (health check, NEG with an endpoint, backend service with the NEG, URL map
//! with a path matcher, target HTTP proxy, global address, forwarding rule), reads it back,
//! asks for health, fails to delete an in-use health check, then deletes everything in reverse
//! order (the last step a two-resource delete, which gcloud sends as a multipart batch).
//! Environment per reference/gce-clients.md, section 1, with a throwaway config directory.

mod control_support;

use std::path::Path;
use std::process::Command;

use control_support::Emulator;
use serde_json::Value;

struct Gcloud<'a> {
    cfg: &'a Path,
    token: std::path::PathBuf,
    endpoint: String,
}

impl Gcloud<'_> {
    /// Runs `gcloud compute ARGS`; returns (success, stdout, stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("gcloud")
            .arg("compute")
            .args(args)
            .env("CLOUDSDK_CONFIG", self.cfg)
            .env("CLOUDSDK_CORE_PROJECT", "p1")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &self.token)
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", &self.endpoint)
            .output()
            .expect("run gcloud");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args);
        assert!(ok, "gcloud compute {} failed:\n{stderr}", args.join(" "));
        stdout
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--format=json");
        serde_json::from_str(&self.ok(&a)).expect("gcloud printed JSON")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_builds_inspects_and_tears_down_an_http_load_balancer() {
    if Command::new("gcloud").arg("--version").output().is_err() {
        panic!("gcloud is required for this test (see make deps)");
    }
    let emu = Emulator::start(&["--require-token", "fake-token-abc"]);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token.txt");
    std::fs::write(&token, "fake-token-abc").unwrap();
    let cfg = dir.path().join("gcloudcfg");
    std::fs::create_dir(&cfg).unwrap();
    let g = Gcloud {
        cfg: &cfg,
        token,
        endpoint: emu.base.clone(),
    };
    let z = "--zone=us-central1-a";

    // Build.
    g.ok(&[
        "health-checks",
        "create",
        "http",
        "hc1",
        "--request-path=/healthz",
        "--port=8080",
    ]);
    g.ok(&["health-checks", "create", "tcp", "hc2", "--port=443"]);
    g.ok(&[
        "network-endpoint-groups",
        "create",
        "neg1",
        z,
        "--network-endpoint-type=gce-vm-ip-port",
        "--default-port=8080",
    ]);
    g.ok(&[
        "instances",
        "create",
        "vm1",
        z,
        "--network-interface=network=default,private-network-ip=127.0.0.9",
    ]);
    g.ok(&[
        "network-endpoint-groups",
        "update",
        "neg1",
        z,
        "--add-endpoint=instance=vm1,ip=127.0.0.9,port=8080",
    ]);
    g.ok(&[
        "backend-services",
        "create",
        "bs1",
        "--global",
        "--protocol=HTTP",
        "--health-checks=hc1",
        "--load-balancing-scheme=EXTERNAL",
    ]);
    g.ok(&[
        "backend-services",
        "add-backend",
        "bs1",
        "--global",
        "--network-endpoint-group=neg1",
        "--network-endpoint-group-zone=us-central1-a",
        "--balancing-mode=RATE",
        "--max-rate-per-endpoint=100",
    ]);
    g.ok(&["url-maps", "create", "um1", "--default-service=bs1"]);
    g.ok(&[
        "url-maps",
        "add-path-matcher",
        "um1",
        "--path-matcher-name=pm1",
        "--default-service=bs1",
        "--new-hosts=example.com",
        "--path-rules=/api/*=bs1",
    ]);
    g.ok(&["target-http-proxies", "create", "thp1", "--url-map=um1"]);
    g.ok(&["addresses", "create", "addr1", "--global"]);
    g.ok(&[
        "forwarding-rules",
        "create",
        "fr1",
        "--global",
        "--target-http-proxy=thp1",
        "--ports=80",
        "--address=addr1",
    ]);

    // Read back what a real project would show.
    let um = g.json(&["url-maps", "describe", "um1"]);
    assert_eq!(um["kind"], "compute#urlMap");
    assert_eq!(um["hostRules"][0]["hosts"][0], "example.com");
    assert_eq!(um["pathMatchers"][0]["pathRules"][0]["paths"][0], "/api/*");
    assert!(um["pathMatchers"][0]["pathRules"][0]["service"]
        .as_str()
        .unwrap()
        .ends_with("/projects/p1/global/backendServices/bs1"));
    assert!(um["fingerprint"].as_str().is_some_and(|f| !f.is_empty()));
    let bs = g.json(&["backend-services", "describe", "bs1", "--global"]);
    assert!(bs["backends"][0]["group"]
        .as_str()
        .unwrap()
        .ends_with("/zones/us-central1-a/networkEndpointGroups/neg1"));
    let addr = g.json(&["addresses", "describe", "addr1", "--global"]);
    assert_eq!(addr["status"], "IN_USE");
    let ip = addr["address"].as_str().unwrap().to_string();
    assert!(ip.starts_with("127."), "{ip}");
    let rules = g.json(&["forwarding-rules", "list"]);
    assert_eq!(rules.as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules[0]["name"], "fr1");
    assert_eq!(rules[0]["IPAddress"], ip.as_str());
    assert_eq!(rules[0]["portRange"], "80-80");
    let hcs = g.json(&["health-checks", "list", "--filter=name=hc1"]);
    assert_eq!(
        hcs.as_array().unwrap().len(),
        1,
        "gcloud's filter must be applied by the server: {hcs}"
    );
    let eps = g.json(&[
        "network-endpoint-groups",
        "list-network-endpoints",
        "neg1",
        z,
    ]);
    assert_eq!(eps[0]["networkEndpoint"]["ipAddress"], "127.0.0.9");
    let health = g.json(&["backend-services", "get-health", "bs1", "--global"]);
    let status = &health[0]["status"]["healthStatus"][0];
    assert_eq!(status["ipAddress"], "127.0.0.9");
    assert!(
        ["HEALTHY", "UNHEALTHY", "UNKNOWN"].contains(&status["healthState"].as_str().unwrap()),
        "{health}"
    );

    // Deleting what is in use fails with the real error.
    let (ok, _, stderr) = g.run(&["health-checks", "delete", "hc1", "--quiet"]);
    assert!(!ok);
    assert!(
        stderr.contains("is already being used by") && stderr.contains("backendServices/bs1"),
        "{stderr}"
    );

    // Tear down in reverse order; the last command deletes two resources (a batch request).
    g.ok(&["forwarding-rules", "delete", "fr1", "--global", "--quiet"]);
    g.ok(&["addresses", "delete", "addr1", "--global", "--quiet"]);
    g.ok(&["target-http-proxies", "delete", "thp1", "--quiet"]);
    g.ok(&["url-maps", "delete", "um1", "--quiet"]);
    g.ok(&["backend-services", "delete", "bs1", "--global", "--quiet"]);
    g.ok(&["network-endpoint-groups", "delete", "neg1", z, "--quiet"]);
    g.ok(&["health-checks", "delete", "hc1", "hc2", "--quiet"]);
    g.ok(&["instances", "delete", "vm1", z, "--quiet"]);

    let keys = emu.keys("p1").await;
    assert_eq!(
        keys,
        Emulator::initial_keys("p1"),
        "only the default network and its rules are left"
    );
    let calls = emu.admin_get("calls").await;
    assert!(
        calls["methods"]["compute.healthChecks.delete"]
            .as_u64()
            .unwrap()
            >= 3,
        "{calls}"
    );
}
