//! gclb-sync: the Compute layer of gclb-operator, in its own crate so that its tests (and each
//! of its mutants, `make mutants`) build without the rest of the operator.
//!
//! `compute`: the Compute API seam (google-cloud-compute-v1 clients, retries, Operation waits,
//! error classes, the state cache of what exists). `sync`: desired vs observed, one module per
//! Compute collection, and one Ingress's load balancer as a graph of those calls. The input is
//! what `gclb-translate` produced; gclb-operator (`controller`, `gateway`) calls this and
//! re-exports both modules as `gclb_operator::{compute, sync}`. This crate depends on nothing of
//! the operator's (layers import only downward).

pub mod compute;
pub mod sync;

// The translation layer below, at the path the modules name it by (`crate::translate::..`).
use gclb_translate::translate;

// `User-Agent` of every request to the Kubernetes and Compute APIs (defined by the Compute seam).
pub use compute::USER_AGENT;
