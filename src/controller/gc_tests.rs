//! Garbage collection beside syncs, against a scripted Compute API ([`Context::gc_now`]): the
//! project-wide lists hold no lock, so a sync goes ahead while they are in flight, and only what
//! the lists returned may be deleted. Requests are ordered by what the server has received,
//! never by sleeping; the waits have deadlines against hangs, not bounds on speed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::reconcile::{cleanup, sync_load_balancer};
use super::stores::stores_holding;
use super::{Config, Context, ControllerMetrics};
use crate::compute::test_support::{compute_for, done_op};
use crate::sync::ingress::sync_backends;
use crate::sync::test_support::{backend_named, list, other_lists_empty, G};
use crate::sync::Changes;
use crate::translate::namer;
use crate::translate::{ClusterSnapshot, DesiredIngress, ObjectKey};

const NEGS: &str = "/compute/v1/projects/p1/aggregated/networkEndpointGroups";

/// A context over `server` whose stores hold no Ingress: nothing is live, so every backend of
/// this cluster is stale. Its Kubernetes client is never called.
async fn context(server: &MockServer) -> Arc<Context> {
    // kube's client needs a process-wide rustls provider, as main.rs installs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let config = Config {
        translate: crate::translate::test_support::config(),
        resync_period: Duration::from_secs(3600),
        workers: 4,
        status_address: None,
        principal: None,
    };
    Arc::new(Context::new(
        kube::Client::try_from(kube).unwrap(),
        Arc::new(compute_for(server).await),
        stores_holding(&ClusterSnapshot::default()),
        config,
        ControllerMetrics::default(),
    ))
}

/// The name of this cluster's backend for Service `default/<service>:80`.
fn backend_name(ctx: &Context, service: &str) -> String {
    let t = &ctx.config.translate;
    namer::backend(t.mode.scheme(), &t.gke_uid, "default", service, 80)
}

/// Every list not scripted otherwise is empty (the aggregated NEG list too); every insert (and
/// NEG attach) and every DELETE succeeds at once.
async fn the_rest_empty_and_writes_succeed(server: &MockServer) {
    Mock::given(method("GET"))
        .and(path(NEGS))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": {}})))
        .with_priority(20)
        .mount(server)
        .await;
    other_lists_empty(server).await;
    let zonal = json!({"kind": "compute#operation", "name": "op-z", "status": "DONE",
        "zone": "https://x/compute/v1/projects/p1/zones/z1"});
    Mock::given(method("POST"))
        .and(path_regex("/zones/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(zonal))
        .with_priority(3)
        .mount(server)
        .await;
    for verb in ["POST", "DELETE"] {
        Mock::given(method(verb))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op")))
            .with_priority(4)
            .mount(server)
            .await;
    }
}

/// Ingress `default/<name>`.
fn ingress(name: &str) -> Ingress {
    let mut ingress = Ingress::default();
    ingress.metadata.name = Some(name.into());
    ingress.metadata.namespace = Some("default".into());
    ingress
}

/// Waits until the server has received `verb path`; panics after 30 s (against a hang).
async fn until_received(server: &MockServer, verb: &str, at: &str) {
    let seen = async {
        loop {
            let requests = server.received_requests().await.unwrap();
            if requests
                .iter()
                .any(|r| r.method.as_str() == verb && r.url.path() == at)
            {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), seen)
        .await
        .unwrap_or_else(|_| panic!("{verb} {at} never arrived"));
}

/// The paths of the requests with `verb` the server received.
async fn received(server: &MockServer, verb: &str) -> Vec<String> {
    let requests = server.received_requests().await.unwrap();
    requests
        .iter()
        .filter(|r| r.method.as_str() == verb)
        .map(|r| r.url.path().to_string())
        .collect()
}

/// A GC run whose NEG list is still unanswered does not hold up a sync: the sync's inserts go
/// out and it finishes while the run is still listing. (Fails when the run takes the exclusive
/// lock before it lists: the sync then waits on the shared side for the whole list.)
#[tokio::test]
async fn a_sync_goes_ahead_while_the_gc_lists() {
    let server = MockServer::start().await;
    // Answered after an hour: in flight for the whole test. The sync reads its zone's NEG list,
    // never this aggregated one.
    Mock::given(method("GET"))
        .and(path(NEGS))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"items": {}}))
                .set_delay(Duration::from_secs(3600)),
        )
        .mount(&server)
        .await;
    the_rest_empty_and_writes_succeed(&server).await;
    let ctx = context(&server).await;
    let gc = {
        let ctx = ctx.clone();
        tokio::spawn(async move { ctx.gc_now(&mut Changes::new()).await })
    };
    until_received(&server, "GET", NEGS).await;

    let name = backend_name(&ctx, "web");
    let desired = DesiredIngress {
        backends: BTreeMap::from([(name.clone(), backend_named(&name))]),
        ..DesiredIngress::default()
    };
    let ingress = ingress("web");
    let (namer, key) = (ctx.namer(&ingress), ObjectKey::of(&ingress));
    let mut changes = Changes::new();
    let sync = sync_load_balancer(&ctx, &key, &namer, &desired, &mut changes);
    tokio::time::timeout(Duration::from_secs(30), sync)
        .await
        .expect("the sync waited for the GC's lists")
        .unwrap();
    let inserts = received(&server, "POST").await;
    assert!(
        inserts.contains(&format!("{G}/backendServices")),
        "{inserts:?}"
    );
    assert!(
        changes.iter().any(|c| c.name == name),
        "the sync created its backend: {changes:?}"
    );
    assert!(!gc.is_finished(), "the GC run is still listing");
    gc.abort();
}

