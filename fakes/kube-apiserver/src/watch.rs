//! Watch streams (`?watch=1`): newline-delimited JSON `{"type": ..., "object": ...}` events.
//! Starts from the current state (no resourceVersion, `0`, or `sendInitialEvents=true`, which
//! ends the initial state with a BOOKMARK annotated `k8s.io/initial-events-end`) or resumes after
//! a resourceVersion still in the retained history; an older one gets an `ERROR` event with a
//! 410 `Expired` Status, as the real server sends. Selector transitions become ADDED/DELETED.
//! BOOKMARKs (when `allowWatchBookmarks=true`) carry the resourceVersion up to which every change
//! has been seen by this watch, so resuming from one never skips a change.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::registry::ResourceInfo;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Change, ChangeType, Store};
use crate::table;

/// Interval between BOOKMARK events.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);

/// A watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// Resource watched.
    pub res: Arc<ResourceInfo>,
    /// Namespace, `None` for all.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// `resourceVersion` parameter (`""` or `"0"` = start from the current state).
    pub resource_version: String,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`, or the default server timeout.
    pub timeout: Duration,
    /// Table output with this `includeObject`, or JSON objects when `None`.
    pub table: Option<String>,
}

impl WatchRequest {
    fn matches(&self, ns: &str, view: &Value) -> bool {
        self.namespace.as_ref().is_none_or(|n| n == ns)
            && self.labels.matches(view)
            && self.fields.matches(view)
    }

    fn encode(&self, kind: &str, object: &Value) -> Bytes {
        let object = match &self.table {
            Some(include) => {
                let rv = object["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                table::table(&self.res, std::slice::from_ref(object), rv, None, include)
            }
            None => object.clone(),
        };
        let mut line =
            serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj =
            json!({"kind": self.res.kind, "apiVersion": self.res.api_version(), "metadata": md});
        let mut line =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    /// The event (if any) this watch emits for a change.
    fn translate(&self, change: &Change) -> Option<Bytes> {
        if change.storage != self.res.storage {
            return None;
        }
        let new = Store::present(&self.res, &change.object);
        let now = self.matches(&change.namespace, &new);
        let before = change
            .old
            .as_ref()
            .is_some_and(|o| self.matches(&change.namespace, &Store::present(&self.res, o)));
        let kind = match (change.kind, before, now) {
            (ChangeType::Added, _, true) => "ADDED",
            (ChangeType::Modified, true, true) => "MODIFIED",
            (ChangeType::Modified, false, true) => "ADDED",
            (ChangeType::Modified, true, false) => "DELETED",
            (ChangeType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some(self.encode(kind, &new))
    }
}

fn expired(since: u64, oldest: u64) -> Bytes {
    let status =
        ApiError::Expired(format!("too old resource version: {since} ({oldest})")).to_status();
    let mut line =
        serde_json::to_vec(&json!({"type": "ERROR", "object": status})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// The body stream of a watch response.
pub fn stream(
    store: Arc<Store>,
    req: WatchRequest,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    async_stream::stream! {
        let since = req.resource_version.parse::<u64>().ok().filter(|rv| *rv > 0);
        let (mut rx, mut last_seen) = if req.send_initial_events || since.is_none() {
            let (rx, state, rv) = store.subscribe_with_state(&req.res);
            for (ns, obj) in state {
                let view = Store::present(&req.res, &obj);
                if req.matches(&ns, &view) {
                    yield Ok(req.encode("ADDED", &view));
                }
            }
            if req.send_initial_events {
                yield Ok(req.bookmark(rv, true));
            }
            (rx, rv)
        } else {
            let since = since.unwrap_or(0);
            let (rx, backlog, rv) = store.subscribe_since(since);
            match backlog {
                Err(oldest) => {
                    yield Ok(expired(since, oldest));
                    return;
                }
                Ok(changes) => {
                    for change in changes {
                        if let Some(line) = req.translate(&change) {
                            yield Ok(line);
                        }
                    }
                }
            }
            (rx, rv)
        };
        let deadline = tokio::time::sleep(req.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = ticker.tick(), if req.allow_bookmarks => {
                    yield Ok(req.bookmark(last_seen, false));
                }
                received = rx.recv() => match received {
                    Ok(change) => {
                        if change.rv <= last_seen {
                            continue;
                        }
                        last_seen = change.rv;
                        if let Some(line) = req.translate(&change) {
                            yield Ok(line);
                        }
                    }
                    // A slow watcher ends its stream; the client resumes from its last event.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
                }
            }
        }
    }
}
