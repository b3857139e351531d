//! One Ingress as a graph (`sync::ingress`): what runs at once, what waits for what, and the
//! reads a resync makes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::{count, forbid_mutations, list, other_lists_empty, G};
use crate::compute::test_support::{compute_for, done_op, not_found};
use crate::sync::ingress::{self, BackendLocks};
use crate::sync::test_support::backend_named;
use crate::sync::Changes;
use crate::translate::namer::FrontendNamer;
use crate::translate::{DesiredBackend, DesiredFrontend};

/// What the scripted API saw, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, what: &str) {
        self.0.lock().unwrap().push(what.to_string());
    }
    fn seen(&self, what: &str) -> bool {
        self.0.lock().unwrap().iter().any(|w| w == what)
    }
    fn position(&self, what: &str) -> usize {
        let log = self.0.lock().unwrap();
        log.iter()
            .position(|w| w == what)
            .unwrap_or_else(|| panic!("{what} never happened: {log:?}"))
    }
}

/// Answers with `body` and logs `event`.
struct Logged(Log, &'static str, serde_json::Value);

impl wiremock::Respond for Logged {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0.push(self.1);
        ResponseTemplate::new(200).set_body_json(self.2.clone())
    }
}

/// An Operation (`op`) that finishes only once `awaited` has been logged (or, after 200 polls,
/// anyway, logging `"{done} before {awaited}"`): a sync that waits for this Operation before it
/// sends `awaited` fails the test instead of hanging. Logs `done` when it answers DONE.
struct DoneAfter {
    log: Log,
    op: &'static str,
    awaited: &'static str,
    done: &'static str,
    polls: std::sync::atomic::AtomicUsize,
}

impl DoneAfter {
    fn new(log: &Log, op: &'static str, awaited: &'static str, done: &'static str) -> Self {
        Self {
            log: log.clone(),
            op,
            awaited,
            done,
            polls: Default::default(),
        }
    }
}

impl wiremock::Respond for DoneAfter {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let polls = self.polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let status = if self.log.seen(self.awaited) {
            self.log.push(self.done);
            "DONE"
        } else if polls > 200 {
            self.log
                .push(&format!("{} before {}", self.done, self.awaited));
            "DONE"
        } else {
            "RUNNING"
        };
        ResponseTemplate::new(200).set_body_json(operation(self.op, status))
    }
}

/// A global Operation `name` in `status` (`RUNNING`, `DONE`).
fn operation(name: &str, status: &str) -> serde_json::Value {
    json!({"kind": "compute#operation", "name": name, "status": status})
}

