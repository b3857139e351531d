//! `targetSslProxies`: the target of a global external proxy Network Load Balancer that
//! terminates TLS (Compute API v1 reference, `targetSslProxies`): a backend service
//! (`service`, required), 1-15 `sslCertificates` (chosen by SNI like a target HTTPS proxy's),
//! an optional `sslPolicy` and `proxyHeader`. Verbs: `setBackendService`,
//! `setSslCertificates`, `setSslPolicy`, `setProxyHeader`. Certificate maps are not emulated.
//!
//! The data plane terminates TLS with the certificates and forwards the decrypted bytes over
//! plain TCP to an endpoint of `service` (`dataplane/tls_route.rs`).

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::resources::target_tcp_proxies::service_field;
use crate::validate::{self, Obj};

/// Validates a target SSL proxy.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    service_field(cx, r, &["TCP", "SSL"])?;
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
        "proxyHeader",
        &["NONE", "PROXY_V1"],
        Some("NONE"),
    )?;
    Ok(())
}
