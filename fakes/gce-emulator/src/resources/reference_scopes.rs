//! Which scopes a resource may reference (`projects/{p}/regions/{region}/...` against
//! `projects/{p}/global/...`), the scope rules of the Compute API for regional load balancers,
//! checked by `resources::prepare` after each collection's own validation:
//! - a regional resource references load balancing resources of its own region only (a
//!   regional URL map's services are regional backend services of the same region, a regional
//!   backend service's health check is a regional health check, its NEGs are in zones of the
//!   region): "Invalid value for field ...: the resource must be in region R";
//! - a global resource never references a regional load balancing resource.
//!
//! Networks are global and may be referenced from anywhere; subnetworks are regional and are
//! referenced from global resources too (instances, NEGs).

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::collections::{collection_of_key, Scope};
use crate::resources::references::Prepare;
use crate::resources::zones;
use crate::snapshot::key_from_url;
use crate::validate::Obj;

/// Collections whose references must stay in their scope (global to global, regional to the
/// same region).
const SCOPED: &[&str] = &[
    "healthChecks",
    "backendServices",
    "urlMaps",
    "sslCertificates",
    "sslPolicies",
    "securityPolicies",
    "targetHttpProxies",
    "targetHttpsProxies",
    "addresses",
    "forwardingRules",
];

/// Every reference (full URL) inside `v`, with the JSON path it was found at.
fn references<'v>(base: &str, path: String, v: &'v Value, out: &mut Vec<(String, &'v str)>) {
    match v {
        Value::String(s) if s.starts_with(base) => out.push((path, s)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                references(base, format!("{path}[{i}]"), x, out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                references(base, format!("{path}.{k}"), x, out);
            }
        }
        _ => {}
    }
}

/// The region of a key: `regions/R/...` gives R, `zones/Z/...` gives Z's region.
fn region_of_key(key: &str) -> Option<&str> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["projects", _, "regions", r, ..] => Some(r),
        ["projects", _, "zones", z, ..] => Some(zones::region_of(z)),
        _ => None,
    }
}

/// Refuses a reference of a regional resource (`body`, validated by its collection) to a scoped
/// or zonal resource outside `region`, or to a global load balancing resource. Errors: 400
/// `invalid` naming the field.
pub fn same_region_references(cx: &Prepare<'_>, region: &str, body: &Obj) -> Result<(), ApiError> {
    let mut refs = Vec::new();
    for (k, v) in body {
        references(cx.base(), format!("resource.{k}"), v, &mut refs);
    }
    for (field, url) in refs {
        let Some(key) = key_from_url(url) else {
            continue;
        };
        let Some(coll) = collection_of_key(&key) else {
            continue;
        };
        let scoped = SCOPED.contains(&coll.segment) || coll.segment == "subnetworks";
        let zonal = coll.scope == Scope::Zonal;
        if !(scoped || zonal) {
            continue;
        }
        if region_of_key(&key) != Some(region) {
            return Err(ApiError::invalid_value(
                &field,
                url,
                &format!(
                    "A regional resource in {region} can only reference {} in region {region}.",
                    coll.segment
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a global resource that references a regional load balancing resource (a global URL
/// map naming a regional backend service, ...). Errors: 400 `invalid` naming the field.
pub fn refuse_regional_references(body: &Obj) -> Result<(), ApiError> {
    for (k, v) in body {
        let mut refs = Vec::new();
        // References are normalised to full URLs by now; every emulator URL contains
        // `/compute/`, so that prefix finds them all whatever the base.
        references_anywhere(format!("resource.{k}"), v, &mut refs);
        for (field, url) in refs {
            let Some(key) = key_from_url(url) else {
                continue;
            };
            let Some(coll) = collection_of_key(&key) else {
                continue;
            };
            if coll.scope == Scope::Regional && SCOPED.contains(&coll.segment) {
                return Err(ApiError::invalid_value(
                    &field,
                    url,
                    &format!(
                        "A global resource cannot reference the regional {} {key}; use a global one.",
                        coll.segment
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn references_anywhere<'v>(path: String, v: &'v Value, out: &mut Vec<(String, &'v str)>) {
    references("http", path, v, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_of_keys() {
        assert_eq!(
            region_of_key("projects/p/regions/us-east1/urlMaps/u"),
            Some("us-east1")
        );
        assert_eq!(
            region_of_key("projects/p/zones/europe-west1-b/networkEndpointGroups/n"),
            Some("europe-west1")
        );
        assert_eq!(region_of_key("projects/p/global/urlMaps/u"), None);
    }

    #[test]
    fn global_bodies_may_not_name_regional_services() {
        let mut body = Obj::new();
        body.insert(
            "defaultService".into(),
            "http://h/compute/v1/projects/p/regions/us-east1/backendServices/b".into(),
        );
        assert!(refuse_regional_references(&body).is_err());
        body.insert(
            "defaultService".into(),
            "http://h/compute/v1/projects/p/global/backendServices/b".into(),
        );
        assert!(refuse_regional_references(&body).is_ok());
    }
}
