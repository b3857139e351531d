//! Connection draining (`connectionDraining.drainingTimeoutSec`), in process: an endpoint
//! detached from its NEG, or whose NEG leaves the backend service, gets no new requests;
//! requests in flight on it finish within the draining timeout and are cut when it elapses;
//! `0` cuts them at once. Backends hold requests until the test releases them, so no outcome
//! depends on how fast anything runs.

mod dataplane_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use dataplane_support::*;
use gce_emulator::dataplane::ListenerInfo;
use serde_json::json;

/// How long a cut may take to show before the test gives up (a deadline, not a bound on
/// speed: draining cuts at the timeout, which these tests keep at 0 or 1 s).
const CUT_DEADLINE: Duration = Duration::from_secs(30);

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

fn neg(name: &str) -> String {
    url(&format!("zones/{ZONE}/networkEndpointGroups/{name}"))
}

/// Backend service `bs` over NEG `neg-bs` holding `a`, with `drainingTimeoutSec` `secs`, behind
/// a load balancer; returns the world, its listener and a client for `h.example`.
async fn lb_over(a: &Backend, secs: u64) -> (World, ListenerInfo, reqwest::Client) {
    let mut w = World::start();
    w.service(
        "bs",
        None,
        &[a.addr],
        json!({"connectionDraining": {"drainingTimeoutSec": secs}}),
    );
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["h.example"]);
    (w, l, cl)
}

