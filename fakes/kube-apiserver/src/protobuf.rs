//! Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`):
//! the `k8s\0` envelope around a `runtime.Unknown` (`typeMeta`, `raw`), and the object in `raw`
//! decoded with the generated messages of the `k8s-pb` crate (prost, from the upstream
//! `generated.proto` files of k8s.io/api and k8s.io/apimachinery), then turned into the JSON
//! object the rest of the server stores ("Protobuf encoding", Kubernetes API concepts).
//!
//! Kinds decoded: what clients send as protobuf to this server. client-go programs with the
//! protobuf content type (GKE's Ingress controller, kube-controller-manager style controllers)
//! send core/v1 and events.k8s.io/v1 Events, coordination.k8s.io/v1 Leases and ConfigMaps;
//! kubectl's generators send Namespaces, ConfigMaps and Secrets; `kubectl auth can-i` and
//! `kubectl create token` send the review and token kinds. Other kinds answer 415 naming the
//! kind (send JSON instead). `k8s-pb` carries no field names or reflection, so each kind's JSON
//! mapping is written here; it follows the Go types' JSON tags.
//!
//! Zero values: Go marshals non-pointer fields even when empty, and reads an empty string as
//! unset, so empty strings, zero times and empty maps and lists are left out; numbers and
//! booleans that are present are kept (in these kinds they are pointers, or meaningful at 0).
//!
//! Responses are always JSON: every client that sends protobuf lists JSON in its `Accept` header
//! (client-go: `application/vnd.kubernetes.protobuf, application/json`), so JSON is a valid
//! answer to each of them (documented in docs/kube-apiserver.md).

use std::collections::BTreeMap;

use base64::Engine;
use k8s_pb::api::{authentication, authorization, coordination, core, events};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{json, Map, Value};

use crate::status::ApiError;

const MAGIC: &[u8] = b"k8s\0";

/// A JSON object under construction that leaves out absent and empty values.
#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    fn put(mut self, key: &str, v: impl Into<Option<Value>>) -> Obj {
        if let Some(v) = v.into() {
            let empty = match &v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            };
            if !empty {
                self.0.insert(key.to_string(), v);
            }
        }
        self
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// `obj.put(json, s(&v.field))` for each `"json" => field`: the string fields of a message.
macro_rules! strings_of {
    ($obj:expr, $v:expr, $($json:literal => $field:ident),+ $(,)?) => {
        $obj$(.put($json, s(&$v.$field)))+
    };
}

fn s(v: &Option<String>) -> Option<Value> {
    v.as_ref().map(|s| json!(s))
}

fn n<T: Into<Value> + Copy>(v: &Option<T>) -> Option<Value> {
    v.map(Into::into)
}

fn strings(v: &[String]) -> Value {
    json!(v)
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    json!(m)
}

fn bytes_map(m: &BTreeMap<String, Vec<u8>>) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), json!(b64.encode(v))))
            .collect(),
    )
}

