//! Helpers of the regional load balancer tests (internal_e2e, regional_external_e2e): gcloud
//! aimed at the emulator, the regional collections' contents, and the command a Warning gives.

use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use super::{item_names, wait_for, System, DEADLINE, PROJECT};

/// The region of the local Node's zone, where regional load balancers are built.
pub const REGION: &str = "us-central1";

/// Every regional collection a regional Application Load Balancer uses.
pub const REGIONAL: &[&str] = &[
    "forwardingRules",
    "targetHttpProxies",
    "targetHttpsProxies",
    "urlMaps",
    "sslCertificates",
    "backendServices",
    "healthChecks",
];

impl System {
    /// Runs `shell_command` (a gcloud command line) with gcloud aimed at the emulator
    /// (docs/reference gce-clients.md: endpoint override and an access token file); its stdout.
    pub fn gcloud(&self, shell_command: &str) -> Result<String> {
        let out = self.gcloud_as("regional-e2e-token", shell_command)?;
        if !out.status.success() {
            bail!("{shell_command}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `shell_command` (a gcloud command line) with gcloud aimed at the emulator as the
    /// identity whose access token is `token` (its own gcloud config directory); its output,
    /// whatever its exit status.
    pub fn gcloud_as(&self, token: &str, shell_command: &str) -> Result<std::process::Output> {
        let cfg = self.dir.path().join(format!("gcloud-{token}"));
        std::fs::create_dir_all(&cfg)?;
        let token_file = cfg.join("token.txt");
        std::fs::write(&token_file, token)?;
        Command::new("bash")
            .args(["-c", shell_command])
            .env("CLOUDSDK_CONFIG", &cfg)
            .env("CLOUDSDK_CORE_PROJECT", PROJECT)
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token_file)
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                format!("{}compute/v1/", self.compute_url),
            )
            .output()
            .context("running gcloud (installed by make deps)")
    }

    /// Names in one regional collection of [`REGION`].
    pub fn regional_names(&self, collection: &str) -> Result<Vec<String>> {
        let list = self.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/regions/{REGION}/{collection}"
        ))?;
        Ok(item_names(&list))
    }

    /// `collection/name` of everything in the [`REGIONAL`] collections of [`REGION`].
    pub fn all_regional(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for c in REGIONAL {
            out.extend(
                self.regional_names(c)?
                    .into_iter()
                    .map(|n| format!("{c}/{n}")),
            );
        }
        Ok(out)
    }

    /// The command between backticks of the first Warning on Ingress `default/{ingress}`
    /// containing `needle`, waiting for it.
    pub fn warned_command(&self, ingress: &str, needle: &str) -> Result<String> {
        wait_for(&format!("a Warning with {needle:?}"), DEADLINE, || {
            let events = self.events_for("default", "Ingress", ingress)?;
            Ok(events
                .iter()
                .filter(|e| e.starts_with("Warning") && e.contains(needle))
                .find_map(|e| e.split('`').nth(1).map(str::to_string)))
        })
        .with_context(|| self.logs())
    }

    /// Step one of the regional tests: without a proxy-only subnet, Ingress `default/{ingress}`
    /// gets a Warning with the command that creates it and nothing regional exists; the command
    /// is then run with gcloud.
    pub fn fix_missing_proxy_only_subnet(&self, ingress: &str) -> Result<()> {
        let fix = self.warned_command(ingress, "proxy-only subnet")?;
        assert!(
            fix.starts_with("gcloud compute networks subnets create ")
                && fix.contains(&format!(
                    "--purpose=REGIONAL_MANAGED_PROXY --role=ACTIVE --region={REGION} --network=default"
                )),
            "{fix}"
        );
        assert_eq!(self.all_regional()?, Vec::<String>::new());
        self.gcloud(&fix).map(drop)
    }

    /// Waits until no regional resource (and with `negs_too`, no NEG) is left.
    pub fn wait_for_nothing_regional(&self, negs_too: bool) -> Result<()> {
        wait_for("no regional resource", DEADLINE, || {
            let left = self.all_regional()?;
            let negs = if negs_too { self.neg_names()? } else { vec![] };
            if left.is_empty() && negs.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow!("left: {left:?}, NEGs {negs:?}"))
            }
        })
        .with_context(|| self.logs())
    }

    /// Waits until the global load balancer's URL maps and backend services are gone.
    pub fn wait_for_no_global_lb(&self) -> Result<()> {
        wait_for("the global load balancer gone", DEADLINE, || {
            let left = [
                self.compute_names("urlMaps")?,
                self.compute_names("backendServices")?,
            ]
            .concat();
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow!("left: {left:?}"))
            }
        })
        .with_context(|| self.logs())
    }
}
