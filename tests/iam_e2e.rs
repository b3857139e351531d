//! End to end: the operator authenticates as a production install does, against an emulator
//! that enforces IAM (`gce-emulator --iam`; issue 43):
//! - Workload Identity's path: Application Default Credentials from the metadata server
//!   (`GCE_METADATA_HOST`), as the Google service account the Kubernetes ServiceAccount maps
//!   to; tokens live 3 s, so the operator refreshes several times during the test with no
//!   failed sync;
//! - a missing permission: the Warning `PermissionDenied` Event names the permission, the
//!   resource, the principal and the gcloud command that grants the operator's role; that
//!   command, run with gcloud against the emulator, makes the next sync succeed;
//! - a service account key file (`GOOGLE_APPLICATION_CREDENTIALS`) from the emulator, its
//!   account bound to exactly deploy/iam's role: the load balancer serves;
//! - a token revoked while the operator holds it (`POST /_emulator/iam/tokens:revokeAll`,
//!   tokens living an hour): the next sync gets one 401, builds its credentials again, retries
//!   and succeeds, with no Warning Event and no sync error counted;
//! - an operator that may insert but not wait on Operations (no
//!   `compute.globalOperations.get`): once the role is back and the Ingress deleted, nothing it
//!   inserted is left in the project.

mod support;

use anyhow::{anyhow, bail, Context, Result};
use reqwest::Method;
use serde_json::{json, Value};
use support::*;

/// The operator's Google service account (Workload Identity's `iam.gke.io/gcp-service-account`).
use support::iam::{start_with_operator_account, OPERATOR_GSA as GSA, SLOW_OPERATIONS};
/// The custom role docs/install.md creates from deploy/iam/gclb-operator-role.yaml.
fn role() -> String {
    format!("projects/{PROJECT}/roles/gclbOperator")
}

fn examples() -> std::path::PathBuf {
    repo_root().join("docs/examples")
}

fn role_yaml() -> Result<String> {
    Ok(std::fs::read_to_string(
        repo_root().join("deploy/iam/gclb-operator-role.yaml"),
    )?)
}

/// Defines custom role `projects/{PROJECT}/roles/{id}` from a role file's YAML.
fn define_role(sys: &System, id: &str, yaml: String) -> Result<()> {
    sys.iam_admin(
        Method::PUT,
        &format!("projects/{PROJECT}/roles/{id}"),
        &Value::String(yaml),
    )
    .map(drop)
}

fn bind(sys: &System, member: &str, role: &str) -> Result<()> {
    sys.iam_admin(
        Method::POST,
        &format!("projects/{PROJECT}/bindings"),
        &json!({"member": member, "role": role}),
    )
    .map(drop)
}

/// Access tokens the emulator issued to `email` so far.
fn tokens_of(sys: &System, email: &str) -> Result<u64> {
    let v = sys.iam_admin(Method::GET, "", &Value::Null)?;
    Ok(v["tokensIssuedBy"][email].as_u64().unwrap_or(0))
}

/// The first Event of my-ingress containing `needle`.
fn wait_for_event(sys: &System, needle: &str) -> Result<String> {
    wait_for(&format!("an Event with {needle:?}"), DEADLINE, || {
        Ok(sys
            .events_for("default", "Ingress", "my-ingress")?
            .into_iter()
            .find(|e| e.contains(needle)))
    })
    .with_context(|| sys.logs())
}

