//! The architecture test (issue 46): for each crate of the workspace, as `layers.rs` declares
//! it, no circle among its modules (a strongly connected component of the file-level import
//! graph) and no import up a layer; and no hand-written `.rs` file of the workspace is longer
//! than 600 lines. `#[cfg(test)]` code is left out of the module graph: a test module may
//! import whatever it tests. The crate's docs (`src/lib.rs`) say how paths are read.
//!
//! The allowlists below hold only what other work is untying; each entry names its issue and
//! must go when that lands: the test fails on an entry that no longer matches anything.

mod layers;

use std::sync::OnceLock;

use gclb_architecture::{check_crate, sizes, workspace_root, AllowedCircle, Findings};

/// Known circles. A circle found passes when all its files are among one entry's files.
const ALLOWED_CIRCLES: &[AllowedCircle] = &[];

/// Hand-written files over the limit that this issue does not split, each with its reason.
const ALLOWED_LONG_FILES: &[(&str, &str)] = &[];

/// Every crate's findings, read once for both tests that need them.
fn findings() -> &'static [(&'static str, Findings)] {
    static FINDINGS: OnceLock<Vec<(&'static str, Findings)>> = OnceLock::new();
    FINDINGS.get_or_init(|| {
        let root = workspace_root();
        layers::CRATES
            .iter()
            .map(|spec| {
                (
                    spec.name,
                    check_crate(&root, spec).unwrap_or_else(|e| panic!("{}: {e}", spec.name)),
                )
            })
            .collect()
    })
}

#[test]
fn no_module_circles() {
    let mut failures = Vec::new();
    let mut used = vec![false; ALLOWED_CIRCLES.len()];
    for (name, findings) in findings() {
        for (files, edges) in &findings.circles {
            let allowed = ALLOWED_CIRCLES
                .iter()
                .position(|a| files.iter().all(|f| a.files.contains(&f.as_str())));
            match allowed {
                Some(i) => used[i] = true,
                None => failures.push(format!(
                    "circle in {} among {} files:\n    {}\n  tied by (file -> file: names):\n    {}",
                    name,
                    files.len(),
                    files.join("\n    "),
                    edges.join("\n    ")
                )),
            }
        }
    }
    for (entry, used) in ALLOWED_CIRCLES.iter().zip(used) {
        if !used {
            failures.push(format!(
                "allowlisted circle ({}) is gone: remove its entry",
                entry.why
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "modules that import each other, directly or through a circle (untie them: move what both \
         need below both, or invert the call):\n{}",
        failures.join("\n")
    );
}

#[test]
fn no_import_up_a_layer() {
    let mut failures = Vec::new();
    for (name, findings) in findings() {
        for line in &findings.upward {
            failures.push(format!("{name}: {line}"));
        }
        for line in &findings.unlayered {
            failures.push(format!(
                "{name}: {line} is in no layer of tests/architecture/layers.rs"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "imports up a layer (layers are numbered from the top; 0 is the crate root), or modules \
         in no layer:\n{}",
        failures.join("\n")
    );
}

#[test]
fn no_long_hand_written_files() {
    let root = workspace_root();
    let long = sizes::long_files(&root);
    let mut failures = Vec::new();
    for (file, lines) in &long {
        if !ALLOWED_LONG_FILES.iter().any(|(f, _)| f == file) {
            failures.push(format!("{file}: {lines} lines"));
        }
    }
    for (file, why) in ALLOWED_LONG_FILES {
        if !long.iter().any(|(f, _)| f == file) {
            failures.push(format!(
                "{file} is allowlisted ({why}) but no longer too long: remove its entry"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "hand-written files over {} lines (split them by concept: a reader must find each \
         concept's code by its name):\n{}",
        sizes::MAX_LINES,
        failures.join("\n")
    );
}
