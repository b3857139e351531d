//! The real emulator binary on 127.0.0.1:0 and the installed `gcloud` pointed at it, with a
//! throwaway config directory and token (environment per reference/gce-clients.md, section 1).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The emulator process; killed when dropped.
pub struct Emulator(Child);

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gcloud compute` against one emulator, project `gp`.
pub struct Gcloud {
    cfg: PathBuf,
    token: PathBuf,
    endpoint: String,
}

/// A started emulator (`--port-map 80=0`), its base URL (`http://127.0.0.1:PORT`), a gcloud
/// configured for it, and the directory holding gcloud's config (removed when dropped).
pub struct Stack {
    pub emulator: Emulator,
    pub base: String,
    pub gcloud: Gcloud,
    pub dir: tempfile::TempDir,
}

/// Starts `bin` (the emulator binary of the calling test) and configures gcloud for it; panics
/// when gcloud is not installed (`make deps` installs it).
pub fn start(bin: &str) -> Stack {
    assert!(
        Command::new("gcloud").arg("--version").output().is_ok(),
        "gcloud is required for this test (see make deps)"
    );
    let mut child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--port-map", "80=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gce-emulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let emulator = Emulator(child);
    let base = line.trim().trim_end_matches('/').to_string();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "fake-token").unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let gcloud = Gcloud {
        cfg,
        token,
        endpoint: format!("{base}/compute/v1/"),
    };
    Stack {
        emulator,
        base,
        gcloud,
        dir,
    }
}

impl Gcloud {
    /// Runs `gcloud compute ARGS`, whatever its exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("gcloud")
            .arg("compute")
            .args(args)
            .env("CLOUDSDK_CONFIG", &self.cfg)
            .env("CLOUDSDK_CORE_PROJECT", "gp")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &self.token)
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", &self.endpoint)
            .output()
            .expect("run gcloud")
    }

    /// Runs `gcloud compute ARGS`, asserting success; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "gcloud compute {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ok` with `--format=json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--format=json");
        serde_json::from_str(&self.ok(&a)).expect("gcloud JSON")
    }
}
