//! The stores' readiness, the snapshot they build, and the trigger streams.

use super::*;

fn empty<K>() -> (Store<K>, reflector::store::Writer<K>)
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    reflector::store()
}

/// Several tasks wait at once (the reconcile workers, the readiness gate controller, the
/// "stores synced" logger); each must be released once the last store lists. Fails with
/// waiters calling `Store::wait_until_ready` directly (single waker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_concurrent_waiter_is_released_when_the_stores_sync() {
    let (ingresses, mut w_ing) = empty::<Ingress>();
    let (services, mut w_svc) = empty::<Service>();
    let (endpoint_slices, mut w_eps) = empty::<EndpointSlice>();
    let (pods, mut w_pod) = empty::<PodRecord>();
    let (ingress_classes, mut w_cls) = empty::<IngressClass>();
    let (secrets, mut w_sec) = empty::<Secret>();
    let (backend_configs, mut w_bc) = empty::<BackendConfig>();
    let (frontend_configs, mut w_fc) = empty::<FrontendConfig>();
    let (managed_certificates, mut w_mc) = empty::<ManagedCertificate>();
    let (tls_certificate_delegations, mut w_td) = empty::<TLSCertificateDelegation>();
    let (nodes, mut w_node) = empty::<NodeMeta>();
    let by_namespace = ByNamespace {
        ingresses: NamespaceIndex::new(ingresses.clone()),
        services: NamespaceIndex::new(services.clone()),
        endpoint_slices: NamespaceIndex::new(endpoint_slices.clone()),
        pods: NamespaceIndex::new(pods.clone()),
        secrets: NamespaceIndex::new(secrets.clone()),
    };
    let indexes = by_namespace.clone();
    let stores = Stores {
        ingresses,
        services,
        endpoint_slices,
        pods: pods.clone(),
        ingress_classes,
        secrets,
        backend_configs,
        frontend_configs,
        managed_certificates,
        tls_certificate_delegations,
        nodes,
        zones: watch::channel(BTreeSet::new()).1,
        by_namespace,
        ready: Arc::new(tokio::sync::watch::channel(false).0),
    }
    .watch_first_lists();
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let s = stores.clone();
        waiters.push(tokio::spawn(async move { s.wait_until_ready().await }));
    }
    // A foreign task polling one store directly steals that store's single waker.
    let thief = tokio::spawn(async move { pods.wait_until_ready().await.is_ok() });
    tokio::task::yield_now().await;
    assert!(!stores.is_ready(), "ready before any list");
    w_ing.apply_watcher_event(&watcher::Event::InitDone);
    w_svc.apply_watcher_event(&watcher::Event::InitDone);
    w_eps.apply_watcher_event(&watcher::Event::InitDone);
    w_pod.apply_watcher_event(&watcher::Event::InitDone);
    w_cls.apply_watcher_event(&watcher::Event::InitDone);
    w_sec.apply_watcher_event(&watcher::Event::InitDone);
    w_bc.apply_watcher_event(&watcher::Event::InitDone);
    w_fc.apply_watcher_event(&watcher::Event::InitDone);
    w_mc.apply_watcher_event(&watcher::Event::InitDone);
    w_td.apply_watcher_event(&watcher::Event::InitDone);
    w_node.apply_watcher_event(&watcher::Event::InitDone);
    // Every store has listed, but the namespace indexes have not followed yet: a reconcile
    // starting now would read empty namespaces. (Without the index waits, readiness comes
    // within one first-list re-poll, 200 ms; with them, never until the indexes follow.)
    let early = tokio::time::timeout(10 * REPOLL, stores.wait_until_ready()).await;
    assert!(early.is_err(), "ready before the indexes followed");
    indexes.ingresses.apply(&watcher::Event::InitDone);
    indexes.services.apply(&watcher::Event::InitDone);
    indexes.endpoint_slices.apply(&watcher::Event::InitDone);
    indexes.pods.apply(&watcher::Event::InitDone);
    indexes.secrets.apply(&watcher::Event::InitDone);
    let deadline = Duration::from_secs(30);
    for w in waiters {
        tokio::time::timeout(deadline, w)
            .await
            .expect("a waiter was never woken")
            .unwrap();
    }
    assert!(stores.is_ready());
    // The thief itself may never be woken (the single-waker behaviour this module works
    // around: the first-list task re-polls the same store and can take the wake-up).
    thief.abort();
}
