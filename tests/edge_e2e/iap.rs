//! IAP through the Ingress: the sign-in redirect, an allowed identity whose signed header the
//! test verifies against the published keys, and another identity refused with 403.

use super::*;

/// IAP through the load balancer; the test plays the backend that verifies the signed header.
pub(super) fn iap(lb: &Lb, private: &Value) -> Result<()> {
    // Unauthenticated: redirected to the sign-in page the load balancer serves.
    let a = lb.get(IAP, "/orders?x=1", &[])?;
    assert_eq!(a.status, 302, "{}", a.body);
    let to = a.header("location").unwrap_or_default().to_string();
    assert!(to.starts_with("/_gcp_iap/sign_in?continue="), "{to}");
    let page = lb.get(IAP, &to, &[])?;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("/_gcp_iap/authenticate"),
        "{}",
        page.body
    );

    // Only alice may pass (what roles/iap.httpsResourceAccessor grants), by the admin API.
    let bs_url = private["selfLink"].as_str().unwrap_or_default();
    let resp = lb
        .http
        .put(format!("{}_emulator/iap/accessors", lb.sys.compute_url))
        .json(
            &json!({"bindings": [{"member": "user:alice@example.com", "backendService": bs_url}]}),
        )
        .send()?;
    assert!(resp.status().is_success(), "{}", resp.text()?);
    let sign_in = |email: &str| -> Result<String> {
        let a = lb.get(
            IAP,
            &format!("/_gcp_iap/authenticate?email={email}&continue=%2Forders"),
            &[],
        )?;
        assert_eq!((a.status, a.header("location")), (302, Some("/orders")));
        let cookie = a
            .header("set-cookie")
            .ok_or_else(|| anyhow!("no session"))?;
        Ok(cookie.split(';').next().unwrap_or_default().to_string())
    };
    let alice = sign_in("alice@example.com")?;
    let forged = (
        "x-goog-authenticated-user-email",
        "accounts.google.com:eve@example.com",
    );
    // (Polled: the backend service's endpoint may still be on its way to healthy; a 502 does
    // not reach the Pod either.)
    let a = wait_for("alice to reach the backend", DEADLINE, || {
        let a = lb.get(IAP, "/orders", &[("cookie", &alice), forged])?;
        Ok((a.status == 200).then_some(a))
    })?;
    // The redirect and the sign-in never reached the Pod: this is its first /orders.
    assert_eq!(a.path_requests(), 1);
    let echo: Value = serde_json::from_str(&a.body)?;
    let h = &echo["headers"];
    assert_eq!(
        h["x-goog-authenticated-user-email"],
        "accounts.google.com:alice@example.com"
    );
    let jwt = h["x-goog-iap-jwt-assertion"]
        .as_str()
        .ok_or_else(|| anyhow!("no signed header: {h}"))?;
    // The backend's check (IAP docs, "Securing your app with signed headers"): ES256 under the
    // published key named by `kid`, issuer IAP, audience this backend service.
    let project = lb
        .sys
        .compute_get(&format!("compute/v1/projects/{PROJECT}"))?;
    let audience = format!(
        "/projects/{}/global/backendServices/{}",
        project["id"].as_str().unwrap_or_default(),
        private["id"].as_str().unwrap_or_default()
    );
    let jwks: jsonwebtoken::jwk::JwkSet =
        serde_json::from_value(lb.sys.compute_get("_emulator/iap/public_key-jwk")?)?;
    let claims = verify_iap_jwt(jwt, &jwks, &audience)?;
    assert_eq!(claims["email"], "alice@example.com");
    assert_eq!(claims["sub"], h["x-goog-authenticated-user-id"]);
    assert!(
        verify_iap_jwt(jwt, &jwks, "/projects/1/global/backendServices/1").is_err(),
        "the JWT verifies for another audience"
    );

    // Bob signs in but is not allowed: 403, and the Pod does not see him.
    let bob = sign_in("bob@example.com")?;
    assert_eq!(lb.get(IAP, "/orders", &[("cookie", &bob)])?.status, 403);
    let again = lb.get(IAP, "/orders", &[("cookie", &alice)])?;
    assert_eq!(again.path_requests(), 2, "bob's request reached the Pod");
    Ok(())
}

/// Verifies `x-goog-iap-jwt-assertion` as a backend does; returns its claims.
pub(super) fn verify_iap_jwt(
    jwt: &str,
    jwks: &jsonwebtoken::jwk::JwkSet,
    audience: &str,
) -> Result<Value> {
    let kid = jsonwebtoken::decode_header(jwt)?
        .kid
        .ok_or_else(|| anyhow!("no kid in the JWT header"))?;
    let jwk = jwks
        .find(&kid)
        .ok_or_else(|| anyhow!("kid {kid} is not published"))?;
    let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    rules.set_audience(&[audience]);
    rules.set_issuer(&["https://cloud.google.com/iap"]);
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk)?;
    Ok(jsonwebtoken::decode::<Value>(jwt, &key, &rules)?.claims)
}
