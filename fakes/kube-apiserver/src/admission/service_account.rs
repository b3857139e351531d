//! The `ServiceAccount` admission plugin on Pod create: a Pod without `serviceAccountName` runs
//! as `default`; the ServiceAccount must exist (else `403 pods "p" is forbidden: error looking up
//! service account ns/default: serviceaccount "default" not found`); unless the Pod or the
//! ServiceAccount opts out (`automountServiceAccountToken: false`), every container gets the
//! `kube-api-access-xxxxx` projected volume (token, `kube-root-ca.crt`, namespace) mounted at
//! `/var/run/secrets/kubernetes.io/serviceaccount`. Port of k8s.io/kubernetes
//! `plugin/pkg/admission/serviceaccount/admission.go` (v1.26).

use rand::Rng;
use serde_json::{json, Value};

use crate::status::ApiError;
use crate::store::{Store, DEFAULT_SERVICE_ACCOUNT};

/// Where the token volume is mounted.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Prefix of the token volume's name.
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// `expirationSeconds` of the projected token (`WarnOnlyBoundTokenExpirationSeconds`).
pub const PROJECTED_TOKEN_SECONDS: i64 = 3607;

fn suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The projected volume source of the token volume.
pub fn token_volume_source() -> Value {
    json!({"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": PROJECTED_TOKEN_SECONDS, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]})
}

/// Admits a Pod create (see the module docs).
///
/// Errors: 403 `Forbidden` when the ServiceAccount does not exist.
pub fn admit(store: &Store, namespace: &str, pod: &mut Value) -> Result<(), ApiError> {
    if pod["metadata"]["annotations"]
        .get("kubernetes.io/config.mirror")
        .is_some()
    {
        return Ok(());
    }
    let spec = &mut pod["spec"];
    if !spec.is_object() {
        return Ok(());
    }
    let sa_name = spec["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| spec["serviceAccount"].as_str().filter(|s| !s.is_empty()))
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
        .to_string();
    spec["serviceAccountName"] = json!(sa_name);
    spec["serviceAccount"] = json!(sa_name);
    let Some(sa) = store.get_stored("/serviceaccounts", namespace, &sa_name) else {
        return Err(ApiError::ForbiddenResource {
            group: String::new(),
            resource: "pods".into(),
            name: pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            message: format!(
                "error looking up service account {namespace}/{sa_name}: serviceaccount {sa_name:?} not found"
            ),
        });
    };
    let automount = spec["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    if spec["imagePullSecrets"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        if let Some(secrets) = sa["imagePullSecrets"].as_array().filter(|a| !a.is_empty()) {
            spec["imagePullSecrets"] = json!(secrets
                .iter()
                .map(|s| json!({"name": s["name"]}))
                .collect::<Vec<_>>());
        }
    }
    Ok(())
}

fn mount_token(spec: &mut Value) {
    let existing = spec["volumes"].as_array().and_then(|vols| {
        vols.iter()
            .filter_map(|v| v["name"].as_str())
            .find(|n| n.starts_with(VOLUME_PREFIX))
            .map(str::to_string)
    });
    let volume_name = existing
        .clone()
        .unwrap_or_else(|| format!("{VOLUME_PREFIX}{}", suffix()));
    let mut needs_volume = false;
    for list in ["initContainers", "containers"] {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            let mounted = container["volumeMounts"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH));
            if mounted {
                continue;
            }
            if !container["volumeMounts"].is_array() {
                container["volumeMounts"] = json!([]);
            }
            if let Some(m) = container["volumeMounts"].as_array_mut() {
                m.push(
                    json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}),
                );
            }
            needs_volume = true;
        }
    }
    if existing.is_none() && needs_volume {
        if !spec["volumes"].is_array() {
            spec["volumes"] = json!([]);
        }
        if let Some(v) = spec["volumes"].as_array_mut() {
            v.push(json!({"name": volume_name, "projected": token_volume_source()}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_container_mounts_one_token_volume() {
        let mut spec = json!({"containers": [{"name": "a"}, {"name": "b", "volumeMounts": [
            {"name": "own", "mountPath": TOKEN_MOUNT_PATH}]}]});
        mount_token(&mut spec);
        let vols = spec["volumes"].as_array().unwrap();
        assert_eq!(vols.len(), 1);
        let name = vols[0]["name"].as_str().unwrap();
        assert!(name.starts_with(VOLUME_PREFIX) && name.len() == VOLUME_PREFIX.len() + 5);
        assert_eq!(spec["containers"][0]["volumeMounts"][0]["name"], name);
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