/// A backend a sync creates after the GC's lists is not deleted by that run, even though no
/// live Ingress wants it; a listed stale backend is. (Fails when the run decides from lists
/// taken under the lock, as it did before: the new backend is then listed and stale.)
#[tokio::test]
async fn a_backend_created_after_the_gc_lists_is_not_deleted() {
    let server = MockServer::start().await;
    let ctx = context(&server).await;
    let (old, new) = (backend_name(&ctx, "old"), backend_name(&ctx, "new"));
    for collection in ["backendServices", "healthChecks"] {
        list(
            &server,
            &format!("{G}/{collection}"),
            json!([{ "name": old }]),
            Some(1),
        )
        .await;
    }
    the_rest_empty_and_writes_succeed(&server).await;

    let candidates = ctx.gc_candidates().await.unwrap();
    // A sync (whose Ingress is gone again by the time GC decides) creates `new`.
    let backends = BTreeMap::from([(new.clone(), backend_named(&new))]);
    sync_backends(&ctx.compute, &ctx.locks, &backends, &mut Changes::new())
        .await
        .unwrap();
    assert!(received(&server, "POST")
        .await
        .contains(&format!("{G}/backendServices")));
    let mut changes = Changes::new();
    ctx.gc_locked(&candidates, &mut changes).await.unwrap();

    let deletes = received(&server, "DELETE").await;
    for collection in ["backendServices", "healthChecks"] {
        assert!(
            deletes.contains(&format!("{G}/{collection}/{old}")),
            "the listed stale {collection} stays: {deletes:?}"
        );
        assert!(
            !deletes.contains(&format!("{G}/{collection}/{new}")),
            "{collection} created after the lists was deleted: {deletes:?}"
        );
    }
}

/// A deleted Ingress's cleanup deletes its own frontend while a sync of another Ingress holds
/// the shared side of the GC lock: its names are its own, so it needs no exclusive lock (only
/// the GC of shared backends that follows does). (Fails when the cleanup takes the exclusive
/// lock first: no DELETE arrives while the sync holds the shared side.)
#[tokio::test]
async fn a_cleanup_deletes_its_frontend_while_a_sync_holds_the_shared_lock() {
    let server = MockServer::start().await;
    let ctx = context(&server).await;
    let old = ingress("old");
    let rule = ctx.namer(&old).http_forwarding_rule();
    let body = json!({"name": rule, "IPAddress": "127.130.0.9", "portRange": "80-80",
        "target": "projects/p1/global/targetHttpProxies/tp"});
    list(
        &server,
        &format!("{G}/forwardingRules"),
        json!([body]),
        None,
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/forwardingRules/{rule}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&server)
        .await;
    the_rest_empty_and_writes_succeed(&server).await;

    let sync_in_flight = ctx.gc_lock.read().await;
    let cleanup = {
        let ctx = ctx.clone();
        tokio::spawn(async move { cleanup(&old, &ctx).await })
    };
    until_received(&server, "DELETE", &format!("{G}/forwardingRules/{rule}")).await;
    // The GC after it waits for the sync, then the cleanup finishes.
    drop(sync_in_flight);
    tokio::time::timeout(Duration::from_secs(30), cleanup)
        .await
        .expect("the cleanup finishes once the sync is done")
        .unwrap()
        .unwrap();
}
