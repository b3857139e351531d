//! End to end, issue 22 (Contour's TLS certificate delegation, reference 004): an Ingress in
//! `default` names TLS Secrets of namespace `certs` (annotation
//! `projectcontour.io/tls-cert-namespace`, Contour's Ingress v1 form); a TLSCertificateDelegation
//! (`gclb-operator.dev/v1alpha1`) in `certs` decides which of them the load balancer serves.
//! Shown with real TLS handshakes through the emulator's data plane:
//! - a delegated Secret is served: an HTTPS request with its SNI name verifies against that
//!   Secret's certificate (and only it) and reaches the Pods;
//! - a Secret not delegated is refused: a Warning Event names the Ingress, the field, the Secret
//!   and the delegation to create, and its SNI name gets the other certificate;
//! - delegating it to `*` serves it; revoking the first delegation takes that certificate off the
//!   load balancer (its name gets the remaining certificate) with a Warning;
//! - each delegation's status (Contour's `Valid` condition, with `errors` and `warnings`) follows:
//!   the Secrets served and to which Ingress, a use refused, a delegated Secret that does not
//!   exist (`Valid=False` until it is created).

mod support;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use support::tls::{https_get, https_get_with, self_signed, trusting};
use support::*;

fn tls_secret(namespace: &str, name: &str, crt: &str, key: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(crt),
        b64(key)
    )
}

/// The TLSCertificateDelegation `certs/to-others` with `delegations` (secret, target namespaces).
fn delegation(delegations: &[(&str, &str)]) -> String {
    let mut yaml = String::from(
        "apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: to-others, namespace: certs}\nspec:\n  delegations:\n",
    );
    for (secret, targets) in delegations {
        yaml.push_str(&format!(
            "  - {{secretName: {secret}, targetNamespaces: [{targets}]}}\n"
        ));
    }
    yaml + "---\n"
}

/// Service `web` with one echo Pod, and the HTTPS-only Ingress `web` whose two `spec.tls`
/// Secrets live in `certs`.
const WEB: &str = r#"apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
  annotations: {local.gclb-operator.dev/run: echo}
spec:
  containers:
  - name: echo
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  annotations:
    kubernetes.io/ingress.allow-http: "false"
    projectcontour.io/tls-cert-namespace: certs
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
  tls:
  - {hosts: [a.example], secretName: shared}
  - {hosts: [c.example], secretName: private}
---
"#;

/// Polls until an HTTPS request with SNI `sni`, trusting only `root_pem`, verifies and is
/// answered 200 by the web Pod.
fn wait_verified(sys: &System, socket: &str, sni: &str, root_pem: &str) -> Result<()> {
    let config = trusting(root_pem)?;
    wait_for(
        &format!("a verified HTTPS answer for {sni}"),
        DEADLINE,
        || {
            let response = https_get_with(config.clone(), socket, sni, "/")?;
            if !response.starts_with("HTTP/1.1 200") || !response.contains("\"web-1\"") {
                bail!("{}", response.chars().take(300).collect::<String>());
            }
            Ok(Some(()))
        },
    )
    .with_context(|| sys.logs())
}

/// Polls until SNI `sni` is served the certificate `want` (DER).
fn wait_served(sys: &System, socket: &str, sni: &str, want: &[u8]) -> Result<()> {
    wait_for(
        &format!("the certificate served for {sni}"),
        DEADLINE,
        || {
            let (leaf, _) = https_get(socket, sni, "/")?;
            Ok((leaf == want).then_some(()))
        },
    )
    .with_context(|| sys.logs())
}

/// Polls until Ingress default/web has a Warning Event containing every part of `parts`.
fn wait_warning(sys: &System, parts: &[&str]) -> Result<String> {
    wait_for(&format!("a Warning with {parts:?}"), DEADLINE, || {
        let events = sys.events_for("default", "Ingress", "web")?;
        Ok(events
            .into_iter()
            .find(|e| e.starts_with("Warning ") && parts.iter().all(|p| e.contains(p))))
    })
    .with_context(|| sys.logs())
}

/// Polls until TLSCertificateDelegation `certs/name` has a `Valid` condition that `check`
/// accepts (it says why not); returns the condition.
fn wait_valid(
    sys: &System,
    name: &str,
    check: impl Fn(&serde_json::Value) -> Result<()>,
) -> Result<serde_json::Value> {
    wait_for(
        &format!("TLSCertificateDelegation certs/{name} status"),
        DEADLINE,
        || {
            let d = sys.get_json(&["tlscertificatedelegation", "-n", "certs", name])?;
            let valid = d["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Valid"))
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no Valid condition: {}", d["status"]))?;
            check(&valid).with_context(|| valid.to_string())?;
            Ok(Some(valid))
        },
    )
    .with_context(|| sys.logs())
}

