//! The emulator as identity provider and IAM enforcer (`--iam`), driven by Google's own Rust
//! credential providers (google-cloud-auth) and the official Compute client:
//! - the metadata server on the API's port hands out short-lived tokens; a client that keeps
//!   calling across their expiry refreshes with no failed call;
//! - a key file from the admin API authenticates by self-signed JWT (google-cloud-auth's
//!   service account credentials) and by the JWT bearer grant at the token endpoint;
//! - a call needs its method's permission through the project's bindings, plus `use` of what
//!   its body references; a refusal is 403 in Google's words; the admin API's custom role
//!   (deploy/iam's YAML as it is) and bindings grant and revoke.

mod control_support;

use control_support::Emulator;
use google_cloud_compute_v1::client::HealthChecks;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const DEFAULT_SA: &str = "100000000001-compute@developer.gserviceaccount.com";
const OP_SA: &str = "op@p1.iam.gserviceaccount.com";

async fn health_checks(
    host: &str,
    creds: google_cloud_auth::credentials::Credentials,
) -> HealthChecks {
    HealthChecks::builder()
        .with_endpoint(host)
        .with_credentials(creds)
        .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
        .build()
        .await
        .expect("client")
}

/// `(HTTP status, message)` of a client error.
fn refusal(e: &google_cloud_gax::error::Error) -> (u16, String) {
    (
        e.http_status_code().unwrap_or(0),
        e.status()
            .map(|s| s.message.clone())
            .unwrap_or_else(|| e.to_string()),
    )
}

