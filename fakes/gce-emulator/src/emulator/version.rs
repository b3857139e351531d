//! API versions: `/compute/v1`, `/compute/beta` and `/compute/alpha` over one store.
//!
//! The store keeps every resource once, in its v1 wire form (references are full URLs under
//! `…/compute/v1/`), plus any fields a beta or alpha request set. A request names its version in
//! the path; the answer is the same resource seen through that version:
//! - every URL of this emulator in it (`selfLink`, references, an Operation's `targetLink`, a
//!   list's `selfLink`) is under `…/compute/{version}/`, as the real API answers
//!   (Compute API reference, "API versions": each version's resources link to that version);
//! - fields the version does not have are left out (a v1 read does not show a beta-only field);
//! - alpha resources carry `selfLinkWithId` (`…/compute/alpha/…/{collection}/{id}`), which only
//!   the alpha API has.
//!
//! A request that sends a field its version does not have is refused as the API's front end
//! refuses an unknown field (400 `Invalid JSON payload received. Unknown name "…"`), and an
//! `update` (PUT) through a version keeps the fields that version cannot see.
//!
//! Which top-level fields exist only from beta or alpha on comes from the Compute API's
//! discovery documents (v1, beta, alpha; the messages gcloud 528 generates from them), less the
//! fields v1 has gained since (`grpcTlsHealthCheck`, `tlsSettings`,
//! `networkPassThroughLbTrafficPolicy`, security policy `associations`/`parent`/`shortName` are
//! in the v1 model of google-cloud-compute-v1 4.x); nested fields are not versioned here.

use serde_json::{Map, Value};

use crate::errors::ApiError;

/// A version of the Compute API, named as in its path (`/compute/{version}/`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    /// `/compute/v1/`: the store's own form.
    #[default]
    V1,
    /// `/compute/beta/`.
    Beta,
    /// `/compute/alpha/`.
    Alpha,
}

/// Top-level fields of a resource kind that exist only from beta on, and only in alpha.
struct LaterFields {
    kind: &'static str,
    beta: &'static [&'static str],
    alpha: &'static [&'static str],
}

/// From the Compute API discovery documents (v1 vs beta vs alpha) for the kinds served.
/// `selfLinkWithId` is output only and generated on read (see [`ApiVersion::view`]).
const LATER_FIELDS: &[LaterFields] = &[
    LaterFields {
        kind: "compute#network",
        beta: &[],
        alpha: &["region"],
    },
    LaterFields {
        kind: "compute#firewall",
        beta: &["enableLogging"],
        alpha: &[],
    },
    LaterFields {
        kind: "compute#instance",
        beta: &[
            "eraseWindowsVssSignature",
            "partnerMetadata",
            "postKeyRevocationActionType",
            "shieldedVmConfig",
            "shieldedVmIntegrityPolicy",
        ],
        alpha: &[
            "preservedStateSizeGb",
            "secureTags",
            "serviceIntegrationSpecs",
            "upcomingMaintenance",
        ],
    },
    LaterFields {
        kind: "compute#healthCheck",
        beta: &[],
        alpha: &["udpHealthCheck"],
    },
    LaterFields {
        kind: "compute#networkEndpointGroup",
        beta: &["loadBalancer", "serverlessDeployment"],
        alpha: &["type"],
    },
    LaterFields {
        kind: "compute#securityPolicy",
        beta: &["displayName", "ruleTupleCount"],
        alpha: &["cloudArmorConfig"],
    },
    LaterFields {
        kind: "compute#backendService",
        beta: &["dynamicForwarding"],
        alpha: &["vpcNetworkScope"],
    },
    LaterFields {
        kind: "compute#sslPolicy",
        beta: &[],
        alpha: &["tlsSettings"],
    },
    LaterFields {
        kind: "compute#targetHttpProxy",
        beta: &["httpFilters"],
        alpha: &[],
    },
    LaterFields {
        kind: "compute#targetHttpsProxy",
        beta: &["authentication", "authorization", "httpFilters"],
        alpha: &[],
    },
    LaterFields {
        kind: "compute#forwardingRule",
        beta: &["allowPscPacketInjection"],
        alpha: &[],
    },
];

/// Kinds whose alpha form has `selfLinkWithId` (every served kind but urlMap, forwardingRule
/// and zone, per the alpha discovery document).
const SELF_LINK_WITH_ID: &[&str] = &[
    "compute#network",
    "compute#firewall",
    "compute#instance",
    "compute#instanceGroup",
    "compute#healthCheck",
    "compute#networkEndpointGroup",
    "compute#securityPolicy",
    "compute#backendService",
    "compute#sslCertificate",
    "compute#sslPolicy",
    "compute#targetHttpProxy",
    "compute#targetHttpsProxy",
    "compute#address",
    "compute#operation",
];

