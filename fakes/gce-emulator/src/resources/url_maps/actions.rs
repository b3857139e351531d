//! What a URL map does with a matched request (Compute API v1 reference, `urlMaps`:
//! `defaultService`, `service`, `HttpRedirectAction`, `HttpRouteAction`): a backend service, a
//! redirect or a route action (weighted backend services), one of them required at each level.

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

const REDIRECT_CODES: &[&str] = &[
    "MOVED_PERMANENTLY_DEFAULT",
    "FOUND",
    "SEE_OTHER",
    "TEMPORARY_REDIRECT",
    "PERMANENT_REDIRECT",
];
/// What a URL map's services may be.
const SERVICES: &[&str] = &["backendServices"];

/// A default action: `defaultService`, `defaultUrlRedirect` or `defaultRouteAction` (one required).
pub fn default_action(
    cx: &Prepare<'_>,
    o: &mut Obj,
    prefix: &str,
    service_key: &str,
) -> Result<(), ApiError> {
    let svc = cx.ref_field(o, prefix, service_key, SERVICES)?;
    let redirect = redirect(o, prefix, "defaultUrlRedirect")?;
    let route = route_action(cx, o, prefix, "defaultRouteAction")?;
    match (svc.is_some(), redirect, route) {
        (false, false, false) => Err(ApiError::required(&validate::path(prefix, service_key))),
        (true, true, _) => Err(ApiError::invalid_value(
            &validate::path(prefix, "defaultUrlRedirect"),
            "",
            "Only one of defaultService and defaultUrlRedirect may be set.",
        )),
        _ => Ok(()),
    }
}

/// A rule's action: `service`, `urlRedirect` or `routeAction` (one required).
pub fn rule_action(
    cx: &Prepare<'_>,
    o: &mut Obj,
    prefix: &str,
    service_key: &str,
) -> Result<(), ApiError> {
    let svc = cx.ref_field(o, prefix, service_key, SERVICES)?;
    let redirect = redirect(o, prefix, "urlRedirect")?;
    let route = route_action(cx, o, prefix, "routeAction")?;
    if svc.is_none() && !redirect && !route {
        return Err(ApiError::required(&validate::path(prefix, service_key)));
    }
    Ok(())
}

/// A redirect at `key` (`defaultUrlRedirect`, `urlRedirect`): its response code, flags and
/// paths; whether one is set.
fn redirect(o: &mut Obj, prefix: &str, key: &str) -> Result<bool, ApiError> {
    let p = validate::path(prefix, key);
    let Some(rd) = validate::object_mut(o, prefix, key, false)? else {
        return Ok(false);
    };
    validate::enum_field(
        rd,
        &p,
        "redirectResponseCode",
        REDIRECT_CODES,
        Some("MOVED_PERMANENTLY_DEFAULT"),
    )?;
    validate::bool_field(rd, &p, "httpsRedirect", Some(false))?;
    validate::bool_field(rd, &p, "stripQuery", Some(false))?;
    for k in ["pathRedirect", "prefixRedirect"] {
        if let Some(v) = validate::opt_str(rd, &p, k)? {
            if !v.starts_with('/') {
                return Err(ApiError::invalid_value(
                    &validate::path(&p, k),
                    v,
                    "Must start with '/'.",
                ));
            }
        }
    }
    Ok(true)
}

/// A route action at `key`: its weighted backend services and weights; whether one is set.
fn route_action(cx: &Prepare<'_>, o: &mut Obj, prefix: &str, key: &str) -> Result<bool, ApiError> {
    let p = validate::path(prefix, key);
    let Some(ra) = validate::object_mut(o, prefix, key, false)? else {
        return Ok(false);
    };
    if let Some(wbs) = validate::array_mut(ra, &p, "weightedBackendServices")? {
        for (i, w) in wbs.iter_mut().enumerate() {
            let wp = format!("{p}.weightedBackendServices[{i}]");
            let wo = validate::object_item_mut(w, &wp)?;
            cx.ref_field(wo, &wp, "backendService", SERVICES)?;
            validate::int_field(wo, &wp, "weight", 0, 1000, None)?;
        }
    }
    Ok(true)
}
