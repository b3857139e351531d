//! The HTTPS listener case of tests/gateway_conformance_e2e.rs (kubernetes-sigs/gateway-api
//! `conformance/tests/httproute-https-listener.{go,yaml}` and the Gateway
//! `same-namespace-with-https-listener` of `conformance/base/manifests.yaml`): HTTPS requests
//! through the emulated Application Load Balancer's target HTTPS proxy, each TLS handshake
//! verified (chain and name) against the certificate the test put in the listeners' Secret
//! `tls-validity-checks-certificate`, as upstream's `MakeTLSRequestAndExpectEventuallyConsistentResponse`
//! does with the Secret's certificate.
//!
//! Deviation: upstream's certificate names `*`, `*.org` and `*.wildcard.org`; TLS clients (rustls
//! here) refuse a wildcard over a top-level domain, so the certificate names the hosts the case
//! requests (`example.org`, `unknown-example.org`, `second-example.org`) and `*.wildcard.org`.

use anyhow::{ensure, Result};
use serde_json::Value;

use super::support::tls::https_get_with;
use super::support::{wait_for, DEADLINE};
use super::Cx;

/// The names of the certificate in `tls-validity-checks-certificate`.
pub const CERTIFICATE_HOSTS: &[&str] = &[
    "example.org",
    "unknown-example.org",
    "second-example.org",
    "*.wildcard.org",
];

/// One verified HTTPS `GET /` with SNI and Host `host`: (status, the Pod that answered).
fn https_request(cx: &Cx, host: &str) -> Result<(u16, String)> {
    let raw = https_get_with(cx.https_roots.clone(), &cx.https, host, "/")?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_default();
    let pod = raw
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["pod"].as_str().map(str::to_owned))
        .unwrap_or_default();
    Ok((status, pod))
}

/// `HTTPRouteHTTPSListener`: `example.org` reaches infra-backend-v1 through the listener `https`,
/// `second-example.org` infra-backend-v2 through `https-with-hostname` (the route without
/// hostnames bound to that listener), a host no route claims gets 404.
pub fn https_listener(cx: &Cx) -> Result<()> {
    for route in ["httproute-https-test", "httproute-https-test-no-hostname"] {
        cx.expect_route_condition("httproute", route, "Accepted", "True", "Accepted")?;
        cx.expect_route_condition("httproute", route, "ResolvedRefs", "True", "ResolvedRefs")?;
    }
    for (host, status, backend) in [
        ("example.org", 200, Some("infra-backend-v1")),
        ("unknown-example.org", 404, None),
        ("second-example.org", 200, Some("infra-backend-v2")),
    ] {
        wait_for(
            &format!("https://{host}/ answers {status}"),
            DEADLINE,
            || {
                let (got, pod) = https_request(cx, host)?;
                let backend_ok = backend.is_none_or(|b| pod.starts_with(&format!("{b}-")));
                ensure!(got == status && backend_ok, "got {got} from {pod:?}");
                Ok(Some(()))
            },
        )?;
    }
    Ok(())
}
