//! CRD value validation with the repository's real CRDs (`crds/*.yaml`, issue 6 acceptance):
//! kubectl 1.32 applies invalid BackendConfig / FrontendConfig / ManagedCertificate objects and
//! gets the real server's `422 Invalid` messages naming the field; valid ones are stored.

mod api_support;

use api_support::{poll, start, ApiServer};

fn install_crds(server: &ApiServer) {
    let crds = format!("{}/../../crds/", env!("CARGO_MANIFEST_DIR"));
    server.kubectl_ok(&["apply", "-k", &crds]);
    for kind in ["backendconfigs", "frontendconfigs", "managedcertificates"] {
        poll(&format!("{kind} served"), || {
            server.kubectl(&["get", kind]).0.then_some(())
        });
    }
}

/// Applies `yaml` expecting a refusal; returns kubectl's stderr.
fn refused(server: &ApiServer, yaml: &str) -> String {
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(!ok, "accepted an invalid object:\n{yaml}\n{out}");
    err
}

#[test]
fn invalid_custom_resources_are_refused_naming_the_field() {
    let server = start(&["--no-local-controllers"]);
    install_crds(&server);

    let err = refused(
        &server,
        "apiVersion: networking.gke.io/v1\nkind: ManagedCertificate\nmetadata: {name: bad-mcrt}\nspec:\n  domains: ['*.example.com']\n",
    );
    assert!(
        // kubectl rebuilds the message from `details` (kind without group).
        err.contains(r#"The ManagedCertificate "bad-mcrt" is invalid: spec.domains[0]: Invalid value: "*.example.com": spec.domains[0] in body should match '"#),
        "{err}"
    );

    let err = refused(
        &server,
        "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bad-bc}\nspec:\n  sessionAffinity: {affinityType: STICKY}\n",
    );
    assert!(
        err.contains(
            r#"spec.sessionAffinity.affinityType: Unsupported value: "STICKY": supported values: "#
        ),
        "{err}"
    );

    let err = refused(
        &server,
        "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bad-ttl}\nspec:\n  sessionAffinity: {affinityType: GENERATED_COOKIE, affinityCookieTtlSec: 100000}\n",
    );
    assert!(
        err.contains("spec.sessionAffinity.affinityCookieTtlSec: Invalid value: 100000: spec.sessionAffinity.affinityCookieTtlSec in body should be less than or equal to 86400"),
        "{err}"
    );

    let err = refused(
        &server,
        "apiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {name: bad-fc}\nspec:\n  redirectToHttps: {enabled: true, responseCodeName: SEE_OTHER}\n",
    );
    assert!(
        err.contains(r#"spec.redirectToHttps.responseCodeName: Unsupported value: "SEE_OTHER""#),
        "{err}"
    );

    // A CEL rule of the BackendConfig CRD (x-kubernetes-validations on healthCheck).
    let err = refused(
        &server,
        "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bad-hc}\nspec:\n  healthCheck: {timeoutSec: 10, checkIntervalSec: 5}\n",
    );
    assert!(
        err.contains(r#"spec.healthCheck: Invalid value: "object": healthCheck.timeoutSec must not exceed healthCheck.checkIntervalSec"#),
        "{err}"
    );

    // Nothing invalid was stored; valid objects are.
    let out = server.kubectl_ok(&[
        "get",
        "backendconfigs,managedcertificates,frontendconfigs",
        "-o",
        "name",
    ]);
    assert_eq!(out.trim(), "", "invalid objects stored: {out}");
    let valid = "apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: good-bc}\nspec:\n  sessionAffinity: {affinityType: GENERATED_COOKIE, affinityCookieTtlSec: 86400}\n  healthCheck: {timeoutSec: 5, checkIntervalSec: 5}\n  connectionDraining: {}\n---\napiVersion: networking.gke.io/v1\nkind: ManagedCertificate\nmetadata: {name: good-mcrt}\nspec:\n  domains: [shop.example.com]\n---\napiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {name: good-fc}\nspec:\n  redirectToHttps: {enabled: true, responseCodeName: FOUND}\n";
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(valid));
    assert!(ok, "valid objects refused:\n{out}\n{err}");

    // Schema defaults are applied inside objects that are present, as a real server does.
    let draining = server.kubectl_ok(&[
        "get",
        "backendconfig",
        "good-bc",
        "-o",
        "jsonpath={.spec.connectionDraining.drainingTimeoutSec}",
    ]);
    assert_eq!(draining, "0");

    // An update through a merge patch is validated too; the stored object stays as it was.
    let (ok, _, err) = server.kubectl(&[
        "patch",
        "backendconfig",
        "good-bc",
        "--type=merge",
        "-p",
        r#"{"spec":{"sessionAffinity":{"affinityCookieTtlSec":90000}}}"#,
    ]);
    assert!(
        !ok && err.contains("spec.sessionAffinity.affinityCookieTtlSec"),
        "{err}"
    );
    let ttl = server.kubectl_ok(&[
        "get",
        "backendconfig",
        "good-bc",
        "-o",
        "jsonpath={.spec.sessionAffinity.affinityCookieTtlSec}",
    ]);
    assert_eq!(ttl, "86400");
}

#[tokio::test]
async fn invalid_status_has_causes_with_fields() {
    let server = start(&["--no-local-controllers"]);
    install_crds(&server);
    let body = serde_json::json!({
        "apiVersion": "cloud.google.com/v1", "kind": "BackendConfig",
        "metadata": {"name": "two-errors"},
        "spec": {"sessionAffinity": {"affinityType": "STICKY", "affinityCookieTtlSec": -1}},
    });
    let resp = server
        .http()
        .post(format!(
            "{}/apis/cloud.google.com/v1/namespaces/default/backendconfigs",
            server.url
        ))
        .bearer_auth(server.token())
        .json(&body)
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 422);
    let status: serde_json::Value = resp.json().await.expect("Status JSON");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "BackendConfig");
    assert_eq!(status["details"]["group"], "cloud.google.com");
    let fields: Vec<(&str, &str)> = status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        fields.contains(&(
            "spec.sessionAffinity.affinityType",
            "FieldValueNotSupported"
        )),
        "{fields:?}"
    );
    assert!(
        fields.contains(&(
            "spec.sessionAffinity.affinityCookieTtlSec",
            "FieldValueInvalid"
        )),
        "{fields:?}"
    );
    let message = status["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with(r#"BackendConfig.cloud.google.com "two-errors" is invalid: ["#),
        "{message}"
    );
}

