//! Request bodies against the Compute API v1 schema: a field the schema does not have is
//! refused as Google's API front end refuses it, with 400 and
//! `Invalid JSON payload received. Unknown name "x" at 'resource': Cannot find field.`
//!
//! The schema is not a list kept here: it is the model types of the official Rust client,
//! google-cloud-compute-v1 (generated from the API's discovery document), so every field of
//! every resource the emulator serves is known, including those it does not model (they are
//! accepted and stored as sent). Those types keep the fields they do not know aside instead
//! of failing; a body is checked by decoding it into its type and, when something was kept
//! aside, by decoding one small probe per field (the field with a `null` value, at its place
//! in the document) to find which field at which place was unknown.
//!
//! Collections are matched by `kind` (`compute#backendService`), so a regional twin of a
//! global collection is checked by the same type; custom verbs by their request type.

use std::fmt::Debug;

use google_cloud_compute_v1::model;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::errors::ApiError;

/// A schema check: `Err` with the unknown field's place (`resource.host_rules[0]`) and name.
pub type Check = fn(&Value) -> Result<(), (String, String)>;

fn check_as<T: DeserializeOwned + Debug>(body: &Value) -> Result<(), (String, String)> {
    match unknown_field::<T>(body) {
        Some(found) => Err(found),
        None => Ok(()),
    }
}

/// The schema of a resource of `kind` (`compute#urlMap`), `None` for a kind without one.
pub fn resource_check(kind: &str) -> Option<Check> {
    Some(match kind {
        "compute#address" => check_as::<model::Address>,
        "compute#backendService" => check_as::<model::BackendService>,
        "compute#firewall" => check_as::<model::Firewall>,
        "compute#forwardingRule" => check_as::<model::ForwardingRule>,
        "compute#healthCheck" => check_as::<model::HealthCheck>,
        "compute#instance" => check_as::<model::Instance>,
        "compute#network" => check_as::<model::Network>,
        "compute#networkEndpointGroup" => check_as::<model::NetworkEndpointGroup>,
        "compute#securityPolicy" => check_as::<model::SecurityPolicy>,
        "compute#sslCertificate" => check_as::<model::SslCertificate>,
        "compute#sslPolicy" => check_as::<model::SslPolicy>,
        "compute#subnetwork" => check_as::<model::Subnetwork>,
        "compute#targetHttpProxy" => check_as::<model::TargetHttpProxy>,
        "compute#targetHttpsProxy" => check_as::<model::TargetHttpsProxy>,
        "compute#targetSslProxy" => check_as::<model::TargetSslProxy>,
        "compute#targetTcpProxy" => check_as::<model::TargetTcpProxy>,
        "compute#urlMap" => check_as::<model::UrlMap>,
        _ => return None,
    })
}

/// The schema of the body of custom verb `verb` on a resource of `kind`, `None` for a verb
/// without a body (`removeRule`, `getRule`) or without a schema. The regional request types
/// of `setSslCertificates` and `setLabels` have the fields of the global ones checked here.
pub fn verb_check(kind: &str, verb: &str) -> Option<Check> {
    Some(match verb {
        "setUrlMap" => check_as::<model::UrlMapReference>,
        "setTarget" => check_as::<model::TargetReference>,
        "setSslPolicy" => check_as::<model::SslPolicyReference>,
        "setSecurityPolicy" | "setEdgeSecurityPolicy" => check_as::<model::SecurityPolicyReference>,
        "setSslCertificates" if kind == "compute#targetSslProxy" => {
            check_as::<model::TargetSslProxiesSetSslCertificatesRequest>
        }
        "setSslCertificates" => check_as::<model::TargetHttpsProxiesSetSslCertificatesRequest>,
        "setBackendService" if kind == "compute#targetSslProxy" => {
            check_as::<model::TargetSslProxiesSetBackendServiceRequest>
        }
        "setBackendService" => check_as::<model::TargetTcpProxiesSetBackendServiceRequest>,
        "setProxyHeader" if kind == "compute#targetSslProxy" => {
            check_as::<model::TargetSslProxiesSetProxyHeaderRequest>
        }
        "setProxyHeader" => check_as::<model::TargetTcpProxiesSetProxyHeaderRequest>,
        "setQuicOverride" => check_as::<model::TargetHttpsProxiesSetQuicOverrideRequest>,
        "setCertificateMap" => check_as::<model::TargetHttpsProxiesSetCertificateMapRequest>,
        "setLabels" if kind == "compute#instance" => check_as::<model::InstancesSetLabelsRequest>,
        "setLabels" => check_as::<model::GlobalSetLabelsRequest>,
        "setTags" => check_as::<model::Tags>,
        "getHealth" => check_as::<model::ResourceGroupReference>,
        "attachNetworkEndpoints" => check_as::<model::NetworkEndpointGroupsAttachEndpointsRequest>,
        "detachNetworkEndpoints" => check_as::<model::NetworkEndpointGroupsDetachEndpointsRequest>,
        "listNetworkEndpoints" => check_as::<model::NetworkEndpointGroupsListEndpointsRequest>,
        "validate" => check_as::<model::UrlMapsValidateRequest>,
        "invalidateCache" => check_as::<model::CacheInvalidationRule>,
        "addRule" | "patchRule" => check_as::<model::SecurityPolicyRule>,
        "enableXpnResource" => check_as::<model::ProjectsEnableXpnResourceRequest>,
        "disableXpnResource" => check_as::<model::ProjectsDisableXpnResourceRequest>,
        "listXpnHosts" => check_as::<model::ProjectsListXpnHostsRequest>,
        _ => return None,
    })
}

