//! The CRDs as kubectl shows them: printer columns, and invalid objects refused with messages
//! naming the field.

use super::*;

#[test]
fn kubectl_get_bc_mcrt_prints_useful_columns() -> Result<()> {
    let sys = System::start(&[])?;
    sys.apply_crds()?;
    sys.apply(
        r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata:
  name: cols-bc
spec:
  timeoutSec: 42
  sessionAffinity: {affinityType: CLIENT_IP}
  healthCheck: {requestPath: /healthz-cols}
---
apiVersion: networking.gke.io/v1
kind: ManagedCertificate
metadata:
  name: cols-mcrt
spec:
  domains: [cols.example.com]
"#,
    )?;
    let table = sys.kubectl_ok(&["get", "bc,mcrt"])?;
    for needle in [
        "TIMEOUT",
        "AFFINITY",
        "HEALTHPATH",
        "42",
        "CLIENT_IP",
        "/healthz-cols",
        "DOMAINS",
        "cols.example.com",
        "STATUS",
    ] {
        assert!(table.contains(needle), "missing {needle:?} in:\n{table}");
    }

    Ok(())
}

#[test]
fn invalid_crd_objects_are_refused_with_messages_naming_the_field() -> Result<()> {
    let sys = System::start(&[])?;
    sys.apply_crds()?;
    let refused = |yaml: &str, field: &str| -> Result<()> {
        let path = sys.dir.path().join("invalid.yaml");
        std::fs::write(&path, yaml)?;
        let out = sys.kubectl(&["apply", "-f", path.to_str().unwrap()])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            bail!("accepted an invalid object (expected an error naming {field}):\n{yaml}");
        }
        assert!(
            stderr.contains(field),
            "error does not name {field}: {stderr}"
        );
        Ok(())
    };
    refused(
        "apiVersion: networking.gke.io/v1\nkind: ManagedCertificate\nmetadata: {name: bad-mcrt}\nspec:\n  domains: ['*.example.com']\n",
        "spec.domains",
    )?;
    refused(
        "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bad-bc}\nspec:\n  sessionAffinity: {affinityType: STICKY}\n",
        "spec.sessionAffinity.affinityType",
    )?;
    refused(
        "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bad-ttl}\nspec:\n  sessionAffinity: {affinityType: GENERATED_COOKIE, affinityCookieTtlSec: 100000}\n",
        "spec.sessionAffinity.affinityCookieTtlSec",
    )?;
    refused(
        "apiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {name: bad-fc}\nspec:\n  redirectToHttps: {enabled: true, responseCodeName: SEE_OTHER}\n",
        "spec.redirectToHttps.responseCodeName",
    )?;
    Ok(())
}
