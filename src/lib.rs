//! gclb-operator: provisions Google Cloud HTTP(S) load balancers from Kubernetes Ingress objects.
//!
//! Data flow: kube objects -> `controller` (watch, stores) -> `translate` (pure) ->
//! `sync` (desired vs observed) -> `compute` (Compute API v1 or the emulator). `gateway` does the
//! same for the Gateway API (Gateway, HTTPRoute, TLSRoute).

pub mod compute;
pub mod controller;
pub mod gateway;
pub mod managed_certificates;
pub mod readiness;
pub mod sync;
pub mod webhook;

/// The pure translation layer (the `gclb-translate` crate, crates/translate), re-exported so
/// `crate::crd::..` and `crate::translate::..` keep their paths.
pub use gclb_translate::{crd, translate};

/// `User-Agent` of every request to the Kubernetes and Compute APIs: `gclb-operator/<version>`,
/// so cluster admins (audit log `userAgent`) and cloud admins (Cloud Audit Logs
/// `requestMetadata.callerSuppliedUserAgent`) can attribute calls to this operator.
pub const USER_AGENT: &str = concat!("gclb-operator/", env!("CARGO_PKG_VERSION"));
