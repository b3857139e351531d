//! What every request of every listener shares ([`ProxyContext`]): the upstream pools and
//! the state of the edge features. It sits below the proxy and its edge features (which read
//! it) and the serving loop (which hands it to each request).

use std::sync::Arc;

use crate::dataplane::access_log::AccessLog;
use crate::dataplane::coarse_timer::CoarseTimer;
use crate::dataplane::upstream::Upstream;
use crate::dataplane::{armor, cdn, iap, logging};

/// Shared by every request.
#[derive(Debug)]
pub struct ProxyContext {
    /// Upstream pools.
    pub upstream: Upstream,
    /// Access log, when configured.
    pub access_log: Option<AccessLog>,
    /// Per-request deadlines (`timeoutSec`, hyper's header read timeout).
    pub timer: CoarseTimer,
    /// Cloud Armor state (rate-limit counters, region map).
    pub armor: Arc<armor::State>,
    /// Request logs (`logConfig`), read through the Cloud Logging API.
    pub logs: Arc<logging::Store>,
    /// The Cloud CDN cache.
    pub cdn: Arc<cdn::store::Store>,
    /// IAP's key and allowed identities.
    pub iap: Arc<iap::State>,
}
