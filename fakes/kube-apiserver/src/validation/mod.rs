//! Validation of built-in kinds as the real server's `pkg/apis/*/validation` does it, with its
//! field paths and messages, and server-side field validation (`fieldValidation=Strict`).
//!
//! - [`strict_fields`]: unknown fields against the kind's OpenAPI schema (400).
//! - [`builtin`]: which rules run for which write (create, update, `/status`), in the real
//!   server's order:
//!   - [`object_meta`]: labels, annotations, finalizers, owner references, `generateName` of
//!     every object (apimachinery `pkg/api/validation/objectmeta.go`);
//!   - [`core`], [`config`], [`pod`]: the core kinds' contents (`pkg/apis/core/validation`);
//!   - [`apps`]: Deployments, ReplicaSets, StatefulSets, DaemonSets (`pkg/apis/apps/validation`),
//!     their templates validated as Pod templates by [`pod`];
//!   - [`networking`]: Ingress and IngressClass (`pkg/apis/networking/validation`);
//!   - [`update`]: immutable fields and each kind's update rules;
//!   - messages built by [`errors`] and [`go_format`] (how Go prints values).
//! - [`names`]: `metadata.name` / `generateName` rules per kind (DNS-1123 subdomain or label,
//!   DNS-1035 label, path segment) and the other string formats of apimachinery's
//!   `pkg/util/validation` (qualified names, label values, config keys, percents).

pub mod apps;
pub mod builtin;
pub mod config;
pub mod core;
pub mod decoding;
pub mod errors;
pub mod go_format;
pub mod names;
pub mod networking;
pub mod object_meta;
pub mod pod;
pub mod strict_fields;
pub mod update;

pub use strict_fields::{strict, unknown_fields};
