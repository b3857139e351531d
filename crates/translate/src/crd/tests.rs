//! CRD generation tests: the checked-in `crds/*.yaml` must match the Rust types.

use super::*;

#[test]
fn checked_in_crds_match_the_rust_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let generated = crds_yaml();
    if std::env::var_os("UPDATE_CRDS").is_some() {
        for (file, yaml) in &generated {
            std::fs::write(dir.join(file), yaml).unwrap();
        }
    }
    for (file, yaml) in &generated {
        let on_disk = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            on_disk == *yaml,
            "crds/{file} is out of date: run `gclb-operator crds --out-dir crds` or `UPDATE_CRDS=1 cargo test -p gclb-translate crd::`"
        );
    }
}

fn schema_of(crd: &CustomResourceDefinition) -> serde_json::Value {
    let v = serde_json::to_value(crd).unwrap();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn backend_config_schema_validates_ranges_enums_and_iap_with_cdn() {
    let crd = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "BackendConfig")
        .unwrap();
    assert_eq!(crd.spec.group, "cloud.google.com");
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["bc".to_owned()][..])
    );
    let spec = &schema_of(&crd)["properties"]["spec"];
    let affinity = &spec["properties"]["sessionAffinity"]["properties"];
    let types: Vec<&str> = affinity["affinityType"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(types, ["NONE", "CLIENT_IP", "GENERATED_COOKIE"]);
    assert_eq!(affinity["affinityCookieTtlSec"]["maximum"], 86400.0);
    assert_eq!(
        spec["properties"]["logging"]["properties"]["sampleRate"]["maximum"],
        1.0
    );
    assert_eq!(
        spec["properties"]["cdn"]["properties"]["signedUrlKeys"]["maxItems"],
        3
    );
    let rules = spec["x-kubernetes-validations"].as_array().unwrap();
    assert!(rules
        .iter()
        .any(|r| r["rule"].as_str().unwrap().contains("self.iap.enabled")
            && r["message"].as_str().unwrap().contains("spec.iap.enabled")));
    let columns: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    assert!(columns.contains(&"Timeout".to_owned()) && columns.contains(&"HealthPath".to_owned()));
}

#[test]
fn managed_certificate_schema_limits_domains() {
    let crd = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "ManagedCertificate")
        .unwrap();
    assert_eq!(crd.spec.group, "networking.gke.io");
    assert_eq!(crd.spec.versions[0].name, "v1");
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["mcrt".to_owned()][..])
    );
    let domains = &schema_of(&crd)["properties"]["spec"]["properties"]["domains"];
    assert_eq!(domains["maxItems"], 100);
    assert_eq!(domains["items"]["maxLength"], 63);
    let pattern = domains["items"]["pattern"].as_str().unwrap();
    assert!(
        pattern.starts_with("^(([a-zA-Z0-9]") && !pattern.contains(r"\*"),
        "labels must not allow a literal `*`: {pattern}"
    );
    assert!(crd.spec.versions[0]
        .subresources
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .is_some());
}

#[test]
fn frontend_config_schema_lists_redirect_codes() {
    let crd = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "FrontendConfig")
        .unwrap();
    assert_eq!(crd.spec.versions[0].name, "v1beta1");
    let codes = &schema_of(&crd)["properties"]["spec"]["properties"]["redirectToHttps"]
        ["properties"]["responseCodeName"]["enum"];
    for code in [
        "MOVED_PERMANENTLY_DEFAULT",
        "FOUND",
        "TEMPORARY_REDIRECT",
        "PERMANENT_REDIRECT",
    ] {
        assert!(
            codes.as_array().unwrap().iter().any(|c| c == code),
            "{code} missing"
        );
    }
}

#[test]
fn managed_certificate_statuses_map_from_compute() {
    use managed_certificate::{certificate_status_from_compute, domain_status_from_compute};
    assert_eq!(certificate_status_from_compute("ACTIVE"), Some("Active"));
    assert_eq!(
        certificate_status_from_compute("MANAGED_CERTIFICATE_STATUS_UNSPECIFIED"),
        Some("")
    );
    assert_eq!(certificate_status_from_compute("WHATEVER"), None);
    assert_eq!(
        domain_status_from_compute("FAILED_NOT_VISIBLE"),
        Some("FailedNotVisible")
    );
}
