//! kube-rs against the server: a reflector and a `Controller` over Ingresses (watching Pods
//! too) that adds and removes a finalizer with kube-runtime's `finalizer` helper, writes Ingress
//! status through the status subresource with server-side apply, merge-patches Pod status, and
//! records Events with `Recorder` (events.k8s.io/v1) that `kubectl describe` shows.

mod api_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api_support::{poll_async, start};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};
use serde_json::json;

const FINALIZER: &str = "example.com/test-finalizer";

struct Ctx {
    client: kube::Client,
    recorder: Recorder,
    reconciles: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

async fn reconcile(ing: Arc<Ingress>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let api: Api<Ingress> =
        Api::namespaced(ctx.client.clone(), &ing.namespace().unwrap_or_default());
    let reference = ing.object_ref(&());
    finalizer(&api, FINALIZER, ing, |event| async {
        match event {
            Finalizer::Apply(ing) => {
                let status = json!({
                    "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                    "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.10"}]}},
                });
                api.patch_status(
                    &ing.name_any(),
                    &PatchParams::apply("test-controller").force(),
                    &Patch::Apply(&status),
                )
                .await?;
                let ev = Event {
                    type_: EventType::Normal,
                    reason: "Sync".into(),
                    note: Some("Scheduled for sync".into()),
                    action: "Sync".into(),
                    secondary: None,
                };
                ctx.recorder.publish(&ev, &reference).await?;
                Ok(Action::await_change())
            }
            Finalizer::Cleanup(_) => {
                let ev = Event {
                    type_: EventType::Normal,
                    reason: "Delete".into(),
                    note: Some("cleaned up".into()),
                    action: "Delete".into(),
                    secondary: None,
                };
                ctx.recorder.publish(&ev, &reference).await?;
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

fn error_policy(_: Arc<Ingress>, error: &ReconcileError, _: Arc<Ctx>) -> Action {
    eprintln!("reconcile failed: {error:?}");
    Action::requeue(Duration::from_millis(200))
}

/// Collects WARN and ERROR events that kube's crates log (watcher errors, relists, decode
/// failures) and counts all their events, to show the capture works.
#[derive(Clone, Default)]
struct KubeWarnings(Arc<std::sync::Mutex<Vec<String>>>, Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for KubeWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if meta.target().starts_with("kube") {
            self.1.fetch_add(1, Ordering::SeqCst);
            if *meta.level() <= tracing::Level::WARN {
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("{} {}", meta.target(), meta.name()));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_finalizer_status_and_events() {
    use tracing_subscriber::layer::SubscriberExt;
    let warnings = KubeWarnings::default();
    // Global: the controller's tasks run on every worker thread.
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(warnings.clone()))
        .expect("one subscriber per test binary");
    let server = start(&["--no-local-controllers"]);
    let client = server.client().await;
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // A reflector keeps a local cache of Pods.
    let (pod_reader, pod_writer) = reflector::store::<Pod>();
    let pod_stream = reflector(
        pod_writer,
        watcher(pods.clone(), watcher::Config::default()),
    )
    .default_backoff()
    .applied_objects();
    tokio::spawn(pod_stream.for_each(|r| async move {
        if let Err(e) = r {
            eprintln!("pod watcher error: {e:?}");
        }
    }));

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "test-controller".into(),
                instance: None,
            },
        ),
        reconciles: AtomicUsize::new(0),
    });
    let controller = Controller::new(ingresses.clone(), watcher::Config::default())
        .watches(pods.clone(), watcher::Config::default(), |pod: Pod| {
            pod.labels().get("ingress").map(|name| {
                ObjectRef::<Ingress>::new(name).within(&pod.namespace().unwrap_or_default())
            })
        })
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    let ing: Ingress = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
    }))
    .unwrap();
    ingresses
        .create(&PostParams::default(), &ing)
        .await
        .expect("create ingress");

    let synced = poll_async("finalizer and status", || async {
        let ing = ingresses.get("web").await.ok()?;
        let ip = ing
            .status
            .as_ref()?
            .load_balancer
            .as_ref()?
            .ingress
            .as_ref()?
            .first()?
            .ip
            .clone()?;
        (ing.finalizers().contains(&FINALIZER.to_string()) && ip == "127.0.0.10").then_some(ing)
    })
    .await;
    assert_eq!(
        synced.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );
    let managers: Vec<String> = synced
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.contains(&"test-controller".to_string()),
        "{managers:?}"
    );

    // A Pod labelled for the Ingress triggers a reconcile through `watches`; its status is
    // merge-patched through the status subresource; the reflector sees it.
    let before = ctx.reconciles.load(Ordering::SeqCst);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "labels": {"ingress": "web"}},
        "spec": {"containers": [{"name": "c", "image": "echo"}],
                 "readinessGates": [{"conditionType": "cloud.google.com/load-balancer-neg-ready"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    poll_async("a reconcile caused by the Pod", || async {
        (ctx.reconciles.load(Ordering::SeqCst) > before).then_some(())
    })
    .await;
    let patch = json!({"status": {"conditions": [{"type": "cloud.google.com/load-balancer-neg-ready", "status": "True"}]}});
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("merge patch pod status");
    let cached = poll_async("the reflector to see the Pod condition", || {
        let reader = pod_reader.clone();
        async move {
            let pod = reader.get(&ObjectRef::new("web-1").within("default"))?;
            let conds = pod.status.as_ref()?.conditions.clone()?;
            conds
                .iter()
                .any(|c| {
                    c.type_ == "cloud.google.com/load-balancer-neg-ready" && c.status == "True"
                })
                .then_some(pod)
        }
    })
    .await;
    assert_eq!(
        cached.spec.as_ref().unwrap().containers[0].name,
        "c",
        "status patch left the spec alone"
    );

    // The Event written by Recorder (events.k8s.io/v1) shows in kubectl describe (core/v1).
    let describe = poll_async("kubectl describe to show the Sync event", || async {
        let (ok, out, _) = server.kubectl(&["describe", "ingress", "web"]);
        (ok && out.contains("Scheduled for sync") && out.contains("test-controller")).then_some(out)
    })
    .await;
    assert!(describe.contains("127.0.0.10"), "{describe}");

    // Deleting: the finalizer holds the object until cleanup removes it.
    ingresses
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete ingress");
    poll_async("the Ingress to be gone after cleanup", || async {
        ingresses.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.contains(&"Delete".to_string()), "{reasons:?}");
    controller.abort();
    assert!(
        warnings.1.load(Ordering::SeqCst) > 0,
        "kube's log events are captured"
    );
    let warned = warnings.0.lock().unwrap().clone();
    assert!(warned.is_empty(), "kube-runtime warned: {warned:?}");
}

#[tokio::test]
async fn leases_for_leader_election() {
    use k8s_openapi::api::coordination::v1::Lease;
    let server = start(&["--no-local-controllers"]);
    let leases: Api<Lease> = Api::namespaced(server.client().await, "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "gclb-operator"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let mut takeover = created.clone();
    takeover.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = leases
        .replace("gclb-operator", &PostParams::default(), &takeover)
        .await
        .expect("replace");
    assert_eq!(replaced.spec.unwrap().holder_identity.as_deref(), Some("b"));
    // A second candidate that read the old version loses the race with 409 Conflict.
    let mut stale = created;
    stale.spec.as_mut().unwrap().holder_identity = Some("c".into());
    match leases
        .replace("gclb-operator", &PostParams::default(), &stale)
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409),
        other => panic!("expected a conflict, got {other:?}"),
    }
}
