//! `targetHttpsProxies` and `regionTargetHttpsProxies`: a URL map, 1-15 SSL certificates and an
//! optional SSL policy behind an HTTPS forwarding rule (`setUrlMap`, `setSslCertificates`,
//! `setSslPolicy`, `setQuicOverride`; Compute API v1 reference, `targetHttpsProxies` and
//! `regionTargetHttpsProxies`). A regional proxy's URL map and SSL certificates are regional
//! ones of its region (`resources::reference_scopes`); QUIC negotiation is a feature of the
//! global external Application Load Balancer only, so a regional proxy refuses `quicOverride`
//! ENABLE.

use crate::errors::ApiError;
use crate::resources::collections::Scope;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Validates a target HTTPS proxy of `scope` (global or regional). Errors: 400 `invalid` for a
/// certificate map (not emulated), a missing URL map or certificate, more than 15 certificates,
/// and `quicOverride: ENABLE` on a regional proxy; 404 for a reference to a missing resource.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj, scope: Scope) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    if cx
        .ref_field(r, "resource", "urlMap", &["urlMaps"])?
        .is_none()
    {
        return Err(ApiError::required("resource.urlMap"));
    }
    super::load_balancing_schemes::check_target_proxy(cx, r)?;
    if let Some(m) = validate::opt_str(r, "resource", "certificateMap")? {
        return Err(ApiError::invalid_value(
            "resource.certificateMap",
            m,
            "Certificate Manager maps are not emulated; use sslCertificates.",
        ));
    }
    let certs = cx.ref_list(r, "resource", "sslCertificates", &["sslCertificates"])?;
    if certs.is_empty() {
        return Err(ApiError::required("resource.sslCertificates"));
    }
    if certs.len() > 15 {
        return Err(ApiError::invalid_value(
            "resource.sslCertificates",
            &certs.len().to_string(),
            "At most 15 SSL certificates may be attached.",
        ));
    }
    cx.ref_field(r, "resource", "sslPolicy", &["sslPolicies"])?;
    validate::enum_field(
        r,
        "resource",
        "quicOverride",
        &["NONE", "ENABLE", "DISABLE"],
        Some("NONE"),
    )?;
    validate::enum_field(
        r,
        "resource",
        "tlsEarlyData",
        &["DISABLED", "PERMISSIVE", "STRICT", "UNRESTRICTED"],
        None,
    )?;
    validate::int_field(r, "resource", "httpKeepAliveTimeoutSec", 5, 1200, None)?;
    if scope == Scope::Regional
        && validate::opt_str(r, "resource", "quicOverride")? == Some("ENABLE")
    {
        return Err(ApiError::invalid_value(
            "resource.quicOverride",
            "ENABLE",
            "QUIC is not supported by regional target HTTPS proxies.",
        ));
    }
    Ok(())
}
