//! A tap on an HTTP/1 client connection's read side that sees each request head as the client
//! sent it, before hyper parses it, for the framing ambiguities hyper resolves without a trace.
//!
//! hyper (1.x) accepts, and leaves no evidence of in the parsed request, three heads that nginx
//! refuses with 400 and that RFC 9112 allows a server to refuse: `Content-Length` together with
//! `Transfer-Encoding` in either order (hyper drops the length, reads the chunked body and
//! closes after the answer, RFC 9112 section 6.1) and identical duplicate `Content-Length` lines
//! (hyper keeps one, RFC 9110 section 8.6). Its builder has no setting for either, and the
//! header map it hands over is the same as for a well-formed request. This tap is the narrowest
//! place that still sees them: [`HeadTap`] wraps the socket (or the TLS stream), runs every
//! head through `httparse`, the parser hyper itself uses with the same defaults (so both agree
//! on where a head ends), and records one [`HeadVerdict`] per head in [`HeadVerdicts`]; the
//! listener's service takes them in order and marks an ambiguous request with [`AmbiguousFraming`],
//! which `request_checks::check` refuses with 400 before anything is proxied, and the answer
//! closes the connection (as nginx does).
//!
//! The tap frames nothing: hyper alone decides what is forwarded. The tap only needs to know
//! where the next head starts, which it knows after a head without a body and after a
//! `Content-Length` body (it skips that many bytes). After a chunked body, an upgrade or a
//! `CONNECT`, it stops looking (the next head's position would need the chunked framing), so
//! later requests on that connection are checked by hyper's rules alone: hyper still drops the
//! length and closes after answering, so no request boundary is lost either way; the answer is
//! just not the 400 nginx gives. docs/reliability.md lists this.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Most header lines in one head, as hyper's own limit (its `DEFAULT_MAX_HEADERS`, 100): a head
/// with more is refused by hyper with 431, and the tap stops looking.
const MAX_HEADERS: usize = 100;

/// What the tap found in one request head: `None` for a head without framing ambiguity, or
/// the reason to refuse it.
pub type HeadVerdict = Option<&'static str>;

/// A request extension set on a request whose head the tap found ambiguous: the sentence for the
/// error page (`request_checks::check` answers 400).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmbiguousFraming(pub &'static str);

/// The verdicts of the heads a connection's tap has seen and its requests have not yet taken, in
/// order. Shared between the tap (which pushes) and the listener's service (which takes one per
/// request).
///
/// No queue is needed: the tap stops looking after an ambiguous head, so what it saw is always
/// some clean heads, then at most one ambiguous head, then nothing. Two counters and the
/// ambiguous head's index hold that without a lock or an allocation per request (a
/// `Mutex<VecDeque>` did before: a lock and an unlock on each side of every request).
#[derive(Debug, Default)]
pub struct HeadVerdicts {
    /// Heads the tap has seen (written by the tap only).
    seen: AtomicU64,
    /// Verdicts the service has taken (written by the service only).
    taken: AtomicU64,
    /// The index of the ambiguous head, the last the tap saw, and why it is ambiguous.
    ambiguous: OnceLock<(u64, &'static str)>,
}

impl HeadVerdicts {
    /// The verdict of the next request's head: `None` when the tap did not see it (it stopped
    /// looking), `Some(None)` for a clean head, `Some(Some(why))` for an ambiguous one.
    pub fn next(&self) -> Option<HeadVerdict> {
        let i = self.taken.load(Ordering::Relaxed);
        if i >= self.seen.load(Ordering::Acquire) {
            return None;
        }
        self.taken.store(i + 1, Ordering::Relaxed);
        Some(match self.ambiguous.get() {
            Some(&(at, why)) if at == i => Some(why),
            _ => None,
        })
    }

