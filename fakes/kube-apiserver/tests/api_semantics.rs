//! API conventions over raw HTTPS: authentication (see auth_rbac.rs for RBAC), Status errors, optimistic concurrency,
//! namespaces, selectors, pagination, status subresource, generation, finalizers, graceful Pod
//! deletion, watch resume/410/initial events, and the state file (server-side apply:
//! server_side_apply.rs).

mod api_support;

use std::time::{Duration, Instant};

use api_support::http::Http;
use api_support::{start, start_in, DEADLINE};
use serde_json::{json, Value};

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "web"}}, "data": {"k": "v"}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn auth_errors_and_optimistic_concurrency() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    // A wrong bearer token is 401; no credentials at all is the anonymous user, whom RBAC
    // refuses (403), as on a real server with its default --anonymous-auth=true.
    let resp = server
        .http()
        .get(format!("{}/api/v1/namespaces", server.url))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let status: Value = resp.json().await.unwrap();
    assert_eq!(
        (
            status["kind"].as_str(),
            status["reason"].as_str(),
            status["code"].as_i64()
        ),
        (Some("Status"), Some("Unauthorized"), Some(401))
    );
    let resp = server
        .http()
        .get(format!("{}/api/v1/namespaces", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let status: Value = resp.json().await.unwrap();
    assert_eq!(
        status["message"],
        r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#
    );

    let (code, status) = http.get(&format!("{CMS}/missing")).await;
    assert_eq!(code, 404);
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], "configmaps \"missing\" not found");

    let (code, created) = http.post(CMS, cm("a")).await;
    assert_eq!(code, 201);
    assert!(created["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    assert!(created["metadata"]["creationTimestamp"].is_string());
    let (code, status) = http.post(CMS, cm("a")).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );

    let (code, status) = http.post(CMS, cm("Not_Valid")).await;
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.name");

    let (code, status) = http
        .post("/api/v1/namespaces/nope/configmaps", cm("b"))
        .await;
    assert_eq!(code, 404, "{status}");
    assert_eq!(status["message"], "namespaces \"nope\" not found");

    // Stale resourceVersion: 409 Conflict; current one: accepted, with a new resourceVersion.
    let mut stale = created.clone();
    stale["data"]["k"] = json!("v2");
    let (code, updated) = http.put(&format!("{CMS}/a"), stale.clone()).await;
    assert_eq!(code, 200);
    let (code, status) = http.put(&format!("{CMS}/a"), stale).await;
    assert_eq!((code, status["reason"].as_str()), (409, Some("Conflict")));
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&updated) > rv(&created));

    // generateName.
    let (code, generated) = http
        .post(
            CMS,
            json!({"metadata": {"generateName": "gen-"}, "data": {}}),
        )
        .await;
    assert_eq!(code, 201);
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn selectors_and_pagination() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web"), ("d", "cache")] {
        let mut obj = cm(name);
        obj["metadata"]["labels"]["app"] = json!(app);
        assert_eq!(http.post(CMS, obj).await.0, 201);
    }
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, list) = http
        .get(&format!("{CMS}?labelSelector=app%20in%20(web,cache)"))
        .await;
    assert_eq!(names(&list), ["a", "c", "d"]);
    let (_, list) = http.get(&format!("{CMS}?labelSelector=app!%3Dweb")).await;
    assert_eq!(names(&list), ["b", "d"]);
    let (_, list) = http
        .get(&format!("{CMS}?fieldSelector=metadata.name%3Db"))
        .await;
    assert_eq!(names(&list), ["b"]);
    assert_eq!(list["kind"], "ConfigMapList");

    let (_, page1) = http.get(&format!("{CMS}?limit=3")).await;
    assert_eq!(names(&page1), ["a", "b", "c"]);
    assert_eq!(page1["metadata"]["remainingItemCount"], 1);
    let token = page1["metadata"]["continue"]
        .as_str()
        .expect("continue token");
    let (_, page2) = http
        .get(&format!("{CMS}?limit=3&continue={}", urlencode(token)))
        .await;
    assert_eq!(names(&page2), ["d"]);
    assert!(page2["metadata"].get("continue").is_none());

    // With a selector the server cannot know how many remain: `remainingItemCount` is unset
    // (ListMeta), while the continue token still pages through the matches.
    let (_, page1) = http
        .get(&format!("{CMS}?labelSelector=app%3Dweb&limit=1"))
        .await;
    assert_eq!(names(&page1), ["a"]);
    assert!(page1["metadata"].get("remainingItemCount").is_none());
    let token = page1["metadata"]["continue"]
        .as_str()
        .expect("continue token with a selector");
    let (_, page2) = http
        .get(&format!(
            "{CMS}?labelSelector=app%3Dweb&limit=1&continue={}",
            urlencode(token)
        ))
        .await;
    assert_eq!(names(&page2), ["c"]);
    assert!(page2["metadata"].get("continue").is_none());
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn status_subresource_generation_and_finalizers() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let ings = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "finalizers": ["example.com/keep"]},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
    let (code, created) = http.post(ings, ing).await;
    assert_eq!(code, 201);
    assert_eq!(
        created["status"],
        json!({"loadBalancer": {}}),
        "create ignores status"
    );
    assert_eq!(created["metadata"]["generation"], 1);

    let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.9"}]}}, "spec": {"ingressClassName": "x"}});
    let (code, after) = http
        .patch(
            &format!("{ings}/web/status"),
            patch,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        after["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.9"
    );
    assert!(
        after["spec"].get("ingressClassName").is_none(),
        "status writes ignore spec"
    );
    assert_eq!(after["metadata"]["generation"], 1);

    let (_, after) = http
        .patch(
            &format!("{ings}/web"),
            json!({"metadata": {"labels": {"a": "b"}}}),
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(
        after["metadata"]["generation"], 1,
        "metadata changes keep generation"
    );
    let (_, after) = http
        .patch(
            &format!("{ings}/web"),
            json!({"spec": {"ingressClassName": "gce"}, "status": null}),
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(
        after["metadata"]["generation"], 2,
        "spec changes bump generation"
    );
    assert_eq!(
        after["status"]["loadBalancer"]["ingress"][0]["ip"], "127.0.0.9",
        "main writes ignore status"
    );

    let (code, deleting) = http.delete(&format!("{ings}/web"), None).await;
    assert_eq!(code, 200);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = http.get(&format!("{ings}/web")).await;
    assert_eq!(code, 200, "finalizer holds the object");
    let add = json!({"metadata": {"finalizers": ["example.com/keep", "example.com/new"]}});
    let (code, status) = http
        .patch(&format!("{ings}/web"), add, "application/merge-patch+json")
        .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let (code, _) = http
        .patch(
            &format!("{ings}/web"),
            json!({"metadata": {"finalizers": null}}),
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = http.get(&format!("{ings}/web")).await;
    assert_eq!(code, 404, "removing the last finalizer deletes the object");
}

#[tokio::test]
async fn pods_run_by_a_kubelet_terminate_gracefully() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, node: Option<&str>| {
        let mut p = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 30}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    };
    assert_eq!(http.post(pods, pod("bound", Some("local"))).await.0, 201);
    assert_eq!(http.post(pods, pod("unbound", None)).await.0, 201);

    let (_, terminating) = http.delete(&format!("{pods}/bound"), Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}))).await;
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 30);
    let (code, still) = http.get(&format!("{pods}/bound")).await;
    assert_eq!(code, 200);
    assert!(still["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = http
        .delete(&format!("{pods}/bound?gracePeriodSeconds=0"), None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        http.get(&format!("{pods}/bound")).await.0,
        404,
        "the kubelet's grace-0 delete removes it"
    );

    http.delete(&format!("{pods}/unbound"), None).await;
    assert_eq!(
        http.get(&format!("{pods}/unbound")).await.0,
        404,
        "unscheduled Pods go at once"
    );
}

#[tokio::test]
async fn watch_resumes_expires_and_sends_initial_events() {
    let server = start(&["--no-local-controllers", "--watch-history", "5"]);
    let http = Http::new(&server);
    let (_, first) = http.post(CMS, cm("w1")).await;
    let rv1 = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    http.post(CMS, cm("w2")).await;
    http.delete(&format!("{CMS}/w1"), None).await;

    let events = http
        .watch_until(&format!("{CMS}?watch=1&resourceVersion={rv1}"), |e| {
            e.len() >= 2
        })
        .await;
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [("ADDED", "w2"), ("DELETED", "w1")]);

    // Watching one object by its path starts with that object only.
    let one = http
        .watch_until(
            "/api/v1/watch/namespaces/default/configmaps/w2?timeoutSeconds=1",
            |_| false,
        )
        .await;
    let names: Vec<&str> = one
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w2"]);

    let events = http.watch_until(&format!("{CMS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"), |e| e.iter().any(|e| e["type"] == "BOOKMARK")).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "w2");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    for i in 0..8 {
        http.post(CMS, cm(&format!("x{i}"))).await;
    }
    let events = http
        .watch_until(&format!("{CMS}?watch=1&resourceVersion={rv1}"), |e| {
            !e.is_empty()
        })
        .await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");

    // Live events with a label selector; a label change out of the selector is a DELETED.
    let live_path = format!(
        "{CMS}?watch=1&labelSelector=app%3Dweb&resourceVersion={}",
        server_rv(&http).await
    );
    let watcher = http.watch_until(&live_path, |e| e.len() >= 2);
    // The watch resumes from a resourceVersion, so it sees these changes whenever it starts.
    let change = async {
        http.post(CMS, cm("live")).await;
        http.patch(
            &format!("{CMS}/live"),
            json!({"metadata": {"labels": {"app": "other"}}}),
            "application/merge-patch+json",
        )
        .await;
    };
    let (events, _) = tokio::join!(watcher, change);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "DELETED"]);
}

