//! gcloud's batch endpoint, `POST /batch/compute/{v1,beta,alpha}` (multipart/mixed; each part
//! an `application/http` request such as `DELETE /compute/v1/...?alt=json HTTP/1.1`, each
//! answered in the version its own path names). Parts run
//! in order; the answer is multipart/mixed with `Content-ID: <response-{id}>` per part, the
//! shape gcloud's apitools accepted (reference/gce-clients.md, section 1).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use crate::emulator::{ApiRequest, Emulator};
use crate::errors::ApiError;

/// One request inside a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPart {
    /// The part's Content-ID without angle brackets (may be empty).
    pub content_id: String,
    /// HTTP method of the inner request.
    pub method: String,
    /// Path and query of the inner request (scheme and host removed).
    pub target: String,
    /// Body of the inner request.
    pub body: Vec<u8>,
}

/// Errors of batch parsing.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BatchError {
    /// No `boundary` parameter on a multipart content type.
    #[error("the batch request needs Content-Type: multipart/mixed; boundary=...")]
    NoBoundary,
    /// A part is not an HTTP request.
    #[error("batch part {0} is not an application/http request: {1}")]
    BadPart(usize, String),
}

/// The `boundary` parameter of a `multipart/mixed` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
        .filter(|b| !b.is_empty())
}

fn split_head(s: &str) -> (&str, &str) {
    if let Some(i) = s.find("\r\n\r\n") {
        (&s[..i], &s[i + 4..])
    } else if let Some(i) = s.find("\n\n") {
        (&s[..i], &s[i + 2..])
    } else {
        (s, "")
    }
}

/// Splits a multipart/mixed body into its HTTP requests.
pub fn parse(body: &str, boundary: &str) -> Result<Vec<BatchPart>, BatchError> {
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    for (i, raw) in body.split(delim.as_str()).skip(1).enumerate() {
        if raw.starts_with("--") {
            break;
        }
        let raw = raw.trim_start_matches(['\r', '\n']);
        let (headers, inner) = split_head(raw);
        let content_id = headers
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.trim().eq_ignore_ascii_case("content-id"))
                    .map(|(_, v)| {
                        v.trim()
                            .trim_start_matches('<')
                            .trim_end_matches('>')
                            .to_string()
                    })
            })
            .unwrap_or_default();
        let (req_head, req_body) = split_head(inner);
        let request_line = req_head.lines().next().unwrap_or_default();
        let mut words = request_line.split_whitespace();
        let (Some(method), Some(target)) = (words.next(), words.next()) else {
            return Err(BatchError::BadPart(i, request_line.to_string()));
        };
        let target = match target.find("://") {
            Some(s) => target[s + 3..]
                .find('/')
                .map(|p| target[s + 3 + p..].to_string())
                .unwrap_or_else(|| "/".into()),
            None => target.to_string(),
        };
        let body = req_body.trim_end_matches(['\r', '\n']).as_bytes().to_vec();
        parts.push(BatchPart {
            content_id,
            method: method.to_string(),
            target,
            body,
        });
    }
    Ok(parts)
}

/// `POST /batch/compute/{version}` (and `POST /batch`).
pub async fn handle(State(emu): State<Arc<Emulator>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(e) = crate::api_request::check_auth(&emu, &headers) {
        return e.into_response();
    }
    let ct = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let parts = match boundary(ct)
        .ok_or(BatchError::NoBoundary)
        .and_then(|b| parse(&String::from_utf8_lossy(&body), &b))
    {
        Ok(p) => p,
        Err(e) => return ApiError::new(400, "badRequest", e.to_string()).into_response(),
    };
    let out_boundary = format!("batch_{:016x}", rand::random::<u64>());
    let mut out = String::new();
    for part in parts {
        let (path, query) = part
            .target
            .split_once('?')
            .map_or((part.target.as_str(), None), |(p, q)| (p, Some(q)));
        let result = match (
            Method::from_bytes(part.method.as_bytes()),
            crate::emulator::ApiVersion::split_path(path),
        ) {
            (Ok(method), Some((version, p))) => {
                emu.handle(ApiRequest {
                    method,
                    version,
                    path: p.to_string(),
                    query: crate::api_request::parse_query(query),
                    body: Bytes::from(part.body),
                    token: crate::api_request::bearer_token(&headers).map(str::to_string),
                })
                .await
            }
            _ => Err(ApiError::new(
                404,
                "notFound",
                format!("The requested URL {path} was not found on this server."),
            )),
        };
        let (code, json) = match result {
            Ok(v) => (200, v),
            Err(e) => (e.code, e.to_json()),
        };
        let reason = StatusCode::from_u16(code)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        out.push_str(&format!(
            "--{out_boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{}>\r\n\r\nHTTP/1.1 {code} {reason}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{json}\r\n",
            part.content_id
        ));
    }
    out.push_str(&format!("--{out_boundary}--\r\n"));
    (
        [(
            http::header::CONTENT_TYPE,
            format!("multipart/mixed; boundary={out_boundary}"),
        )],
        out,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gcloud_batch_parts() {
        let body = "--===1==\r\nContent-Type: application/http\r\nMIME-Version: 1.0\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <abc+0>\r\n\r\nDELETE /compute/v1/projects/p1/global/healthChecks/hc1?alt=json HTTP/1.1\r\nContent-Type: application/json\r\nMIME-Version: 1.0\r\n\r\n\r\n--===1==\r\nContent-Type: application/http\r\nContent-ID: <abc+1>\r\n\r\nPOST http://127.0.0.1:9/compute/v1/projects/p1/global/operations/op/wait?alt=json HTTP/1.1\r\ncontent-type: application/json\r\n\r\n{}\r\n--===1==--";
        let b = boundary("multipart/mixed; boundary=\"===1==\"").unwrap();
        let parts = parse(body, &b).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].content_id, "abc+0");
        assert_eq!(parts[0].method, "DELETE");
        assert_eq!(
            parts[0].target,
            "/compute/v1/projects/p1/global/healthChecks/hc1?alt=json"
        );
        assert!(parts[0].body.is_empty());
        assert_eq!(
            parts[1].target,
            "/compute/v1/projects/p1/global/operations/op/wait?alt=json"
        );
        assert_eq!(parts[1].body, b"{}");
        assert_eq!(boundary("multipart/mixed"), None);
    }
}