/// The Gateway API CRDs' transition rule (GatewayClass `spec.controllerName`:
/// `self == oldSelf`, "Value is immutable") refuses an update as a real server does; a create
/// (no old value) and updates of other fields pass.
#[test]
fn gateway_class_controller_name_transition_rule_refuses_the_update() {
    let server = start(&["--no-local-controllers"]);
    let crds = format!("{}/../../crds/gateway-api", env!("CARGO_MANIFEST_DIR"));
    server.kubectl_ok(&["apply", "-k", &crds]);
    poll("gatewayclasses served", || {
        server.kubectl(&["get", "gatewayclasses"]).0.then_some(())
    });
    let class = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: gclb}\nspec:\n  controllerName: gclb-operator.dev/gateway-controller\n";
    let (ok, out, err) = server.kubectl_stdin(&["apply", "-f", "-"], Some(class));
    assert!(ok, "create refused:\n{out}\n{err}");

    let (ok, _, err) = server.kubectl(&[
        "patch",
        "gatewayclass",
        "gclb",
        "--type=merge",
        "-p",
        r#"{"spec":{"controllerName":"example.net/other-controller"}}"#,
    ]);
    assert!(!ok, "the controllerName change was accepted");
    assert!(
        err.contains(r#"The GatewayClass "gclb" is invalid: spec.controllerName: Invalid value: "string": Value is immutable"#),
        "{err}"
    );
    let stored = server.kubectl_ok(&[
        "get",
        "gatewayclass",
        "gclb",
        "-o",
        "jsonpath={.spec.controllerName}",
    ]);
    assert_eq!(stored, "gclb-operator.dev/gateway-controller");

    server.kubectl_ok(&[
        "patch",
        "gatewayclass",
        "gclb",
        "--type=merge",
        "-p",
        r#"{"spec":{"description":"changed"}}"#,
    ]);
}
