//! Kubernetes' protobuf encoding of built-in objects, driven by the upstream message
//! definitions: the `generated.proto` files of k8s.io/api, k8s.io/apimachinery and
//! k8s.io/apiextensions-apiserver (vendored under `protos/` from kube-rs/k8s-pb, the files its
//! `k8s-pb` crate is generated from) compiled at build time by `protox` into a descriptor set,
//! read at run time with `prost-reflect`. No message is written by hand: every kind the
//! descriptors define is transcoded by the same code.
//!
//! The JSON side is the Kubernetes JSON form (k8s.io/apimachinery's protobuf and JSON
//! serializers agree field by field: a proto field's name is the Go field's JSON name), with
//! the types whose JSON form is not their message's shape mapped as apimachinery maps them:
//!
//! | message | JSON |
//! |---|---|
//! | `meta.v1.Time` `{seconds, nanos}` | RFC 3339 string, seconds (`2026-11-25T16:22:10Z`) |
//! | `meta.v1.MicroTime` | RFC 3339 string, microseconds |
//! | `meta.v1.Duration` `{duration}` (nanoseconds) | Go duration string (`1h2m3s`) |
//! | `resource.Quantity` `{string}` | the string (`100m`) |
//! | `intstr.IntOrString` `{type, intVal, strVal}` | a number or a string |
//! | `runtime.RawExtension` `{raw}`, `meta.v1.FieldsV1` `{Raw}` | the embedded JSON value |
//! | `*.ExtraValue` `{items}` | an array of strings |
//!
//! 64-bit integers are JSON numbers, `bytes` are base64. Decoding leaves out what Go's JSON
//! encoder leaves out for `omitempty` fields, as far as a protobuf body can tell: empty
//! strings, empty lists and maps, and the zero time; numbers, booleans and messages that are
//! present are kept (a present empty message is `{}`: `emptyDir: {}` means something).
//!
//! Envelope ("Protobuf encoding", Kubernetes API concepts): the 4 bytes `k8s\0`, then a
//! `runtime.Unknown` whose `typeMeta` names `apiVersion` and `kind` and whose `raw` is the
//! object's message.

mod duration;
mod json;

use std::sync::OnceLock;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use serde_json::Value;

pub use json::{from_json, to_json};

/// The `k8s\0` magic that starts every protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What went wrong transcoding a body.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not a `k8s\0` envelope, or its bytes do not decode as the message.
    #[error("the protobuf body is malformed: {0}")]
    Malformed(String),
    /// No message of the descriptors is `(apiVersion, kind)`.
    #[error("no protobuf message is known for {api_version} {kind}")]
    UnknownKind {
        /// `apiVersion` of the object.
        api_version: String,
        /// `kind` of the object.
        kind: String,
    },
    /// The JSON value does not fit the message (a wrong type at `field`).
    #[error("{field}: {reason}")]
    Json {
        /// JSON path of the value, e.g. `spec.replicas`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The descriptors of every vendored message.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(include_bytes!(concat!(env!("OUT_DIR"), "/k8s.fds")).as_slice())
            .expect("the descriptor set compiled by build.rs decodes")
    })
}

/// The message of `(apiVersion, kind)`: `kind` in the package of the group's version (the
/// group's first label, `core` for the core group: `apps/v1` -> `api.apps.v1`,
/// `rbac.authorization.k8s.io/v1` -> `api.rbac.v1`, `apiextensions.k8s.io/v1` ->
/// `apiextensions_apiserver.pkg.apis.apiextensions.v1`), else in `meta.v1` (`Status`,
/// `APIResourceList`, ...). `None` when neither defines it.
pub fn message_for(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let label = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    let suffix = format!(".{label}.{version}");
    let pool = pool();
    pool.all_messages()
        .find(|m| m.name() == kind && m.package_name().ends_with(&suffix))
        .or_else(|| pool.get_message_by_name(&format!("apimachinery.pkg.apis.meta.v1.{kind}")))
}

fn unknown_descriptor() -> MessageDescriptor {
    pool()
        .get_message_by_name("apimachinery.pkg.runtime.Unknown")
        .expect("runtime.Unknown is vendored")
}

/// Decodes a protobuf body (`k8s\0` + `runtime.Unknown`) into the JSON object it encodes, with
/// `apiVersion` and `kind` from the envelope.
///
/// Errors: [`Error::Malformed`] for a body that is not an envelope or whose message does not
/// decode; [`Error::UnknownKind`] when no vendored message is its kind.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    let bytes = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| Error::Malformed("it does not start with the k8s\\0 magic".into()))?;
    let unknown = DynamicMessage::decode(unknown_descriptor(), bytes)
        .map_err(|e| Error::Malformed(e.to_string()))?;
    let envelope = to_json(&unknown);
    let api_version = envelope["typeMeta"]["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let kind = envelope["typeMeta"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(prost_reflect::Value::Bytes(b)) => b.clone(),
        _ => return Err(Error::Malformed("runtime.Unknown has no raw".into())),
    };
    let desc = message_for(&api_version, &kind).ok_or_else(|| Error::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let msg = DynamicMessage::decode(desc, raw)
        .map_err(|e| Error::Malformed(format!("{api_version} {kind}: {e}")))?;
    let mut obj = to_json(&msg);
    if !obj.is_object() {
        obj = Value::Object(Default::default());
    }
    obj["apiVersion"] = Value::from(api_version);
    obj["kind"] = Value::from(kind);
    Ok(obj)
}

/// Encodes a JSON object (with `apiVersion` and `kind`) as a protobuf body: `k8s\0` and a
/// `runtime.Unknown` holding its message.
///
/// Errors: [`Error::UnknownKind`] when no vendored message is its kind; [`Error::Json`] when a
/// value does not fit its field.
pub fn encode(obj: &Value) -> Result<Vec<u8>, Error> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let desc = message_for(api_version, kind).ok_or_else(|| Error::UnknownKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })?;
    let raw = from_json(&desc, obj)?.encode_to_vec();
    let envelope = serde_json::json!({
        "typeMeta": {"apiVersion": api_version, "kind": kind},
        "contentEncoding": "",
        "contentType": "",
    });
    let mut unknown = from_json(&unknown_descriptor(), &envelope)?;
    unknown.set_field_by_name("raw", prost_reflect::Value::Bytes(raw.into()));
    Ok([MAGIC, unknown.encode_to_vec().as_slice()].concat())
}

#[cfg(test)]
mod tests;
