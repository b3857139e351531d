//! gce-url-map: the emulator's URL map routing (host rules, path matchers, route rules,
//! actions), free of I/O and in its own crate so that its tests (and each of its mutants,
//! `make mutants`) build without the rest of the emulator. The emulator re-exports it as
//! `gce_emulator::dataplane::url_map`; its data plane routes every request with it.

pub mod url_map;
