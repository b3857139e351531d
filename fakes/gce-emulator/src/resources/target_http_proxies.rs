//! `targetHttpProxies` and `regionTargetHttpProxies`: a URL map behind an HTTP forwarding rule
//! (`setUrlMap` changes it; Compute API v1 reference, `targetHttpProxies` and
//! `regionTargetHttpProxies`). Both scopes are validated the same way; a regional proxy's
//! `urlMap` must be a regional URL map of the same region (`resources::reference_scopes`).

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Validates a target HTTP proxy of either scope: `urlMap` is required and must exist.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    if cx
        .ref_field(r, "resource", "urlMap", &["urlMaps"])?
        .is_none()
    {
        return Err(ApiError::required("resource.urlMap"));
    }
    super::load_balancing_schemes::check_target_proxy(cx, r)?;
    validate::bool_field(r, "resource", "proxyBind", None)?;
    validate::int_field(r, "resource", "httpKeepAliveTimeoutSec", 5, 1200, None)?;
    Ok(())
}
