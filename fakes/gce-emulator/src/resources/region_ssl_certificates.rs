//! `regionSslCertificates`: certificates of regional target HTTPS proxies (Compute API v1
//! reference, `regionSslCertificates`). Only self-managed certificates exist in a region:
//! Google-managed certificates are global ("Regional SSL certificates can only be
//! SELF_MANAGED").

use crate::errors::ApiError;
use crate::resources::{ssl_certificates, Prepare};
use crate::validate::{self, Obj};

/// Validates a regional SSL certificate (see [`ssl_certificates::prepare`]); errors: 400
/// `invalid` for `type: MANAGED`.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    if validate::opt_str(r, "resource", "type")? == Some("MANAGED") || r.contains_key("managed") {
        return Err(ApiError::invalid_value(
            "resource.type",
            "MANAGED",
            "Regional SSL certificates can only be SELF_MANAGED.",
        ));
    }
    ssl_certificates::prepare(cx, r)
}