/// Scripts an insert whose Operation finishes late: `POST {insert}` (once) logs `inserted` and
/// answers the RUNNING Operation `op`, whose `wait` answers as [`DoneAfter`] (`awaited`, `done`).
async fn insert_done_after(
    server: &MockServer,
    log: &Log,
    insert: String,
    inserted: &'static str,
    (op, awaited, done): (&'static str, &'static str, &'static str),
) {
    Mock::given(method("POST"))
        .and(path(insert))
        .respond_with(Logged(log.clone(), inserted, operation(op, "RUNNING")))
        .expect(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/operations/{op}/wait")))
        .respond_with(DoneAfter::new(log, op, awaited, done))
        .mount(server)
        .await;
}

fn backend() -> DesiredBackend {
    backend_named("b1")
}

/// A new backend: its health check and NEG are sent together (the NEG insert arrives while the
/// health check's Operation is still running); the backend service waits for both, the
/// endpoints only for their NEG; one list per collection and no GET before the first write.
#[tokio::test]
async fn a_new_backend_sends_its_health_check_and_neg_at_once_then_the_rest() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    let log = Log::default();
    let z = "/compute/v1/projects/p1/zones/z1";
    insert_done_after(
        &server,
        &log,
        format!("{G}/healthChecks"),
        "health check insert",
        ("op-hc", "neg insert", "health check done"),
    )
    .await;
    let zonal_done = json!({"kind": "compute#operation", "name": "op-z", "status": "DONE",
        "zone": "https://x/compute/v1/projects/p1/zones/z1"});
    for (p, event) in [
        (format!("{z}/networkEndpointGroups"), "neg insert"),
        (
            format!("{z}/networkEndpointGroups/b1/attachNetworkEndpoints"),
            "attach",
        ),
    ] {
        Mock::given(method("POST"))
            .and(path(p))
            .respond_with(Logged(log.clone(), event, zonal_done.clone()))
            .expect(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path(format!("{G}/backendServices")))
        .respond_with(Logged(
            log.clone(),
            "backend service insert",
            done_op("op-bs"),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let backends = BTreeMap::from([("b1".to_string(), backend())]);
    let mut changes = Changes::new();
    ingress::sync_backends(&compute, &BackendLocks::default(), &backends, &mut changes)
        .await
        .unwrap();
    assert!(
        !log.seen("health check done before neg insert"),
        "{:?}",
        log.0.lock().unwrap()
    );
    let at = |w| log.position(w);
    assert!(at("neg insert") < at("health check done"));
    assert!(at("health check done") < at("backend service insert"));
    assert!(at("neg insert") < at("attach"));
    let events: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        events,
        [
            "HealthCheck \"b1\" created",
            "NetworkEndpointGroup \"b1\" created",
            "BackendService \"b1\" created"
        ]
    );
    assert_eq!(
        count(&server, "GET", "/(healthChecks|backendServices)$").await,
        2
    );
    assert_eq!(count(&server, "GET", "/networkEndpointGroups$").await, 1);
    assert_eq!(
        count(&server, "GET", "/b1$").await,
        0,
        "no GET of one resource"
    );
    assert_eq!(
        count(&server, "POST", "/listNetworkEndpoints$").await,
        0,
        "a new NEG holds no endpoints: nothing to list"
    );
    // Synced again: everything is known, nothing is sent.
    let before = server.received_requests().await.unwrap().len();
    let mut changes = Changes::new();
    ingress::sync_backends(&compute, &BackendLocks::default(), &backends, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), before);
}

/// A one-rule (HTTP) frontend routing everything to `b1`.
pub(super) fn frontend(namer: &FrontendNamer) -> DesiredFrontend {
    let (um, tp, fr) = (
        namer.url_map(),
        namer.target_http_proxy(),
        namer.http_forwarding_rule(),
    );
    DesiredFrontend {
        url_map: Some(
            model::UrlMap::new()
                .set_name(um.clone())
                .set_default_service("projects/p1/global/backendServices/b1"),
        ),
        target_http_proxy: Some(
            model::TargetHttpProxy::new()
                .set_name(tp.clone())
                .set_url_map(format!("projects/p1/global/urlMaps/{um}")),
        ),
        http_forwarding_rule: Some(
            model::ForwardingRule::new()
                .set_name(fr)
                .set_port_range("80")
                .set_target(format!("projects/p1/global/targetHttpProxies/{tp}")),
        ),
        ..DesiredFrontend::default()
    }
}

/// The lists of a frontend in sync on the server (full URLs, server defaults); `address`: with
/// its managed address (else the rule's IP is ephemeral).
pub(super) async fn frontend_in_sync(server: &MockServer, namer: &FrontendNamer, address: bool) {
    let full = "https://compute.googleapis.com/compute/v1/projects/p1/global";
    let (um, tp, fr) = (
        namer.url_map(),
        namer.target_http_proxy(),
        namer.http_forwarding_rule(),
    );
    let rule = json!({
        "name": fr, "IPAddress": "127.130.0.9", "portRange": "80-80", "IPProtocol": "TCP",
        "target": format!("{full}/targetHttpProxies/{tp}")
    });
    list(
        server,
        &format!("{G}/urlMaps"),
        json!([{"name": um, "fingerprint": "YWJj",
        "defaultService": format!("{full}/backendServices/b1")}]),
        Some(1),
    )
    .await;
    list(
        server,
        &format!("{G}/targetHttpProxies"),
        json!([{"name": tp, "urlMap": format!("{full}/urlMaps/{um}")}]),
        Some(1),
    )
    .await;
    list(
        server,
        &format!("{G}/forwardingRules"),
        json!([rule.clone()]),
        Some(1),
    )
    .await;
    let addresses = if address {
        json!([{"name": fr, "address": "127.130.0.9", "status": "IN_USE"}])
    } else {
        json!([])
    };
    list(server, &format!("{G}/addresses"), addresses, Some(1)).await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/forwardingRules/{fr}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(rule))
        .named("GET the rule")
        .mount(server)
        .await;
}

/// A resync of a frontend in sync reads one list per collection once (shared with every other
/// Ingress) and, per sync, only its forwarding rule; it writes nothing, not even for the absent
/// HTTPS parts.
#[tokio::test]
async fn an_in_sync_frontend_resync_reads_only_its_forwarding_rule() {
    let server = MockServer::start().await;
    forbid_mutations(&server).await;
    let namer = FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "abcd1234",
        "ks-uid",
        "default",
        "web",
    );
    frontend_in_sync(&server, &namer, true).await;
    other_lists_empty(&server).await;
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(40)
        .expect(0)
        .named("any other GET")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    for round in 1..=3 {
        let mut changes = Changes::new();
        let status =
            ingress::sync_frontend(&compute, &namer, &frontend(&namer), None, &mut changes)
                .await
                .unwrap();
        assert_eq!(status.ip.as_deref(), Some("127.130.0.9"));
        assert!(changes.is_empty(), "{changes:?}");
        let rule = format!("/forwardingRules/{}$", namer.http_forwarding_rule());
        assert_eq!(count(&server, "GET", &rule).await, round);
    }
}

