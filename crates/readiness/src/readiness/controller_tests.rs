use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::*;
use crate::readiness::neg::{BackendHealth, EndpointHealth, NegHealthError, NegRef};
use crate::readiness::test_api::{FakeHealth, MockApi, Write};
use crate::readiness::{Config, Context, ReadinessMetrics, StaticLookup, NEG_READINESS_GATE};
use crate::translate::pod::PodRecord;

fn neg(name: &str) -> NegRef {
    NegRef::new("us-central1-a", name)
}

fn pod_json(name: &str, app: &str, ip: &str, age_secs: i64) -> Value {
    let created = Timestamp::now() - SignedDuration::from_secs(age_secs);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "shop", "name": name, "uid": format!("uid-{name}"),
                     "labels": {"app": app},
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()},
        "spec": {"containers": [{"name": "c", "image": "i"}],
                 "readinessGates": [{"conditionType": NEG_READINESS_GATE}]},
        "status": {"podIP": ip, "podIPs": [{"ip": ip}],
                   "conditions": [{"type": "Ready", "status": "False"}]}
    })
}

fn lookup() -> StaticLookup {
    let sel = |app: &str| BTreeMap::from([("app".to_owned(), app.to_owned())]);
    StaticLookup {
        entries: vec![
            ("shop".into(), sel("a"), vec![neg("neg-a")]),
            ("shop".into(), sel("b"), vec![neg("neg-a"), neg("neg-b")]),
        ],
    }
}

fn endpoint(ip: &str, healths: &[(&str, &str)]) -> EndpointHealth {
    EndpointHealth {
        ip_address: ip.to_owned(),
        port: Some(8080),
        healths: healths
            .iter()
            .map(|(bs, st)| BackendHealth {
                backend_service: (*bs).to_owned(),
                health_state: (*st).to_owned(),
            })
            .collect(),
    }
}

fn context(api: &MockApi, health: Arc<FakeHealth>, config: Config) -> Context {
    Context::new(api.client(), health, Arc::new(lookup()), config)
}

fn pods(values: &[Value]) -> Vec<Arc<PodRecord>> {
    values
        .iter()
        .map(|v| Arc::new(serde_json::from_value(v.clone()).unwrap()))
        .collect()
}

fn condition_of(write: &Write) -> &Value {
    &write.body["status"]["conditions"][0]
}

fn patch_for<'a>(patches: &'a [Write], pod: &str) -> Vec<&'a Write> {
    patches
        .iter()
        .filter(|w| w.path == format!("/api/v1/namespaces/shop/pods/{pod}/status"))
        .collect()
}

/// neg-a: every endpoint UNHEALTHY for bs-a. neg-b: p3 listed without health; no backend
/// service health-checks neg-b.
fn scripted_health() -> FakeHealth {
    FakeHealth::new(
        |neg, _| {
            Ok(Some(match neg.name.as_str() {
                "neg-a" => vec![
                    endpoint("127.64.0.1", &[("bs-a", "UNHEALTHY")]),
                    endpoint("127.64.0.2", &[("bs-a", "UNHEALTHY")]),
                    endpoint("127.64.0.3", &[("bs-a", "UNHEALTHY")]),
                ],
                _ => vec![endpoint("127.64.0.3", &[])],
            }))
        },
        BTreeMap::from([(neg("neg-a"), vec!["bs-a".to_owned()])]),
    )
}

