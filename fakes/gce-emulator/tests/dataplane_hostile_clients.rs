//! Hostile HTTP/1 clients against the data plane, beside nginx's answers to the same bytes:
//! request smuggling variants (Content-Length with Transfer-Encoding, duplicate and
//! conflicting lengths, obfuscated codings, whitespace before the colon, obs-fold, bad chunk
//! sizes, bare LF, NUL and control bytes), Host rules, oversized request lines and heads.
//!
//! Behind the proxy is a backend that records the raw bytes it receives (`raw_backend`): in no
//! case may it parse a request whose answer the client did not get from the proxy, which is
//! what a request boundary the proxy did not see would look like. Each case states the status
//! the data plane answers; the file `tests/data/nginx_hostile_clients.json` holds nginx's
//! answers, and no case may be answered more leniently than nginx answers it (nginx refused a
//! request, the data plane forwarded it).
//!
//! Re-record nginx's answers (nginx on PATH, e.g. `apt-get install -y nginx`):
//! `cargo nextest run -p gce-emulator --test dataplane_hostile_clients --run-ignored only`
//! writes the file; review the diff.

mod dataplane_support;
mod raw_backend;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use dataplane_support::*;
use gce_emulator::dataplane::DataPlaneConfig;
use raw_backend::{exchange, Answer, RawBackend};
use serde_json::{json, Value};

/// The request a smuggling case tries to get to the backend unseen.
const SMUGGLED: &str = "GET /smuggled HTTP/1.1\r\nHost: h.example\r\n\r\n";

/// What the data plane does with a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Refused with this status; nothing reaches the backend.
    Refused(u16),
    /// Forwarded as this many requests (the answers come from the backend).
    Forwarded(usize),
    /// This many requests forwarded, then the next refused with this status.
    ForwardedThenRefused(usize, u16),
}

fn chunked(body: &str) -> String {
    format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
}

