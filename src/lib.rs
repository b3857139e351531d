//! gclb-operator: provisions Google Cloud HTTP(S) load balancers from Kubernetes Ingress objects.
//!
//! Data flow: kube objects -> `controller` (watch, stores) -> `translate` (pure) ->
//! `sync` (desired vs observed) -> `compute` (Compute API v1 or the emulator). `gateway` does the
//! same for the Gateway API (Gateway, HTTPRoute, TLSRoute).

pub mod controller;
pub mod gateway;
pub mod managed_certificates;
pub mod webhook;

/// The pure translation layer (the `gclb-translate` crate, crates/translate), re-exported so
/// `crate::crd::..` and `crate::translate::..` keep their paths.
pub use gclb_translate::{crd, translate};

/// The Compute layer (the `gclb-sync` crate, crates/sync), re-exported so `crate::compute::..`
/// and `crate::sync::..` keep their paths. `USER_AGENT` (`gclb-operator/<version>`, the
/// workspace's version) is defined there, beside the Compute clients that send it.
pub use gclb_sync::{compute, sync, USER_AGENT};

/// Pod readiness gates (the `gclb-readiness` crate, crates/readiness), re-exported so
/// `crate::readiness::..` keeps its path.
pub use gclb_readiness::readiness;
