//! Decoding of the Kubernetes protobuf request bodies kubectl sends for its generator commands
//! (`kubectl create namespace|configmap|secret ...`): the `k8s\0` envelope (`runtime.Unknown`
//! with `typeMeta` and `raw`) and the messages of Namespace, ConfigMap and Secret with the
//! ObjectMeta fields a client sets (name, generateName, namespace, labels, annotations,
//! finalizers). Field numbers are those of the `generated.proto` files of k8s.io/api core/v1 and
//! k8s.io/apimachinery meta/v1. Also the review and token kinds kubectl sends for
//! `kubectl auth can-i` and `kubectl create token` (authorization.k8s.io/v1
//! SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectRulesReview; authentication.k8s.io/v1 TokenRequest, TokenReview), decoded by the
//! field tables below. Other kinds answer 415 and clients use JSON.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::status::ApiError;

const MAGIC: &[u8] = b"k8s\0";

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

/// Splits a message into (field number, value) pairs; `None` when malformed.
fn fields(buf: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            1 => {
                pos += 8;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let bytes = buf.get(pos..pos.checked_add(len)?)?;
                pos += len;
                Wire::Bytes(bytes)
            }
            5 => {
                pos += 4;
                Wire::Fixed
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    (pos == buf.len()).then_some(out)
}

fn string(b: &[u8]) -> Option<String> {
    String::from_utf8(b.to_vec()).ok()
}

/// A `map<string, V>` entry: `{1: key, 2: value}`.
fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let mut key = String::new();
    let mut value = json!("");
    for (n, w) in fields(b)? {
        match (n, w) {
            (1, Wire::Bytes(k)) => key = string(k)?,
            (2, Wire::Bytes(v)) if bytes_value => {
                value = json!(base64::engine::general_purpose::STANDARD.encode(v))
            }
            (2, Wire::Bytes(v)) => value = json!(string(v)?),
            _ => {}
        }
    }
    Some((key, value))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut md = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for (n, w) in fields(b)? {
        let Wire::Bytes(v) = w else { continue };
        match n {
            1 => drop(md.insert("name".into(), json!(string(v)?))),
            2 => drop(md.insert("generateName".into(), json!(string(v)?))),
            3 => drop(md.insert("namespace".into(), json!(string(v)?))),
            11 => {
                let (k, val) = map_entry(v, false)?;
                labels.insert(k, val);
            }
            12 => {
                let (k, val) = map_entry(v, false)?;
                annotations.insert(k, val);
            }
            14 => finalizers.push(json!(string(v)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        md.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        md.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        md.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(md))
}

fn decode_kind(kind: &str, raw: &[u8]) -> Option<Value> {
    let mut obj = Map::new();
    let mut maps: [Map<String, Value>; 3] = Default::default();
    for (n, w) in fields(raw)? {
        match (kind, n, w) {
            (_, 1, Wire::Bytes(v)) => drop(obj.insert("metadata".into(), object_meta(v)?)),
            ("Namespace", 2, Wire::Bytes(v)) => {
                let finalizers: Option<Vec<Value>> = fields(v)?
                    .into_iter()
                    .filter_map(|(n, w)| match (n, w) {
                        (1, Wire::Bytes(f)) => Some(string(f).map(Value::String)),
                        _ => None,
                    })
                    .collect();
                obj.insert("spec".into(), json!({"finalizers": finalizers?}));
            }
            ("ConfigMap", 2, Wire::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                maps[0].insert(k, val);
            }
            ("ConfigMap", 3, Wire::Bytes(v)) | ("Secret", 2, Wire::Bytes(v)) => {
                let (k, val) = map_entry(v, true)?;
                maps[1].insert(k, val);
            }
            ("Secret", 4, Wire::Bytes(v)) => {
                let (k, val) = map_entry(v, false)?;
                maps[2].insert(k, val);
            }
            ("Secret", 3, Wire::Bytes(v)) => drop(obj.insert("type".into(), json!(string(v)?))),
            ("ConfigMap", 4, Wire::Varint(b)) | ("Secret", 5, Wire::Varint(b)) => {
                obj.insert("immutable".into(), json!(b != 0));
            }
            _ => {}
        }
    }
    let [data, binary, string_data] = maps;
    match kind {
        "ConfigMap" => {
            if !data.is_empty() {
                obj.insert("data".into(), Value::Object(data));
            }
            if !binary.is_empty() {
                obj.insert("binaryData".into(), Value::Object(binary));
            }
        }
        "Secret" => {
            if !binary.is_empty() {
                obj.insert("data".into(), Value::Object(binary));
            }
            if !string_data.is_empty() {
                obj.insert("stringData".into(), Value::Object(string_data));
            }
        }
        _ => {}
    }
    Some(Value::Object(obj))
}

/// How one protobuf field maps to JSON.
#[derive(Clone, Copy)]
enum Field {
    /// A string (empty strings are left out, as JSON's `omitempty` would).
    Str(&'static str),
    /// A repeated string.
    Strings(&'static str),
    /// A varint integer (0 left out).
    Int(&'static str),
    /// An embedded message.
    Message(&'static str, &'static [(u64, Field)]),
}

const RESOURCE_ATTRIBUTES: &[(u64, Field)] = &[
    (1, Field::Str("namespace")),
    (2, Field::Str("verb")),
    (3, Field::Str("group")),
    (4, Field::Str("version")),
    (5, Field::Str("resource")),
    (6, Field::Str("subresource")),
    (7, Field::Str("name")),
];
const NON_RESOURCE_ATTRIBUTES: &[(u64, Field)] =
    &[(1, Field::Str("path")), (2, Field::Str("verb"))];
const SELF_SAR_SPEC: &[(u64, Field)] = &[
    (1, Field::Message("resourceAttributes", RESOURCE_ATTRIBUTES)),
    (
        2,
        Field::Message("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
    ),
];
const SAR_SPEC: &[(u64, Field)] = &[
    (1, Field::Message("resourceAttributes", RESOURCE_ATTRIBUTES)),
    (
        2,
        Field::Message("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
    ),
    (3, Field::Str("user")),
    (4, Field::Strings("groups")),
    (6, Field::Str("uid")),
];
const RULES_REVIEW_SPEC: &[(u64, Field)] = &[(1, Field::Str("namespace"))];
const BOUND_OBJECT_REF: &[(u64, Field)] = &[
    (1, Field::Str("kind")),
    (2, Field::Str("apiVersion")),
    (3, Field::Str("name")),
    (4, Field::Str("uid")),
];
const TOKEN_REQUEST_SPEC: &[(u64, Field)] = &[
    (1, Field::Strings("audiences")),
    (3, Field::Message("boundObjectRef", BOUND_OBJECT_REF)),
    (4, Field::Int("expirationSeconds")),
];
const TOKEN_REVIEW_SPEC: &[(u64, Field)] =
    &[(1, Field::Str("token")), (2, Field::Strings("audiences"))];

/// The spec table of a review or token kind (`metadata` is field 1 and `spec` field 2 in all).
fn spec_table(api_version: &str, kind: &str) -> Option<&'static [(u64, Field)]> {
    Some(match (api_version, kind) {
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SAR_SPEC,
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => SAR_SPEC,
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => RULES_REVIEW_SPEC,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST_SPEC,
        ("authentication.k8s.io/v1", "TokenReview") => TOKEN_REVIEW_SPEC,
        // No spec: the answer is all status.
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &[],
        _ => return None,
    })
}

fn decode_table(b: &[u8], table: &[(u64, Field)]) -> Option<Value> {
    let mut out = Map::new();
    for (n, w) in fields(b)? {
        let Some((_, f)) = table.iter().find(|(num, _)| *num == n) else {
            continue;
        };
        match (*f, w) {
            (Field::Str(k), Wire::Bytes(v)) => {
                let s = string(v)?;
                if !s.is_empty() {
                    out.insert(k.into(), json!(s));
                }
            }
            (Field::Strings(k), Wire::Bytes(v)) => {
                let list = out.entry(k).or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    a.push(json!(string(v)?));
                }
            }
            (Field::Int(k), Wire::Varint(i)) if i != 0 => {
                out.insert(k.into(), json!(i as i64));
            }
            (Field::Message(k, t), Wire::Bytes(v)) => {
                out.insert(k.into(), decode_table(v, t)?);
            }
            _ => {}
        }
    }
    Some(Value::Object(out))
}

fn decode_review(table: &'static [(u64, Field)], raw: &[u8]) -> Option<Value> {
    let mut obj = Map::new();
    for (n, w) in fields(raw)? {
        match (n, w) {
            (1, Wire::Bytes(v)) => drop(obj.insert("metadata".into(), object_meta(v)?)),
            (2, Wire::Bytes(v)) => drop(obj.insert("spec".into(), decode_table(v, table)?)),
            _ => {}
        }
    }
    Some(Value::Object(obj))
}

/// Decodes a protobuf request body into the JSON object it encodes.
///
/// Errors: 415 for kinds this server cannot decode (send JSON instead), 400 for a malformed body.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = || ApiError::BadRequest("the protobuf request body is malformed".into());
    let unknown = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    for (n, w) in fields(unknown).ok_or_else(bad)? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (n, w) in fields(tm).ok_or_else(bad)? {
                    match (n, w) {
                        (1, Wire::Bytes(v)) => api_version = string(v).ok_or_else(bad)?,
                        (2, Wire::Bytes(v)) => kind = string(v).ok_or_else(bad)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = Some(r),
            _ => {}
        }
    }
    let raw = raw.ok_or_else(bad)?;
    let mut obj = if let Some(table) = spec_table(&api_version, &kind) {
        decode_review(table, raw).ok_or_else(bad)?
    } else if api_version == "v1" && ["Namespace", "ConfigMap", "Secret"].contains(&kind.as_str()) {
        decode_kind(&kind, raw).ok_or_else(bad)?
    } else {
        return Err(ApiError::UnsupportedMediaType(format!(
            "protobuf bodies of {api_version} {kind} are not supported; send application/json (kubectl apply -f / create -f)"
        )));
    };
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        [field(1, k.as_bytes()), field(2, v.as_bytes())].concat()
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let meta = [
            field(1, b"cm"),
            field(3, b"default"),
            field(11, &entry("app", "web")),
        ]
        .concat();
        let raw = [field(1, &meta), field(2, &entry("a", "b"))].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let obj = decode(&body).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn decodes_a_self_subject_access_review() {
        let attrs = [
            field(1, b"default"),
            field(2, b"patch"),
            field(3, b"networking.k8s.io"),
            field(4, b""),
            field(5, b"ingresses"),
            field(6, b"status"),
        ]
        .concat();
        let raw = [field(1, b""), field(2, &field(1, &attrs))].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "metadata": {}, "spec": {"resourceAttributes": {"namespace": "default", "verb": "patch",
                "group": "networking.k8s.io", "resource": "ingresses", "subresource": "status"}}})
        );
    }

    #[test]
    fn other_kinds_are_unsupported() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, b"")].concat();
        assert!(matches!(
            decode(&body),
            Err(ApiError::UnsupportedMediaType(_))
        ));
        assert!(matches!(decode(b"nope"), Err(ApiError::BadRequest(_))));
    }
}