#[test]
fn delegated_secrets_are_served_others_refused_and_revocation_removes_them() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    sys.kubectl_ok(&["create", "namespace", "certs"])?;
    let (shared_crt, shared_key, shared_der) = self_signed("a.example")?;
    let (private_crt, private_key, private_der) = self_signed("c.example")?;
    let mut yaml = tls_secret("certs", "shared", &shared_crt, &shared_key);
    yaml += &tls_secret("certs", "private", &private_crt, &private_key);
    yaml += &delegation(&[("shared", "default"), ("private", "other")]);
    yaml += WEB;
    sys.apply(&yaml)?;
    let ip = sys.wait_for_ingress_ip("default", "web")?;
    let socket = sys.wait_for_listener(&ip, 443)?;

    // Delegated to `default`: served, and verifies against that Secret's certificate.
    wait_verified(&sys, &socket, "a.example", &shared_crt)?;
    // Not delegated: refused with a Warning; c.example gets the other (default) certificate.
    let refused = wait_warning(
        &sys,
        &[
            "CertificateDelegationRefused",
            "Ingress default/web",
            "spec.tls[1].secretName",
            "Secret certs/private",
            "kind: TLSCertificateDelegation",
            "secretName: private, targetNamespaces: [default]",
        ],
    )?;
    println!("refusal: {refused}");
    let (leaf, _) = https_get(&socket, "c.example", "/")?;
    assert!(
        leaf == shared_der,
        "c.example must not get the undelegated certificate"
    );
    // The delegation's status: `shared` served to the Ingress, `private` refused to it.
    wait_valid(&sys, "to-others", |v| {
        anyhow::ensure!(
            v["status"] == "True" && v["reason"] == "Valid",
            "not Valid=True"
        );
        anyhow::ensure!(
            v["message"] == "Valid TLSCertificateDelegation; serving shared to Ingress default/web",
            "message"
        );
        let w = &v["warnings"][0];
        anyhow::ensure!(
            w["type"] == "TLSError"
                && w["reason"] == "DelegationNotPermitted"
                && w["message"].as_str().is_some_and(|m| m.starts_with(
                    "Ingress default/web (spec.tls[1].secretName) names Secret certs/private"
                )),
            "no refusal warning"
        );
        Ok(())
    })?;
    // A delegated Secret that does not exist: Valid=False with a SecretNotValid error, until
    // the Secret is created.
    sys.apply("apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: broken, namespace: certs}\nspec:\n  delegations:\n  - {secretName: absent, targetNamespaces: [default]}\n")?;
    wait_valid(&sys, "broken", |v| {
        anyhow::ensure!(
            v["status"] == "False" && v["reason"] == "ErrorPresent",
            "not Valid=False"
        );
        let e = &v["errors"][0];
        anyhow::ensure!(
            e["type"] == "TLSError"
                && e["reason"] == "SecretNotValid"
                && e["message"].as_str().is_some_and(|m| m.starts_with(
                    "spec.delegations[0].secretName: Secret certs/absent does not exist"
                )),
            "no SecretNotValid error"
        );
        Ok(())
    })?;
    let (absent_crt, absent_key, _) = self_signed("absent.example")?;
    sys.apply(&tls_secret("certs", "absent", &absent_crt, &absent_key))?;
    wait_valid(&sys, "broken", |v| {
        anyhow::ensure!(
            v["status"] == "True" && v.get("errors").is_none(),
            "still invalid"
        );
        Ok(())
    })?;

    // Delegated to every namespace: now served for its name.
    sys.apply(&delegation(&[("shared", "default"), ("private", "\"*\"")]))?;
    wait_verified(&sys, &socket, "c.example", &private_crt)?;
    wait_valid(&sys, "to-others", |v| {
        anyhow::ensure!(
            v["message"] == "Valid TLSCertificateDelegation; serving private to Ingress default/web; shared to Ingress default/web"
                && v.get("warnings").is_none(),
            "both served, nothing refused"
        );
        Ok(())
    })?;

    // Revoked: `shared` leaves the load balancer (a.example gets the remaining certificate, so
    // a client trusting only `shared` fails) and a Warning says why.
    sys.apply(&delegation(&[("private", "\"*\"")]))?;
    wait_served(&sys, &socket, "a.example", &private_der)?;
    let shared_only = trusting(&shared_crt)?;
    assert!(
        https_get_with(shared_only, &socket, "a.example", "/").is_err(),
        "a.example still verifies against the revoked Secret's certificate"
    );
    wait_warning(
        &sys,
        &[
            "CertificateDelegationRefused",
            "spec.tls[0].secretName",
            "Secret certs/shared",
        ],
    )?;
    wait_valid(&sys, "to-others", |v| {
        anyhow::ensure!(
            v["message"]
                == "Valid TLSCertificateDelegation; serving private to Ingress default/web",
            "shared is no longer this delegation's"
        );
        Ok(())
    })?;
    Ok(())
}
