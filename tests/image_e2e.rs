//! The operator's OCI image, built offline as `make image` builds it (deploy/image/build.sh,
//! issue 15 "An image"), from the binary this test run uses: the image is unpacked with umoci
//! and its entrypoint run inside the unpacked root filesystem (chroot, as the image's user),
//! so it runs with the image's own C library and loader and nothing of the host's. The config
//! says user 65532, entrypoint `/gclb-operator`; the root filesystem has CA certificates and
//! no shell.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use support::*;

fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

/// Runs `args` inside `rootfs` as the image's user: chroot as root; in a user namespace
/// (`unshare -r`) otherwise, where the caller maps to root and the user cannot be changed.
fn run_in(rootfs: &Path, user: &str, args: &[&str]) -> Result<String> {
    let is_root = run(Command::new("id").arg("-u"))?.stdout == b"0\n";
    let mut cmd = if is_root {
        let mut c = Command::new("chroot");
        c.arg(format!("--userspec={user}"));
        c
    } else {
        let mut c = Command::new("unshare");
        c.args(["--map-root-user", "chroot"]);
        c
    };
    // Nothing of the test's environment reaches the entrypoint but a PATH to find chroot.
    cmd.arg(rootfs)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    let out = run(&mut cmd)?;
    Ok(String::from_utf8(out.stdout)?)
}

#[test]
fn make_image_builds_an_image_whose_entrypoint_runs_in_its_own_root_filesystem() -> Result<()> {
    for tool in ["umoci", "skopeo"] {
        assert!(
            Command::new(tool).arg("--version").output().is_ok(),
            "{tool} is missing: apt-get install -y umoci skopeo (make deps installs them)"
        );
    }
    let dir = tempfile::tempdir()?;
    let image_dir = dir.path().join("image");
    let out = run(Command::new("bash")
        .arg(repo_root().join("deploy/image/build.sh"))
        .env("IMAGE_BINARY", bin("gclb-operator"))
        .env("IMAGE_DIR", &image_dir)
        .env("IMAGE_TAG", "e2e"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with("image size: "),
        "{stdout}"
    );
    let image = format!("oci:{}:e2e", image_dir.join("oci").display());

    // The image config.
    let config: Value = serde_json::from_slice(
        &run(Command::new("skopeo").args(["inspect", "--config", &image]))?.stdout,
    )?;
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532", "{config}");
    assert_eq!(c["Entrypoint"], serde_json::json!(["/gclb-operator"]));
    assert_eq!(c["Cmd"], serde_json::json!(["run"]));
    assert_eq!(config["os"], "linux");
    // The single-file archive to push is the same image.
    let archive = format!(
        "oci-archive:{}:e2e",
        image_dir.join("gclb-operator.tar").display()
    );
    let digest = |reference: &str| -> Result<Value> {
        let raw: Value = serde_json::from_slice(
            &run(Command::new("skopeo").args(["inspect", "--raw", reference]))?.stdout,
        )?;
        Ok(raw["config"]["digest"].clone())
    };
    assert_eq!(digest(&archive)?, digest(&image)?);

    // Unpacked: the entrypoint runs with only the image's files.
    let bundle = dir.path().join("bundle");
    let layout = format!("{}:e2e", image_dir.join("oci").display());
    run(Command::new("umoci")
        .args(["unpack", "--rootless", "--image", &layout])
        .arg(&bundle))?;
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file());
    assert!(!rootfs.join("bin/sh").exists(), "the image has a shell");
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd"))?;
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
    let version = run_in(&rootfs, "65532:65532", &["/gclb-operator", "--version"])?;
    assert_eq!(
        version.trim(),
        format!("gclb-operator {}", env!("CARGO_PKG_VERSION"))
    );
    let help = run_in(&rootfs, "65532:65532", &["/gclb-operator", "run", "--help"])?;
    for flag in ["--project", "--takeover", "--webhook-listen", "--zone"] {
        assert!(help.contains(flag), "run --help lacks {flag}:\n{help}");
    }
    Ok(())
}