/// Every case: name, raw bytes, what the data plane must do.
fn cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    use Expect::*;
    let h = "Host: h.example\r\n";
    let post = |headers: &str, body: &str| {
        format!("POST /upload HTTP/1.1\r\n{h}{headers}\r\n{body}").into_bytes()
    };
    let smuggle_chunked = chunked(SMUGGLED);
    let long_target = format!("GET /{} HTTP/1.1\r\n{h}\r\n", "a".repeat(32 * 1024));
    let huge_target = format!("GET /{} HTTP/1.1\r\n{h}\r\n", "a".repeat(1024 * 1024));
    let big_head = format!(
        "GET / HTTP/1.1\r\n{h}{}\r\n",
        (0..80)
            .map(|i| format!("X-Filler-{i}: {}\r\n", "v".repeat(1024)))
            .collect::<String>()
    );
    vec![
        (
            "plain_get",
            format!("GET / HTTP/1.1\r\n{h}\r\n").into_bytes(),
            Forwarded(1),
        ),
        (
            "plain_post",
            post("Content-Length: 5\r\n", "hello"),
            Forwarded(1),
        ),
        (
            "chunked_post",
            post("Transfer-Encoding: chunked\r\n", &chunked("hello")),
            Forwarded(1),
        ),
        // Content-Length says the body is "0\r\n\r\nG"...; chunked framing says it ends at "0".
        (
            "cl_then_te",
            post(
                "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
                &format!("0\r\n\r\n{SMUGGLED}"),
            ),
            Refused(400),
        ),
        (
            "te_then_cl",
            post(
                "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
                &smuggle_chunked,
            ),
            Refused(400),
        ),
        (
            "cl_duplicate_same",
            post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
            Refused(400),
        ),
        // The same after a well-framed request on the same connection.
        (
            "get_then_cl_then_te",
            [
                format!("GET /first HTTP/1.1\r\n{h}\r\n").into_bytes(),
                post(
                    "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
                    &format!("0\r\n\r\n{SMUGGLED}"),
                ),
            ]
            .concat(),
            ForwardedThenRefused(1, 400),
        ),
        (
            "post_then_cl_duplicate",
            [
                post("Content-Length: 5\r\n", "hello"),
                post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
            ]
            .concat(),
            ForwardedThenRefused(1, 400),
        ),
        (
            "cl_conflicting",
            post(
                "Content-Length: 5\r\nContent-Length: 40\r\n",
                &format!("hello{SMUGGLED}"),
            ),
            Refused(400),
        ),
        (
            "cl_list",
            post("Content-Length: 5, 5\r\n", "hello"),
            Refused(400),
        ),
        (
            "cl_plus_sign",
            post("Content-Length: +5\r\n", "hello"),
            Refused(400),
        ),
        (
            "cl_space_before_colon",
            post("Content-Length : 5\r\n", "hello"),
            Refused(400),
        ),
        (
            "te_chunked_identity",
            post(
                "Transfer-Encoding: chunked, identity\r\nContent-Length: 5\r\n",
                "hello",
            ),
            Refused(400),
        ),
        (
            "te_identity_chunked",
            post(
                "Transfer-Encoding: identity, chunked\r\n",
                &chunked("hello"),
            ),
            Refused(501),
        ),
        (
            "te_xchunked",
            post(
                "Transfer-Encoding: xchunked\r\nContent-Length: 5\r\n",
                "hello",
            ),
            Refused(400),
        ),
        (
            "te_chunked_twice",
            post(
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                &chunked("hello"),
            ),
            Refused(400),
        ),
        (
            "te_space_before_colon",
            post(
                "Transfer-Encoding : chunked\r\nContent-Length: 4\r\n",
                &smuggle_chunked,
            ),
            Refused(400),
        ),
        (
            "te_obs_fold",
            post(
                "Transfer-Encoding:\r\n chunked\r\nContent-Length: 4\r\n",
                &smuggle_chunked,
            ),
            Refused(400),
        ),
        (
            "te_on_http10",
            format!(
                "POST / HTTP/1.0\r\n{h}Transfer-Encoding: chunked\r\n\r\n{}",
                chunked("hello")
            )
            .into_bytes(),
            Refused(400),
        ),
        (
            "chunk_size_invalid",
            post("Transfer-Encoding: chunked\r\n", "zz\r\nhello\r\n0\r\n\r\n"),
            Refused(400),
        ),
        (
            "chunk_size_overflow",
            post(
                "Transfer-Encoding: chunked\r\n",
                "fffffffffffffffff1\r\nhello\r\n0\r\n\r\n",
            ),
            Refused(400),
        ),
        (
            "chunk_size_negative",
            post("Transfer-Encoding: chunked\r\n", "-5\r\nhello\r\n0\r\n\r\n"),
            Refused(400),
        ),
        (
            "chunk_bare_lf",
            post(
                "Transfer-Encoding: chunked\r\n",
                &format!("5\nhello\n0\n\n{SMUGGLED}"),
            ),
            Refused(400),
        ),
        (
            "bare_lf_head",
            b"GET / HTTP/1.1\nHost: h.example\n\n".to_vec(),
            Forwarded(1),
        ),
        (
            "bare_cr_head",
            b"GET / HTTP/1.1\rHost: h.example\r\n\r\n".to_vec(),
            Refused(400),
        ),
        (
            "nul_in_header",
            format!("GET / HTTP/1.1\r\n{h}X-Test: a\0b\r\n\r\n").into_bytes(),
            Refused(400),
        ),
        (
            "ctl_in_header",
            format!("GET / HTTP/1.1\r\n{h}X-Test: a\x01b\r\n\r\n").into_bytes(),
            Refused(400),
        ),
        (
            "nul_in_target",
            format!("GET /a\0b HTTP/1.1\r\n{h}\r\n").into_bytes(),
            Refused(400),
        ),
        (
            "space_in_target",
            format!("GET /a b HTTP/1.1\r\n{h}\r\n").into_bytes(),
            Refused(400),
        ),
        (
            "missing_host",
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            Refused(400),
        ),
        (
            "duplicate_host",
            format!("GET / HTTP/1.1\r\n{h}Host: other.example\r\n\r\n").into_bytes(),
            Refused(400),
        ),
        (
            "host_with_userinfo",
            b"GET / HTTP/1.1\r\nHost: user@h.example\r\n\r\n".to_vec(),
            Refused(400),
        ),
        (
            "host_with_space",
            b"GET / HTTP/1.1\r\nHost: h example\r\n\r\n".to_vec(),
            Refused(400),
        ),
        (
            "http10_without_host",
            b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            Forwarded(1),
        ),
        ("http09", b"GET /\r\n".to_vec(), Refused(400)),
        (
            "pipelined_two",
            format!("GET /one HTTP/1.1\r\n{h}\r\nGET /two HTTP/1.1\r\n{h}\r\n").into_bytes(),
            Forwarded(2),
        ),
        ("long_request_line", long_target.into_bytes(), Refused(414)),
        ("huge_request_line", huge_target.into_bytes(), Refused(431)),
        ("huge_head", big_head.into_bytes(), Refused(431)),
    ]
}

