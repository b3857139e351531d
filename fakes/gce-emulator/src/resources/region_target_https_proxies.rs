//! `regionTargetHttpsProxies`: the target HTTPS proxy of a regional load balancer (Compute API
//! v1 reference, `regionTargetHttpsProxies`). Its URL map and SSL certificates are regional
//! ones of its region ([`super::regional`]); QUIC negotiation is a feature of the global
//! external Application Load Balancer only, so `quicOverride` other than NONE is refused.

use crate::errors::ApiError;
use crate::resources::{target_https_proxies, Prepare};
use crate::validate::{self, Obj};

/// Validates a regional target HTTPS proxy (see [`target_https_proxies::prepare`]).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    target_https_proxies::prepare(cx, r)?;
    if let Some(q) = validate::opt_str(r, "resource", "quicOverride")? {
        if q == "ENABLE" {
            return Err(ApiError::invalid_value(
                "resource.quicOverride",
                q,
                "QUIC is not supported by regional target HTTPS proxies.",
            ));
        }
    }
    Ok(())
}
