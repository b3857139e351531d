//! `--state-file`: the whole store as JSON (`{"resourceVersion": N, "objects": [{"storage",
//! "object"}]}`), loaded at start and rewritten atomically (temporary file + rename) shortly after
//! each change.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::store::Store;

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The file could not be read or written.
    #[error("state file {path}: {source}")]
    Io {
        /// Path of the state file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a state file written by this server.
    #[error("state file {path} is not valid: {reason}; move it away to start with an empty state")]
    Invalid {
        /// Path of the state file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Writes `bytes` to `path` atomically with file mode `mode`.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp: PathBuf = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
        std::process::id()
    ));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Loads the state file into `store` when it exists.
///
/// Errors: [`StateFileError`] when it exists but cannot be read or parsed.
pub fn load(store: &Store, path: &Path) -> Result<bool, StateFileError> {
    let p = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(StateFileError::Io { path: p, source }),
    };
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| StateFileError::Invalid {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    let rv = v["resourceVersion"]
        .as_u64()
        .ok_or_else(|| StateFileError::Invalid {
            path: p.clone(),
            reason: "missing resourceVersion".into(),
        })?;
    let objects = v["objects"]
        .as_array()
        .ok_or_else(|| StateFileError::Invalid {
            path: p.clone(),
            reason: "missing objects".into(),
        })?
        .iter()
        .map(|o| {
            (
                o["storage"].as_str().unwrap_or_default().to_string(),
                o["object"].clone(),
            )
        })
        .collect();
    store.restore(rv, objects);
    Ok(true)
}

/// Writes the current state once.
///
/// Errors: [`StateFileError::Io`].
pub fn save(store: &Store, path: &Path) -> Result<(), StateFileError> {
    let (rv, objects) = store.snapshot();
    let objects: Vec<Value> = objects
        .into_iter()
        .map(|(s, o)| json!({"storage": s, "object": o}))
        .collect();
    let bytes =
        serde_json::to_vec(&json!({"resourceVersion": rv, "objects": objects})).unwrap_or_default();
    write_atomic(path, &bytes, 0o600).map_err(|source| StateFileError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Rewrites the state file after changes (batched over `DEBOUNCE`) until dropped.
pub async fn persist(store: Arc<Store>, path: PathBuf) {
    const DEBOUNCE: Duration = Duration::from_millis(200);
    loop {
        store.changed().await;
        tokio::time::sleep(DEBOUNCE).await;
        if let Err(e) = save(&store, &path) {
            tracing::warn!(error = %e, "could not write the state file");
        }
    }
}
