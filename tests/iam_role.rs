//! The operator's Google IAM custom role, derived from the Compute methods it calls (issue 15,
//! "Workload Identity and IAM": "a custom role whose permission list is generated from the
//! Compute methods the operator calls (a test keeps that list in sync)").
//!
//! - [`role_is_generated_from_the_methods_the_operator_calls`]: finds every Compute method the
//!   operator's source calls ([`called_methods`]), maps each to its permissions with
//!   deploy/iam/method-permissions.yaml (the Compute API reference's "IAM Permissions" per
//!   method) and fails unless deploy/iam/gclb-operator-role.yaml grants exactly their union:
//!   a method without a line in the table, a permission the role lacks and a permission no
//!   called method needs are each named. `IAM_ROLE_WRITE=1` (`make iam-role`) rewrites the role
//!   file instead.
//! - [`the_operator_calls_only_methods_the_role_covers`]: end to end, the methods the emulator
//!   counted while the operator programmed and deleted the demo's load balancer are all found
//!   by the source scan and covered by the role, so the scan cannot silently miss a call path.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use support::*;

/// The role file `gcloud iam roles create --file` reads.
const ROLE: &str = "deploy/iam/gclb-operator-role.yaml";
/// Method -> permissions, from the Compute API reference.
const TABLE: &str = "deploy/iam/method-permissions.yaml";
/// The command that regenerates [`ROLE`].
const REGENERATE: &str = "make iam-role";

/// The sources of the operator's own crates besides `src/`: the Compute layer (gclb-sync, where
/// the Compute seam [`SEAM`] is), the readiness gates (gclb-readiness, which reads NEG health)
/// and the translation layer (gclb-translate).
const CRATES: [&str; 3] = [
    "crates/readiness/src",
    "crates/sync/src",
    "crates/translate/src",
];
/// The Compute seam: one function per Compute method.
const SEAM: &str = "crates/sync/src/compute/";

/// Where a method is called from: `file:line`.
type Sites = BTreeMap<String, Vec<String>>;

/// The operator's non-test Rust sources: `(path relative to the repository, text)`, with each
/// file's `#[cfg(test)]` module cut off and `*tests.rs` and `test_support.rs` files left out. The operator is `src/`
/// and the workspace crates it builds on ([`CRATES`]).
fn sources() -> Result<Vec<(String, String)>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
        Ok(())
    }
    let root = repo_root();
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files)?;
    for krate in CRATES {
        walk(&root.join(krate), &mut files)?;
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root)?.to_string_lossy().into_owned();
        if rel.ends_with("tests.rs") || rel.ends_with("test_support.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f)?;
        let text = match text.find("#[cfg(test)]\nmod ") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        out.push((rel, text));
    }
    Ok(out)
}

