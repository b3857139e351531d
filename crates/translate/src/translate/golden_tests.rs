//! Golden tests: `testdata/<case>.yaml` (a cluster snapshot) -> `testdata/<case>.json` (the
//! desired state of every Ingress, or its error, plus the firewall rule). Regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p gclb-translate translate::golden`, then review the diff.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::test_support::{config, snapshot_from_yaml};
use super::*;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/translate/testdata")
}

/// Translates every Ingress of a snapshot into one JSON document.
pub(super) fn translate_all(snapshot: &ClusterSnapshot, config: &TranslateConfig) -> Value {
    let mut ingresses = serde_json::Map::new();
    let mut desired = Vec::new();
    for (key, ingress) in &snapshot.ingresses {
        let out = if !owns_ingress(snapshot, ingress, config) {
            json!({"owned": false})
        } else {
            match translate_ingress(snapshot, ingress, config) {
                Ok(d) => {
                    let v = json!({"owned": true, "desired": d.to_json()});
                    desired.push(d);
                    v
                }
                Err(e) => json!({"owned": true, "error": e.to_string()}),
            }
        };
        ingresses.insert(key.to_string(), out);
    }
    let refs: Vec<&DesiredIngress> = desired.iter().collect();
    let firewall = translate_firewall(&refs, config);
    json!({"ingresses": ingresses, "firewall": serde_json::to_value(firewall).unwrap()})
}

#[test]
fn golden_cases() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(testdata())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no golden cases found");
    let mut failures = Vec::new();
    for case in cases {
        let snapshot = snapshot_from_yaml(&std::fs::read_to_string(&case).unwrap());
        let actual =
            serde_json::to_string_pretty(&translate_all(&snapshot, &config())).unwrap() + "\n";
        let golden = case.with_extension("json");
        if update {
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{} differs from the translation (UPDATE_GOLDEN=1 regenerates it):\n{actual}",
                golden.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
