//! Clients and endpoints that hold on or give up: slowloris connections trickling header bytes
//! are cut by the header-read deadline while other requests succeed, an idle kept-alive
//! connection is closed, an endpoint that never answers gets 504 after the backend service's
//! `timeoutSec` and one that resets the connection 502, both as Google's error page; and the
//! real binary holds 10,000 idle client connections (started with the soft open-files limit of
//! 1024 many systems give, which it raises itself), reporting its memory. An endpoint that
//! answers in HTTP/1.0 does not change the version of the load balancer's status line.

mod dataplane_support;
mod raw_backend;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dataplane_support::*;
use gce_emulator::dataplane::DataPlaneConfig;
use raw_backend::{answer_of, RawBackend};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn world(header_read_timeout: Duration) -> World {
    World::start_with(DataPlaneConfig {
        port_map: [(80, 0)].into_iter().collect(),
        header_read_timeout: Some(header_read_timeout),
        ..Default::default()
    })
}

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

/// Reads from `s` until `done(text so far)` or the peer closes; fails after 30 s.
async fn read_until(s: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    let mut got = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 4096];
        while !done(&String::from_utf8_lossy(&got)) {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    assert!(
        r.is_ok(),
        "nothing within 30 s; got {:?}",
        String::from_utf8_lossy(&got)
    );
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_cut_while_other_requests_succeed() {
    const SLOW: usize = 300;
    let a = Backend::start("a").await;
    let mut w = world(Duration::from_secs(3));
    w.service("bs", None, &[a.addr], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let front = l.local_addr;

    // Each slow client sends a request line and then one header byte every 200 ms (the pace
    // of the attack, not a synchronisation), never ending its head, until the server closes.
    let cut = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut slow = Vec::new();
    for _ in 0..SLOW {
        let (cut, answered) = (cut.clone(), answered.clone());
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(front).await.unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: h.example\r\nX-Slow: ")
                .await
                .unwrap();
            let mut buf = [0u8; 1024];
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    r = s.read(&mut buf) => {
                        match r {
                            Ok(0) | Err(_) => cut.fetch_add(1, Ordering::SeqCst),
                            Ok(_) => answered.fetch_add(1, Ordering::SeqCst),
                        };
                        return;
                    }
                    _ = tick.tick() => {
                        if s.write_all(b"a").await.is_err() {
                            cut.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            }
        }));
    }
    // Meanwhile other clients are served, each request once (no retry through a failure).
    let cl = client(&l, &["h.example"]);
    let mut ok = 0;
    for _ in 0..40 {
        let (status, _, v, _) = get(&cl, &l, "h.example", "/").await;
        assert_eq!(status, 200, "a normal request failed during the attack");
        assert_eq!(backend_of(&v), "a");
        ok += 1;
    }
    let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(slow)).await;
    assert!(
        all.is_ok(),
        "slow connections still open after 60 s: the header-read deadline did not cut them"
    );
    println!(
        "slowloris: {SLOW} slow connections, {} cut, {} answered; {ok} normal requests succeeded",
        cut.load(Ordering::SeqCst),
        answered.load(Ordering::SeqCst)
    );
    assert_eq!(
        cut.load(Ordering::SeqCst),
        SLOW,
        "every slow connection is cut without an answer"
    );
    assert_eq!(
        a.state.requests.load(Ordering::SeqCst),
        40,
        "no slow request reached the backend"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connection_is_closed() {
    let b = RawBackend::start().await;
    let mut w = world(Duration::from_secs(2));
    w.service("bs", None, &[b.addr], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let front = w.listener("lb").await.local_addr;
    let mut s = TcpStream::connect(front).await.unwrap();
    let req = b"GET /one HTTP/1.1\r\nHost: h.example\r\n\r\n";
    s.write_all(req).await.unwrap();
    let first = read_until(&mut s, |t| t.ends_with("\r\n\r\nok")).await;
    // The connection is kept alive: a second request on it is served.
    s.write_all(b"GET /two HTTP/1.1\r\nHost: h.example\r\n\r\n")
        .await
        .unwrap();
    let second = read_until(&mut s, |t| t.ends_with("\r\n\r\nok")).await;
    let both = answer_of(format!("{first}{second}").as_bytes());
    assert_eq!(both.statuses, [200, 200], "{first}{second}");
    assert_eq!(both.from_backend.len(), 2);
    // Then it idles, and the data plane closes it: the read ends with nothing more.
    let rest = read_until(&mut s, |_| false).await;
    assert_eq!(
        rest, "",
        "the idle connection closes without another answer"
    );
}

/// A listener that accepts connections and holds them without ever answering.
async fn hanging_endpoint() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = tcp.accept().await {
            held.push(s);
        }
    });
    (addr, task)
}

