//! A backend that records the raw bytes it receives and the requests it parsed from them, and a
//! raw client that sends any bytes and reads whatever comes back: the two ends of the request
//! smuggling tests. The backend parses with hyper (strict) and answers each complete request
//! with `x-backend-request: <connection>-<n> <method> <path>`, so a client can tell which
//! answers came from the backend and the test can compare what each side saw.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// What the backend saw.
#[derive(Default)]
pub struct Seen {
    /// Raw bytes received, per connection, in order.
    pub raw: Mutex<Vec<Vec<u8>>>,
    /// Complete requests (head and whole body) parsed: `<connection>-<n> <method> <path>`.
    pub requests: Mutex<Vec<String>>,
    /// Connections still open.
    pub open: AtomicUsize,
}

/// A running raw-recording backend.
pub struct RawBackend {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
}

/// A stream that appends every byte read to `sink`.
struct Recording {
    inner: TcpStream,
    sink: Arc<Seen>,
    conn: usize,
}

impl AsyncRead for Recording {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &r {
            let new = &buf.filled()[before..];
            self.sink.raw.lock().unwrap()[self.conn].extend_from_slice(new);
        }
        r
    }
}

impl tokio::io::AsyncWrite for Recording {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl RawBackend {
    /// Starts on 127.0.0.1:0. Idle connections are closed after one second, so that
    /// [`RawBackend::settled`] is reached soon after the last request.
    pub async fn start() -> RawBackend {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let s = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = tcp.accept().await {
                let conn = {
                    let mut raw = s.raw.lock().unwrap();
                    raw.push(Vec::new());
                    raw.len() - 1
                };
                s.open.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                tokio::spawn(async move {
                    let io = Recording {
                        inner: stream,
                        sink: s.clone(),
                        conn,
                    };
                    let n = Arc::new(AtomicUsize::new(0));
                    let svc_seen = s.clone();
                    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                        let (seen, n) = (svc_seen.clone(), n.clone());
                        async move {
                            let method = req.method().clone();
                            let path = req.uri().path().to_string();
                            // Only a request whose whole body arrived is a request seen.
                            let complete = req.into_body().collect().await.is_ok();
                            let mut resp = hyper::Response::new(Full::new(Bytes::from("ok")));
                            if complete {
                                let i = n.fetch_add(1, Ordering::SeqCst);
                                let id = format!("{conn}-{i} {method} {path}");
                                seen.requests.lock().unwrap().push(id.clone());
                                resp.headers_mut()
                                    .insert("x-backend-request", id.parse().unwrap());
                            }
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(1))
                        .serve_connection(TokioIo::new(io), svc)
                        .await;
                    s.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        RawBackend { addr, seen }
    }

    /// Waits (up to 30 s) until every connection to the backend has closed, so every byte it
    /// received has been parsed.
    pub async fn settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.seen.open.load(Ordering::SeqCst) > 0 {
            assert!(
                Instant::now() < deadline,
                "backend connections still open after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The requests seen so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.requests.lock().unwrap().clone()
    }

    /// Every raw byte received, connection after connection.
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.seen.raw.lock().unwrap().clone()
    }
}

/// What a client got back for raw bytes it sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The status of every response on the connection, in order.
    pub statuses: Vec<u16>,
    /// The `x-backend-request` values among them: answers that came from the backend.
    pub from_backend: Vec<String>,
    /// Everything received.
    pub text: String,
}

/// Sends `bytes` on a new connection to `to` and reads until the server closes it (the front
/// end's idle timeout closes a kept-alive one), or 30 s pass (a hang fails the test).
pub async fn exchange(to: SocketAddr, bytes: &[u8]) -> Answer {
    let mut s = TcpStream::connect(to).await.unwrap();
    // A server may close before reading everything (a refusal): then writing fails, and what it
    // answered is still readable.
    let _ = s.write_all(bytes).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 16384];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the front end neither answered nor closed within 30 s"
    );
    answer_of(&got)
}

/// Splits a received byte stream into its status lines and backend markers. Bodies in these
/// tests are `ok` or error pages, which contain no `HTTP/1.x NNN` and no marker header.
pub fn answer_of(got: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(got).into_owned();
    let mut a = Answer {
        text: text.clone(),
        ..Answer::default()
    };
    // A response may follow a body directly (`okHTTP/1.1 200 OK`): search the whole text.
    let mut at = 0;
    while let Some(i) = text[at..].find("HTTP/1.") {
        let start = at + i;
        let code = text.get(start + 9..start + 12).and_then(|c| c.parse().ok());
        if let (Some(code), Some(b' ')) = (code, text.as_bytes().get(start + 8)) {
            a.statuses.push(code);
        }
        at = start + 7;
    }
    for line in text.split("\r\n") {
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("x-backend-request: ") {
            a.from_backend
                .push(line[line.len() - v.len()..].to_string());
        }
    }
    a
}