/// Runs a hint's gcloud command against the emulator as [`LOCAL_ADMIN`] (the project's
/// admin), with Resource Manager aimed at the emulator too.
fn run_hint(sys: &System, command: &str) -> Result<String> {
    let cfg = sys.dir.path().join("gcloud-admin");
    std::fs::create_dir_all(&cfg)?;
    let token_file = cfg.join("token.txt");
    std::fs::write(
        &token_file,
        sys.admin_token.as_deref().context("no admin token")?,
    )?;
    let out = std::process::Command::new("bash")
        .args(["-c", command])
        .env("CLOUDSDK_CONFIG", &cfg)
        .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
        .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
        .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
        .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &token_file)
        .env(
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER",
            &sys.compute_url,
        )
        .output()
        .context("running gcloud (installed by make deps)")?;
    if !out.status.success() {
        bail!("{command}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn workload_identity_tokens_refresh_and_a_missing_permission_is_named_and_fixed() -> Result<()> {
    let mut sys = start_with_operator_account(&["--token-lifetime-sec", "3"])?;
    // The operator's account holds deploy/iam's role but for one permission.
    let yaml = role_yaml()?;
    define_role(&sys, "gclbOperator", yaml.clone())?;
    let partial: String = yaml
        .lines()
        .filter(|l| l.trim() != "- compute.backendServices.create")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(partial.len(), yaml.len());
    define_role(&sys, "withoutBackendServicesCreate", partial)?;
    let member = format!("serviceAccount:{GSA}");
    bind(
        &sys,
        &member,
        &format!("projects/{PROJECT}/roles/withoutBackendServicesCreate"),
    )?;

    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;
    let event = wait_for_event(&sys, "PermissionDenied")?;
    for part in [
        "Warning PermissionDenied",
        "'compute.backendServices.create'",
        &format!("'projects/{PROJECT}/global/backendServices/"),
        &member,
    ] {
        assert!(event.contains(part), "{part:?} missing from {event}");
    }
    let command = event
        .split('`')
        .nth(1)
        .ok_or_else(|| anyhow!("no command in {event}"))?;
    assert_eq!(
        command,
        format!(
            "gcloud projects add-iam-policy-binding {PROJECT} --member={member} --role={}",
            role()
        )
    );
    // No retry storm: a refused sync backs off (5 s, 10 s, ...), so few inserts were tried.
    let calls = sys.compute_get("_emulator/calls")?;
    let tried = calls["methods"]["compute.backendServices.insert"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        (1..=6).contains(&tried),
        "backendServices.insert tried {tried} times: {calls}"
    );

    // The hint's command, run with gcloud against the emulator, fixes the next sync.
    run_hint(&sys, command)?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;

    // Tokens live 3 s: the operator keeps working across refreshes. Wait until it took two
    // more tokens, then change the Ingress: the change is programmed with a refreshed token.
    let before = tokens_of(&sys, GSA)?;
    assert!(
        before >= 1,
        "the operator took no token from the metadata server"
    );
    wait_for("two token refreshes", DEADLINE, || {
        Ok((tokens_of(&sys, GSA)? >= before + 2).then_some(()))
    })?;
    sys.apply(
        &(fanout::ingress("my-ingress", None, false)
            + r#"      - path: /sale
        pathType: Prefix
        backend: {service: {name: my-discounted-products, port: {number: 80}}}
"#),
    )?;
    sys.wait_for_response(
        &socket,
        "your-store.example",
        "/sale",
        200,
        "discounted-products-",
    )?;
    // No sync failed for want of a valid token.
    let events = sys.events_for("default", "Ingress", "my-ingress")?;
    let failed: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("Warning") && !e.contains("PermissionDenied"))
        .collect();
    assert!(failed.is_empty(), "failed syncs: {failed:#?}");
    let log = sys.logs();
    assert!(
        !log.contains("HTTP 401") && !log.contains("authError"),
        "a call was refused for its token:\n{log}"
    );
    Ok(())
}

#[test]
fn a_service_account_key_file_authenticates_the_operator() -> Result<()> {
    let mut sys = System::start_with(Options {
        emulator_args: &["--port-map", "80=0,443=0"],
        iam: true,
        ..Options::default()
    })?;
    let email = "gclb-key@p1.iam.gserviceaccount.com";
    let key = sys.iam_admin(
        Method::POST,
        &format!("serviceAccounts/{email}/keys"),
        &Value::Null,
    )?;
    assert_eq!(key["token_uri"], format!("{}token", sys.compute_url));
    let key_file = sys.dir.path().join("key.json");
    std::fs::write(&key_file, serde_json::to_vec(&key)?)?;
    define_role(&sys, "gclbOperator", role_yaml()?)?;
    bind(&sys, &format!("serviceAccount:{email}"), &role())?;

    sys.apply_path(&examples())?;
    let key_path = key_file.to_string_lossy().into_owned();
    sys.operator = Some(sys.spawn_operator_from(
        &bin("gclb-operator"),
        &[],
        "operator",
        &[("GOOGLE_APPLICATION_CREDENTIALS", key_path.as_str())],
    )?);
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    // The metadata server's account took no token: the key file was used.
    assert_eq!(
        tokens_of(&sys, "100000000001-compute@developer.gserviceaccount.com")?,
        0
    );
    let events = sys.events_for("default", "Ingress", "my-ingress")?;
    assert!(
        !events.iter().any(|e| e.starts_with("Warning")),
        "{events:#?}"
    );
    Ok(())
}

/// `gclb_ingress_sync_errors_total` on the operator's `/metrics`, all classes.
fn sync_errors(sys: &System) -> Result<u64> {
    let url = sys
        .operator
        .as_ref()
        .context("no operator")?
        .metrics_url()?;
    let body = reqwest::blocking::get(url)?.text()?;
    Ok(body
        .lines()
        .filter(|l| l.starts_with("gclb_ingress_sync_errors_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Permission checks the emulator granted `member` so far (all permissions).
fn granted_to(sys: &System, member: &str) -> Result<u64> {
    let v = sys.iam_admin(Method::GET, "", &Value::Null)?;
    Ok(v["usage"][member]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, c)| c["granted"].as_u64())
        .sum())
}

#[test]
fn a_revoked_token_is_refreshed_once_and_the_sync_succeeds() -> Result<()> {
    let mut sys = start_with_operator_account(&[])?;
    define_role(&sys, "gclbOperator", role_yaml()?)?;
    let member = format!("serviceAccount:{GSA}");
    bind(&sys, &member, &role())?;
    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    let errors_before = sync_errors(&sys)?;
    let tokens_before = tokens_of(&sys, GSA)?;
    let before = sys.iam_admin(Method::GET, "", &Value::Null)?;
    let unauthenticated_before = before["unauthenticated"].as_u64().unwrap_or(0);
    let granted_before = granted_to(&sys, &member)?;

    // Tokens live an hour (the default): the library would not refresh on its own. The
    // emulator forgets every token it issued, as a revocation does.
    let revoked = sys.iam_admin(Method::POST, "tokens:revokeAll", &Value::Null)?;
    assert!(revoked["revoked"].as_u64() >= Some(1), "{revoked}");

    // A change that needs a Compute call: the next sync sends the revoked token first.
    sys.apply(
        &(fanout::ingress("my-ingress", None, false)
            + r#"      - path: /more
        pathType: ImplementationSpecific
        backend: {service: {name: my-products, port: {number: 60000}}}
"#),
    )?;
    sys.wait_for_response(&socket, "your-store.example", "/more", 200, "products-")?;

    let after = sys.iam_admin(Method::GET, "", &Value::Null)?;
    let unauthenticated = after["unauthenticated"].as_u64().unwrap_or(0) - unauthenticated_before;
    assert_eq!(
        unauthenticated,
        1,
        "one 401, then a fresh token: {:#}\n{}",
        after["refusals"],
        sys.logs()
    );
    assert_eq!(
        after["refusals"]
            .as_array()
            .and_then(|r| r.last())
            .map(|r| r["code"].clone()),
        Some(json!(401)),
        "the 401 is the last refusal: nothing was refused after it"
    );
    assert!(
        granted_to(&sys, &member)? > granted_before,
        "calls succeeded after the 401"
    );
    assert!(
        tokens_of(&sys, GSA)? > tokens_before,
        "the operator took a new token from the metadata server"
    );
    // No failed sync: no Warning Event, no sync error counted.
    let warnings: Vec<String> = sys
        .events_for("default", "Ingress", "my-ingress")?
        .into_iter()
        .filter(|e| e.starts_with("Warning"))
        .collect();
    assert!(warnings.is_empty(), "failed syncs: {warnings:#?}");
    assert_eq!(sync_errors(&sys)?, errors_before, "{}", sys.logs());
    Ok(())
}

/// Issue 43 (deploy/iam/permission-report.md, row `compute.globalOperations.get`): the
/// operator may insert but not wait on the Operation, so the first sync fails after the API
/// accepted its health checks; the role is then restored and the Ingress deleted at once.
/// Everything the operator made is deleted (it used to forget the health checks whose wait
/// was refused, and left them until its state cache listed them again).
#[test]
fn an_insert_whose_operation_wait_is_refused_is_deleted_with_the_ingress() -> Result<()> {
    let mut sys = start_with_operator_account(&["--slow-cloud", SLOW_OPERATIONS])?;
    let all = support::iam::role_permissions()?;
    let without: Vec<String> = all
        .iter()
        .filter(|p| *p != "compute.globalOperations.get")
        .cloned()
        .collect();
    sys.define_role("gclbOperator", &without)?;
    bind(&sys, &format!("serviceAccount:{GSA}"), &role())?;
    let baseline = sys.project_resources()?;
    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;
    wait_for_event(&sys, "'compute.globalOperations.get'")?;
    let made = wait_for("a health check inserted", DEADLINE, || {
        let now = sys.project_resources()?;
        Ok(now
            .iter()
            .any(|r| r.starts_with("global/healthChecks/"))
            .then_some(now))
    })?;

    sys.define_role("gclbOperator", &all)?;
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--wait=false"])?;
    wait_for("my-ingress deleted", DEADLINE, || {
        let out = sys.kubectl_ok(&["get", "ingress", "-o", "name"])?;
        Ok((!out.contains("my-ingress")).then_some(()))
    })?;
    let mut left = Vec::new();
    wait_for("the project back to its baseline", DEADLINE, || {
        left = sys
            .project_resources()?
            .into_iter()
            .filter(|r| !baseline.contains(r))
            .collect();
        Ok(left.is_empty().then_some(()))
    })
    .with_context(|| format!("made {made:?}; left {left:?}\n{}", sys.logs()))?;
    Ok(())
}