/// Sends `GET path` in the background and waits until backend `a` holds it.
async fn hold_on(
    a: &Backend,
    cl: &reqwest::Client,
    l: &ListenerInfo,
    path: &'static str,
) -> tokio::task::JoinHandle<(u16, reqwest::header::HeaderMap, serde_json::Value, String)> {
    let (cl, l) = (cl.clone(), l.clone());
    let in_flight = tokio::spawn(async move { get(&cl, &l, "h.example", path).await });
    poll("request held by a", 30, async || {
        (a.state.held.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    in_flight
}

/// Asserts `text` is the 502 a request cut by the end of draining gets.
fn assert_cut(status: u16, text: &str, secs: u64) {
    assert_eq!(status, 502, "a request cut by draining: {text}");
    assert!(
        text.contains("backend_connection_closed_before_data_sent_to_client")
            && text.contains(&format!("drainingTimeoutSec={secs} elapsed")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_lets_an_in_flight_request_finish() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let (mut w, l, cl) = lb_over(&a, 30).await;
    let in_flight = hold_on(&a, &cl, &l, "/hold").await;
    // a is detached, b attached: new requests go to b while a's request is still open.
    w.set_endpoints("neg-bs", &[b.addr]);
    w.publish();
    poll("traffic moved to b", 30, async || {
        (backend_of(&get(&cl, &l, "h.example", "/").await.2) == "b").then_some(())
    })
    .await;
    for _ in 0..5 {
        assert_eq!(backend_of(&get(&cl, &l, "h.example", "/").await.2), "b");
    }
    a.state.release.notify_waiters();
    let (status, _, v, text) = in_flight.await.unwrap();
    assert_eq!(
        (status, backend_of(&v)),
        (200, "a"),
        "the in-flight request completed on the detached endpoint: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_timeout_zero_cuts_an_in_flight_request_at_once() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let (mut w, l, cl) = lb_over(&a, 0).await;
    let in_flight = hold_on(&a, &cl, &l, "/hold").await;
    w.set_endpoints("neg-bs", &[b.addr]);
    w.publish();
    let (status, _, _, text) = tokio::time::timeout(CUT_DEADLINE, in_flight)
        .await
        .expect("the request held by the detached endpoint is cut (drainingTimeoutSec 0)")
        .unwrap();
    assert_cut(status, &text, 0);
    assert_eq!(backend_of(&get(&cl, &l, "h.example", "/").await.2), "b");
    a.state.release.notify_waiters();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_cuts_a_request_still_in_flight_when_the_timeout_elapses() {
    let a = Backend::start("a").await;
    let (mut w, l, cl) = lb_over(&a, 1).await;
    let in_flight = hold_on(&a, &cl, &l, "/hold").await;
    w.set_endpoints("neg-bs", &[]);
    w.publish();
    // Never released: only the end of the 1 s draining ends it.
    let (status, _, _, text) = tokio::time::timeout(CUT_DEADLINE, in_flight)
        .await
        .expect("the request still held when drainingTimeoutSec elapsed is cut")
        .unwrap();
    assert_cut(status, &text, 1);
    a.state.release.notify_waiters();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_cuts_a_response_body_still_streaming() {
    let a = Backend::start("a").await;
    let (mut w, l, cl) = lb_over(&a, 0).await;
    let mut resp = cl
        .get(format!(
            "http://h.example:{}/stream-hold",
            l.local_addr.port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.chunk().await.unwrap().as_deref(),
        Some(&b"start\n"[..])
    );
    poll("the rest of the body held by a", 30, async || {
        (a.state.held.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    w.set_endpoints("neg-bs", &[]);
    w.publish();
    let rest = tokio::time::timeout(CUT_DEADLINE, resp.chunk())
        .await
        .expect("the body being streamed from the detached endpoint is cut");
    // An error, not a clean end: the client must not take the truncated body as complete.
    assert!(rest.is_err(), "body after the cut: {rest:?}");
    a.state.release.notify_waiters();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_neg_from_the_backend_service_drains_its_endpoints() {
    let a = Backend::start("a").await;
    let (mut w, l, cl) = lb_over(&a, 0).await;
    let in_flight = hold_on(&a, &cl, &l, "/hold").await;
    // The NEG keeps its endpoint; the backend service no longer lists the NEG.
    w.put(
        "global/backendServices/bs",
        json!({"kind": "compute#backendService", "protocol": "HTTP", "backends": [],
               "connectionDraining": {"drainingTimeoutSec": 0}}),
    );
    w.publish();
    let (status, _, _, text) = tokio::time::timeout(CUT_DEADLINE, in_flight)
        .await
        .expect("the request held by an endpoint of the removed NEG is cut")
        .unwrap();
    assert_cut(status, &text, 0);
    let (status, _, _, text) = get(&cl, &l, "h.example", "/").await;
    assert!(
        status == 502 && text.contains("failed_to_pick_backend"),
        "{status} {text}"
    );
    a.state.release.notify_waiters();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_timeout_of_backend_services_sharing_a_neg_applies() {
    let a = Backend::start("a").await;
    // `bs` (drainingTimeoutSec 0) serves the load balancer; `long` (30 s) uses the same NEG.
    let (mut w, l, cl) = lb_over(&a, 0).await;
    w.put(
        "global/backendServices/long",
        json!({"kind": "compute#backendService", "protocol": "HTTP",
               "backends": [{"group": neg("neg-bs")}],
               "connectionDraining": {"drainingTimeoutSec": 30}}),
    );
    w.publish();
    let in_flight = hold_on(&a, &cl, &l, "/hold").await;
    w.set_endpoints("neg-bs", &[]);
    w.publish();
    // New requests find no endpoint, so the detach has been compiled ...
    poll("a to leave bs", 30, async || {
        let (status, _, _, text) = get(&cl, &l, "h.example", "/").await;
        (status == 502 && text.contains("failed_to_pick_backend")).then_some(())
    })
    .await;
    // ... and the request held on a still completes: it drains for 30 s, not 0.
    a.state.release.notify_waiters();
    let (status, _, v, text) = in_flight.await.unwrap();
    assert_eq!((status, backend_of(&v)), (200, "a"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_cuts_requests_and_bodies_of_https_and_http2_endpoints() {
    for protocol in ["HTTPS", "HTTP2"] {
        let a = tls_backend("tls").await;
        let mut w = World::start();
        w.service(
            "bs",
            None,
            &[a.addr],
            json!({"protocol": protocol, "connectionDraining": {"drainingTimeoutSec": 0}}),
        );
        w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
        w.publish();
        let l = w.listener("lb").await;
        let cl = client(&l, &["h.example"]);
        let (status, _, v, text) = get(&cl, &l, "h.example", "/").await;
        assert_eq!((status, backend_of(&v)), (200, "tls"), "{protocol}: {text}");

        // A body being streamed, and a request waiting for its response headers.
        let mut streaming = cl
            .get(format!(
                "http://h.example:{}/stream-hold",
                l.local_addr.port()
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(streaming.status(), 200, "{protocol}");
        assert_eq!(
            streaming.chunk().await.unwrap().as_deref(),
            Some(&b"start\n"[..]),
            "{protocol}"
        );
        let waiting = {
            let (cl, l) = (cl.clone(), l.clone());
            tokio::spawn(async move { get(&cl, &l, "h.example", "/hold").await })
        };
        poll(&format!("{protocol}: two requests held"), 30, async || {
            (a.state.held.load(Ordering::SeqCst) == 2).then_some(())
        })
        .await;
        w.set_endpoints("neg-bs", &[]);
        w.publish();
        let (status, _, _, text) = tokio::time::timeout(CUT_DEADLINE, waiting)
            .await
            .unwrap_or_else(|_| panic!("{protocol}: the held request is cut"))
            .unwrap();
        assert_cut(status, &text, 0);
        let rest = tokio::time::timeout(CUT_DEADLINE, streaming.chunk())
            .await
            .unwrap_or_else(|_| panic!("{protocol}: the streaming body is cut"));
        assert!(rest.is_err(), "{protocol}: body after the cut: {rest:?}");
        a.state.release.notify_waiters();
    }
}
