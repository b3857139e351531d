//! The workspace's architecture checks (issue 46), run by `tests/architecture/main.rs`:
//!
//! - no circle among a crate's modules: the module graph (one node per source file, an edge
//!   wherever a file names another file's item: `use crate::..`, `use super::..`, `crate::x::y`
//!   paths in code) has no strongly connected component of more than one file;
//! - no module imports one from a layer its crate declares above it;
//! - no hand-written `.rs` file is longer than 600 lines.
//!
//! Test code (`#[cfg(test)]` items and the modules they declare) is left out of the graph:
//! a test module may reach into whatever it tests.
//!
//! A name re-exported by `pub use` is followed to the file that defines it, so a facade
//! (`mod.rs` re-exporting its children) ties nothing by itself; a private `use` is an edge.

pub mod graph;
pub mod layers;
pub mod scope;
pub mod sizes;
pub mod tree;

use std::path::{Path, PathBuf};

/// One crate's source tree and its declared layers, as the test's table gives them.
#[derive(Debug, Clone, Copy)]
pub struct CrateSpec {
    /// The package name, for messages.
    pub name: &'static str,
    /// The crate root relative to the workspace root, e.g. `crates/sync/src/lib.rs`.
    pub root: &'static str,
    /// Layers from the top down; each lists module paths (`dataplane`, `resources::url_maps`)
    /// that belong to it, a module and everything under it. The crate root is above all layers.
    pub layers: &'static [&'static [&'static str]],
}

/// The workspace root: two levels above this crate's manifest.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// A circle the test lets pass until the issue named in `why` unties it: every circle found
/// whose files are all among `files` passes.
#[derive(Debug, Clone, Copy)]
pub struct AllowedCircle {
    pub files: &'static [&'static str],
    pub why: &'static str,
}

/// What the checks found in one crate.
#[derive(Debug, Default)]
pub struct Findings {
    /// Every circle, each as its files (sorted) and the edges inside it, as lines of text.
    pub circles: Vec<(Vec<String>, Vec<String>)>,
    /// Imports up a layer, as lines of text.
    pub upward: Vec<String>,
    /// Modules that no layer of the table covers.
    pub unlayered: Vec<String>,
}

/// Reads one crate and checks it: circles, imports up a layer, modules in no layer.
pub fn check_crate(workspace: &Path, spec: &CrateSpec) -> Result<Findings, String> {
    let tree = tree::ModuleTree::load(workspace, spec.root)?;
    let resolver = scope::Resolver::new(&tree);
    let edges = resolver.edges();
    let pairs: std::collections::BTreeSet<(usize, usize)> = edges.keys().copied().collect();
    let mut findings = Findings::default();
    for component in graph::circles(tree.files.len(), &pairs) {
        let files: Vec<String> = component.iter().map(|&f| tree.files[f].clone()).collect();
        let mut lines = Vec::new();
        for (&(a, b), labels) in &edges {
            if component.contains(&a) && component.contains(&b) {
                let names: Vec<&str> = labels.iter().map(String::as_str).collect();
                lines.push(format!(
                    "{} -> {}: {}",
                    tree.files[a],
                    tree.files[b],
                    names.join(", ")
                ));
            }
        }
        findings.circles.push((files, lines));
    }
    // Each file's own module: the outermost module it holds.
    let mut file_module: Vec<Option<&[String]>> = vec![None; tree.files.len()];
    for module in &tree.modules {
        let slot = &mut file_module[module.file];
        if slot.is_none_or(|p| module.path.len() < p.len()) {
            *slot = Some(&module.path);
        }
    }
    let layer = |file: usize| -> Option<usize> {
        let path = file_module[file].expect("every file holds a module");
        if path.is_empty() {
            return Some(0);
        }
        layers::layer_of(spec.layers, path).map(|l| l + 1)
    };
    for (file, path) in file_module.iter().enumerate() {
        if layer(file).is_none() {
            findings.unlayered.push(format!(
                "{} (module {})",
                tree.files[file],
                path.unwrap_or(&[]).join("::")
            ));
        }
    }
    for (&(a, b), labels) in &edges {
        if let (Some(la), Some(lb)) = (layer(a), layer(b)) {
            if lb < la {
                let names: Vec<&str> = labels.iter().map(String::as_str).collect();
                findings.upward.push(format!(
                    "{} (layer {la}) imports {} (layer {lb}, above it): {}",
                    tree.files[a],
                    tree.files[b],
                    names.join(", ")
                ));
            }
        }
    }
    Ok(findings)
}

/// The crate's top-level modules and the edges between them (for writing a layer table).
pub fn top_level_edges(
    workspace: &Path,
    spec: &CrateSpec,
) -> Result<Vec<(String, String)>, String> {
    let tree = tree::ModuleTree::load(workspace, spec.root)?;
    let resolver = scope::Resolver::new(&tree);
    let mut top = vec![String::new(); tree.files.len()];
    for module in &tree.modules {
        if module.path.len() <= 1 && top[module.file].is_empty() {
            top[module.file] = module
                .path
                .first()
                .cloned()
                .unwrap_or_else(|| "crate".into());
        }
    }
    for module in &tree.modules {
        if top[module.file].is_empty() {
            top[module.file] = module.path[0].clone();
        }
    }
    let mut out: std::collections::BTreeSet<(String, String)> = Default::default();
    for (a, b) in resolver.edges().keys() {
        if top[*a] != top[*b] {
            out.insert((top[*a].clone(), top[*b].clone()));
        }
    }
    Ok(out.into_iter().collect())
}
