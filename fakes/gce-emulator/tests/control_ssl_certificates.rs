//! sslCertificates: SELF_MANAGED PEM validation (mismatched or garbage -> 400 naming the field;
//! the key is never returned), and the MANAGED lifecycle: PROVISIONING until a forwarding rule
//! serves it through a target HTTPS proxy, then ACTIVE with a certificate from the local CA.
//! Also the other secret the API takes but never returns: a backend service's IAP OAuth client
//! secret, served only as its SHA-256.

mod control_support;

use control_support::{poll, Emulator};
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

fn pair(name: &str) -> (String, String) {
    let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

#[tokio::test]
async fn self_managed_certificates_are_validated_and_keys_never_returned() {
    let emu = Emulator::start(&[]);
    let (cert, key) = pair("shop.example.com");
    let (_, other_key) = pair("other.example.com");
    let (c, e) = emu
        .post(
            &format!("{G}/sslCertificates"),
            &json!({"name": "c1", "certificate": cert, "privateKey": other_key}),
        )
        .await;
    assert_eq!(c, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resource.privateKey"),
        "{e}"
    );
    let (c, e) = emu.post(&format!("{G}/sslCertificates"), &json!({"name": "c1", "certificate": "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n", "privateKey": key})).await;
    assert_eq!(c, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resource.certificate"),
        "{e}"
    );
    assert_eq!(
        emu.post(
            &format!("{G}/sslCertificates"),
            &json!({"name": "c1", "certificate": cert, "privateKey": key})
        )
        .await
        .0,
        200
    );
    let (_, got) = emu.get(&format!("{G}/sslCertificates/c1")).await;
    assert_eq!(got["type"], "SELF_MANAGED");
    assert_eq!(got["subjectAlternativeNames"], json!(["shop.example.com"]));
    assert!(got["expireTime"].as_str().is_some_and(|t| t.len() > 10));
    assert!(got.get("privateKey").is_none());
    assert!(!emu
        .admin_get("state")
        .await
        .to_string()
        .contains("PRIVATE KEY"));
}

#[tokio::test]
async fn managed_certificates_become_active_once_served() {
    let emu = Emulator::start(&["--managed-cert-provisioning-ms", "300"]);
    let mc = json!({"name": "mc1", "type": "MANAGED", "managed": {"domains": ["shop.example.com", "www.example.com"]}});
    assert_eq!(emu.post(&format!("{G}/sslCertificates"), &mc).await.0, 200);
    let (_, got) = emu.get(&format!("{G}/sslCertificates/mc1")).await;
    assert_eq!(got["managed"]["status"], "PROVISIONING");
    assert_eq!(
        got["managed"]["domainStatus"]["www.example.com"],
        "PROVISIONING"
    );
    let (c, e) = emu
        .post(
            &format!("{G}/sslCertificates"),
            &json!({"name": "mc2", "type": "MANAGED", "managed": {"domains": ["*.example.com"]}}),
        )
        .await;
    assert_eq!(c, 400, "{e}");

    // Attached to a proxy but not served by a forwarding rule: still provisioning.
    assert_eq!(
        emu.post(&format!("{G}/backendServices"), &json!({"name": "bs1"}))
            .await
            .0,
        200
    );
    assert_eq!(
        emu.post(
            &format!("{G}/urlMaps"),
            &json!({"name": "um1", "defaultService": format!("{G}/backendServices/bs1")})
        )
        .await
        .0,
        200
    );
    let proxy = json!({"name": "p1", "urlMap": format!("{G}/urlMaps/um1"), "sslCertificates": [format!("{G}/sslCertificates/mc1")]});
    assert_eq!(
        emu.post(&format!("{G}/targetHttpsProxies"), &proxy).await.0,
        200
    );
    let (_, got) = emu.get(&format!("{G}/sslCertificates/mc1")).await;
    assert_eq!(got["managed"]["status"], "PROVISIONING");

    let fr =
        json!({"name": "fr1", "target": format!("{G}/targetHttpsProxies/p1"), "portRange": "443"});
    assert_eq!(emu.post(&format!("{G}/forwardingRules"), &fr).await.0, 200);
    let active: Value = poll(60, "the managed certificate to become ACTIVE", || async {
        let (_, v) = emu.get(&format!("{G}/sslCertificates/mc1")).await;
        (v["managed"]["status"] == "ACTIVE").then_some(v)
    })
    .await;
    assert_eq!(
        active["managed"]["domainStatus"]["shop.example.com"],
        "ACTIVE"
    );
    assert!(active["certificate"]
        .as_str()
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    assert_eq!(
        active["subjectAlternativeNames"],
        json!(["shop.example.com", "www.example.com"])
    );
    assert!(active["expireTime"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(active.get("privateKey").is_none());
    // In use by the proxy: cannot be deleted.
    assert_eq!(
        emu.send(
            reqwest::Method::DELETE,
            &format!("{G}/sslCertificates/mc1"),
            ""
        )
        .await
        .0,
        400
    );
}

/// Every `iap` object anywhere in `v` (a resource, a list, an aggregated list).
fn iaps(v: &Value) -> Vec<Value> {
    match v {
        Value::Object(o) => o
            .iter()
            .flat_map(|(k, v)| match k.as_str() {
                "iap" => vec![v.clone()],
                _ => iaps(v),
            })
            .collect(),
        Value::Array(a) => a.iter().flat_map(iaps).collect(),
        _ => Vec::new(),
    }
}

/// `iap.oauth2ClientSecret` is input only (Compute API v1 reference, `BackendServiceIAP`):
/// get, list and aggregatedList answer `oauth2ClientSecretSha256` (SHA-256, lowercase hex)
/// and never the secret, nor does the emulator's admin state; a patch of other fields keeps
/// the hash, a new secret replaces it.
#[tokio::test]
async fn iap_client_secrets_are_never_returned_only_their_sha256() {
    let emu = Emulator::start(&[]);
    let bs = json!({"name": "bs1", "iap": {"enabled": true, "oauth2ClientId": "client-1",
        "oauth2ClientSecret": "abc"}});
    assert_eq!(emu.post(&format!("{G}/backendServices"), &bs).await.0, 200);
    // SHA-256("abc"): the FIPS 180-2 test vector.
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    let served = json!({"enabled": true, "oauth2ClientId": "client-1",
        "oauth2ClientSecretSha256": abc});
    for path in [
        format!("{G}/backendServices/bs1"),
        format!("{G}/backendServices"),
        "projects/p1/aggregated/backendServices".to_string(),
    ] {
        let (c, got) = emu.get(&path).await;
        assert_eq!(c, 200, "{path}: {got}");
        assert_eq!(iaps(&got), vec![served.clone()], "{path}");
    }
    let patch = |body: Value| {
        let emu = &emu;
        async move {
            let path = format!("{G}/backendServices/bs1");
            let (c, v) = emu
                .send(reqwest::Method::PATCH, &path, &body.to_string())
                .await;
            assert_eq!(c, 200, "{v}");
            emu.get(&path).await.1
        }
    };
    let got = patch(json!({"description": "no secret sent"})).await;
    assert_eq!(got["iap"], served, "{got}");

    let secret = "iap-oauth-secret-0123456789";
    let got = patch(json!({"iap": {"oauth2ClientSecret": secret}})).await;
    let hash = got["iap"]["oauth2ClientSecretSha256"].as_str().unwrap();
    assert!(hash != abc && hash.len() == 64, "{got}");
    assert!(got["iap"].get("oauth2ClientSecret").is_none(), "{got}");
    for path in [
        format!("{G}/backendServices"),
        "projects/p1/aggregated/backendServices".to_string(),
    ] {
        assert!(
            !emu.get(&path).await.1.to_string().contains(secret),
            "{path}"
        );
    }
    assert!(!emu.admin_get("state").await.to_string().contains(secret));
}
