//! Compute Engine API v1 emulator: a REST control plane that real clients (gcloud, the Rust
//! crate google-cloud-compute-v1, Python google-cloud-compute) use unchanged, and a data plane
//! that carries real HTTP(S) traffic through the emulated load balancers.
//!
//! Control plane map: [`api`] (HTTP routes) -> [`emulator`] (routing to methods, faults,
//! counters, commit and publish) -> [`methods`] (insert/get/delete/update/patch/setters) ->
//! [`resources`] (one module per Compute resource: validation and defaults) over [`store`].
//! [`network`] is the pure network model (instances, firewall rules) the data plane consults.
//! See docs/emulator.md.

pub mod addresses;
pub mod admin;
pub mod api;
#[cfg(test)]
mod api_fuzz_tests;
pub mod api_request;
pub mod batch;
pub mod ca;
pub mod calls;
pub mod dashboard;
pub mod dataplane;
pub mod emulator;
pub mod explain_cli;
pub mod faults;
pub mod filter;
#[cfg(test)]
mod fuzz_support;
pub mod health_state;
pub mod iam;
pub mod iam_permissions;
pub mod iam_policy;
pub mod iam_roles;
pub mod identity;
pub mod identity_api;
pub mod listing;
pub mod logging_api;
pub mod metadata;
pub mod methods;
pub mod metrics;
pub mod network;
pub mod open_files;
pub mod operations;
pub mod options;
pub mod project_number;
pub mod resources;
pub mod schema;
pub mod slow_cloud;
pub mod snapshot;
pub mod state_file;
pub mod store;
pub mod tokens;

/// Google's error shape and request validation (the `gce-validate` crate, crates/validate),
/// re-exported so `crate::errors::..` and `crate::validate::..` keep their paths.
pub use gce_validate::{errors, validate};
