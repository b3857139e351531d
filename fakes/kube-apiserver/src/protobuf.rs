//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`): request bodies of every
//! built-in kind this server serves are decoded, and responses are encoded as protobuf when the
//! client prefers it, both by the `k8s-protobuf` crate (upstream's `generated.proto` message
//! definitions compiled into descriptors, one transcoder for every kind; no per-kind code).
//!
//! Requests: the `k8s\0` envelope around a `runtime.Unknown` (`typeMeta`, `raw`), the object
//! in `raw` turned into the JSON object the rest of the server stores ("Protobuf encoding",
//! Kubernetes API concepts). A kind without a message (custom resources: the real server has
//! no protobuf form for them either) answers 415 naming it; a body that does not decode, 400.
//!
//! Responses: when the first media type of `Accept` is the protobuf one (client-go sends
//! `application/vnd.kubernetes.protobuf, application/json`), an object or list answer is
//! encoded as protobuf with that content type. Answers that have no message (custom
//! resources, `as=Table`) stay JSON, which such clients accept as their fallback; watch streams
//! and error `Status` bodies stay JSON too (documented in docs/kube-apiserver.md).

use axum::body::Body;
use axum::response::Response;
use http::header;
use serde_json::Value;

use crate::status::ApiError;

pub use k8s_protobuf::MEDIA_TYPE;

/// Decodes a protobuf request body into the JSON object it encodes.
///
/// Errors: 415 for kinds without a protobuf message (send JSON instead), 400 for a body that
/// is not a `k8s\0` envelope or whose message does not decode.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    k8s_protobuf::decode(body).map_err(|e| match e {
        k8s_protobuf::Error::UnknownKind { api_version, kind } => {
            ApiError::UnsupportedMediaType(format!(
                "protobuf bodies of {api_version} {kind} are not supported; send application/json (kubectl apply -f / create -f)"
            ))
        }
        other => ApiError::BadRequest(format!("the protobuf request body is malformed: {other}")),
    })
}

/// Whether the client prefers protobuf answers: the first media type it accepts is protobuf,
/// without an `as=` conversion (`as=Table` answers stay JSON).
pub fn prefers_protobuf(accept: &str) -> bool {
    let first = accept.split(',').next().unwrap_or_default();
    let mut parts = first.split(';').map(str::trim);
    parts.next() == Some(MEDIA_TYPE) && !parts.any(|p| p.starts_with("as="))
}

/// `response` (a JSON object or list answer) as protobuf when it has a message; otherwise
/// unchanged.
pub async fn encode_response(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json");
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| k8s_protobuf::encode(&v).ok());
    match encoded {
        Some(pb) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(pb))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_without_a_message_are_unsupported_and_bad_bytes_are_refused() {
        use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
        use prost::Message;
        let cr = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("gclb-operator.dev/v1alpha1".into()),
                kind: Some("TLSCertificateDelegation".into()),
            }),
            raw: Some(Vec::new()),
            content_encoding: None,
            content_type: None,
        };
        let body = [k8s_protobuf::MAGIC.to_vec(), cr.encode_to_vec()].concat();
        assert!(
            matches!(decode(&body), Err(ApiError::UnsupportedMediaType(m)) if m.contains("TLSCertificateDelegation"))
        );
        let body = k8s_protobuf::encode(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}}))
        .unwrap();
        assert_eq!(decode(&body).unwrap()["metadata"]["name"], "d");
        assert!(matches!(decode(b"nope"), Err(ApiError::BadRequest(_))));
    }

    #[test]
    fn protobuf_is_preferred_only_when_listed_first() {
        assert!(prefers_protobuf(
            "application/vnd.kubernetes.protobuf, application/json"
        ));
        assert!(prefers_protobuf("application/vnd.kubernetes.protobuf;q=1"));
        assert!(!prefers_protobuf(
            "application/json, application/vnd.kubernetes.protobuf"
        ));
        assert!(!prefers_protobuf(
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
        assert!(!prefers_protobuf(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json"
        ));
    }
}
