//! `targetTcpProxies`: the target of a global external proxy Network Load Balancer
//! (Compute API v1 reference, `targetTcpProxies`): a backend service (`service`, required) and
//! `proxyHeader` (`NONE` or `PROXY_V1`); `setBackendService` and `setProxyHeader` change them.
//!
//! Network Services `tlsRoutes` may name a target TCP proxy in `targetProxies`; the data plane
//! then routes each connection by the SNI of its TLS ClientHello (see
//! `dataplane/tls_route.rs`), and connections no route matches go to `service`.

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Validates a target TCP proxy: `service` is required and must be a backend service of
/// protocol `TCP` (or `SSL`) that exists.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    service_field(cx, r, &["TCP", "SSL"])?;
    validate::enum_field(
        r,
        "resource",
        "proxyHeader",
        &["NONE", "PROXY_V1"],
        Some("NONE"),
    )?;
    validate::bool_field(r, "resource", "proxyBind", None)?;
    Ok(())
}

/// Normalises the required `service` reference and checks the backend service's protocol is
/// one of `protocols` (the real API refuses, for example, an HTTP backend service behind a
/// target TCP proxy).
pub(crate) fn service_field(
    cx: &Prepare<'_>,
    r: &mut Obj,
    protocols: &[&str],
) -> Result<(), ApiError> {
    let url = cx
        .ref_field(r, "resource", "service", &["backendServices"])?
        .ok_or_else(|| ApiError::required("resource.service"))?;
    let key = crate::snapshot::key_from_url(&url).unwrap_or_default();
    let protocol = cx
        .state
        .resources
        .get(&key)
        .and_then(|bs| bs["protocol"].as_str().map(str::to_string))
        .unwrap_or_else(|| "HTTP".to_string());
    if !protocols.contains(&protocol.as_str()) {
        return Err(ApiError::invalid_value(
            "resource.service",
            &url,
            &format!(
                "The backend service's protocol is {protocol}; this target proxy needs {}.",
                protocols.join(" or ")
            ),
        ));
    }
    Ok(())
}
