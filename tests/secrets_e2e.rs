//! No secret reaches a log, an Event or a status (DESIGN.md: "never secrets or private keys").
//!
//! One run through everything that handles key material: an Ingress with two TLS Secrets, one
//! of them rotated to a new key; a Secret whose key does not match its certificate and one whose
//! `tls.key` is not PEM at all (errors are where a key is most likely echoed); a pre-shared
//! certificate created with its private key; a Google-managed certificate issued by the
//! emulator's CA; the operator running with its ServiceAccount token. Then every line of every
//! process's log (local Kubernetes API, emulator, operator, at debug level), every Event, the
//! status of every Ingress and ManagedCertificate, and what the Compute API returns for the
//! certificates are searched for any 24-character piece of each private key (PEM body, and its
//! DER as hex) and any 16-character piece of each token. None may appear.

mod support;

use anyhow::{bail, Result};
use base64::Engine as _;
use support::*;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn tls_secret(name: &str, crt: &str, key: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(crt),
        b64(key)
    )
}

/// A certificate for `host` and its key: (PEM certificate, PEM key).
fn keypair(host: &str) -> Result<(String, String)> {
    let ck = rcgen::generate_simple_self_signed(vec![host.to_string()])?;
    Ok((ck.cert.pem(), ck.signing_key.serialize_pem()))
}

/// The pieces of `secret` that must never be seen: every `width`-character window of it.
fn windows(secret: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= width {
        return vec![secret.to_string()];
    }
    chars.windows(width).map(|w| w.iter().collect()).collect()
}

/// The 24-character windows of a PEM's base64 body (one line at a time, as PEM and
/// JSON-escaped PEM both keep its lines) and the 48-character windows of its DER in hex.
fn pem_pieces(pem: &str) -> Vec<String> {
    let body: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut pieces: Vec<String> = body.iter().flat_map(|l| windows(l, 24)).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.concat())
        .unwrap_or_default();
    pieces.extend(windows(&hex::encode(der), 48));
    pieces
}

/// Every piece of a private key to look for: [`pem_pieces`] of the key, except those that also
/// occur in a certificate (a PKCS#8 EC key carries its public key, which its certificate shows
/// to the world): what is left covers the private scalar.
fn key_pieces(pem: &str, public: &std::collections::HashSet<String>) -> Vec<String> {
    pem_pieces(pem)
        .into_iter()
        .filter(|p| !public.contains(p))
        .collect()
}

const APP: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: NodePort\n  selector: {app: web}\n  ports:\n  - {name: http, protocol: TCP, port: 80, targetPort: 8080}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  labels: {app: web}\n  annotations: {local.gclb-operator.dev/run: echo}\nspec:\n  containers:\n  - {name: echo, image: echo, ports: [{containerPort: 8080}]}\n---\n";

fn ingress(name: &str, annotations: &str, tls: &[(&str, &str)]) -> String {
    let mut y = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  defaultBackend:\n    service: {{name: web, port: {{number: 80}}}}\n"
    );
    if !tls.is_empty() {
        y.push_str("  tls:\n");
        for (host, secret) in tls {
            y.push_str(&format!("  - hosts: [{host}]\n    secretName: {secret}\n"));
        }
    }
    y + "---\n"
}