async fn grant(emu: &Emulator, method: Method, member: &str, role: &str) -> (u16, Value) {
    emu.admin(
        method,
        "iam/projects/p1/bindings",
        &json!({"member": member, "role": role}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_tokens_are_checked_refreshed_and_bound_by_role() {
    let emu = Emulator::start(&["--iam", "--token-lifetime-sec", "2"]);
    let host = emu.root.trim_end_matches('/').to_string();
    // No token: 401.
    let (code, body) = emu.get("projects/p1/global/healthChecks").await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = emu
        .send(Method::GET, "projects/p1/global/healthChecks", "")
        .await;
    assert_eq!(
        (code, body["error"]["errors"][0]["reason"].as_str()),
        (401, Some("required"))
    );

    // The metadata server's token, as ADC gets it with GCE_METADATA_HOST (here: the endpoint).
    let creds = google_cloud_auth::credentials::mds::Builder::default()
        .with_endpoint(&host)
        .build()
        .expect("mds credentials");
    let hc = health_checks(&host, creds).await;
    let e = hc.list().set_project("p1").send().await.unwrap_err();
    assert_eq!(
        refusal(&e),
        (
            403,
            "Required 'compute.healthChecks.list' permission for 'projects/p1'".into()
        )
    );

    // deploy/iam's role, loaded as it is, bound to the metadata server's account.
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/iam/gclb-operator-role.yaml"
    ))
    .unwrap();
    let r = emu
        .http
        .put(format!(
            "{}_emulator/iam/projects/p1/roles/gclbOperator",
            emu.root
        ))
        .body(yaml)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let member = format!("serviceAccount:{DEFAULT_SA}");
    let (code, body) = grant(
        &emu,
        Method::POST,
        &member,
        "projects/p1/roles/gclbOperator",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    hc.list()
        .set_project("p1")
        .send()
        .await
        .expect("list with the role");

    // Calls across several token lifetimes: each token expires, the client refreshes, and no
    // call fails.
    let issued = |v: Value| v["tokensIssued"].as_u64().unwrap();
    let first = issued(emu.admin_get("iam").await);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut calls = 0;
    while issued(emu.admin_get("iam").await) < first + 2 {
        assert!(Instant::now() < deadline, "no refresh within 60 s");
        hc.list()
            .set_project("p1")
            .send()
            .await
            .expect("every call succeeds across refreshes");
        calls += 1;
    }
    assert!(calls > 0);

    // Revoked: refused again.
    let (code, _) = grant(
        &emu,
        Method::DELETE,
        &member,
        "projects/p1/roles/gclbOperator",
    )
    .await;
    assert_eq!(code, 200);
    let e = hc.list().set_project("p1").send().await.unwrap_err();
    assert_eq!(refusal(&e).0, 403);
    // The dashboard's data: who may do what.
    let summary = emu.admin_get("iam").await;
    assert_eq!(summary["enforced"], true);
    assert!(
        summary["customRoles"]["projects/p1/roles/gclbOperator"]["includedPermissions"]
            .as_array()
            .unwrap()
            .contains(&json!("compute.urlMaps.create"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_files_authenticate_and_use_permissions_are_checked() {
    let emu = Emulator::start(&["--iam"]);
    let host = emu.root.trim_end_matches('/').to_string();
    let (code, key) = emu
        .admin(
            Method::POST,
            &format!("iam/serviceAccounts/{OP_SA}/keys"),
            &Value::Null,
        )
        .await;
    assert_eq!(code, 200, "{key}");
    assert_eq!(key["token_uri"], format!("{}token", emu.root));

    // google-cloud-auth's service account credentials: a self-signed JWT per call.
    let creds = google_cloud_auth::credentials::service_account::Builder::new(key.clone())
        .build()
        .expect("key file credentials");
    let hc = health_checks(&host, creds).await;
    let member = format!("serviceAccount:{OP_SA}");
    assert_eq!(
        refusal(&hc.list().set_project("p1").send().await.unwrap_err()).0,
        403
    );
    let (code, body) = grant(&emu, Method::POST, &member, "roles/compute.viewer").await;
    assert_eq!(code, 200, "{body}");
    hc.list()
        .set_project("p1")
        .send()
        .await
        .expect("viewer lists");
    let body: google_cloud_compute_v1::model::HealthCheck = serde_json::from_value(
        json!({"name": "hc", "type": "TCP", "tcpHealthCheck": {"port": 80}}),
    )
    .unwrap();
    let e = hc
        .insert()
        .set_project("p1")
        .set_body(body)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&e),
        (403, "Required 'compute.healthChecks.create' permission for 'projects/p1/global/healthChecks/hc'".into())
    );

    // The JWT bearer grant at the key file's token_uri (what gcloud and google-auth do).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let assertion = gce_emulator::tokens::sign_jwt(
        &key,
        &json!({"iss": OP_SA, "aud": key["token_uri"], "scope": "https://www.googleapis.com/auth/cloud-platform", "iat": now, "exp": now + 600}),
    )
    .unwrap();
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
        ("assertion", assertion.as_str()),
    ];
    let r = emu
        .http
        .post(format!("{}token", emu.root))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let token: Value = r.json().await.unwrap();
    let access = token["access_token"].as_str().unwrap().to_string();
    let r = emu
        .http
        .get(format!("{}projects/p1/global/healthChecks", emu.base))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bad = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
        ("assertion", "x.y.z"),
    ];
    let r = emu
        .http
        .post(format!("{}token", emu.root))
        .form(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = emu
        .http
        .get(format!("{}projects/p1/global/healthChecks", emu.base))
        .bearer_auth("ya29.not-issued")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // `use` of a referenced resource: creating a backend service that names a health check
    // needs compute.healthChecks.useReadOnly on it, beside compute.backendServices.create.
    let yaml = "title: t\nincludedPermissions:\n- compute.backendServices.create\n- compute.healthChecks.create\n- compute.globalOperations.get\n";
    let r = emu
        .http
        .put(format!(
            "{}_emulator/iam/projects/p1/roles/partial",
            emu.root
        ))
        .body(yaml)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (code, _) = grant(&emu, Method::POST, &member, "projects/p1/roles/partial").await;
    assert_eq!(code, 200);
    let post = |path: &str, body: Value| {
        emu.http
            .post(format!("{}{path}", emu.base))
            .bearer_auth(&access)
            .json(&body)
            .send()
    };
    let r = post(
        "projects/p1/global/healthChecks",
        json!({"name": "hc", "type": "TCP", "tcpHealthCheck": {"port": 80}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let bs = json!({"name": "bs", "protocol": "HTTP", "healthChecks": ["projects/p1/global/healthChecks/hc"]});
    let r = post("projects/p1/global/backendServices", bs.clone())
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e["error"]["message"],
        "Required 'compute.healthChecks.useReadOnly' permission for 'projects/p1/global/healthChecks/hc'"
    );
    assert_eq!(e["error"]["errors"][0]["reason"], "forbidden");
    let (code, _) = grant(
        &emu,
        Method::POST,
        &member,
        "roles/compute.loadBalancerAdmin",
    )
    .await;
    assert_eq!(code, 200);
    let r = post("projects/p1/global/backendServices", bs)
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // Unknown roles and malformed members are refused by the admin API.
    assert_eq!(
        grant(&emu, Method::POST, &member, "roles/nope").await.0,
        400
    );
    assert_eq!(
        grant(&emu, Method::POST, OP_SA, "roles/compute.viewer")
            .await
            .0,
        400
    );
}
