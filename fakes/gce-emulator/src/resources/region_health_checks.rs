//! `regionHealthChecks`: health checks of regional load balancers (Compute API v1 reference,
//! `regionHealthChecks`). The same resource as [`super::health_checks`], validated the same way;
//! regional backend services of INTERNAL_MANAGED and EXTERNAL_MANAGED load balancers must use one
//! of these, in their own region ([`super::regional`]).

use crate::errors::ApiError;
use crate::resources::{health_checks, Prepare};
use crate::validate::Obj;

/// Validates a regional health check (see [`health_checks::prepare`]).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    health_checks::prepare(cx, r)
}
