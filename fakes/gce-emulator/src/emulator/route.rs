//! Routing: an API request's method and path to the [`Call`] it asks for, and the API method
//! id (`compute.urlMaps.insert`) that fault injection, call counting and IAM use. Paths follow
//! the Compute API v1 reference, including the legacy `/global/`-less paths of three verbs; the
//! beta and alpha APIs have the same paths under their own prefix (see [`super::version`]).

use http::Method;

use crate::emulator::request::ApiRequest;
use crate::errors::ApiError;
use crate::methods::Target;
use crate::resources::{self, collection, zones, Collection, Scope};

/// What a request asks for, after routing.
#[derive(Clone, Debug)]
pub(crate) enum Call {
    List(Target),
    Get(Target),
    Insert(Target),
    Delete(Target),
    Update(Target, bool),
    Custom(Target, String),
    Aggregated(&'static Collection, String),
    ZoneList(String),
    ZoneGet(String, String),
    OpList(String, Option<String>),
    OpGet(String, Option<String>, String),
    OpWait(String, Option<String>, String),
    OpDelete(String, Option<String>, String),
    /// `projects.get`.
    ProjectGet(String),
    /// A project-level verb: `enableXpnHost`, `disableXpnHost`, `enableXpnResource`,
    /// `disableXpnResource`, `getXpnHost`, `getXpnResources`, `listXpnHosts`.
    ProjectVerb(String, &'static str),
}

/// Project-level verbs and their HTTP method (Compute API v1 reference, `projects`).
const PROJECT_VERBS: &[(&str, Method)] = &[
    ("enableXpnHost", Method::POST),
    ("disableXpnHost", Method::POST),
    ("enableXpnResource", Method::POST),
    ("disableXpnResource", Method::POST),
    ("getXpnHost", Method::GET),
    ("getXpnResources", Method::GET),
    ("listXpnHosts", Method::POST),
];

pub(crate) fn method_not_found(req: &ApiRequest) -> ApiError {
    ApiError::new(
        404,
        "notFound",
        format!(
            "The requested URL /compute/{}/{} (method {}) was not found on this server.",
            req.version.segment(),
            req.path,
            req.method
        ),
    )
}

/// Routes a request to a [`Call`]. Errors: 404 for unknown paths, methods and collections.
pub(crate) fn route(req: &ApiRequest) -> Result<Call, ApiError> {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let m = &req.method;
    let nf = || method_not_found(req);
    let target =
        |coll: &'static Collection, project: &str, zone: Option<&str>, name: Option<&str>| Target {
            coll,
            project: project.to_string(),
            zone: zone.map(str::to_string),
            name: name.map(str::to_string),
        };
    let (project, rest) = match segs.as_slice() {
        ["projects", p, rest @ ..] => (*p, rest),
        _ => return Err(nf()),
    };
    let (scope, zone, coll_segs): (Scope, Option<&str>, &[&str]) = match rest {
        [] if m == Method::GET => return Ok(Call::ProjectGet(project.into())),
        [verb] if *verb != "zones" => {
            return PROJECT_VERBS
                .iter()
                .find(|(v, method)| v == verb && method == m)
                .map(|(v, _)| Call::ProjectVerb(project.into(), v))
                .ok_or_else(nf)
        }
        // Three global verbs keep the v1 API's legacy path without `/global/`:
        // `projects/{p}/targetHttpProxies/{name}/setUrlMap`,
        // `projects/{p}/targetHttpsProxies/{name}/setUrlMap` and `.../setSslCertificates`
        // (Compute API v1 reference; google-cloud-compute-v1 and gcloud send exactly these).
        [seg @ ("targetHttpProxies" | "targetHttpsProxies"), name, verb]
            if m == Method::POST && legacy_global_verb(seg, verb) =>
        {
            let coll = collection(Scope::Global, seg).ok_or_else(nf)?;
            return Ok(Call::Custom(
                target(coll, project, None, Some(name)),
                verb.to_string(),
            ));
        }
        ["zones"] if m == Method::GET => return Ok(Call::ZoneList(project.into())),
        ["zones", z] if m == Method::GET => {
            return Ok(Call::ZoneGet(project.into(), z.to_string()))
        }
        ["aggregated", seg] if m == Method::GET => {
            let coll = resources::all()
                .find(|c| c.segment == *seg && matches!(c.scope, Scope::Global | Scope::Zonal))
                .or_else(|| collection(Scope::Regional, seg))
                .ok_or_else(nf)?;
            return Ok(Call::Aggregated(coll, project.into()));
        }
        ["global", rest @ ..] => (Scope::Global, None, rest),
        ["zones", z, rest @ ..] => (Scope::Zonal, Some(*z), rest),
        // Regional collections: the region must be one of the served zones' regions.
        ["regions", r, rest @ ..] => {
            if !zones::regions().contains(r) {
                return Err(ApiError::not_found(&format!(
                    "projects/{project}/regions/{r}"
                )));
            }
            (Scope::Regional, Some(*r), rest)
        }
        _ => return Err(nf()),
    };
    // Operations live at their scope: `zones/Z/operations`, `regions/R/operations`, `global`.
    let zone_s = match scope {
        Scope::Zonal => zone.map(|z| format!("zones/{z}")),
        Scope::Regional => zone.map(|r| format!("regions/{r}")),
        _ => None,
    };
    match coll_segs {
        ["operations"] if m == Method::GET => return Ok(Call::OpList(project.into(), zone_s)),
        ["operations", name] if m == Method::GET => {
            return Ok(Call::OpGet(project.into(), zone_s, name.to_string()))
        }
        ["operations", name] if m == Method::DELETE => {
            return Ok(Call::OpDelete(project.into(), zone_s, name.to_string()))
        }
        ["operations", name, "wait"] if m == Method::POST => {
            return Ok(Call::OpWait(project.into(), zone_s, name.to_string()))
        }
        ["operations", ..] => return Err(nf()),
        _ => {}
    }
    let (seg, tail) = coll_segs.split_first().ok_or_else(nf)?;
    let coll = collection(scope, seg).ok_or_else(nf)?;
    Ok(match tail {
        [] if m == Method::GET => Call::List(target(coll, project, zone, None)),
        [] if m == Method::POST => Call::Insert(target(coll, project, zone, None)),
        [name] if m == Method::GET => Call::Get(target(coll, project, zone, Some(name))),
        [name] if m == Method::DELETE => Call::Delete(target(coll, project, zone, Some(name))),
        [name] if m == Method::PATCH => Call::Update(target(coll, project, zone, Some(name)), true),
        [name] if m == Method::PUT => Call::Update(target(coll, project, zone, Some(name)), false),
        [_, verb] if zone.is_none() && legacy_global_verb(seg, verb) => return Err(nf()),
        [name, verb] if m == Method::POST || (m == Method::GET && *verb == "getRule") => {
            Call::Custom(target(coll, project, zone, Some(name)), verb.to_string())
        }
        _ => return Err(nf()),
    })
}

/// The operations collection of an operation location: globalOperations, zoneOperations or
/// regionOperations (Compute API v1 reference).
fn operations_api(location: Option<&str>) -> &'static str {
    match location {
        Some(l) if l.starts_with("regions/") => "regionOperations",
        Some(_) => "zoneOperations",
        None => "globalOperations",
    }
}

