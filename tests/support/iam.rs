//! Credentials and IAM in the e2e harness: the operator's Application Default Credentials
//! from the emulator's metadata server, and, for an emulator run with `--iam`, the local admin
//! the harness and the local kubelet call as, and the IAM admin API (docs/emulator.md,
//! "Credentials and IAM").

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{System, PROJECT};

/// The Google service account the harness and the local kubelet call the emulator as when it
/// enforces IAM ([`super::Options::iam`]).
pub const LOCAL_ADMIN: &str = "local-admin@p1.iam.gserviceaccount.com";

/// The operator's Google service account in the IAM tests: the emulator's metadata server
/// hands out its tokens (`--metadata-service-account`, Workload Identity's path).
pub const OPERATOR_GSA: &str = "gclb-operator@p1.iam.gserviceaccount.com";

/// The emulator's slow cloud with Operations only (no latency, no quota): a mutation's
/// Operation is RUNNING for a moment, so the operator waits on it (`globalOperations.wait`,
/// `zoneOperations.wait`, which IAM checks as `*Operations.get`; docs/performance.md, "The
/// slow cloud"). For `--slow-cloud`.
pub const SLOW_OPERATIONS: &str =
    r#"{"operations": {"global": {"runningMs": 30}, "zonal": {"runningMs": 30}}}"#;

/// A stack whose emulator enforces IAM ([`super::Options::iam`]) and whose metadata server
/// serves [`OPERATOR_GSA`]'s tokens to the operator, on ports the kernel picks
/// (`--port-map 80=0,443=0`), with `extra` emulator flags. The operator holds nothing until
/// the test binds its account.
///
/// Errors: as [`System::start_with`].
pub fn start_with_operator_account(extra: &[&str]) -> Result<System> {
    let mut args = vec![
        "--port-map",
        "80=0,443=0",
        "--metadata-service-account",
        OPERATOR_GSA,
    ];
    args.extend_from_slice(extra);
    System::start_with(super::Options {
        emulator_args: &args,
        iam: true,
        ..super::Options::default()
    })
}

/// Points `cmd`'s Application Default Credentials at the emulator's metadata server (served on
/// its API port, `compute_url` `http://127.0.0.1:PORT/`), as GKE's Workload Identity serves
/// them: `GCE_METADATA_HOST`, no `GOOGLE_APPLICATION_CREDENTIALS`, and a `HOME` (`home`)
/// without gcloud's ADC file. So every e2e test runs the operator authenticated (`--compute-
/// credentials adc`, its default) and nothing reaches for the real metadata server.
pub fn metadata_adc(cmd: &mut Command, compute_url: &str, home: &Path) {
    let host = compute_url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    cmd.env("GCE_METADATA_HOST", host)
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env("HOME", home);
}

/// Binds [`LOCAL_ADMIN`] to `roles/compute.admin` in [`PROJECT`] (and the Shared VPC host) on
/// the emulator at `compute_url` and returns a day-long access token of it.
pub(super) fn local_admin(
    http: &reqwest::blocking::Client,
    compute_url: &str,
    shared_vpc: Option<(&str, &str)>,
) -> Result<String> {
    let member = format!("serviceAccount:{LOCAL_ADMIN}");
    for project in std::iter::once(PROJECT).chain(shared_vpc.map(|(h, _)| h)) {
        let resp = http
            .post(format!(
                "{compute_url}_emulator/iam/projects/{project}/bindings"
            ))
            .json(&serde_json::json!({"member": member, "role": "roles/compute.admin"}))
            .send()?;
        if !resp.status().is_success() {
            bail!("binding {member} in {project}: {}", resp.text()?);
        }
    }
    let token: Value = http
        .post(format!(
            "{compute_url}_emulator/iam/serviceAccounts/{LOCAL_ADMIN}/tokens"
        ))
        .json(&serde_json::json!({"lifetimeSec": 86400}))
        .send()?
        .json()?;
    token["access_token"]
        .as_str()
        .map(str::to_string)
        .context("the emulator issued no token")
}

impl System {
    /// `method /_emulator/iam/{path}` with `body` (JSON, or a role's YAML as a string):
    /// the emulator's IAM admin API (docs/emulator.md, "Credentials and IAM").
    pub fn iam_admin(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
        let url = match path {
            "" => format!("{}_emulator/iam", self.compute_url),
            p => format!("{}_emulator/iam/{p}", self.compute_url),
        };
        let rb = self.http.request(method.clone(), &url);
        let rb = match body {
            Value::String(text) => rb.body(text.clone()),
            Value::Null => rb,
            v => rb.json(v),
        };
        let resp = rb.send()?;
        let status = resp.status();
        let text = resp.text()?;
        if !status.is_success() {
            bail!("{method} {url}: {status} {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// `includedPermissions` of deploy/iam/gclb-operator-role.yaml, in the file's order.
pub fn role_permissions() -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(super::repo_root().join("deploy/iam/gclb-operator-role.yaml"))?;
    let v: serde_yaml::Value = serde_yaml::from_str(&text)?;
    Ok(v["includedPermissions"]
        .as_sequence()
        .context("includedPermissions")?
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect())
}

/// A check count of the emulator's usage counters: `(granted, denied)`.
pub type Counts = (u64, u64);

impl System {
    /// Defines (or redefines: it applies to the next call at once) the custom role
    /// `projects/{PROJECT}/roles/{id}` with `perms`, through the IAM admin API.
    pub fn define_role(&self, id: &str, perms: &[String]) -> Result<()> {
        let yaml = format!(
            "title: {id}\nincludedPermissions:\n{}",
            perms.iter().map(|p| format!("- {p}\n")).collect::<String>()
        );
        self.iam_admin(
            reqwest::Method::PUT,
            &format!("projects/{PROJECT}/roles/{id}"),
            &Value::String(yaml),
        )
        .map(drop)
    }

    /// Binds (`POST`) or unbinds (`DELETE`) `member` to `role` in [`PROJECT`].
    pub fn bind(&self, method: reqwest::Method, member: &str, role: &str) -> Result<()> {
        self.iam_admin(
            method,
            &format!("projects/{PROJECT}/bindings"),
            &serde_json::json!({"member": member, "role": role}),
        )
        .map(drop)
    }

    /// `member`'s permission checks since the last reset (and with `reset`, resets them):
    /// permission -> (granted, denied), from the emulator's usage counters.
    pub fn iam_usage(
        &self,
        member: &str,
        reset: bool,
    ) -> Result<std::collections::BTreeMap<String, Counts>> {
        let v = match reset {
            true => self.iam_admin(reqwest::Method::DELETE, "usage", &Value::Null)?,
            false => self.iam_admin(reqwest::Method::GET, "", &Value::Null)?["usage"].clone(),
        };
        Ok(v[member]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(p, c)| {
                let n = |k: &str| c[k].as_u64().unwrap_or(0);
                (p.clone(), (n("granted"), n("denied")))
            })
            .collect())
    }
}