/// Every `"compute.<collection>.<verb>"` string literal in `text` with its line number, and
/// every Network Services method id (`"networkservices.projects.locations.tlsRoutes.create"`,
/// src/gateway/network_services.rs: the Gateway's TLS passthrough routes).
fn method_literals(text: &str) -> Vec<(usize, String)> {
    let re = regex::Regex::new(
        r#""((?:compute|networkservices\.projects\.locations)\.[A-Za-z]+\.[A-Za-z]+)""#,
    )
    .expect("regex");
    text.lines()
        .enumerate()
        .flat_map(|(i, l)| {
            re.captures_iter(l)
                .map(move |c| (i + 1, c[1].to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The Compute methods the operator calls, each with where.
///
/// The Compute seam ([`SEAM`]) defines one function per method: hand-written ones name
/// their method id as a literal (`self.read("compute.networkEndpointGroups.get", ..)`), and
/// macro invocations name the API and the generated functions (`global_crud!(.., api:
/// "urlMaps", .., get: get_url_map, insert: insert_url_map, ..)`, `global_verb!(update_url_map,
/// .., api: "urlMaps.update", ..)`; any macro of that shape is read the same way; `project:`,
/// `region:` and `cached:` name parameters, not methods). A method
/// defined there counts when its function is named anywhere else in the operator's code (a
/// call, or a macro argument such as `listed! { UrlMap: url_maps, list_url_maps, get_url_map; }`
/// that calls it): a generated function nobody names is not granted, and where the scan cannot
/// tell it grants. Method literals outside the seam (the readiness controller's own
/// client) count as called where they are.
fn called_methods() -> Result<Sites> {
    let files = sources()?;
    // (function, method, definition site)
    let mut defined: Vec<(String, String, String)> = Vec::new();
    let mut called = Sites::new();
    let fn_re = regex::Regex::new(r"\bfn\s+([a-z_][a-z0-9_]*)").expect("regex");
    let api_re = regex::Regex::new(r#"\bapi:\s*"([A-Za-z]+)(?:\.([A-Za-z]+))?""#).expect("regex");
    let key_re = regex::Regex::new(r"\b([a-zA-Z]+):\s*([a-z_][a-z0-9_]*)\b").expect("regex");
    for (path, text) in &files {
        if !path.starts_with(SEAM) {
            for (line, m) in method_literals(text) {
                called.entry(m).or_default().push(format!("{path}:{line}"));
            }
            continue;
        }
        // Hand-written functions: the last `fn` above each literal.
        let mut current_fn = None;
        let literals: BTreeMap<usize, Vec<String>> =
            method_literals(text)
                .into_iter()
                .fold(BTreeMap::new(), |mut m, (l, id)| {
                    m.entry(l).or_insert_with(Vec::new).push(id);
                    m
                });
        for (i, l) in text.lines().enumerate() {
            if let Some(c) = fn_re.captures(l) {
                current_fn = Some(c[1].to_string());
            }
            if l.trim_start().starts_with("macro_rules!") {
                current_fn = None;
            }
            for id in literals.get(&(i + 1)).into_iter().flatten() {
                if let Some(f) = &current_fn {
                    defined.push((f.clone(), id.clone(), format!("{path}:{}", i + 1)));
                }
            }
        }
        // Macro invocations that name an `api:`: from the `name!(` before it to the `);`
        // after it.
        for api in api_re.captures_iter(text) {
            let at = api.get(0).expect("match").start();
            let (Some(open), Some(close)) = (text[..at].rfind("!("), text[at..].find(");")) else {
                continue;
            };
            let body = &text[open + 2..at + close];
            let site = format!("{path}:{}", text[..at].lines().count());
            match api.get(2) {
                // `verb_macro!(fn_name, .., api: "collection.verb", ..)`
                Some(verb) => {
                    let f = body
                        .split(',')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    let id = format!("compute.{}.{}", &api[1], verb.as_str());
                    defined.push((f, id, site));
                }
                // `crud_macro!(.., api: "collection", get: f, insert: g, ..)`
                None => {
                    for k in key_re.captures_iter(body) {
                        let verb = &k[1];
                        if matches!(
                            verb,
                            "client"
                                | "model"
                                | "api"
                                | "setter"
                                | "project"
                                | "region"
                                | "cached"
                                | "verb"
                                | "body"
                        ) {
                            continue;
                        }
                        let id = format!("compute.{}.{verb}", &api[1]);
                        defined.push((k[2].to_string(), id, site.clone()));
                    }
                }
            }
        }
    }
    // Code lines (comments dropped), to find where each function is named.
    let code: Vec<(String, usize, &str)> = files
        .iter()
        .flat_map(|(path, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .map(move |(i, l)| (path.clone(), i + 1, l))
        })
        .collect();
    for (f, id, site) in defined {
        // Named anywhere but where it is defined: a call (`.get_url_map(`), or handed to a
        // macro that calls it (`listed! { UrlMap: url_maps, list_url_maps, get_url_map; }`).
        let word = regex::Regex::new(&format!(r"\b{f}\b")).expect("regex");
        let def =
            regex::Regex::new(&format!(r"\bfn\s+{f}\b|:\s*{f}\b|!\(\s*{f}\s*,")).expect("regex");
        let used = code
            .iter()
            .any(|(_, _, l)| word.is_match(l) && !def.is_match(l));
        if used {
            called.entry(id).or_default().push(format!("{site} ({f})"));
        }
    }
    Ok(called)
}

/// deploy/iam/method-permissions.yaml: method id -> permissions.
fn table() -> Result<BTreeMap<String, Vec<String>>> {
    let text = std::fs::read_to_string(repo_root().join(TABLE))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {TABLE}"))
}

/// The role file's text for `permissions` (what [`REGENERATE`] writes).
fn role_yaml(permissions: &BTreeSet<String>) -> String {
    let mut y = String::from(
        "# GENERATED by `make iam-role` (tests/iam_role.rs) from the Compute methods the operator\n\
         # calls and deploy/iam/method-permissions.yaml; do not edit by hand.\n\
         # gcloud iam roles create gclbOperator --project=PROJECT --file=deploy/iam/gclb-operator-role.yaml\n\
         title: gclb-operator\n\
         description: Exactly the Compute Engine and Network Services permissions gclb-operator uses to program load balancers from Ingresses and Gateways.\n\
         stage: GA\n\
         includedPermissions:\n",
    );
    for p in permissions {
        y.push_str(&format!("- {p}\n"));
    }
    y
}

/// The permissions the role file grants.
fn role_permissions() -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join(ROLE))
        .with_context(|| format!("reading {ROLE} (generate it with `{REGENERATE}`)"))?;
    let v: serde_yaml::Value = serde_yaml::from_str(&text)?;
    Ok(v["includedPermissions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect())
}

/// Permissions `methods` need; fails naming every method the table does not map.
fn needed(methods: &Sites, table: &BTreeMap<String, Vec<String>>) -> Result<BTreeSet<String>> {
    let unmapped: Vec<String> = methods
        .iter()
        .filter(|(m, _)| !table.contains_key(*m))
        .map(|(m, sites)| format!("  {m}  (called at {})", sites.join(", ")))
        .collect();
    if !unmapped.is_empty() {
        bail!(
            "the operator calls Compute methods that {TABLE} does not map to IAM permissions:\n{}\n\
             Add a line per method with the permissions its Compute API reference page lists under \
             \"IAM Permissions\" (plus the `use` permission of each resource the request body \
             references), then run `{REGENERATE}`.",
            unmapped.join("\n")
        );
    }
    Ok(methods
        .keys()
        .flat_map(|m| table[m].iter().cloned())
        .collect())
}

#[test]
fn role_is_generated_from_the_methods_the_operator_calls() -> Result<()> {
    let methods = called_methods()?;
    // The scan must find the operator's core calls at all (a broken scan would find nothing
    // and generate an empty role).
    for m in [
        "compute.urlMaps.insert",
        "compute.backendServices.getHealth",
        "compute.networkEndpointGroups.attachNetworkEndpoints",
        "compute.globalOperations.wait",
        "compute.firewalls.insert",
        "networkservices.projects.locations.tlsRoutes.create",
    ] {
        assert!(
            methods.contains_key(m),
            "the source scan did not find {m}: {methods:#?}"
        );
    }
    let permissions = needed(&methods, &table()?)?;
    let want = role_yaml(&permissions);
    let path = repo_root().join(ROLE);
    if std::env::var_os("IAM_ROLE_WRITE").is_some() {
        std::fs::write(&path, &want)?;
        for (m, sites) in &methods {
            eprintln!("{m}: {}", sites.join(", "));
        }
        eprintln!(
            "wrote {ROLE}: {} permissions for {} methods",
            permissions.len(),
            methods.len()
        );
        return Ok(());
    }
    let granted = role_permissions()?;
    let missing: Vec<String> = permissions
        .iter()
        .filter(|p| !granted.contains(*p))
        .map(|p| {
            let by: Vec<&str> = methods
                .keys()
                .filter(|m| table().map(|t| t[*m].contains(p)).unwrap_or(false))
                .map(String::as_str)
                .collect();
            format!("  {p}  (needed by {})", by.join(", "))
        })
        .collect();
    let unused: Vec<&String> = granted.difference(&permissions).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "{ROLE} is out of date: run `{REGENERATE}`.\nmissing (the operator would get 403):\n{}\n\
         granted but needed by no method the operator calls: {unused:?}",
        missing.join("\n")
    );
    assert_eq!(
        std::fs::read_to_string(&path)?,
        want,
        "{ROLE} differs from what `{REGENERATE}` writes"
    );
    Ok(())
}

#[test]
fn the_operator_calls_only_methods_the_role_covers() -> Result<()> {
    let mut sys = System::start(&[])?;
    sys.apply_basics()?;
    let examples = repo_root().join("docs/examples");
    sys.apply_path(&examples.join("20-services-and-deployments.yaml"))?;
    // Only the operator's calls from here on (the local kubelet registered its Node's
    // instance through the Compute API at start-up).
    sys.compute_delete("_emulator/calls")?;
    sys.start_operator(&[])?;
    sys.apply_path(&examples.join("30-my-ingress.yaml"))?;
    let ip = sys.wait_for_ingress_ip("default", "my-ingress")?;
    let socket = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    // Deleted once the operator has deleted its resources and released the finalizer; waiting
    // on the Kubernetes side keeps the test's own Compute reads out of the counts.
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--timeout=120s"])?;
    let counted = sys.compute_get("_emulator/calls")?;
    let observed: BTreeSet<String> = counted["methods"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(m, _)| m.clone())
        .collect();
    assert!(
        observed.contains("compute.urlMaps.insert") && observed.contains("compute.urlMaps.delete"),
        "the operator programmed and deleted a load balancer: {counted}"
    );

    let scanned = called_methods()?;
    let not_scanned: Vec<&String> = observed
        .iter()
        .filter(|m| !scanned.contains_key(*m))
        .collect();
    assert!(
        not_scanned.is_empty(),
        "the operator called {not_scanned:?}, which the source scan of tests/iam_role.rs does \
         not find: extend called_methods() so the role covers them"
    );
    let table = table()?;
    let granted = role_permissions()?;
    for m in &observed {
        let perms = table
            .get(m)
            .with_context(|| format!("{m} is not in {TABLE}"))?;
        let missing: Vec<&String> = perms.iter().filter(|p| !granted.contains(*p)).collect();
        assert!(
            missing.is_empty(),
            "the operator called {m}, which needs {missing:?}; {ROLE} lacks them: run `{REGENERATE}`"
        );
    }
    Ok(())
}
