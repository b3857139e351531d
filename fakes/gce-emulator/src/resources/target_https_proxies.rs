//! `targetHttpsProxies`: a URL map, 1-15 SSL certificates and an optional SSL policy behind an
//! HTTPS forwarding rule (`setUrlMap`, `setSslCertificates`, `setSslPolicy`, `setQuicOverride`).

use crate::errors::ApiError;
use crate::resources::Prepare;
use crate::validate::{self, Obj};

/// Validates a target HTTPS proxy. Certificate maps are not emulated (400).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
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
    Ok(())
}
