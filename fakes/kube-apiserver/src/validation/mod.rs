//! Validation of built-in kinds as the real server's `pkg/apis/*/validation` does it, with its
//! field paths and messages, and server-side field validation (`fieldValidation=Strict`).
//!
//! - [`strict_fields`]: unknown fields against the kind's OpenAPI schema (400).
//! - [`builtin`]: value validation of Ingress, IngressClass, Service, Secret, Pod status, Event,
//!   Lease and EndpointSlice ([`networking`], [`core`]; messages built by [`errors`]).
//! - [`names`]: `metadata.name` / `generateName` rules per kind (DNS-1123 subdomain or label,
//!   DNS-1035 label, path segment).

pub mod builtin;
pub mod core;
pub mod decoding;
pub mod errors;
pub mod names;
pub mod networking;
pub mod strict_fields;

pub use strict_fields::{strict, unknown_fields};
