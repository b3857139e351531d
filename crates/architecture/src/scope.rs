//! What each module names: the items it defines, the names its `use` items bring in, and the
//! edges from its file to the files whose items it names.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use syn::visit::Visit;

use crate::tree::{is_test, ModuleTree};

/// One leaf of a `use` tree: `name` is what it brings into scope (`None` for a glob).
#[derive(Debug, Clone)]
pub struct UseLeaf {
    pub name: Option<String>,
    pub path: Vec<String>,
    pub public: bool,
}

/// The names one module defines and imports.
#[derive(Debug, Default)]
pub struct Scope {
    pub defined: HashSet<String>,
    pub uses: Vec<UseLeaf>,
}

/// A crate's modules with their scopes: resolves paths to the files defining what they name.
pub struct Resolver<'a> {
    pub tree: &'a ModuleTree,
    pub scopes: Vec<Scope>,
}

/// Edges between files: (from, to) -> the paths, as written, that tie them.
pub type Edges = BTreeMap<(usize, usize), BTreeSet<String>>;

const DEPTH: usize = 16;

fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, public: bool, out: &mut Vec<UseLeaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, public, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let path = prefix.clone();
                out.push(UseLeaf {
                    name: path.last().cloned(),
                    path,
                    public,
                });
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push(UseLeaf {
                    name: Some(name),
                    path,
                    public,
                });
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseLeaf {
                name: Some(r.rename.to_string()),
                path,
                public,
            });
        }
        syn::UseTree::Glob(_) => out.push(UseLeaf {
            name: None,
            path: prefix.clone(),
            public,
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, public, out);
            }
        }
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    Some(match item {
        Const(i) => i.ident.to_string(),
        Enum(i) => i.ident.to_string(),
        Fn(i) => i.sig.ident.to_string(),
        Macro(i) => i.ident.as_ref()?.to_string(),
        Mod(i) => i.ident.to_string(),
        Static(i) => i.ident.to_string(),
        Struct(i) => i.ident.to_string(),
        Trait(i) => i.ident.to_string(),
        TraitAlias(i) => i.ident.to_string(),
        Type(i) => i.ident.to_string(),
        Union(i) => i.ident.to_string(),
        _ => return None,
    })
}

impl<'a> Resolver<'a> {
    pub fn new(tree: &'a ModuleTree) -> Self {
        let scopes = tree
            .modules
            .iter()
            .map(|module| {
                let mut scope = Scope::default();
                for item in &module.items {
                    if let Some(name) = item_name(item) {
                        scope.defined.insert(name);
                    }
                    if let syn::Item::Use(u) = item {
                        let public = !matches!(u.vis, syn::Visibility::Inherited);
                        let mut prefix = Vec::new();
                        if u.leading_colon.is_some() {
                            prefix.push("::".to_string());
                        }
                        use_leaves(&u.tree, &mut prefix, public, &mut scope.uses);
                    }
                }
                scope
            })
            .collect();
        Resolver { tree, scopes }
    }

    fn module(&self, path: &[String]) -> Option<usize> {
        self.tree.by_path.get(path).copied()
    }

    /// The absolute module path a path written in `module` starts from, or `None` when it
    /// names another crate (or a prelude or local name).
    pub fn absolute(&self, module: usize, raw: &[String], depth: usize) -> Option<Vec<String>> {
        if depth > DEPTH || raw.is_empty() {
            return None;
        }
        let here = &self.tree.modules[module].path;
        let first = raw[0].as_str();
        match first {
            "::" => None,
            "crate" => Some(raw[1..].to_vec()),
            "self" => Some(here.iter().chain(&raw[1..]).cloned().collect()),
            "super" => {
                let mut base = here.clone();
                let mut rest = raw;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                Some(base)
            }
            _ => {
                let mut child = here.clone();
                child.push(first.to_string());
                if self.module(&child).is_some() || self.scopes[module].defined.contains(first) {
                    return Some(here.iter().chain(raw).cloned().collect());
                }
                let leaf = self.scopes[module]
                    .uses
                    .iter()
                    .find(|u| u.name.as_deref() == Some(first))?;
                let mut base = self.absolute(module, &leaf.path, depth + 1)?;
                base.extend(raw[1..].iter().cloned());
                Some(base)
            }
        }
    }

