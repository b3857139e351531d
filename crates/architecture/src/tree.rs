//! A crate's module tree read from its source files: each `mod x;` is followed to `x.rs` or
//! `x/mod.rs` (or its `#[path]`), each inline `mod x { .. }` is a module of the same file.
//! Items under `#[cfg(test)]` are dropped, and so are the modules they declare.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One module: its path from the crate root, the file holding it and its non-test items.
pub struct Module {
    pub path: Vec<String>,
    pub file: usize,
    pub items: Vec<syn::Item>,
}

/// Every module of one crate, and the files they live in (workspace-relative paths).
pub struct ModuleTree {
    pub files: Vec<String>,
    pub modules: Vec<Module>,
    pub by_path: HashMap<Vec<String>, usize>,
}

/// Whether an item's attributes put it under `#[cfg(test)]` or `#[cfg(all(test, ..))]`.
pub fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = attr.meta.require_list() else {
            return false;
        };
        let tokens = list.tokens.to_string().replace(' ', "");
        tokens == "test" || tokens.starts_with("all(test,")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl ModuleTree {
    /// Reads the crate whose root file is `root_rel` (relative to `workspace`).
    pub fn load(workspace: &Path, root_rel: &str) -> Result<ModuleTree, String> {
        let mut tree = ModuleTree {
            files: Vec::new(),
            modules: Vec::new(),
            by_path: HashMap::new(),
        };
        let root = workspace.join(root_rel);
        let dir = root
            .parent()
            .expect("crate root has a directory")
            .to_path_buf();
        tree.load_file(workspace, &root, Vec::new(), dir)?;
        Ok(tree)
    }

    /// Loads one file as the module `path`; `children_dir` is where its `mod x;` files are.
    fn load_file(
        &mut self,
        workspace: &Path,
        file: &Path,
        path: Vec<String>,
        children_dir: PathBuf,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let rel = file
            .strip_prefix(workspace)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        self.files.push(rel);
        let file_index = self.files.len() - 1;
        let file_dir = file.parent().expect("a file has a directory").to_path_buf();
        self.add_module(
            workspace,
            file_index,
            &file_dir,
            path,
            children_dir,
            ast.items,
        )
    }

    fn add_module(
        &mut self,
        workspace: &Path,
        file: usize,
        file_dir: &Path,
        path: Vec<String>,
        children_dir: PathBuf,
        items: Vec<syn::Item>,
    ) -> Result<(), String> {
        let items: Vec<syn::Item> = items
            .into_iter()
            .filter(|item| !is_test(item_attrs(item)))
            .collect();
        let children: Vec<syn::ItemMod> = items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Mod(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        self.by_path.insert(path.clone(), self.modules.len());
        self.modules.push(Module {
            path: path.clone(),
            file,
            items,
        });
        for child in children {
            let name = child.ident.to_string();
            let mut child_path = path.clone();
            child_path.push(name.clone());
            match child.content {
                Some((_, items)) => self.add_module(
                    workspace,
                    file,
                    file_dir,
                    child_path,
                    children_dir.join(&name),
                    items,
                )?,
                None => {
                    let (child_file, grandchildren) = match path_attr(&child.attrs) {
                        Some(p) => {
                            let f = file_dir.join(p);
                            let d = f.parent().expect("dir").to_path_buf();
                            (f, d)
                        }
                        None => {
                            let flat = children_dir.join(format!("{name}.rs"));
                            if flat.exists() {
                                (flat, children_dir.join(&name))
                            } else {
                                (
                                    children_dir.join(&name).join("mod.rs"),
                                    children_dir.join(&name),
                                )
                            }
                        }
                    };
                    self.load_file(workspace, &child_file, child_path, grandchildren)?;
                }
            }
        }
        Ok(())
    }
}

/// An item's attributes (empty for the kinds that carry none we care about).
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}
