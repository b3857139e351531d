//! The metadata server (`--metadata-listen`) over real HTTP, as Go's metadata client and
//! google-auth reach it with `GCE_METADATA_HOST`: its URL is the second stdout line, it refuses
//! requests without `Metadata-Flavor: Google`, and the token it hands out is the one the API
//! requires (`--require-token`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_metadata_server_hands_out_the_token_the_api_requires() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--metadata-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--metadata-project",
            "demo-project",
            "--require-token",
            "t0k",
        ])
        .args(["--port-map", "80=0", "--dataplane-threads", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start gce-emulator");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _guard = Killed(child);
    let root = lines.next().unwrap().unwrap();
    let md = lines.next().unwrap().unwrap();
    let md = md
        .strip_prefix("metadata ")
        .expect("second line names the metadata server");
    let http = reqwest::Client::new();
    let get = |path: &str, flavor: bool| {
        let mut rb = http.get(format!("{md}computeMetadata/v1/{path}"));
        if flavor {
            rb = rb.header("Metadata-Flavor", "Google");
        }
        rb.send()
    };
    let r = get("project/project-id", false).await.unwrap();
    assert_eq!(r.status(), 403, "the Metadata-Flavor header is required");
    let r = get("project/project-id", true).await.unwrap();
    assert_eq!(r.headers()["metadata-flavor"], "Google");
    assert_eq!(r.text().await.unwrap(), "demo-project");
    let zone = get("instance/zone", true)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(zone.ends_with("/zones/us-central1-a"), "{zone}");
    let token: serde_json::Value = get("instance/service-accounts/default/token", true)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(token["token_type"], "Bearer");
    let access = token["access_token"].as_str().unwrap();
    // The API accepts exactly that token.
    let list = |t: String| {
        http.get(format!(
            "{root}compute/v1/projects/demo-project/global/healthChecks"
        ))
        .bearer_auth(t)
        .send()
    };
    assert_eq!(list(access.to_string()).await.unwrap().status(), 200);
    assert_eq!(list("other".into()).await.unwrap().status(), 401);
    let r = get("instance/attributes/kube-env", true).await.unwrap();
    assert_eq!(r.status(), 404);
}