    /// The file defining what the absolute path `abs` names, following `use` (re-exports and
    /// imports) to the definition; `None` when it leads out of the crate.
    pub fn locate(&self, abs: &[String], depth: usize) -> Option<usize> {
        if depth > DEPTH {
            return None;
        }
        let mut k = abs.len();
        let module = loop {
            if let Some(m) = self.module(&abs[..k]) {
                break m;
            }
            k -= 1;
        };
        let file = self.tree.modules[module].file;
        if k == abs.len() {
            return Some(file);
        }
        let name = abs[k].as_str();
        let scope = &self.scopes[module];
        if scope.defined.contains(name) {
            return Some(file);
        }
        if let Some(leaf) = scope.uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            let mut target = self.absolute(module, &leaf.path, depth + 1)?;
            target.extend(abs[k + 1..].iter().cloned());
            return self.locate(&target, depth + 1);
        }
        for glob in scope.uses.iter().filter(|u| u.name.is_none()) {
            let Some(base) = self.absolute(module, &glob.path, depth + 1) else {
                continue;
            };
            let Some(g) = self.module(&base) else {
                continue;
            };
            let gs = &self.scopes[g];
            // A glob brings in what the module defines and what it re-exports (`pub use`),
            // never its private imports.
            let reexports = gs
                .uses
                .iter()
                .any(|u| u.public && u.name.as_deref() == Some(name));
            if gs.defined.contains(name) || reexports {
                let mut target = base;
                target.extend(abs[k..].iter().cloned());
                return self.locate(&target, depth + 1);
            }
        }
        Some(file)
    }

    /// Every edge from a file to another: private `use` items and paths in code, resolved to
    /// the files that define what they name.
    pub fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (m, module) in self.tree.modules.iter().enumerate() {
            let from = module.file;
            let mut add = |to: usize, label: String| {
                if to != from {
                    edges.entry((from, to)).or_default().insert(label);
                }
            };
            for leaf in self.scopes[m].uses.iter().filter(|u| !u.public) {
                let Some(abs) = self.absolute(m, &leaf.path, 0) else {
                    continue;
                };
                let written = leaf.path.join("::");
                match self.module(&abs) {
                    // `use x::*` ties the module to all of x; `use x;` only through its uses.
                    Some(target) if leaf.name.is_none() => {
                        add(self.tree.modules[target].file, format!("{written}::*"))
                    }
                    Some(_) => {}
                    None => {
                        if let Some(to) = self.locate(&abs, 0) {
                            add(to, written);
                        }
                    }
                }
            }
            let mut paths = PathCollector::default();
            for item in &module.items {
                if !matches!(item, syn::Item::Use(_) | syn::Item::Mod(_)) {
                    paths.visit_item(item);
                }
            }
            for raw in paths.paths {
                if raw.len() == 1 && paths.locals.contains(&raw[0]) {
                    continue;
                }
                let Some(abs) = self.absolute(m, &raw, 0) else {
                    continue;
                };
                if self.module(&abs).is_some() {
                    continue;
                }
                if let Some(to) = self.locate(&abs, 0) {
                    add(to, raw.join("::"));
                }
            }
        }
        edges
    }
}

/// Collects every path written in code (types, expressions, patterns, macro names, trait
/// bounds), leaving out `#[cfg(test)]` items.
#[derive(Default)]
struct PathCollector {
    paths: BTreeSet<Vec<String>>,
    /// Names bound by patterns (parameters, `let`, closures, `match` arms): a one-segment path
    /// naming one of them is taken for the local variable, not an item.
    locals: HashSet<String>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut raw: Vec<String> = Vec::new();
        if path.leading_colon.is_some() {
            raw.push("::".to_string());
        }
        raw.extend(path.segments.iter().map(|s| s.ident.to_string()));
        self.paths.insert(raw);
        syn::visit::visit_path(self, path);
    }
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // A macro's arguments are tokens: read the paths of two or more segments in them.
        scan_tokens(mac.tokens.clone(), &mut self.paths);
        syn::visit::visit_macro(self, mac);
    }
    fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
        self.locals.insert(pat.ident.to_string());
        syn::visit::visit_pat_ident(self, pat);
    }
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(crate::tree::item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` inside a function body (top-level ones are read as the module's scope).
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), false, &mut leaves);
        self.paths.extend(leaves.into_iter().map(|leaf| leaf.path));
    }
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // An inline module is a module of its own, visited as such.
    }
}

/// Collects `a::b(::c)*` paths from a token stream (a macro's arguments), at any depth.
fn scan_tokens(tokens: proc_macro2::TokenStream, out: &mut BTreeSet<Vec<String>>) {
    use proc_macro2::{Spacing, TokenTree};
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let is_colons = |i: usize| -> bool {
        matches!((trees.get(i), trees.get(i + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
    };
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => {
                scan_tokens(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(first) => {
                let preceded_by_colons = i >= 2 && is_colons(i - 2);
                let mut path = vec![first.to_string()];
                let mut j = i + 1;
                while is_colons(j) {
                    match trees.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 && !preceded_by_colons {
                    out.insert(path);
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
}