#[tokio::test]
async fn one_poll_calls_each_neg_once_and_applies_every_rule() {
    let values = [
        pod_json("p1", "a", "127.64.0.1", 5),
        pod_json("p2", "a", "127.64.0.2", 5),
        pod_json("p3", "b", "127.64.0.3", 5),
        pod_json("p4", "none", "127.64.0.4", 5),
    ];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    let ctx = context(&api, health.clone(), Config::default());
    let mut memory = Memory::default();
    let waiting = pods(&values);

    let errors = poll_once(&ctx, &waiting, &mut memory).await;
    assert_eq!(errors, 0);
    // Three Pods share neg-a, one is also in neg-b: one call per NEG.
    assert_eq!(health.calls(&neg("neg-a")), 1);
    assert_eq!(health.calls(&neg("neg-b")), 1);
    // p3 showed no health in neg-b, so backend services were read once.
    assert_eq!(health.backend_service_calls.load(Ordering::SeqCst), 1);

    let patches = api.patches();
    assert_eq!(patches.len(), 4, "{patches:#?}");
    for w in &patches {
        assert_eq!(w.content_type, "application/strategic-merge-patch+json");
        let conditions = w.body["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1, "only our condition is sent");
        assert_eq!(conditions[0]["type"], NEG_READINESS_GATE);
    }
    for waiting_pod in ["p1", "p2"] {
        let c = condition_of(patch_for(&patches, waiting_pod)[0]);
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "LoadBalancerNegNotReady");
        assert_eq!(
            c["message"],
            "Waiting for pod to become healthy in at least one of the NEG(s): [neg-a]"
        );
    }
    let p3 = condition_of(patch_for(&patches, "p3")[0]);
    assert_eq!(
        (p3["status"].as_str(), p3["reason"].as_str()),
        (Some("True"), Some("LoadBalancerNegWithoutHealthCheck"))
    );
    let p4 = condition_of(patch_for(&patches, "p4")[0]);
    assert_eq!(
        (p4["status"].as_str(), p4["reason"].as_str()),
        (Some("True"), Some("LoadBalancerNegReady"))
    );
    // Events for the two Pods let through, with GKE's reasons.
    let mut reasons: Vec<(String, String)> = api
        .events()
        .iter()
        .map(|e| {
            (
                e.body["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e.body["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        vec![
            (
                "p3".to_owned(),
                "LoadBalancerNegWithoutHealthCheck".to_owned()
            ),
            ("p4".to_owned(), "LoadBalancerNegReady".to_owned()),
        ]
    );

    // A second poll over the same (stale) Pods: one more call per NEG, nothing rewritten.
    poll_once(&ctx, &waiting, &mut memory).await;
    assert_eq!(health.calls(&neg("neg-a")), 2);
    assert_eq!(health.calls(&neg("neg-b")), 2);
    assert_eq!(api.patches().len(), 4);
}

#[tokio::test]
async fn pods_in_no_neg_cost_no_compute_call() {
    let values = [pod_json("p4", "none", "127.64.0.4", 5)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    let ctx = context(&api, health.clone(), Config::default());
    poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    assert_eq!(health.total_calls(), 0);
    assert_eq!(health.backend_service_calls.load(Ordering::SeqCst), 0);
    assert_eq!(api.patches().len(), 1);
}

#[tokio::test]
async fn timeout_lets_the_pod_through_with_a_warning_event() {
    let values = [pod_json("old", "a", "127.64.0.1", 1200)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    let ctx = context(&api, health, Config::default());
    poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    let patches = api.patches();
    let c = condition_of(&patches[0]);
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("LoadBalancerNegTimeout"))
    );
    let events = api.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].body["type"], "Warning");
    assert_eq!(events[0].body["reason"], "LoadBalancerNegTimeout");
}

#[tokio::test]
async fn a_pod_waiting_too_long_gets_one_not_ready_event() {
    let values = [pod_json("slow", "a", "127.64.0.1", 120)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    let config = Config {
        slow_event_after: Duration::from_secs(60),
        ..Config::default()
    };
    let ctx = context(&api, health, config);
    let mut memory = Memory::default();
    let waiting = pods(&values);
    poll_once(&ctx, &waiting, &mut memory).await;
    poll_once(&ctx, &waiting, &mut memory).await;
    let events = api.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].body["type"], "Warning");
    assert_eq!(events[0].body["reason"], "LoadBalancerNegNotReady");
    let note = events[0].body["note"].as_str().unwrap();
    assert!(note.contains("Waiting for pod to become healthy"), "{note}");
    assert!(note.contains("health check"), "{note}");
}