/// Whether `{segment}/{name}/{verb}` is one of the global custom methods whose v1 path has no
/// `/global/` segment. The real API serves these only there; the `/global/...` form is a 404.
fn legacy_global_verb(segment: &str, verb: &str) -> bool {
    matches!(
        (segment, verb),
        ("targetHttpProxies", "setUrlMap")
            | ("targetHttpsProxies", "setUrlMap")
            | ("targetHttpsProxies", "setSslCertificates")
    )
}

/// The API method id of a call (`compute.globalForwardingRules.insert`).
pub(crate) fn method_id(call: &Call) -> String {
    let (api, verb): (&str, &str) = match call {
        Call::List(t) => (t.coll.api, "list"),
        Call::Get(t) => (t.coll.api, "get"),
        Call::Insert(t) => (t.coll.api, "insert"),
        Call::Delete(t) => (t.coll.api, "delete"),
        Call::Update(t, true) => (t.coll.api, "patch"),
        Call::Update(t, false) => (t.coll.api, "update"),
        Call::Custom(t, v) => (t.coll.api, v.as_str()),
        Call::Aggregated(c, _) => (c.segment, "aggregatedList"),
        Call::ZoneList(_) => ("zones", "list"),
        Call::ZoneGet(..) => ("zones", "get"),
        Call::ProjectGet(_) => ("projects", "get"),
        Call::ProjectVerb(_, v) => ("projects", v),
        Call::OpList(_, z) => (operations_api(z.as_deref()), "list"),
        Call::OpGet(_, z, _) => (operations_api(z.as_deref()), "get"),
        Call::OpWait(_, z, _) => (operations_api(z.as_deref()), "wait"),
        Call::OpDelete(_, z, _) => (operations_api(z.as_deref()), "delete"),
    };
    format!("compute.{api}.{verb}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn req(m: Method, path: &str) -> ApiRequest {
        ApiRequest {
            method: m,
            path: path.into(),
            query: vec![],
            body: Bytes::new(),
            version: Default::default(),
            token: None,
        }
    }

    #[test]
    fn method_ids_follow_the_api() {
        let cases = [
            (
                Method::POST,
                "projects/p/global/forwardingRules",
                "compute.globalForwardingRules.insert",
            ),
            (
                Method::GET,
                "projects/p/aggregated/networkEndpointGroups",
                "compute.networkEndpointGroups.aggregatedList",
            ),
            (
                Method::POST,
                "projects/p/zones/us-central1-a/operations/op1/wait",
                "compute.zoneOperations.wait",
            ),
            (
                Method::POST,
                "projects/p/global/backendServices/bs/getHealth",
                "compute.backendServices.getHealth",
            ),
            (
                Method::PATCH,
                "projects/p/global/urlMaps/um",
                "compute.urlMaps.patch",
            ),
            (
                Method::GET,
                "projects/p/global/addresses",
                "compute.globalAddresses.list",
            ),
            (Method::GET, "projects/p", "compute.projects.get"),
            (
                Method::POST,
                "projects/p/enableXpnResource",
                "compute.projects.enableXpnResource",
            ),
            (
                Method::GET,
                "projects/p/getXpnHost",
                "compute.projects.getXpnHost",
            ),
            (
                Method::POST,
                "projects/p/zones/us-central1-a/instances/vm/setTags",
                "compute.instances.setTags",
            ),
        ];
        for (m, p, want) in cases {
            assert_eq!(method_id(&route(&req(m, p)).unwrap()), want, "{p}");
        }
        assert_eq!(
            route(&req(Method::GET, "projects/p/global/instances"))
                .unwrap_err()
                .code,
            404
        );
    }
}
