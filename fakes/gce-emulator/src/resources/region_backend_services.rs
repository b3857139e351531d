//! `regionBackendServices`: backend services of regional load balancers (Compute API v1
//! reference, `regionBackendServices`). The emulator serves the proxy load balancers, so a
//! regional backend service is one of the regional internal Application Load Balancer
//! (`loadBalancingScheme: INTERNAL_MANAGED`) or of the regional external Application Load
//! Balancer (`EXTERNAL_MANAGED`); the passthrough schemes (INTERNAL, EXTERNAL: the API's
//! default for this collection) answer 400 saying so. Cloud CDN is a feature of the global
//! external load balancers only ("Cloud CDN ... is supported with the global external
//! Application Load Balancer and the classic Application Load Balancer"), so `enableCDN: true`
//! and `cdnPolicy` are refused. Health checks and NEGs must be in the service's region
//! ([`super::regional`]). Otherwise validated as [`super::backend_services`].

use crate::errors::ApiError;
use crate::resources::{backend_services, Prepare};
use crate::validate::{self, Obj};

/// Load balancing schemes of the regional Application Load Balancers.
pub const PROXY_SCHEMES: &[&str] = &["INTERNAL_MANAGED", "EXTERNAL_MANAGED"];

/// Validates a regional backend service (see the module docs).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    if validate::opt_str(r, "resource", "loadBalancingScheme")?.is_none() {
        r.insert("loadBalancingScheme".into(), "INTERNAL".into());
    }
    backend_services::prepare(cx, r)?;
    let scheme = validate::req_str(r, "resource", "loadBalancingScheme")?;
    if !PROXY_SCHEMES.contains(&scheme) {
        return Err(ApiError::invalid_value(
            "resource.loadBalancingScheme",
            scheme,
            "The emulator serves regional backend services of the regional Application Load Balancers only: use INTERNAL_MANAGED or EXTERNAL_MANAGED (passthrough Network Load Balancers are not emulated).",
        ));
    }
    if r.get("enableCDN").and_then(serde_json::Value::as_bool) == Some(true)
        || r.contains_key("cdnPolicy")
    {
        return Err(ApiError::invalid_value(
            "resource.enableCDN",
            "true",
            "Cloud CDN is not supported for regional backend services; it requires the global external Application Load Balancer.",
        ));
    }
    if r.get("edgeSecurityPolicy").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid_value(
            "resource.edgeSecurityPolicy",
            "",
            "Edge security policies are not supported for regional backend services.",
        ));
    }
    Ok(())
}