/// A new frontend: the address (its insert, then the read of the IP the API chose) runs beside
/// the URL map and the target proxy, and only the forwarding rule waits for it: the proxy is
/// sent while the address's Operation is still running (issue 26, the chain is URL map -> proxy
/// -> rule; the address is not on it).
#[tokio::test]
async fn the_proxy_does_not_wait_for_the_address() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    let namer = FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "abcd1234",
        "ks-uid",
        "default",
        "web",
    );
    let fr = namer.http_forwarding_rule();
    let log = Log::default();
    for (collection, event) in [
        ("urlMaps", "url map insert"),
        ("targetHttpProxies", "proxy insert"),
        ("forwardingRules", "rule insert"),
    ] {
        Mock::given(method("POST"))
            .and(path(format!("{G}/{collection}")))
            .respond_with(Logged(log.clone(), event, done_op("op-x")))
            .expect(1)
            .mount(&server)
            .await;
    }
    insert_done_after(
        &server,
        &log,
        format!("{G}/addresses"),
        "address insert",
        ("op-ad", "proxy insert", "address done"),
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/addresses/{fr}")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": fr, "address": "127.130.0.7"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let status = ingress::sync_frontend(&compute, &namer, &frontend(&namer), None, &mut changes)
        .await
        .unwrap();
    assert_eq!(status.ip.as_deref(), Some("127.130.0.7"));
    let at = |w| log.position(w);
    assert!(
        !log.seen("address done before proxy insert"),
        "the proxy waited for the address: {:?}",
        log.0.lock().unwrap()
    );
    assert!(at("url map insert") < at("proxy insert"));
    assert!(at("proxy insert") < at("address done"));
    assert!(at("address done") < at("rule insert"));
}

/// A forwarding rule deleted behind the operator's back (its GET answers 404) is put back at
/// the next sync, on the same IP, even though the cache still knew it.
#[tokio::test]
async fn a_rule_deleted_behind_our_back_is_recreated_at_the_next_sync() {
    let server = MockServer::start().await;
    let namer = FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "abcd1234",
        "ks-uid",
        "default",
        "web",
    );
    let fr = namer.http_forwarding_rule();
    Mock::given(method("GET"))
        .and(path(format!("{G}/forwardingRules/{fr}")))
        .respond_with(not_found())
        .with_priority(1)
        .mount(&server)
        .await;
    frontend_in_sync(&server, &namer, true).await;
    other_lists_empty(&server).await;
    // The refetch of the rest of the frontend: still there.
    for p in [
        format!("{G}/urlMaps/{}", namer.url_map()),
        format!("{G}/targetHttpProxies/{}", namer.target_http_proxy()),
        format!("{G}/addresses/{fr}"),
    ] {
        let name = p.rsplit('/').next().unwrap().to_string();
        let body = if p.contains("/addresses/") {
            json!({"name": name, "address": "127.130.0.9"})
        } else if p.contains("/targetHttpProxies/") {
            json!({"name": name, "urlMap": format!("projects/p1/global/urlMaps/{}", namer.url_map())})
        } else {
            json!({"name": name, "fingerprint": "YWJj", "defaultService": "projects/p1/global/backendServices/b1"})
        };
        Mock::given(method("GET"))
            .and(path(p))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .expect(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(40)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(wiremock::matchers::body_partial_json(
            json!({"name": fr, "IPAddress": "127.130.0.9"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-fr")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let status = ingress::sync_frontend(&compute, &namer, &frontend(&namer), None, &mut changes)
        .await
        .unwrap();
    assert_eq!(status.ip.as_deref(), Some("127.130.0.9"));
    let events: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(events, [format!("ForwardingRule {fr:?} created")]);
}

/// Deleting an Ingress's frontend sends a DELETE only for what exists: most Ingresses have no
/// HTTPS part, redirect URL map or managed address, and a DELETE of something absent is still
/// a write against the project's quota.
#[tokio::test]
async fn delete_frontend_deletes_only_what_exists() {
    let server = MockServer::start().await;
    let namer = FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "uid12345",
        "kube-system-uid",
        "shop",
        "web",
    );
    let present = [
        ("forwardingRules", namer.http_forwarding_rule()),
        ("targetHttpProxies", namer.target_http_proxy()),
        ("urlMaps", namer.url_map()),
    ];
    for (collection, name) in &present {
        list(
            &server,
            &format!("{G}/{collection}"),
            json!([{"name": name}]),
            Some(1),
        )
        .await;
        Mock::given(method("DELETE"))
            .and(path(format!("{G}/{collection}/{name}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
            .expect(1)
            .named(format!("DELETE {name}"))
            .mount(&server)
            .await;
    }
    // The rule checked before it goes.
    Mock::given(method("GET"))
        .and(path(format!(
            "{G}/forwardingRules/{}",
            namer.http_forwarding_rule()
        )))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": namer.http_forwarding_rule()})),
        )
        .expect(1)
        .mount(&server)
        .await;
    other_lists_empty(&server).await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(20)
        .expect(0)
        .named("DELETE of an absent resource")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    ingress::delete_frontend(&compute, &namer, &mut changes)
        .await
        .unwrap();
    let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(done.len(), 3, "{done:?}");
    assert!(
        done[0].starts_with("ForwardingRule"),
        "users first: {done:?}"
    );
    assert!(done[2].starts_with("UrlMap"), "{done:?}");
}
