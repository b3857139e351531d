//! sslCertificates: SELF_MANAGED PEM validation (mismatched or garbage -> 400 naming the field;
//! the key is never returned), and the MANAGED lifecycle: PROVISIONING until a forwarding rule
//! serves it through a target HTTPS proxy, then ACTIVE with a certificate from the local CA.

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
