//! ConfigMap and Secret contents, as k8s.io/kubernetes `pkg/apis/core/validation/validation.go`
//! `ValidateConfigMap` and `ValidateSecret` check them: every key of `data` / `binaryData` a
//! config key (`IsConfigMapKey`, reported at `data[key]`), no key in both, at most 1 MiB of
//! values, and the keys each Secret `type` requires.

use base64::Engine;
use serde_json::Value;

use super::errors::{invalid, required};
use super::names::config_key;
use crate::crd_validation::FieldError;

/// `core.MaxSecretSize`: 1 MiB of values.
pub const MAX_SIZE: usize = 1024 * 1024;

fn too_long(field: &str) -> FieldError {
    FieldError {
        reason: "FieldValueTooLong",
        field: field.into(),
        message: format!("Too long: must have at most {MAX_SIZE} bytes"),
    }
}

fn keys(map: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for k in map.as_object().into_iter().flatten().map(|(k, _)| k) {
        for m in config_key(k) {
            errs.push(invalid(format!("{path}[{k}]"), &Value::from(k.as_str()), m));
        }
    }
}

/// The length of a base64 value once decoded (its text length when it does not decode).
fn decoded_len(v: &Value) -> usize {
    let text = v.as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_or(text.len(), |b| b.len())
}

/// `ValidateConfigMap`.
pub fn config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (data, binary) = (&obj["data"], &obj["binaryData"]);
    let mut total = 0;
    for (k, v) in data.as_object().into_iter().flatten() {
        for m in config_key(k) {
            errs.push(invalid(format!("data[{k}]"), &Value::from(k.as_str()), m));
        }
        if binary.get(k).is_some() {
            errs.push(invalid(
                format!("data[{k}]"),
                &Value::from(k.as_str()),
                "duplicate of key present in binaryData",
            ));
        }
        total += v.as_str().map_or(0, str::len);
    }
    keys(binary, "binaryData", &mut errs);
    total += binary
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| decoded_len(v))
        .sum::<usize>();
    if total > MAX_SIZE {
        errs.push(too_long(""));
    }
    errs
}

/// `ValidateSecret`: data keys and size, then the keys of the Secret's `type`.
pub fn secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let data = &obj["data"];
    keys(data, "data", &mut errs);
    let total: usize = data
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| decoded_len(v))
        .sum();
    if total > MAX_SIZE {
        errs.push(too_long("data"));
    }
    let has = |k: &str| data.get(k).is_some();
    match obj["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let key = "kubernetes.io/service-account.name";
            if obj["metadata"]["annotations"][key]
                .as_str()
                .is_none_or(str::is_empty)
            {
                errs.push(required(format!("metadata.annotations[{key}]"), ""));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => {
            errs.push(required("data[.dockercfg]", ""))
        }
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            errs.push(required("data[.dockerconfigjson]", ""))
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required("data[username]", ""));
            errs.push(required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" if decoded_len(&data["ssh-privatekey"]) == 0 => {
            errs.push(required("data[ssh-privatekey]", ""))
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    errs.push(required(format!("data[{key}]"), ""));
                }
            }
        }
        _ => {}
    }
    errs
}
