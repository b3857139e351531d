//! Desired-vs-observed comparison of Compute resources.
//!
//! Both sides are serialised to their wire JSON (camelCase, as in the Compute API reference),
//! then every field translation set is compared with what the API returned:
//! - references are normalised to `projects/...` (the API answers with full URLs);
//! - fields only the server sets (`id`, `selfLink`, `fingerprint`, `creationTimestamp`, `kind`)
//!   are never in the desired value, so they are ignored;
//! - a field the server omits counts as equal to a desired zero value (`false`, `0`, `""`,
//!   empty list), since the API leaves defaults out;
//! - nested objects compare only the keys translation set (the server adds defaults inside them,
//!   e.g. `httpHealthCheck.proxyHeader`), but lists must match in length and order;
//! - top-level `clearable` lists (e.g. a URL map's `hostRules`) must be empty on the server when
//!   the desired value has none, because empty lists are not serialised at all.
//!
//! Getting this right is what makes a no-op resync send zero mutating calls.

use serde::Serialize;
use serde_json::Value;

use crate::compute::reference::normalize;

/// The JSON path of the first field where `observed` does not satisfy `desired`, or `None`
/// when they agree.
pub fn first_difference<T: Serialize>(
    project: &str,
    desired: &T,
    observed: &T,
    clearable: &[&str],
) -> Option<String> {
    let desired = serde_json::to_value(desired).unwrap_or(Value::Null);
    let observed = serde_json::to_value(observed).unwrap_or(Value::Null);
    if let Some(path) = differs(project, "", &desired, &observed) {
        return Some(path);
    }
    for key in clearable {
        let wanted = desired.get(*key).unwrap_or(&Value::Null);
        let found = observed.get(*key).unwrap_or(&Value::Null);
        if is_zero(wanted) && !is_zero(found) {
            return Some((*key).to_string());
        }
    }
    None
}

fn differs(project: &str, path: &str, desired: &Value, observed: &Value) -> Option<String> {
    let here = || {
        if path.is_empty() {
            "<root>".to_string()
        } else {
            path.to_string()
        }
    };
    match (desired, observed) {
        (_, Value::Null) => (!is_zero(desired)).then(here),
        (Value::Object(want), Value::Object(got)) => want.iter().find_map(|(key, value)| {
            let child = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            differs(project, &child, value, got.get(key).unwrap_or(&Value::Null))
        }),
        (Value::Array(want), Value::Array(got)) => {
            if want.len() != got.len() {
                return Some(here());
            }
            want.iter()
                .zip(got)
                .enumerate()
                .find_map(|(i, (w, g))| differs(project, &format!("{path}[{i}]"), w, g))
        }
        (Value::String(want), Value::String(got)) => {
            (normalize(project, want) != normalize(project, got)).then(here)
        }
        (Value::Number(want), Value::Number(got)) => (want.as_f64() != got.as_f64()).then(here),
        (want, got) => (want != got).then(here),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

#[cfg(test)]
mod tests {
    use google_cloud_compute_v1::model;

    use super::*;

    fn um(default_service: &str) -> model::UrlMap {
        model::UrlMap::new()
            .set_name("um")
            .set_default_service(default_service)
    }

    #[test]
    fn full_urls_equal_project_paths() {
        let desired = um("projects/p/global/backendServices/b");
        let observed: model::UrlMap = serde_json::from_value(serde_json::json!({
            "name": "um", "fingerprint": "YWJj", "id": "7", "kind": "compute#urlMap",
            "selfLink": "https://x/compute/v1/projects/p/global/urlMaps/um",
            "defaultService": "https://compute.googleapis.com/compute/v1/projects/p/global/backendServices/b"
        }))
        .unwrap();
        assert_eq!(
            first_difference("p", &desired, &observed, &["hostRules"]),
            None
        );
    }

    #[test]
    fn changed_reference_and_removed_list_differ() {
        let desired = um("projects/p/global/backendServices/b");
        let observed = um("projects/p/global/backendServices/c");
        assert_eq!(
            first_difference("p", &desired, &observed, &[]).as_deref(),
            Some("defaultService")
        );
        let observed =
            um("projects/p/global/backendServices/b").set_host_rules([model::HostRule::new()
                .set_hosts(["a.example"])
                .set_path_matcher("m")]);
        assert_eq!(
            first_difference("p", &desired, &observed, &["hostRules"]).as_deref(),
            Some("hostRules")
        );
    }

    #[test]
    fn server_defaults_inside_objects_and_omitted_zeros_are_equal() {
        let desired = model::HealthCheck::new()
            .set_name("hc")
            .set_healthy_threshold(1)
            .set_http_health_check(model::HTTPHealthCheck::new().set_request_path("/"))
            .set_description("");
        let observed = model::HealthCheck::new()
            .set_name("hc")
            .set_healthy_threshold(1)
            .set_http_health_check(
                model::HTTPHealthCheck::new()
                    .set_request_path("/")
                    .set_proxy_header(model::http_health_check::ProxyHeader::None),
            );
        assert_eq!(first_difference("p", &desired, &observed, &[]), None);
        let observed = observed.set_healthy_threshold(2);
        assert_eq!(
            first_difference("p", &desired, &observed, &[]).as_deref(),
            Some("healthyThreshold")
        );
    }

    /// A field the server leaves out equals a desired zero of each JSON type, and only a zero:
    /// a desired `2`, `true`, `"a"`, `[1]` or `{"a": 1}` the server does not have is a
    /// difference (else a resync would never restore it).
    #[test]
    fn an_omitted_field_equals_only_a_desired_zero() {
        let observed = serde_json::json!({ "name": "x" });
        for zero in [
            serde_json::json!(0),
            serde_json::json!(false),
            serde_json::json!(""),
            serde_json::json!([]),
            serde_json::json!({ "a": 0 }),
        ] {
            let desired = serde_json::json!({ "name": "x", "f": zero });
            assert_eq!(
                first_difference("p", &desired, &observed, &[]),
                None,
                "{desired}"
            );
        }
        for set in [
            serde_json::json!(2),
            serde_json::json!(true),
            serde_json::json!("a"),
            serde_json::json!([1]),
            serde_json::json!({ "a": 1 }),
        ] {
            let desired = serde_json::json!({ "name": "x", "f": set });
            assert_eq!(
                first_difference("p", &desired, &observed, &[]).as_deref(),
                Some("f"),
                "{desired}"
            );
        }
    }

    /// A changed number, boolean, string, list length or list element is found, at its path.
    #[test]
    fn a_changed_value_of_each_type_is_found_at_its_path() {
        let desired = serde_json::json!({
            "n": 1, "b": true, "s": "a", "l": [{ "k": 1 }, { "k": 2 }]
        });
        assert_eq!(first_difference("p", &desired, &desired.clone(), &[]), None);
        for (field, value, path) in [
            ("n", serde_json::json!(2), "n"),
            ("b", serde_json::json!(false), "b"),
            ("s", serde_json::json!("b"), "s"),
            ("l", serde_json::json!([{ "k": 1 }]), "l"),
            (
                "l",
                serde_json::json!([{ "k": 1 }, { "k": 2 }, { "k": 3 }]),
                "l",
            ),
            ("l", serde_json::json!([{ "k": 1 }, { "k": 3 }]), "l[1].k"),
        ] {
            let mut observed = desired.clone();
            observed[field] = value;
            assert_eq!(
                first_difference("p", &desired, &observed, &[]).as_deref(),
                Some(path),
                "{observed}"
            );
        }
    }
}