/// `metav1.Time` as RFC 3339 with seconds (`2026-11-25T16:22:10Z`); the zero time is absent.
fn time(t: &Option<meta::Time>) -> Option<Value> {
    let t = t.as_ref()?;
    let secs = t.seconds.unwrap_or(0);
    if secs == 0 && t.nanos.unwrap_or(0) == 0 {
        return None;
    }
    let at = chrono::DateTime::from_timestamp(secs, 0)?;
    Some(json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
}

/// `metav1.MicroTime` as RFC 3339 with microseconds (`2026-11-25T16:22:10.123456Z`).
fn micro_time(t: &Option<meta::MicroTime>) -> Option<Value> {
    let t = t.as_ref()?;
    let (secs, nanos) = (t.seconds.unwrap_or(0), t.nanos.unwrap_or(0));
    if secs == 0 && nanos == 0 {
        return None;
    }
    let at = chrono::DateTime::from_timestamp(secs, u32::try_from(nanos).ok()?)?;
    Some(json!(
        at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    ))
}

fn object_meta(m: &Option<meta::ObjectMeta>) -> Value {
    let Some(m) = m else { return json!({}) };
    let owners: Vec<Value> = m
        .owner_references
        .iter()
        .map(|o| {
            strings_of!(Obj::default(), o, "apiVersion" => api_version, "kind" => kind,
                "name" => name, "uid" => uid)
            .put("controller", n(&o.controller))
            .put("blockOwnerDeletion", n(&o.block_owner_deletion))
            .done()
        })
        .collect();
    Obj::default()
        .put("name", s(&m.name))
        .put("generateName", s(&m.generate_name))
        .put("namespace", s(&m.namespace))
        .put("uid", s(&m.uid))
        .put("resourceVersion", s(&m.resource_version))
        .put(
            "generation",
            m.generation.filter(|g| *g != 0).map(Value::from),
        )
        .put("creationTimestamp", time(&m.creation_timestamp))
        .put("labels", string_map(&m.labels))
        .put("annotations", string_map(&m.annotations))
        .put("ownerReferences", json!(owners))
        .put("finalizers", strings(&m.finalizers))
        .done()
}

fn object_reference(r: &Option<core::v1::ObjectReference>) -> Option<Value> {
    let r = r.as_ref()?;
    let o = strings_of!(Obj::default(), r, "kind" => kind, "namespace" => namespace,
        "name" => name, "uid" => uid, "apiVersion" => api_version,
        "resourceVersion" => resource_version, "fieldPath" => field_path);
    Some(o.done())
}

fn event_source(e: &Option<core::v1::EventSource>) -> Option<Value> {
    let e = e.as_ref()?;
    Some(strings_of!(Obj::default(), e, "component" => component, "host" => host).done())
}

fn core_event(e: core::v1::Event) -> Value {
    let series = e.series.as_ref().map(|x| {
        Obj::default()
            .put("count", n(&x.count))
            .put("lastObservedTime", micro_time(&x.last_observed_time))
            .done()
    });
    Obj::default()
        .put("metadata", object_meta(&e.metadata))
        .put("involvedObject", object_reference(&e.involved_object))
        .put("reason", s(&e.reason))
        .put("message", s(&e.message))
        .put("source", event_source(&e.source))
        .put("firstTimestamp", time(&e.first_timestamp))
        .put("lastTimestamp", time(&e.last_timestamp))
        .put("count", n(&e.count))
        .put("type", s(&e.r#type))
        .put("eventTime", micro_time(&e.event_time))
        .put("series", series)
        .put("action", s(&e.action))
        .put("related", object_reference(&e.related))
        .put("reportingComponent", s(&e.reporting_component))
        .put("reportingInstance", s(&e.reporting_instance))
        .done()
}

fn events_event(e: events::v1::Event) -> Value {
    let series = e.series.as_ref().map(|x| {
        Obj::default()
            .put("count", n(&x.count))
            .put("lastObservedTime", micro_time(&x.last_observed_time))
            .done()
    });
    Obj::default()
        .put("metadata", object_meta(&e.metadata))
        .put("eventTime", micro_time(&e.event_time))
        .put("series", series)
        .put("reportingController", s(&e.reporting_controller))
        .put("reportingInstance", s(&e.reporting_instance))
        .put("action", s(&e.action))
        .put("reason", s(&e.reason))
        .put("regarding", object_reference(&e.regarding))
        .put("related", object_reference(&e.related))
        .put("note", s(&e.note))
        .put("type", s(&e.r#type))
        .put("deprecatedSource", event_source(&e.deprecated_source))
        .put(
            "deprecatedFirstTimestamp",
            time(&e.deprecated_first_timestamp),
        )
        .put(
            "deprecatedLastTimestamp",
            time(&e.deprecated_last_timestamp),
        )
        .put("deprecatedCount", n(&e.deprecated_count))
        .done()
}

fn lease(l: coordination::v1::Lease) -> Value {
    let spec = l.spec.as_ref().map(|x| {
        Obj::default()
            .put("holderIdentity", s(&x.holder_identity))
            .put("leaseDurationSeconds", n(&x.lease_duration_seconds))
            .put("acquireTime", micro_time(&x.acquire_time))
            .put("renewTime", micro_time(&x.renew_time))
            .put("leaseTransitions", n(&x.lease_transitions))
            .put("strategy", s(&x.strategy))
            .put("preferredHolder", s(&x.preferred_holder))
            .done()
    });
    Obj::default()
        .put("metadata", object_meta(&l.metadata))
        .put("spec", spec)
        .done()
}

fn resource_attributes(a: &Option<authorization::v1::ResourceAttributes>) -> Option<Value> {
    let a = a.as_ref()?;
    let o = strings_of!(Obj::default(), a, "namespace" => namespace, "verb" => verb,
        "group" => group, "version" => version, "resource" => resource,
        "subresource" => subresource, "name" => name);
    Some(o.done())
}

fn non_resource_attributes(a: &Option<authorization::v1::NonResourceAttributes>) -> Option<Value> {
    let a = a.as_ref()?;
    Some(strings_of!(Obj::default(), a, "path" => path, "verb" => verb).done())
}

fn access_review_spec(spec: &Option<authorization::v1::SubjectAccessReviewSpec>) -> Value {
    let Some(x) = spec else { return json!({}) };
    Obj::default()
        .put(
            "resourceAttributes",
            resource_attributes(&x.resource_attributes),
        )
        .put(
            "nonResourceAttributes",
            non_resource_attributes(&x.non_resource_attributes),
        )
        .put("user", s(&x.user))
        .put("groups", strings(&x.groups))
        .put("uid", s(&x.uid))
        .done()
}

/// `(metadata, spec)` of a review or token kind as JSON.
fn with_spec(metadata: &Option<meta::ObjectMeta>, spec: Value) -> Value {
    json!({"metadata": object_meta(metadata), "spec": spec})
}

/// Decodes `raw` as the message of `(apiVersion, kind)` into its JSON object (without
/// `apiVersion` and `kind`); `None` for a kind not decoded here, `Some(Err)` for bad bytes.
fn decode_kind(
    api_version: &str,
    kind: &str,
    raw: &[u8],
) -> Option<Result<Value, prost::DecodeError>> {
    macro_rules! dec {
        ($t:ty, $f:expr) => {
            Some(<$t>::decode(raw).map($f))
        };
    }
    use authentication::v1 as authn;
    use authorization::v1 as authz;
    match (api_version, kind) {
        ("v1", "Event") => dec!(core::v1::Event, core_event),
        ("events.k8s.io/v1", "Event") => dec!(events::v1::Event, events_event),
        ("coordination.k8s.io/v1", "Lease") => dec!(coordination::v1::Lease, lease),
        ("v1", "Namespace") => dec!(core::v1::Namespace, |x| {
            let spec = x.spec.as_ref().map(|sp| {
                Obj::default()
                    .put("finalizers", strings(&sp.finalizers))
                    .done()
            });
            Obj::default()
                .put("metadata", object_meta(&x.metadata))
                .put("spec", spec)
                .done()
        }),
        ("v1", "ConfigMap") => dec!(core::v1::ConfigMap, |x| {
            Obj::default()
                .put("metadata", object_meta(&x.metadata))
                .put("data", string_map(&x.data))
                .put("binaryData", bytes_map(&x.binary_data))
                .put("immutable", n(&x.immutable))
                .done()
        }),
        ("v1", "Secret") => dec!(core::v1::Secret, |x| {
            Obj::default()
                .put("metadata", object_meta(&x.metadata))
                .put("data", bytes_map(&x.data))
                .put("stringData", string_map(&x.string_data))
                .put("type", s(&x.r#type))
                .put("immutable", n(&x.immutable))
                .done()
        }),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            dec!(authz::SelfSubjectAccessReview, |x| {
                let spec = x.spec.as_ref().map(|sp| {
                    Obj::default()
                        .put(
                            "resourceAttributes",
                            resource_attributes(&sp.resource_attributes),
                        )
                        .put(
                            "nonResourceAttributes",
                            non_resource_attributes(&sp.non_resource_attributes),
                        )
                        .done()
                });
                with_spec(&x.metadata, spec.unwrap_or_else(|| json!({})))
            })
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            dec!(authz::SubjectAccessReview, |x| with_spec(
                &x.metadata,
                access_review_spec(&x.spec)
            ))
        }
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            dec!(authz::LocalSubjectAccessReview, |x| with_spec(
                &x.metadata,
                access_review_spec(&x.spec)
            ))
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            dec!(authz::SelfSubjectRulesReview, |x| {
                let spec = Obj::default()
                    .put("namespace", x.spec.as_ref().and_then(|sp| s(&sp.namespace)))
                    .done();
                with_spec(&x.metadata, spec)
            })
        }
        ("authentication.k8s.io/v1", "TokenRequest") => dec!(authn::TokenRequest, |x| {
            let spec = x.spec.as_ref().map(|sp| {
                let bound = sp.bound_object_ref.as_ref().map(|b| {
                    strings_of!(Obj::default(), b, "kind" => kind, "apiVersion" => api_version,
                        "name" => name, "uid" => u_id)
                    .done()
                });
                Obj::default()
                    .put("audiences", strings(&sp.audiences))
                    .put("expirationSeconds", n(&sp.expiration_seconds))
                    .put("boundObjectRef", bound)
                    .done()
            });
            with_spec(&x.metadata, spec.unwrap_or_else(|| json!({})))
        }),
        ("authentication.k8s.io/v1", "TokenReview") => dec!(authn::TokenReview, |x| {
            let spec = x.spec.as_ref().map(|sp| {
                Obj::default()
                    .put("token", s(&sp.token))
                    .put("audiences", strings(&sp.audiences))
                    .done()
            });
            with_spec(&x.metadata, spec.unwrap_or_else(|| json!({})))
        }),
        // No spec: the answer is all status.
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            dec!(
                authn::SelfSubjectReview,
                |x| json!({"metadata": object_meta(&x.metadata)})
            )
        }
        _ => None,
    }
}

/// Decodes a protobuf request body into the JSON object it encodes.
///
/// Errors: 415 for kinds this server does not decode (send JSON instead), 400 for a body that
/// is not a `k8s\0` envelope or whose message does not decode.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |why: String| {
        ApiError::BadRequest(format!("the protobuf request body is malformed: {why}"))
    };
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the k8s\\0 magic".into()))?;
    let unknown = Unknown::decode(unknown).map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown
        .raw
        .ok_or_else(|| bad("runtime.Unknown has no raw".into()))?;
    let mut obj = match decode_kind(&api_version, &kind, &raw) {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(bad(format!("{api_version} {kind}: {e}"))),
        None => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "protobuf bodies of {api_version} {kind} are not supported; send application/json (kubectl apply -f / create -f)"
            )))
        }
    };
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC.to_vec(), u.encode_to_vec()].concat()
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let cm = core::v1::ConfigMap {
            metadata: Some(meta::ObjectMeta {
                name: Some("cm".into()),
                namespace: Some("default".into()),
                generate_name: Some(String::new()),
                labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
            data: [("a".to_string(), "b".to_string())].into(),
            binary_data: [("bin".to_string(), vec![0u8, 255])].into(),
            ..Default::default()
        };
        let obj = decode(&envelope("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}},
            "data": {"a": "b"}, "binaryData": {"bin": "AP8="}})
        );
    }

    #[test]
    fn decodes_a_self_subject_access_review() {
        let r = authorization::v1::SelfSubjectAccessReview {
            metadata: Some(Default::default()),
            spec: Some(authorization::v1::SelfSubjectAccessReviewSpec {
                resource_attributes: Some(authorization::v1::ResourceAttributes {
                    namespace: Some("default".into()),
                    verb: Some("patch".into()),
                    group: Some("networking.k8s.io".into()),
                    version: Some(String::new()),
                    resource: Some("ingresses".into()),
                    subresource: Some("status".into()),
                    ..Default::default()
                }),
                non_resource_attributes: None,
            }),
            status: None,
        };
        let body = envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            r.encode_to_vec(),
        );
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "metadata": {}, "spec": {"resourceAttributes": {"namespace": "default", "verb": "patch",
                "group": "networking.k8s.io", "resource": "ingresses", "subresource": "status"}}})
        );
    }

    #[test]
    fn times_are_rfc3339_and_micro_times_keep_microseconds() {
        let t = Some(meta::Time {
            seconds: Some(1_795_623_729),
            nanos: Some(0),
        });
        assert_eq!(time(&t).unwrap(), "2026-11-25T16:22:09Z");
        let m = Some(meta::MicroTime {
            seconds: Some(1_795_623_729),
            nanos: Some(123_456_000),
        });
        assert_eq!(micro_time(&m).unwrap(), "2026-11-25T16:22:09.123456Z");
        assert_eq!(
            time(&Some(meta::Time::default())),
            None,
            "the zero time is absent"
        );
    }

    #[test]
    fn other_kinds_are_unsupported_and_bad_bytes_are_refused() {
        let body = envelope("apps/v1", "Deployment", vec![]);
        assert!(matches!(
            decode(&body),
            Err(ApiError::UnsupportedMediaType(_))
        ));
        assert!(matches!(decode(b"nope"), Err(ApiError::BadRequest(_))));
        let body = envelope("v1", "Event", vec![0x0a, 0x05, 1]);
        assert!(matches!(decode(&body), Err(ApiError::BadRequest(_))));
    }
}