/// nginx's recorded answers: case name -> (statuses, requests the backend saw).
fn nginx_answers() -> (String, BTreeMap<String, (Vec<u16>, usize)>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/nginx_hostile_clients.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = v["cases"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, c)| {
            let statuses = c["statuses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_u64().unwrap() as u16)
                .collect();
            (
                k.clone(),
                (statuses, c["forwarded"].as_u64().unwrap() as usize),
            )
        })
        .collect();
    (v["nginx"].as_str().unwrap().to_string(), cases)
}

/// Runs one case against the front end at `front`, with `backend` behind it. Returns the
/// client's answer and the requests the backend parsed.
async fn run_case(front: SocketAddr, backend: &RawBackend, bytes: &[u8]) -> (Answer, Vec<String>) {
    let answer = exchange(front, bytes).await;
    backend.settled().await;
    (answer, backend.requests())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_variants_never_reach_the_backend_as_a_second_request() {
    let cases = cases();
    let mut w = World::start_with(DataPlaneConfig {
        port_map: [(80, 0)].into_iter().collect(),
        // Kept-alive client connections close soon after the last answer, ending each read.
        header_read_timeout: Some(Duration::from_secs(2)),
        ..Default::default()
    });
    // One backend and one load balancer per case, so the cases run at once.
    let mut backends = Vec::new();
    for (name, _, _) in &cases {
        let b = RawBackend::start().await;
        let svc = format!("bs-{}", name.replace('_', "-"));
        w.service(&svc, None, &[b.addr], json!({"timeoutSec": 10}));
        let lb = format!("lb-{}", name.replace('_', "-"));
        w.http_lb(
            &lb,
            lb_ip(),
            json!({"defaultService": url(&format!("global/backendServices/{svc}"))}),
        );
        backends.push((lb, b));
    }
    w.publish();
    let mut fronts = Vec::new();
    for (lb, _) in &backends {
        fronts.push(w.listener(lb).await.local_addr);
    }
    let runs = cases
        .iter()
        .zip(&backends)
        .zip(&fronts)
        .map(|(((_, bytes, _), (_, b)), front)| run_case(*front, b, bytes));
    let results = futures::future::join_all(runs).await;

    let (nginx, recorded) = nginx_answers();
    let mut table = vec![format!(
        "{:<24} {:<12} {:<10} {}",
        "case", "data plane", "expected", nginx
    )];
    let mut failures = Vec::new();
    for ((name, _, expect), (answer, seen)) in cases.iter().zip(&results) {
        let ours = match (answer.statuses.first(), answer.from_backend.len()) {
            (Some(s), 0) => Expect::Refused(*s),
            (_, n) => match answer.statuses.get(n) {
                Some(s) if *s >= 400 => Expect::ForwardedThenRefused(n, *s),
                _ => Expect::Forwarded(n),
            },
        };
        let theirs = recorded.get(*name);
        table.push(format!(
            "{name:<24} {:<12} {:<10} {:?}",
            format!("{:?}", answer.statuses),
            format!("{expect:?}"),
            theirs
        ));
        // The backend parsed exactly the requests whose answers the client got.
        let mut got = answer.from_backend.clone();
        got.sort();
        let mut parsed = seen.clone();
        parsed.sort();
        if got != parsed {
            failures.push(format!(
                "{name}: backend parsed {parsed:?}, client got answers for {got:?}"
            ));
        }
        if seen.iter().any(|r| r.ends_with("/smuggled")) {
            failures.push(format!(
                "{name}: the smuggled request reached the backend: {seen:?}"
            ));
        }
        if ours != *expect {
            failures.push(format!(
                "{name}: expected {expect:?}, got {ours:?}: {}",
                answer.text.chars().take(300).collect::<String>()
            ));
        }
        match theirs {
            None => failures.push(format!(
                "{name}: no nginx answer recorded; re-record (see the file's docs)"
            )),
            // No weaker than nginx: every request nginx refused, the data plane refuses too.
            Some((statuses, forwarded)) => {
                let nginx_refused = statuses.len() > *forwarded
                    && statuses.get(*forwarded).is_some_and(|s| *s >= 400);
                let ours_forwarded = match ours {
                    Expect::Refused(_) => 0,
                    Expect::Forwarded(n) => n,
                    Expect::ForwardedThenRefused(n, _) => n,
                };
                if nginx_refused && ours_forwarded > *forwarded {
                    failures.push(format!(
                        "{name}: nginx forwarded {forwarded} and refused the next with {statuses:?}, the data plane forwarded {ours_forwarded}"
                    ));
                }
            }
        }
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Writes nginx's answers to every case to `tests/data/nginx_hostile_clients.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records nginx's answers; needs nginx on PATH"]
async fn record_nginx_answers() {
    let version = std::process::Command::new("nginx")
        .arg("-v")
        .output()
        .expect("nginx on PATH (apt-get install -y nginx)");
    let version = String::from_utf8_lossy(&version.stderr)
        .trim()
        .trim_start_matches("nginx version: ")
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut out = serde_json::Map::new();
    for (name, bytes, _) in cases() {
        // A fresh nginx and backend per case: nothing carries over between cases.
        let backend = RawBackend::start().await;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{ access_log off; client_header_timeout 2s; keepalive_timeout 2s; client_body_timeout 2s;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://{}; proxy_http_version 1.1; }} }} }}\n",
            backend.addr
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let mut child = std::process::Command::new("nginx")
            .args([
                "-c",
                &dir.path().join("nginx.conf").display().to_string(),
                "-p",
                &d.to_string(),
            ])
            .spawn()
            .unwrap();
        let front: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        poll("nginx listening", 10, async || {
            tokio::net::TcpStream::connect(front).await.ok()
        })
        .await;
        let (answer, seen) = run_case(front, &backend, &bytes).await;
        let _ = child.kill();
        let _ = child.wait();
        println!("{name}: {:?} forwarded {}", answer.statuses, seen.len());
        out.insert(
            name.to_string(),
            json!({"statuses": answer.statuses, "forwarded": seen.len()}),
        );
    }
    let doc = json!({
        "nginx": version,
        "how": "cargo nextest run -p gce-emulator --test dataplane_hostile_clients --run-ignored only",
        "config": "proxy_pass to the raw backend, proxy_http_version 1.1, default buffers and limits",
        "cases": out,
    });
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/nginx_hostile_clients.json"
    );
    std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
}
