//! Validation of built-in kinds as the real server's `pkg/apis/*/validation` does it, with its
//! field paths and messages, and server-side field validation (`fieldValidation=Strict`).
//!
//! - [`strict_fields`]: unknown fields against the kind's OpenAPI schema (400).
//! - [`names`]: `metadata.name` / `generateName` rules per kind (DNS-1123 subdomain or label,
//!   DNS-1035 label, path segment).

pub mod names;
pub mod strict_fields;

pub use strict_fields::{strict, unknown_fields};
