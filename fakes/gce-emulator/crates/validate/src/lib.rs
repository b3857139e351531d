//! gce-validate: the Compute API's request validation as the emulator applies it (names, field
//! formats, references) and Google's error shape (`errors`), in its own crate so that its tests
//! (and each of its mutants, `make mutants`) build without the rest of the emulator. The
//! emulator re-exports both as `gce_emulator::{errors, validate}`.

pub mod errors;
pub mod validate;