#[test]
fn no_private_key_or_token_reaches_a_log_event_or_status() -> Result<()> {
    let mut sys = System::start(&[
        "--port-map",
        "80=0,443=0",
        "--managed-cert-provisioning-ms",
        "1000",
    ])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    let mut keys = Vec::new();
    let (a_crt, a_key) = keypair("a.example")?;
    let (b_crt, b_key) = keypair("b.example")?;
    let (b2_crt, b2_key) = keypair("b.example")?;
    let (wrong_crt, _) = keypair("c.example")?;
    let (_, wrong_key) = keypair("c.example")?;
    let (p_crt, p_key) = keypair("pre.example")?;
    keys.extend([
        a_key.clone(),
        b_key.clone(),
        b2_key.clone(),
        wrong_key.clone(),
        p_key.clone(),
    ]);
    let not_pem = format!("this is not PEM but secret text {}", &b64(&b_key)[40..120]);

    sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/global/sslCertificates"),
        &serde_json::json!({"name": "e2e-pre-shared", "certificate": p_crt, "privateKey": p_key}),
    )?;
    let mut yaml = String::from(APP);
    yaml += &tls_secret("tls-a", &a_crt, &a_key);
    yaml += &tls_secret("tls-b", &b_crt, &b_key);
    yaml += &tls_secret("tls-mismatch", &wrong_crt, &wrong_key);
    yaml += &tls_secret("tls-not-pem", &wrong_crt, &not_pem);
    yaml += "apiVersion: networking.gke.io/v1\nkind: ManagedCertificate\nmetadata: {name: managed}\nspec: {domains: [m.example]}\n---\n";
    yaml += &ingress(
        "web",
        "ingress.gcp.kubernetes.io/pre-shared-cert: e2e-pre-shared, networking.gke.io/managed-certificates: managed",
        &[("a.example", "tls-a"), ("b.example", "tls-b")],
    );
    yaml += &ingress(
        "broken",
        "",
        &[("c.example", "tls-mismatch"), ("d.example", "tls-not-pem")],
    );
    sys.apply(&yaml)?;

    let ip = sys.wait_for_ingress_ip("default", "web")?;
    sys.wait_for_listener(&ip, 443)?;
    wait_for("the ManagedCertificate to be Active", DEADLINE, || {
        let m = sys.get_json(&["managedcertificate", "managed"])?;
        Ok((m["status"]["certificateStatus"] == "Active").then_some(()))
    })?;
    wait_for("a Warning about the broken Secrets", DEADLINE, || {
        let ev = sys.events_for("default", "Ingress", "broken")?;
        Ok(ev.iter().any(|e| e.starts_with("Warning")).then_some(()))
    })?;
    // Rotate one Secret: the old and the new key both pass through the operator.
    sys.apply(&tls_secret("tls-b", &b2_crt, &b2_key))?;
    wait_for("the rotated certificate in the emulator", DEADLINE, || {
        let list = sys.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/sslCertificates"
        ))?;
        Ok(list
            .to_string()
            .contains(&b2_crt.lines().nth(3).unwrap_or_default().to_string())
            .then_some(()))
    })?;

    // What the system wrote.
    let mut haystacks: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(sys.dir.path())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            haystacks.push((path.display().to_string(), std::fs::read_to_string(&path)?));
        }
    }
    haystacks.push((
        "Events".into(),
        sys.kubectl_ok(&["get", "events", "-A", "-o", "json"])?,
    ));
    haystacks.push((
        "Ingress and ManagedCertificate status".into(),
        sys.kubectl_ok(&[
            "get",
            "ingress,managedcertificate",
            "-A",
            "-o",
            "jsonpath={.items[*].status}",
        ])?,
    ));
    haystacks.push((
        "Compute sslCertificates".into(),
        sys.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/sslCertificates"
        ))?
        .to_string(),
    ));
    haystacks.push((
        "emulator state".into(),
        sys.compute_get("_emulator/state")?.to_string(),
    ));
    let lines: usize = haystacks.iter().map(|(_, h)| h.lines().count()).sum();
    assert!(
        lines > 100,
        "too little was written to search: {lines} lines"
    );

    let token = std::fs::read_to_string(sys.dir.path().join("operator-token"))?;
    let kubeconfig: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&sys.kubeconfig)?)?;
    let admin = kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let public: std::collections::HashSet<String> = [&a_crt, &b_crt, &b2_crt, &wrong_crt, &p_crt]
        .iter()
        .flat_map(|c| pem_pieces(c))
        .collect();
    let mut secrets: Vec<(String, Vec<String>)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("private key {i}"), key_pieces(k, &public)))
        .collect();
    assert!(
        secrets.iter().all(|(_, p)| p.len() > 20),
        "too little of a key is private to search for"
    );
    secrets.push((
        "tls.key that is not PEM".into(),
        windows(&not_pem[32..], 24),
    ));
    for (what, t) in [
        ("operator token", token.trim()),
        ("admin token", admin.as_str()),
    ] {
        assert!(t.len() >= 16, "{what} is too short to search for: {t:?}");
        secrets.push((what.into(), windows(t, 16)));
    }
    let mut found = Vec::new();
    for (what, pieces) in &secrets {
        for (name, text) in &haystacks {
            if let Some(p) = pieces.iter().find(|p| text.contains(p.as_str())) {
                let line = text
                    .lines()
                    .find(|l| l.contains(p.as_str()))
                    .unwrap_or_default();
                found.push(format!(
                    "{what} in {name}: {}",
                    line.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    println!(
        "searched {lines} lines in {} places for {} pieces of {} secrets",
        haystacks.len(),
        secrets.iter().map(|(_, p)| p.len()).sum::<usize>(),
        secrets.len()
    );
    sys.stop_operator();
    if !found.is_empty() {
        bail!("secrets were written:\n{}", found.join("\n"));
    }
    Ok(())
}