    fn push(&self, v: HeadVerdict) {
        let i = self.seen.load(Ordering::Relaxed);
        if let Some(why) = v {
            // The tap pushes nothing after an ambiguous head, so this is set once.
            let _ = self.ambiguous.set((i, why));
        }
        // Only the tap writes `seen`: a store, not a read-modify-write.
        self.seen.store(i + 1, Ordering::Release);
    }
}

/// Where the tap is in the client's byte stream.
#[derive(Debug)]
enum State {
    /// At or inside a head; the bytes of a head begun in an earlier read.
    Head(Vec<u8>),
    /// Inside a `Content-Length` body: bytes left to skip.
    Body(u64),
    /// No longer looking (chunked body, upgrade, a head hyper refuses, an ambiguous head).
    Stopped,
}

/// The pure part of the tap: feed it the bytes the client sent, in order; it pushes one verdict
/// per complete request head. `max_head` bounds the bytes kept for an incomplete head (beyond
/// it hyper answers 431, and the scanner stops).
#[derive(Debug)]
pub struct HeadScanner {
    state: State,
    max_head: usize,
}

/// What one complete head says about the bytes after it.
enum Next {
    Body(u64),
    Stop,
}

/// The verdict of one parsed head and where the next head starts.
fn judge(req: &httparse::Request<'_, '_>) -> (HeadVerdict, Next) {
    let mut lengths = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"));
    let chunked = req
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
    let first = lengths.next();
    let more = lengths.next().is_some();
    if first.is_some() && chunked {
        return (
            Some("both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)"),
            Next::Stop,
        );
    }
    if more {
        return (
            Some("more than one Content-Length header (RFC 9110 section 8.6)"),
            Next::Stop,
        );
    }
    let upgrade = req.method == Some("CONNECT")
        || req
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("upgrade"));
    if chunked || upgrade {
        return (None, Next::Stop);
    }
    match first {
        None => (None, Next::Body(0)),
        // Digits only, as hyper requires; anything else hyper refuses and the connection ends.
        Some(h) if !h.value.is_empty() && h.value.iter().all(u8::is_ascii_digit) => {
            match std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.parse().ok())
            {
                Some(n) => (None, Next::Body(n)),
                None => (None, Next::Stop),
            }
        }
        Some(_) => (None, Next::Stop),
    }
}

impl HeadScanner {
    /// A scanner at the start of a connection.
    pub fn new(max_head: usize) -> HeadScanner {
        HeadScanner {
            state: State::Head(Vec::new()),
            max_head,
        }
    }