/// Runs `check` on a raw request body. A body that is not a JSON object passes: the method's
/// own parsing answers it (`parseError`). Errors: 400 `invalid` naming the unknown field.
pub fn check_body(check: Check, body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    check(&v).map_err(|(at, name)| {
        let mut e = ApiError::new(
            400,
            "invalid",
            format!("Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."),
        );
        e.field = Some(at);
        e
    })
}

/// One step from a document to a value inside it.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Whether decoding `doc` into `T` kept some field aside as unknown (`None`: it does not decode).
fn keeps_unknown<T: DeserializeOwned + Debug>(doc: Value) -> Option<bool> {
    let t: T = serde_json::from_value(doc).ok()?;
    // The generated Debug prints `_unknown_fields` only when some were kept aside.
    Some(format!("{t:?}").contains("_unknown_fields"))
}

/// `leaf` placed at `path` in an otherwise empty document.
fn wrap(path: &[Step], leaf: Value) -> Value {
    path.iter().rev().fold(leaf, |acc, step| match step {
        Step::Key(k) => Value::Object(Map::from_iter([(k.clone(), acc)])),
        Step::Index(_) => Value::Array(vec![acc]),
    })
}

/// `hostRules` -> `host_rules`: the proto field names Google's front end reports.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn place(path: &[Step]) -> String {
    let mut out = String::from("resource");
    for step in path {
        match step {
            Step::Key(k) => {
                out.push('.');
                out.push_str(&snake(k));
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The first field of `body` that type `T` does not have, as (place, name), or `None`.
pub fn unknown_field<T: DeserializeOwned + Debug>(body: &Value) -> Option<(String, String)> {
    // The common case, one decode: nothing was kept aside. (A string value that happens to
    // contain "_unknown_fields" only sends the check the slow way below.)
    if keeps_unknown::<T>(body.clone()) == Some(false) {
        return None;
    }
    let mut path = Vec::new();
    find::<T>(body, &mut path)
}

fn find<T: DeserializeOwned + Debug>(v: &Value, path: &mut Vec<Step>) -> Option<(String, String)> {
    match v {
        Value::Object(m) => {
            for (k, inner) in m {
                path.push(Step::Key(k.clone()));
                let probe = keeps_unknown::<T>(wrap(path, Value::Null));
                let found = match probe {
                    Some(true) => {
                        path.pop();
                        return Some((place(path), k.clone()));
                    }
                    // A known field: look inside it. (A probe that does not decode is a
                    // map of values, whose keys are data, or a scalar: nothing to find.)
                    Some(false) => find::<T>(inner, path),
                    None => None,
                };
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            if !item.is_object() {
                return None;
            }
            path.push(Step::Index(i));
            let found = find::<T>(item, path);
            path.pop();
            found
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_found_at_their_place() {
        let ok = json!({"name": "um", "defaultService": "x", "hostRules": [{"hosts": ["a"], "pathMatcher": "pm"}],
            "pathMatchers": [{"name": "pm", "pathRules": [{"paths": ["/a"], "service": "s"}]}],
            "headerAction": {"requestHeadersToAdd": [{"headerName": "a", "headerValue": "b"}]}});
        assert_eq!(unknown_field::<model::UrlMap>(&ok), None);
        let top = json!({"name": "um", "x": 1});
        assert_eq!(
            unknown_field::<model::UrlMap>(&top),
            Some(("resource".into(), "x".into()))
        );
        let nested = json!({"name": "um", "pathMatchers": [{"name": "a"}, {"name": "pm", "pathRules": [{"paths": ["/a"], "servce": "s"}]}]});
        assert_eq!(
            unknown_field::<model::UrlMap>(&nested),
            Some((
                "resource.path_matchers[1].path_rules[0]".into(),
                "servce".into()
            ))
        );
        // Label keys are data, not fields; a description may say anything.
        let labels =
            json!({"name": "a", "labels": {"anything": "v"}, "description": "_unknown_fields"});
        assert_eq!(unknown_field::<model::Address>(&labels), None);
    }

    #[test]
    fn bodies_get_googles_message() {
        let check = resource_check("compute#healthCheck").unwrap();
        let e = check_body(
            check,
            br#"{"name": "hc", "type": "HTTP", "httpHealthCheck": {"port": 80, "bogus": true}}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Invalid JSON payload received. Unknown name \"bogus\" at 'resource.http_health_check': Cannot find field."
        );
        assert_eq!(e.field.as_deref(), Some("resource.http_health_check"));
        assert!(
            check_body(check, b"{not json").is_ok(),
            "left to parseError"
        );
        let verb = verb_check("compute#targetHttpProxy", "setUrlMap").unwrap();
        assert!(check_body(verb, br#"{"urlMap": "u"}"#).is_ok());
        assert!(check_body(verb, br#"{"urlMap": "u", "url_map": "u"}"#).is_err());
        let tcp = resource_check("compute#targetTcpProxy").unwrap();
        assert!(check_body(
            tcp,
            br#"{"name": "t", "service": "s", "proxyHeader": "NONE"}"#
        )
        .is_ok());
        assert!(check_body(tcp, br#"{"name": "t", "sslCertificates": ["c"]}"#).is_err());
        let set = verb_check("compute#targetSslProxy", "setBackendService").unwrap();
        assert!(check_body(set, br#"{"service": "s"}"#).is_ok());
        assert!(check_body(set, br#"{"backendService": "s"}"#).is_err());
    }

    #[test]
    fn every_writable_collection_has_a_schema() {
        for c in crate::resources::COLLECTIONS.iter().filter(|c| c.writable) {
            assert!(resource_check(c.kind).is_some(), "no schema for {}", c.kind);
        }
    }
}
