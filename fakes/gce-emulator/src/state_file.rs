//! `--state-file PATH`: the store written as JSON after every committed change (temp file +
//! rename, so a crash never leaves a torn file) and loaded at start. References are stored as
//! full URLs of the emulator's base, which changes with the port, so they are rebased on load.
//! The file holds private keys (mode 0600): it is a test artefact, not a secret store.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::emulator::Emulator;
use crate::snapshot::{NetworkEndpoint, Snapshot};
use crate::store::State;

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// I/O on the file.
    #[error("state file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not a state file of this emulator.
    #[error("state file {path} is not valid: {source}; delete it or pass another --state-file")]
    Format {
        path: PathBuf,
        source: serde_json::Error,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Endpoint {
    ip_address: String,
    port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instance: Option<String>,
}

/// The file's content.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateFile {
    format: u32,
    base: String,
    version: u64,
    resources: BTreeMap<String, Value>,
    neg_endpoints: BTreeMap<String, Vec<Endpoint>>,
    private_keys: BTreeMap<String, String>,
    #[serde(default)]
    ca: Option<(String, String)>,
}

/// What a state file restores: the store and the local CA's (certificate PEM, key PEM).
pub struct Loaded {
    /// The store, rebased onto the new base URL.
    pub state: State,
    /// The saved CA, if any.
    pub ca: Option<(String, String)>,
}

/// Loads `path` (absent file: `None`), rebasing references onto `base`.
pub fn load(path: &Path, base: &str) -> Result<Option<Loaded>, StateFileError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateFileError::Io {
                path: path.into(),
                source,
            })
        }
    };
    let file: StateFile =
        serde_json::from_slice(&bytes).map_err(|source| StateFileError::Format {
            path: path.into(),
            source,
        })?;
    let mut state = State::new(base.to_string());
    for (k, mut v) in file.resources {
        rebase(&mut v, &file.base, base);
        state.put(k, v);
    }
    for (k, eps) in file.neg_endpoints {
        state.neg_endpoints.insert(
            k,
            eps.into_iter()
                .map(|e| NetworkEndpoint {
                    ip_address: e.ip_address,
                    port: e.port,
                    instance: e.instance,
                })
                .collect(),
        );
    }
    state.private_keys = file.private_keys;
    state.version = file.version;
    Ok(Some(Loaded { state, ca: file.ca }))
}

fn rebase(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) => {
            if let Some(rest) = s.strip_prefix(from) {
                *s = format!("{to}{rest}");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rebase(x, from, to)),
        Value::Object(m) => m.values_mut().for_each(|x| rebase(x, from, to)),
        _ => {}
    }
}

/// Writes `snap` atomically: a temp file in the same directory, fsync, rename.
pub fn save(
    path: &Path,
    base: &str,
    snap: &Snapshot,
    ca: Option<(String, String)>,
) -> Result<(), StateFileError> {
    let file = StateFile {
        format: 1,
        base: base.to_string(),
        version: snap.version,
        resources: snap
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), v.as_ref().clone()))
            .collect(),
        neg_endpoints: snap
            .neg_endpoints
            .iter()
            .map(|(k, eps)| {
                (
                    k.clone(),
                    eps.iter()
                        .map(|e| Endpoint {
                            ip_address: e.ip_address.clone(),
                            port: e.port,
                            instance: e.instance.clone(),
                        })
                        .collect(),
                )
            })
            .collect(),
        private_keys: snap.private_keys.clone(),
        ca,
    };
    let io = |source| StateFileError::Io {
        path: path.into(),
        source,
    };
    let bytes = serde_json::to_vec(&file).expect("state serialises");
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).map_err(io)?;
        f.write_all(&bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)
}

/// Writes the state file whenever a new snapshot is published (coalescing bursts) and tells
/// the emulator which version is on disk, so mutations answer only once persisted.
pub fn spawn_writer(emu: Arc<Emulator>, path: PathBuf) {
    let mut rx = emu.subscribe();
    tokio::spawn(async move {
        loop {
            let snap = rx.borrow_and_update().clone();
            let (p, base, ca) = (
                path.clone(),
                emu.base.clone(),
                emu.ca.as_ref().map(|c| c.to_pem_pair()),
            );
            let version = snap.version;
            match tokio::task::spawn_blocking(move || save(&p, &base, &snap, ca)).await {
                Ok(Ok(())) => emu.mark_persisted(version),
                // Never leave the API waiting on a file that cannot be written: log and go on.
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "cannot write the state file");
                    emu.mark_persisted(version);
                }
                Err(e) => {
                    tracing::error!(error = %e, "state file writer panicked");
                    emu.mark_persisted(version);
                }
            }
            if rx.changed().await.is_err() {
                break;
            }
        }
    });
}