    /// Scans `bytes`, the next bytes the client sent, pushing a verdict per complete head.
    pub fn feed(&mut self, mut bytes: &[u8], out: &HeadVerdicts) {
        loop {
            match &mut self.state {
                State::Stopped => return,
                State::Body(left) => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &bytes[n as usize..];
                    if *left > 0 {
                        return;
                    }
                    self.state = State::Head(Vec::new());
                }
                State::Head(_) if bytes.is_empty() => return,
                State::Head(held) => {
                    let before = held.len();
                    // Usually a head arrives in one read: parse it in place.
                    let parsed = if before == 0 {
                        Self::parse(bytes)
                    } else {
                        held.extend_from_slice(bytes);
                        Self::parse(held)
                    };
                    match parsed {
                        Parsed::Complete(used, verdict, next) => {
                            out.push(verdict);
                            bytes = &bytes[used - before..];
                            self.state = match next {
                                Next::Body(n) => State::Body(n),
                                Next::Stop => State::Stopped,
                            };
                        }
                        Parsed::Partial if held.len().max(bytes.len()) <= self.max_head => {
                            if before == 0 {
                                held.extend_from_slice(bytes);
                            }
                            return;
                        }
                        // Beyond hyper's head limit (431), or a head hyper refuses (400): the
                        // connection ends after hyper's answer.
                        Parsed::Partial | Parsed::Refused => {
                            self.state = State::Stopped;
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Parses the head at the start of `buf`.
    fn parse(buf: &[u8]) -> Parsed {
        // Uninitialised, as hyper passes them: initialising 100 headers (3.2 KiB) per head cost
        // more than parsing a small head.
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(buf, &mut headers) {
            Ok(httparse::Status::Complete(used)) => {
                let (verdict, next) = judge(&req);
                Parsed::Complete(used, verdict, next)
            }
            Ok(httparse::Status::Partial) => Parsed::Partial,
            Err(_) => Parsed::Refused,
        }
    }
}

/// A parse of the bytes at a head's start.
enum Parsed {
    /// A complete head of this many bytes, its verdict and what follows it.
    Complete(usize, HeadVerdict, Next),
    /// More bytes needed.
    Partial,
    /// Not a head hyper accepts.
    Refused,
}

/// The tap: a client stream (TCP or TLS) whose reads go through a [`HeadScanner`] on their way
/// to hyper. Writes pass through.
pub struct HeadTap<S> {
    inner: S,
    scanner: HeadScanner,
    verdicts: Arc<HeadVerdicts>,
}

impl<S> HeadTap<S> {
    /// Taps `inner`, pushing verdicts to `verdicts`; heads over `max_head` bytes are left to
    /// hyper's limit.
    pub fn new(inner: S, verdicts: Arc<HeadVerdicts>, max_head: usize) -> HeadTap<S> {
        HeadTap {
            inner,
            scanner: HeadScanner::new(max_head),
            verdicts,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadTap<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            this.scanner.feed(&buf.filled()[before..], &this.verdicts);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadTap<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]]) -> Vec<Option<HeadVerdict>> {
        let v = HeadVerdicts::default();
        let mut s = HeadScanner::new(1024);
        for c in chunks {
            s.feed(c, &v);
        }
        std::iter::from_fn(|| v.next()).map(Some).collect()
    }

    const OK: Option<HeadVerdict> = Some(None);

    fn ambiguous(r: &[Option<HeadVerdict>]) -> Vec<bool> {
        r.iter().map(|v| matches!(v, Some(Some(_)))).collect()
    }

    #[test]
    fn length_with_chunked_and_duplicate_lengths_are_ambiguous() {
        let cl_te = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX";
        let te_cl = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n";
        let dup =
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello";
        for head in [&cl_te[..], te_cl, dup] {
            assert_eq!(ambiguous(&scan(&[head])), [true]);
        }
        let one = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
        let chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(scan(&[one]), [OK]);
        assert_eq!(scan(&[chunked]), [OK]);
    }

    #[test]
    fn heads_after_bodiless_and_sized_requests_are_seen_across_reads() {
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let post = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
        let bad = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let stream = [&get[..], post, bad].concat();
        assert_eq!(ambiguous(&scan(&[&stream])), [false, false, true]);
        // The same bytes one at a time: a head or body split across reads.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(ambiguous(&scan(&bytes)), [false, false, true]);
        // A body that looks like a head is skipped, not scanned.
        let body = b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n";
        let sized = format!(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let stream = [sized.as_bytes(), body, get].concat();
        assert_eq!(ambiguous(&scan(&[&stream])), [false, false]);
    }

    #[test]
    fn stops_after_chunked_bodies_upgrades_and_refused_heads() {
        let chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let bad =
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello";
        // Where the next head starts after a chunked body is hyper's to find.
        assert_eq!(scan(&[&[&chunked[..], bad].concat()]), [OK]);
        let upgrade =
            b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
        assert_eq!(scan(&[&[&upgrade[..], bad].concat()]), [OK]);
        let refused = b"GET / HTTP/1.1\r\nHost : a\r\n\r\n";
        assert_eq!(scan(&[&[&refused[..], bad].concat()]), []);
        // A head beyond the limit is hyper's 431; nothing is kept.
        let mut s = HeadScanner::new(16);
        s.feed(b"GET /aaaaaaaaaaaaaaaaaaaaaaaa", &HeadVerdicts::default());
        assert!(matches!(s.state, State::Stopped));
    }
}