impl ApiVersion {
    /// Every version, oldest first.
    pub const ALL: [ApiVersion; 3] = [ApiVersion::V1, ApiVersion::Beta, ApiVersion::Alpha];

    /// The path segment: `v1`, `beta`, `alpha`.
    pub fn segment(self) -> &'static str {
        match self {
            ApiVersion::V1 => "v1",
            ApiVersion::Beta => "beta",
            ApiVersion::Alpha => "alpha",
        }
    }

    /// The version named by a path segment; `None` for any other (the API answers 404).
    pub fn from_segment(segment: &str) -> Option<ApiVersion> {
        ApiVersion::ALL.into_iter().find(|v| v.segment() == segment)
    }

    /// Splits `/compute/{version}/{rest}` (or the same without the leading slash) into the
    /// version and `rest`; `None` when the path names no served version.
    pub fn split_path(path: &str) -> Option<(ApiVersion, &str)> {
        let rest = path.trim_start_matches('/').strip_prefix("compute/")?;
        let (segment, rest) = rest.split_once('/')?;
        Some((ApiVersion::from_segment(segment)?, rest))
    }

    /// Whether this version has the top-level field `field` of resources of `kind`.
    pub fn has_field(self, kind: &str, field: &str) -> bool {
        let Some(later) = LATER_FIELDS.iter().find(|l| l.kind == kind) else {
            return true;
        };
        match self {
            ApiVersion::V1 => !later.beta.contains(&field) && !later.alpha.contains(&field),
            ApiVersion::Beta => !later.alpha.contains(&field),
            ApiVersion::Alpha => true,
        }
    }

    /// Refuses a request body (insert, update, patch) of a resource of `kind` that sets a field
    /// this version does not have, with the front end's message for an unknown field.
    ///
    /// Errors: 400 `invalid` naming the field.
    pub fn check_body(self, kind: &str, body: &[u8]) -> Result<(), ApiError> {
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(body) else {
            // Malformed bodies are the method's to refuse, with its own message.
            return Ok(());
        };
        match obj.keys().find(|k| !self.has_field(kind, k)) {
            None => Ok(()),
            Some(field) => {
                let mut e = ApiError::new(
                    400,
                    "invalid",
                    format!("Invalid JSON payload received. Unknown name \"{field}\" at 'resource': Cannot find field."),
                );
                e.field = Some(format!("resource.{field}"));
                Err(e)
            }
        }
    }

    /// The fields of a stored resource this version cannot see (an `update` through this
    /// version keeps them).
    pub fn hidden_fields(self, stored: &Value) -> Map<String, Value> {
        let kind = stored["kind"].as_str().unwrap_or_default();
        stored
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !self.has_field(kind, k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `body` (a PUT's JSON object) with the fields of `stored` this version cannot see added
    /// back; the body unchanged when it is not a JSON object or nothing is hidden.
    pub fn keep_hidden(self, stored: Option<&Value>, body: &[u8]) -> Option<Vec<u8>> {
        let hidden = self.hidden_fields(stored?);
        if hidden.is_empty() {
            return None;
        }
        let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(body) else {
            return None;
        };
        for (k, v) in hidden {
            obj.entry(k).or_insert(v);
        }
        serde_json::to_vec(&Value::Object(obj)).ok()
    }

    /// An answer as this version shows it: URLs under `v1_base` (the store's
    /// `http://HOST/compute/v1/`) moved under this version's path, fields it does not have
    /// removed, and `selfLinkWithId` added for alpha.
    pub fn view(self, v1_base: &str, mut answer: Value) -> Value {
        let own_base = self.base(v1_base);
        self.rewrite(v1_base, &own_base, &mut answer);
        answer
    }

    /// This version's base URL, from the v1 base (`http://HOST/compute/v1/`).
    pub fn base(self, v1_base: &str) -> String {
        match v1_base.strip_suffix("v1/") {
            Some(root) => format!("{root}{}/", self.segment()),
            None => v1_base.to_string(),
        }
    }

    fn rewrite(self, from: &str, to: &str, v: &mut Value) {
        match v {
            Value::String(s) if from != to => {
                if let Some(rest) = s.strip_prefix(from) {
                    *s = format!("{to}{rest}");
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|x| self.rewrite(from, to, x)),
            Value::Object(obj) => {
                let kind = obj.get("kind").and_then(Value::as_str).map(str::to_string);
                if let Some(kind) = &kind {
                    obj.retain(|k, _| self.has_field(kind, k));
                }
                obj.values_mut().for_each(|x| self.rewrite(from, to, x));
                if self == ApiVersion::Alpha
                    && kind.is_some_and(|k| SELF_LINK_WITH_ID.contains(&k.as_str()))
                {
                    let with_id = match (obj.get("selfLink"), obj.get("id")) {
                        (Some(Value::String(link)), Some(Value::String(id))) => link
                            .rsplit_once('/')
                            .map(|(collection, _)| format!("{collection}/{id}")),
                        _ => None,
                    };
                    if let Some(with_id) = with_id {
                        obj.insert("selfLinkWithId".into(), Value::String(with_id));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BASE: &str = "http://127.0.0.1:9/compute/v1/";

    #[test]
    fn paths_name_their_version() {
        assert_eq!(
            ApiVersion::split_path("/compute/beta/projects/p"),
            Some((ApiVersion::Beta, "projects/p"))
        );
        assert_eq!(
            ApiVersion::split_path("compute/alpha/projects/p"),
            Some((ApiVersion::Alpha, "projects/p"))
        );
        assert_eq!(ApiVersion::split_path("/compute/v2/projects/p"), None);
        assert_eq!(
            ApiVersion::Beta.base(BASE),
            "http://127.0.0.1:9/compute/beta/"
        );
    }

    #[test]
    fn views_move_links_and_hide_later_fields() {
        let stored = json!({"kind": "compute#backendService", "id": "42", "name": "bs",
            "selfLink": format!("{BASE}projects/p/global/backendServices/bs"),
            "healthChecks": [format!("{BASE}projects/p/global/healthChecks/hc")],
            "dynamicForwarding": {"ipPortSelection": {"enabled": true}}, "vpcNetworkScope": "GLOBAL_VPC_NETWORK",
            "description": "see https://example.com/compute/v1/"});
        let v1 = ApiVersion::V1.view(BASE, stored.clone());
        assert_eq!(
            v1["selfLink"], stored["selfLink"],
            "v1 is the store's own form"
        );
        assert!(
            v1.get("dynamicForwarding").is_none(),
            "beta-only fields are hidden from v1"
        );
        assert!(v1.get("selfLinkWithId").is_none());
        let beta = ApiVersion::Beta.view(BASE, stored.clone());
        assert_eq!(
            beta["selfLink"],
            "http://127.0.0.1:9/compute/beta/projects/p/global/backendServices/bs"
        );
        assert_eq!(
            beta["healthChecks"][0],
            "http://127.0.0.1:9/compute/beta/projects/p/global/healthChecks/hc"
        );
        assert_eq!(
            beta["dynamicForwarding"]["ipPortSelection"]["enabled"],
            true
        );
        assert!(beta.get("vpcNetworkScope").is_none());
        assert!(beta.get("selfLinkWithId").is_none());
        assert_eq!(beta["description"], stored["description"]);
        let alpha = ApiVersion::Alpha.view(BASE, stored);
        assert_eq!(alpha["vpcNetworkScope"], "GLOBAL_VPC_NETWORK");
        assert_eq!(
            alpha["selfLinkWithId"],
            "http://127.0.0.1:9/compute/alpha/projects/p/global/backendServices/42"
        );
    }

    #[test]
    fn requests_may_set_only_their_versions_fields() {
        let body = br#"{"name": "bs", "dynamicForwarding": {}}"#;
        let e = ApiVersion::V1
            .check_body("compute#backendService", body)
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (400, "invalid"));
        assert!(
            e.message.contains("Unknown name \"dynamicForwarding\""),
            "{e:?}"
        );
        assert!(ApiVersion::Beta
            .check_body("compute#backendService", body)
            .is_ok());
        let stored = json!({"kind": "compute#backendService", "name": "bs", "dynamicForwarding": {"ipPortSelection": {"enabled": true}}});
        let kept = ApiVersion::V1
            .keep_hidden(Some(&stored), br#"{"name": "bs", "description": "d"}"#)
            .unwrap();
        let kept: Value = serde_json::from_slice(&kept).unwrap();
        assert_eq!(
            kept["dynamicForwarding"]["ipPortSelection"]["enabled"],
            true
        );
        assert_eq!(ApiVersion::Beta.keep_hidden(Some(&stored), b"{}"), None);
    }
}