async fn server_rv(http: &Http<'_>) -> String {
    http.get(CMS).await.1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn namespace_deletion_removes_contents_and_state_file_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let state_arg = state.to_str().unwrap().to_string();
    let server = start_in(
        tempfile::tempdir().unwrap(),
        &["--no-local-controllers", "--state-file", &state_arg],
    );
    let http = Http::new(&server);
    assert_eq!(
        http.post("/api/v1/namespaces", json!({"metadata": {"name": "team"}}))
            .await
            .0,
        201
    );
    assert_eq!(
        http.post("/api/v1/namespaces/team/configmaps", cm("gone"))
            .await
            .0,
        201
    );
    assert_eq!(http.post(CMS, cm("kept")).await.0, 201);
    http.delete("/api/v1/namespaces/team", None).await;
    assert_eq!(
        http.get("/api/v1/namespaces/team/configmaps/gone").await.0,
        404
    );
    let deadline = Instant::now() + DEADLINE;
    while http.get("/api/v1/namespaces/team").await.0 != 404 {
        assert!(Instant::now() < deadline, "namespace never removed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rv_before: u64 = server_rv(&http).await.parse().unwrap();
    // The state file is written shortly after changes: wait until it holds the last one.
    while !std::fs::read_to_string(&state)
        .unwrap_or_default()
        .contains(&format!("\"resourceVersion\":{rv_before}"))
    {
        assert!(Instant::now() < deadline, "state file never written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(http);
    drop(server);

    let server = start_in(
        tempfile::tempdir().unwrap(),
        &["--no-local-controllers", "--state-file", &state_arg],
    );
    let http = Http::new(&server);
    let (code, kept) = http.get(&format!("{CMS}/kept")).await;
    assert_eq!(code, 200);
    assert_eq!(kept["data"]["k"], "v");
    let (_, created) = http.post(CMS, cm("after")).await;
    let rv_after: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        rv_after > rv_before,
        "resourceVersions continue after a restart"
    );
}

/// Metadata sent through `/status` is kept for built-in kinds (their status strategies reset
/// only `spec`; glbc sends its finalizer and annotations this way, issue 32) and dropped for
/// custom resources (whose status strategy copies the stored object); Pods keep their stored
/// `ownerReferences`.
#[tokio::test]
async fn status_writes_keep_metadata_per_kind() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let ings = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}});
    assert_eq!(http.post(ings, ing).await.0, 201);
    let patch = json!({"metadata": {"annotations": {"ingress.kubernetes.io/url-map": "k8s2-um"},
        "finalizers": ["networking.gke.io/ingress-finalizer-V2"]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}});
    let (code, after) = http
        .patch(
            &format!("{ings}/web/status"),
            patch,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(
        after["metadata"]["annotations"]["ingress.kubernetes.io/url-map"], "k8s2-um",
        "annotations written through /status are kept"
    );
    assert_eq!(
        after["metadata"]["finalizers"],
        json!(["networking.gke.io/ingress-finalizer-V2"])
    );

    let svcs = "/api/v1/namespaces/default/services";
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    assert_eq!(http.post(svcs, svc).await.0, 201);
    let patch = json!({"metadata": {"annotations": {"cloud.google.com/neg-status": "{}"}},
        "spec": {"selector": {"app": "other"}}});
    let (code, after) = http
        .patch(
            &format!("{svcs}/web/status"),
            patch,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(
        after["metadata"]["annotations"]["cloud.google.com/neg-status"],
        "{}"
    );
    assert_eq!(
        after["spec"]["selector"],
        json!({"app": "web"}),
        "spec is reset"
    );

    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let (code, body) = http.post(pods, pod).await;
    assert_eq!(code, 201, "{body}");
    let patch = json!({"metadata": {"labels": {"l": "v"}, "ownerReferences": null},
        "status": {"phase": "Running"}});
    let (code, after) = http
        .patch(
            &format!("{pods}/p/status"),
            patch,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["metadata"]["labels"]["l"], "v");
    assert_eq!(after["metadata"]["ownerReferences"][0]["uid"], "u1");

    let crd: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(api_support::fixture("backendconfig-crd.yaml")).expect("fixture"),
    )
    .expect("CRD fixture");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, body) = http.post(crds, crd).await;
    assert_eq!(code, 201, "{body}");
    let bcs = "/apis/cloud.google.com/v1/namespaces/default/backendconfigs";
    let bc = json!({"apiVersion": "cloud.google.com/v1", "kind": "BackendConfig",
        "metadata": {"name": "bc"}, "spec": {}});
    api_support::poll_async("BackendConfig served", || {
        let (http, bc) = (&http, bc.clone());
        async move { (http.post(bcs, bc).await.0 == 201).then_some(()) }
    })
    .await;
    let patch = json!({"metadata": {"annotations": {"a": "b"}}, "status": {"x": "y"}});
    let (code, after) = http
        .patch(
            &format!("{bcs}/bc/status"),
            patch,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200, "{after}");
    assert!(
        after["metadata"].get("annotations").is_none(),
        "custom resources keep only status: {after}"
    );
}