#[tokio::test]
async fn api_errors_are_counted_and_the_pod_keeps_waiting() {
    let values = [pod_json("p1", "a", "127.64.0.1", 5)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(FakeHealth::new(
        |_, _| {
            Err(NegHealthError::Api {
                method: "compute.networkEndpointGroups.listNetworkEndpoints",
                resource: "us-central1-a/neg-a".into(),
                status: Some(503),
                message: "backendError".into(),
            })
        },
        BTreeMap::new(),
    ));
    let ctx = context(&api, health, Config::default());
    let errors = poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    assert_eq!(errors, 1);
    let patches = api.patches();
    assert_eq!(condition_of(&patches[0])["status"], "False");
}

#[tokio::test]
async fn bypass_sets_the_gate_true_without_compute_calls() {
    let values = [pod_json("p1", "a", "127.64.0.1", 5)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    let config = Config {
        bypass: true,
        ..Config::default()
    };
    let ctx = context(&api, health.clone(), config);
    poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    assert_eq!(health.total_calls(), 0);
    let c = condition_of(&api.patches()[0]).clone();
    assert_eq!(c["status"], "True");
    assert!(c["message"].as_str().unwrap().contains("bypass"));
}

/// The whole controller: watch, poll until healthy, patch, stop polling once nothing waits.
#[tokio::test]
async fn run_opens_the_gate_when_the_endpoint_turns_healthy() {
    let values = [
        pod_json("p1", "a", "127.64.0.1", 1),
        // Not gated: never touched.
        {
            let mut v = pod_json("plain", "a", "127.64.0.9", 1);
            v["spec"]["readinessGates"] = json!([]);
            v
        },
    ];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(FakeHealth::new(
        |_, n| {
            let state = if n < 2 { "UNHEALTHY" } else { "HEALTHY" };
            Ok(Some(vec![endpoint("127.64.0.1", &[("bs-a", state)])]))
        },
        BTreeMap::new(),
    ));
    let metrics = Arc::new(ReadinessMetrics::default());
    let config = Config {
        poll_interval: Duration::from_millis(20),
        ..Config::default()
    };
    let ctx = context(&api, health.clone(), config).with_metrics(metrics.clone());
    let task = tokio::spawn(run(ctx));

    let deadline = Instant::now() + Duration::from_secs(60);
    let opened = loop {
        let patches = api.patches();
        let open = patches
            .iter()
            .find(|w| condition_of(w)["status"] == "True")
            .cloned();
        if let Some(w) = open {
            break w;
        }
        assert!(Instant::now() < deadline, "gate never opened: {patches:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(opened.path, "/api/v1/namespaces/shop/pods/p1/status");
    assert_eq!(condition_of(&opened)["reason"], "LoadBalancerNegReady");
    assert!(health.calls(&neg("neg-a")) >= 3);
    assert!(api.patches().iter().all(|w| !w.path.contains("/plain/")));
    // The Event and the latency sample follow the patch.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !api
        .events()
        .iter()
        .any(|e| e.body["reason"] == "LoadBalancerNegReady")
    {
        assert!(Instant::now() < deadline, "no Event recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("readiness_gate_seconds_count{reason=\"LoadBalancerNegReady\"} 1"),
        "{text}"
    );
    task.abort();
}

#[tokio::test]
async fn a_failed_patch_is_retried_next_poll_and_does_not_stop_others() {
    let present = pod_json("p4", "none", "127.64.0.4", 5);
    let ghost = pod_json("ghost", "none", "127.64.0.5", 5);
    // The API only knows p4: patching "ghost" gets 404.
    let api = MockApi::with_pods(vec![present.clone()]);
    let health = Arc::new(scripted_health());
    let ctx = context(&api, health, Config::default());
    let mut memory = Memory::default();
    let waiting = pods(&[ghost, present]);
    poll_once(&ctx, &waiting, &mut memory).await;
    assert_eq!(patch_for(&api.patches(), "p4").len(), 1);
    assert!(memory.written.contains_key("uid-p4"));
    assert!(!memory.written.contains_key("uid-ghost"));
    // Next poll: the ghost is tried again, p4 is not rewritten.
    poll_once(&ctx, &waiting, &mut memory).await;
    assert_eq!(patch_for(&api.patches(), "ghost").len(), 2);
    assert_eq!(patch_for(&api.patches(), "p4").len(), 1);
}

/// The shared-store variant: the Pod store belongs to someone else; the gate still opens.
#[tokio::test]
async fn run_with_pods_uses_a_shared_store() {
    use futures::StreamExt;
    use kube::runtime::{reflector, watcher, WatchStreamExt};

    let api = MockApi::with_pods(vec![pod_json("p1", "a", "127.64.0.1", 1)]);
    let health = Arc::new(FakeHealth::new(
        |_, _| Ok(Some(vec![endpoint("127.64.0.1", &[("bs-a", "HEALTHY")])])),
        BTreeMap::new(),
    ));
    let client = api.client();
    let (store, writer) = reflector::store();
    let watch = reflector::reflector(
        writer,
        watcher(
            kube::Api::<PodRecord>::all(client),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| futures::future::ready(()));
    let watch = tokio::spawn(watch);
    let config = Config {
        poll_interval: Duration::from_millis(20),
        ..Config::default()
    };
    let task = tokio::spawn(run_with_pods(context(&api, health, config), store));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !api
        .patches()
        .iter()
        .any(|w| condition_of(w)["status"] == "True")
    {
        assert!(Instant::now() < deadline, "gate never opened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
    watch.abort();
}

/// A failed `backendServices.list` (asked when an endpoint shows no health at all) counts as an
/// error of the poll, like a failed `listNetworkEndpoints`: the loop then backs off.
#[tokio::test]
async fn a_failed_backend_service_listing_is_counted() {
    // p3 of app b is listed in neg-b without any health: its backend services are asked for.
    let values = [pod_json("p3", "b", "127.64.0.3", 5)];
    let api = MockApi::with_pods(values.to_vec());
    let health = Arc::new(scripted_health());
    health.fail_backend_services.store(true, Ordering::SeqCst);
    let ctx = context(&api, health.clone(), Config::default());
    let errors = poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    assert_eq!(health.backend_service_calls.load(Ordering::SeqCst), 1);
    assert_eq!(errors, 1);
    assert_eq!(condition_of(&api.patches()[0])["status"], "False");
}

/// [`run`]'s own Pod watch wakes the idle loop: a gated Pod created after the loop found none
/// waiting is decided without waiting for any timer.
#[tokio::test]
async fn run_wakes_on_a_gated_pod_created_while_idle() {
    let api = MockApi::with_pods(Vec::new());
    let health = Arc::new(FakeHealth::new(
        |_, _| Ok(Some(vec![endpoint("127.64.0.1", &[("bs-a", "HEALTHY")])])),
        BTreeMap::new(),
    ));
    // A poll interval far past the deadline: only the watch can wake the loop in time.
    let config = Config {
        poll_interval: Duration::from_secs(3600),
        ..Config::default()
    };
    let task = tokio::spawn(run(context(&api, health, config)));
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.watches() == 0 {
        assert!(Instant::now() < deadline, "run never watched Pods");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    api.add_pod(pod_json("p1", "a", "127.64.0.1", 1));
    while !api
        .patches()
        .iter()
        .any(|w| condition_of(w)["status"] == "True")
    {
        assert!(
            Instant::now() < deadline,
            "the new Pod was never decided: {:#?}",
            api.patches()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
}

/// After a failed poll the loop waits at least twice the poll interval (jittered exponential
/// backoff, GKE's error backoff) before it polls again; after a good poll, the interval. Only
/// lower bounds are asserted: a loaded machine can stretch a sleep, never shorten it.
#[tokio::test]
async fn failed_polls_back_off_at_least_twice_the_interval() {
    let values = [pod_json("p1", "a", "127.64.0.1", 1)];
    let api = MockApi::with_pods(values.to_vec());
    let polled_at = Arc::new(std::sync::Mutex::new(Vec::new()));
    let times = polled_at.clone();
    let health = Arc::new(FakeHealth::new(
        move |_, n| {
            times.lock().unwrap().push(Instant::now());
            if n < 2 {
                return Err(NegHealthError::Api {
                    method: "compute.networkEndpointGroups.listNetworkEndpoints",
                    resource: "us-central1-a/neg-a".into(),
                    status: Some(503),
                    message: "backendError".into(),
                });
            }
            // Never healthy: the Pod keeps waiting and is polled again.
            Ok(Some(vec![endpoint("127.64.0.1", &[("bs-a", "UNHEALTHY")])]))
        },
        BTreeMap::new(),
    ));
    let (store, mut writer) = reflector::store::<PodRecord>();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitApply(
        serde_json::from_value(values[0].clone()).unwrap(),
    ));
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let interval = Duration::from_millis(50);
    let config = Config {
        poll_interval: interval,
        max_error_backoff: Duration::from_secs(10),
        ..Config::default()
    };
    let task = tokio::spawn(run_with_pods(context(&api, health, config), store));
    let deadline = Instant::now() + Duration::from_secs(60);
    while polled_at.lock().unwrap().len() < 4 {
        assert!(
            Instant::now() < deadline,
            "polled {:?}",
            polled_at.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let t = polled_at.lock().unwrap().clone();
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    // Polls 0 and 1 fail: each is followed by at least 2x the interval, the second by more.
    assert!(gaps[0] >= interval * 2, "first backoff {gaps:?}");
    assert!(gaps[1] >= interval * 2, "second backoff {gaps:?}");
    // Poll 2 succeeds: the next comes after the interval.
    assert!(gaps[2] >= interval, "after a good poll {gaps:?}");
}

/// Each Compute call of a poll is counted by method and result.
#[tokio::test]
async fn compute_calls_are_counted_by_method_and_result() {
    let values = [
        pod_json("p1", "a", "127.64.0.1", 5),
        pod_json("p3", "b", "127.64.0.3", 5),
    ];
    let api = MockApi::with_pods(values.to_vec());
    let metrics = Arc::new(ReadinessMetrics::default());
    let ctx =
        context(&api, Arc::new(scripted_health()), Config::default()).with_metrics(metrics.clone());
    poll_once(&ctx, &pods(&values), &mut Memory::default()).await;
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let count = |method: &str| {
        text.lines()
            .find(|l| l.contains("compute_calls_total{") && l.contains(method))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    // neg-a and neg-b once each; the backend services once (p3 shows no health in neg-b).
    assert_eq!(
        count("method=\"compute.networkEndpointGroups.listNetworkEndpoints\",result=\"ok\"")
            .as_deref(),
        Some("2"),
        "{text}"
    );
    assert_eq!(
        count("method=\"compute.backendServices.list\",result=\"ok\"").as_deref(),
        Some("1"),
        "{text}"
    );
}
