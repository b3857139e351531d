//! `regionUrlMaps`: the URL map of a regional load balancer (Compute API v1 reference,
//! `regionUrlMaps`). The same resource as [`super::url_maps`], whose services must be regional
//! backend services of the URL map's region ([`super::regional`]). Every service of one URL map
//! shares one `loadBalancingScheme` (a URL map belongs to one load balancer).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::{url_maps, Prepare};
use crate::snapshot::key_from_url;
use crate::validate::Obj;

/// Validates a regional URL map (see [`url_maps::prepare`]); errors: 400 `invalid` when its
/// backend services mix load balancing schemes.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    url_maps::prepare(cx, r)?;
    let mut services = Vec::new();
    collect_services(&Value::Object(r.clone()), &mut services);
    let schemes: BTreeSet<&str> = services
        .iter()
        .filter_map(|url| key_from_url(url))
        .filter_map(|k| cx.state.resources.get(&k))
        .filter_map(|bs| bs["loadBalancingScheme"].as_str())
        .collect();
    if schemes.len() > 1 {
        return Err(ApiError::invalid_value(
            "resource.defaultService",
            &schemes.into_iter().collect::<Vec<_>>().join(","),
            "All backend services of a URL map must have the same loadBalancingScheme.",
        ));
    }
    Ok(())
}

/// Every `service`, `defaultService` and `backendService` reference inside `v`.
fn collect_services(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("service" | "defaultService" | "backendService", Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => collect_services(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_services(x, out)),
        _ => {}
    }
}
