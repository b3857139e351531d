//! `regionTargetHttpProxies`: the target HTTP proxy of a regional load balancer (Compute API v1
//! reference, `regionTargetHttpProxies`; `setUrlMap` changes its URL map). Its `urlMap` must be
//! a regional URL map of the same region ([`super::regional`]).

use crate::errors::ApiError;
use crate::resources::{target_http_proxies, Prepare};
use crate::validate::Obj;

/// Validates a regional target HTTP proxy (see [`target_http_proxies::prepare`]).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    target_http_proxies::prepare(cx, r)
}
