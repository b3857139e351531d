//! gclb-translate: the pure translation layer of gclb-operator, in its own crate so that its
//! tests (and each of its mutants, `make mutants`) build in seconds without the operator.
//!
//! `crd`: the custom resources the operator reads (BackendConfig, FrontendConfig,
//! ManagedCertificate, TLSCertificateDelegation) and their generated CRDs. `translate`: a
//! cluster snapshot -> the desired Compute Engine resources, pure and deterministic. No I/O:
//! gclb-operator (`controller`, `sync`, `compute`) reads the cluster, calls this, and writes the
//! result; it re-exports both modules as `gclb_operator::{crd, translate}`. This crate depends
//! on nothing of the operator's (layers import only downward).

pub mod crd;
pub mod translate;
