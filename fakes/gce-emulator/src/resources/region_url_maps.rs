//! `regionUrlMaps`: the URL map of a regional load balancer (Compute API v1 reference,
//! `regionUrlMaps`). The same resource as [`super::url_maps`], whose services must be regional
//! backend services of the URL map's region ([`super::regional`]). Every service of one URL map
//! shares one `loadBalancingScheme` (a URL map belongs to one load balancer:
//! [`super::load_balancing_schemes`]).

use crate::errors::ApiError;
use crate::resources::{url_maps, Prepare};
use crate::validate::Obj;

/// Validates a regional URL map (see [`url_maps::prepare`]); errors: 400 `invalid` when its
/// backend services mix load balancing schemes.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    url_maps::prepare(cx, r)
}
