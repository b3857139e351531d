//! IAP in the data plane, in process: sign-in redirect, an allowed identity reaching a backend
//! that verifies the signed header against the published JWK set, another identity refused.

mod dataplane_support;

use std::sync::atomic::Ordering;

use dataplane_support::*;
use serde_json::{json, Value};

#[derive(Debug, serde::Deserialize)]
struct Claims {
    email: String,
    sub: String,
    iss: String,
}

/// What a backend does with `x-goog-iap-jwt-assertion` (IAP docs, "Securing your app with
/// signed headers"): verify ES256 with the key named by `kid` from the published JWK set, the
/// issuer and the audience.
fn verify(jwt: &str, jwks: &Value, audience: &str) -> Result<Claims, String> {
    let set: jsonwebtoken::jwk::JwkSet =
        serde_json::from_value(jwks.clone()).map_err(|e| e.to_string())?;
    let kid = jsonwebtoken::decode_header(jwt)
        .map_err(|e| e.to_string())?
        .kid
        .ok_or("no kid")?;
    let jwk = set.find(&kid).ok_or("unknown kid")?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v.set_audience(&[audience]);
    v.set_issuer(&["https://cloud.google.com/iap"]);
    jsonwebtoken::decode::<Claims>(jwt, &key, &v)
        .map(|d| d.claims)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_then_signed_headers_for_allowed_identities_only() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service(
        "bs",
        None,
        &[a.addr],
        json!({"id": "4242", "iap": {"enabled": true}}),
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["app.example"]);
    let base = format!("http://app.example:{port}");

    // Unauthenticated: redirected to the sign-in page, which the load balancer serves.
    let r = c.get(format!("{base}/orders?x=1")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 302);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(to, "/_gcp_iap/sign_in?continue=%2Forders%3Fx%3D1");
    let page = c.get(format!("{base}{to}")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page
        .text()
        .await
        .unwrap()
        .contains("action=\"/_gcp_iap/authenticate\""));
    assert_eq!(a.state.requests.load(Ordering::SeqCst), 0);

    // Only alice is allowed (roles/iap.httpsResourceAccessor).
    w.dp.iap().set_accessors(vec![(
        "user:alice@example.com".into(),
        key("global/backendServices/bs"),
    )]);
    let sign_in = |email: &'static str| {
        let c = c.clone();
        let base = base.clone();
        async move {
            let r = c
                .get(format!(
                    "{base}/_gcp_iap/authenticate?email={email}&continue=%2Forders"
                ))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 302);
            assert_eq!(r.headers()["location"], "/orders");
            let cookie = r.headers()["set-cookie"].to_str().unwrap();
            cookie.split(';').next().unwrap().to_string()
        }
    };
    let alice = sign_in("alice@example.com").await;
    let r = c
        .get(format!("{base}/orders"))
        .header("cookie", &alice)
        // A client cannot forge the identity headers: IAP replaces them.
        .header(
            "x-goog-authenticated-user-email",
            "accounts.google.com:mallory@example.com",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    let h = &v["headers"];
    assert_eq!(
        h["x-goog-authenticated-user-email"],
        "accounts.google.com:alice@example.com"
    );
    let id = h["x-goog-authenticated-user-id"].as_str().unwrap();
    let jwt = h["x-goog-iap-jwt-assertion"]
        .as_str()
        .expect("signed header");
    let audience = format!(
        "/projects/{}/global/backendServices/4242",
        gce_emulator::resources::projects::number("p")
    );
    let claims = verify(jwt, &w.dp.iap().jwks(), &audience).expect("the JWT verifies");
    assert_eq!(claims.email, "alice@example.com");
    assert_eq!(claims.iss, "https://cloud.google.com/iap");
    assert_eq!(claims.sub, id);
    // Against another key set, or another audience, it does not verify.
    assert!(verify(
        jwt,
        &w.dp.iap().jwks(),
        "/projects/1/global/backendServices/1"
    )
    .is_err());

    // Bob signs in but is not allowed: 403, the backend is not reached.
    let bob = sign_in("bob@example.com").await;
    let seen = a.state.requests.load(Ordering::SeqCst);
    let r = c
        .get(format!("{base}/orders"))
        .header("cookie", &bob)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(a.state.requests.load(Ordering::SeqCst), seen);
    // A forged session cookie is a sign-in redirect, not a pass.
    let forged = alice.replace("GCP_IAP_AUTH_TOKEN=", "GCP_IAP_AUTH_TOKEN=x");
    let r = c
        .get(format!("{base}/orders"))
        .header("cookie", forged)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 302);
}
