//! TLS clients of tests/gateway_conformance_e2e.rs: `openssl s_client` through a TLS listener
//! (Passthrough: the certificate seen must be the backend's; Terminate: the listener's,
//! verified against the CA the test made) and the listener certificate's Secret.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use crate::support::{wait_for, DEADLINE};

/// What one `openssl s_client -servername <sni>` session saw.
pub struct Session {
    /// The server certificate's subjectAltName (`None`: no certificate, the connection was
    /// refused).
    pub san: Option<String>,
    /// With a CA file: a certificate was presented and openssl verified its chain and hostname
    /// (`Verify return code: 0`).
    pub verified: bool,
    /// What s_client printed, with the HTTP answer received inside the TLS session.
    pub out: String,
}

impl Session {
    /// The Pod that answered the HTTP request sent inside the session (the echo body's `pod`).
    pub fn pod(&self) -> Option<String> {
        self.out
            .lines()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v["pod"].as_str().map(str::to_owned))
    }
}

/// Connects to `socket` with SNI `sni`, sends `GET /` for that host inside the TLS session and
/// reads the answer. With `ca`, openssl verifies the server's chain against it and its name
/// against `sni`, and aborts the handshake when either fails (`-verify_return_error`).
pub fn s_client(socket: &str, sni: &str, ca: Option<&Path>) -> Result<Session> {
    let mut cmd = Command::new("openssl");
    cmd.args([
        "s_client",
        "-connect",
        socket,
        "-servername",
        sni,
        "-ign_eof",
    ]);
    if let Some(ca) = ca {
        cmd.arg("-CAfile")
            .arg(ca)
            .args(["-verify_hostname", sni, "-verify_return_error"]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running openssl s_client (make deps installs openssl)")?;
    child.stdin.take().context("stdin")?.write_all(
        format!("GET / HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let verified = ca.is_some() && stdout.contains("Verify return code: 0 (ok)");
    let pem = stdout.find("-----BEGIN CERTIFICATE-----").and_then(|b| {
        stdout[b..]
            .find("-----END CERTIFICATE-----")
            .map(|e| &stdout[b..b + e + 25])
    });
    let Some(pem) = pem else {
        return Ok(Session {
            san: None,
            verified: false,
            out: stdout,
        });
    };
    let mut x509 = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    x509.stdin
        .take()
        .context("stdin")?
        .write_all(pem.as_bytes())?;
    let san = String::from_utf8_lossy(&x509.wait_with_output()?.stdout).into_owned();
    Ok(Session {
        san: Some(san),
        verified,
        out: stdout,
    })
}

/// Connects with SNI `sni` until a backend answers; returns (certificate SAN, Pod that answered).
pub fn tls_backend(socket: &str, sni: &str) -> Result<(String, String)> {
    tls_answer(socket, sni, None).map(|(s, pod)| (s.san.unwrap_or_default(), pod))
}

/// Connects with SNI `sni` (verifying against `ca` when given) until a backend answers; returns
/// the session and the Pod that answered.
pub fn tls_answer(socket: &str, sni: &str, ca: Option<&Path>) -> Result<(Session, String)> {
    wait_for(&format!("a TLS backend for SNI {sni}"), DEADLINE, || {
        let s = s_client(socket, sni, ca)?;
        match s.pod() {
            Some(pod) if s.san.is_some() => Ok(Some((s, pod))),
            _ => Err(anyhow!(
                "no answer yet (certificate: {:?}, verified: {})",
                s.san,
                s.verified
            )),
        }
    })
}

/// A `kubernetes.io/tls` Secret `namespace/name` with a fresh self-signed certificate for
/// `host`; returns (its manifest, the certificate PEM a client trusts).
pub fn tls_secret(namespace: &str, name: &str, host: &str) -> Result<(String, String)> {
    tls_secret_for(namespace, name, &[host])
}

/// [`tls_secret`] with a certificate for every name of `hosts`.
pub fn tls_secret_for(namespace: &str, name: &str, hosts: &[&str]) -> Result<(String, String)> {
    use base64::Engine as _;
    let ck = rcgen::generate_simple_self_signed(
        hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    )?;
    let cert = ck.cert.pem();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok((
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
            b64(&cert),
            b64(&ck.signing_key.serialize_pem())
        ),
        cert,
    ))
}