/// A listener that reads the start of each request and resets the connection (RST).
async fn resetting_endpoint() -> std::net::SocketAddr {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            let mut buf = [0u8; 16];
            let _ = s.read(&mut buf).await;
            let _ = s.set_zero_linger();
            drop(s);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_endpoint_504_and_resetting_endpoint_502_as_googles_error_page() {
    let (hang, _task) = hanging_endpoint().await;
    let reset = resetting_endpoint().await;
    let mut w = world(Duration::from_secs(60));
    w.service("hang", None, &[hang], json!({"timeoutSec": 1}));
    w.service("reset", None, &[reset], json!({"timeoutSec": 30}));
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("hang"),
               "hostRules": [{"hosts": ["reset.example"], "pathMatcher": "r"}],
               "pathMatchers": [{"name": "r", "defaultService": bs("reset")}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["hang.example", "reset.example"]);
    for (host, status, title, detail) in [
        (
            "hang.example",
            504,
            "Error 504 (Gateway Timeout)!!1",
            "backend_timeout",
        ),
        (
            "reset.example",
            502,
            "Error 502 (Server Error)!!1",
            "backend_connection_closed_before_data_sent_to_client",
        ),
    ] {
        let (got, headers, _, text) = get(&cl, &l, host, "/").await;
        assert_eq!(got, status, "{host}: {text}");
        assert_eq!(
            headers["content-type"], "text/html; charset=UTF-8",
            "{host}"
        );
        assert!(
            text.contains(&format!("<title>{title}</title>")),
            "{host}: {text}"
        );
        assert!(
            text.contains(&format!("statusDetails: {detail}:")),
            "{host}: {text}"
        );
    }
}

/// A listener that answers every request as an HTTP/1.0 server does (`HTTP/1.0 200 OK`, a
/// `Content-Length`, then close).
async fn http10_endpoint() -> std::net::SocketAddr {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            tokio::spawn(async move {
                let _ = read_until(&mut s, |t| t.contains("\r\n\r\n")).await;
                let answer = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhttp10";
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// RFC 9110 section 6.2: an intermediary sends its own HTTP-version in forwarded messages. The
/// load balancer speaks HTTP/1.1 (its `Via: 1.1 google` says so), so an HTTP/1.1 client gets
/// `HTTP/1.1 200 OK` even from an HTTP/1.0 endpoint. An HTTP/1.0 client is answered in
/// HTTP/1.0: hyper, the codec, speaks the older version to a peer that announced it (the
/// downgrade section 6.2 allows), whatever the endpoint spoke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_line_carries_the_load_balancers_version_not_the_endpoints() {
    let old = http10_endpoint().await;
    let mut w = world(Duration::from_secs(60));
    w.service("old", None, &[old], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("old")}));
    w.publish();
    let front = w.listener("lb").await.local_addr;
    for (client_version, want) in [
        ("HTTP/1.1", "HTTP/1.1 200 OK"),
        ("HTTP/1.0", "HTTP/1.0 200 OK"),
    ] {
        let mut s = TcpStream::connect(front).await.unwrap();
        let req = format!("GET / {client_version}\r\nHost: h.example\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let got = read_until(&mut s, |t| t.ends_with("http10")).await;
        let status_line = got.split("\r\n").next().unwrap_or("");
        assert_eq!(
            status_line, want,
            "{client_version} client, HTTP/1.0 endpoint: {got}"
        );
        assert!(
            got.to_ascii_lowercase().contains("\r\nvia: 1.1 google\r\n"),
            "{got}"
        );
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_with_a_soft_limit_of_1024() {
    const IDLE: usize = 10_000;
    // This process holds the client ends.
    let limit = gce_emulator::open_files::raise_limit().unwrap();
    assert!(
        limit as usize > IDLE + 1000,
        "the hard open-files limit is {limit}; this test needs {} (raise it with `ulimit -Hn`)",
        IDLE + 1000
    );
    let backend = Backend::start("a").await;
    // The emulator starts as many systems start services: with a soft limit of 1024.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "ulimit -Sn 1024 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_gce-emulator"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--port-map",
            "80=0",
            "--dataplane-threads",
            "1",
            "--header-read-timeout-sec",
            "600",
            // The backend is a bare socket, not on an instance: no network model here.
            "--validate-neg-endpoints=false",
            "--enforce-firewall=false",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let api = format!("{}compute/v1/projects/p1", line.trim());
    let http = reqwest::Client::new();
    let call = async |path: &str, body: Value| {
        let r = http
            .post(format!("{api}/{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "{path}: {}",
            r.text().await.unwrap()
        );
    };
    let z = "zones/us-central1-a";
    call(&format!("{z}/networkEndpointGroups"), json!({"name": "neg", "networkEndpointType": "GCE_VM_IP_PORT", "defaultPort": backend.addr.port()})).await;
    call(
        &format!("{z}/networkEndpointGroups/neg/attachNetworkEndpoints"),
        json!({"networkEndpoints": [{"ipAddress": "127.0.0.1", "port": backend.addr.port()}]}),
    )
    .await;
    call("global/backendServices", json!({"name": "bs", "protocol": "HTTP", "backends": [{"group": format!("{api}/{z}/networkEndpointGroups/neg"), "balancingMode": "RATE", "maxRatePerEndpoint": 100}]})).await;
    call(
        "global/urlMaps",
        json!({"name": "um", "defaultService": format!("{api}/global/backendServices/bs")}),
    )
    .await;
    call(
        "global/targetHttpProxies",
        json!({"name": "tp", "urlMap": format!("{api}/global/urlMaps/um")}),
    )
    .await;
    call("global/forwardingRules", json!({"name": "fr", "IPProtocol": "TCP", "portRange": "80", "loadBalancingScheme": "EXTERNAL", "target": format!("{api}/global/targetHttpProxies/tp")})).await;
    let root = line.trim().to_string();
    let front: std::net::SocketAddr = poll("the listener", 30, async || {
        let v: Value = http
            .get(format!("{root}_emulator/listeners"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["listeners"].as_array()?.first()?["localAddr"]
            .as_str()?
            .parse()
            .ok()
    })
    .await;
    let cl = reqwest::Client::builder().no_proxy().build().unwrap();
    let ok = |cl: reqwest::Client| async move {
        cl.get(format!("http://{front}/"))
            .header("host", "h.example")
            .send()
            .await
            .map(|r| r.status().as_u16())
    };
    assert_eq!(ok(cl.clone()).await.unwrap(), 200);
    let rss_before = rss_kib(pid);
    let fds_before = open_fds(pid);

    let conns = futures::future::join_all((0..IDLE).map(|_| async move {
        tokio::time::timeout(Duration::from_secs(60), TcpStream::connect(front)).await
    }))
    .await;
    let held: Vec<TcpStream> = conns
        .into_iter()
        .map(|c| c.expect("connect within 60 s").expect("connect"))
        .collect();
    // Every connection is accepted (one descriptor each in the emulator), none refused.
    let fds = poll("the emulator to accept every connection", 120, async || {
        let n = open_fds(pid);
        (n >= fds_before + IDLE).then_some(n)
    })
    .await;
    assert_eq!(
        ok(cl.clone()).await.unwrap(),
        200,
        "a new request with {IDLE} idle connections open"
    );
    let rss_after = rss_kib(pid);
    println!(
        "{IDLE} idle connections: emulator file descriptors {fds_before} -> {fds}, RSS {rss_before} KiB -> {rss_after} KiB ({:.1} KiB per connection)",
        (rss_after.saturating_sub(rss_before)) as f64 / IDLE as f64
    );
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        !stderr.contains("accept failed"),
        "the emulator ran out of descriptors: {stderr}"
    );
}
