//! Garbage collection against a scripted Compute API (`sync::gc::list_candidates` then
//! `delete_garbage`): which names it deletes, which it leaves, and what an in-use or failed
//! delete does to the rest.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::{list, other_lists_empty, G};
use crate::compute::test_support::{compute_for, done_op};
use crate::sync::gc::{delete_garbage, list_candidates, LiveSet};
use crate::sync::{Changes, SyncError};
use crate::translate::namer::{self, FrontendNamer, Scheme};

const UID: &str = "abcd1234";
const NEGS: &str = "/compute/v1/projects/p1/aggregated/networkEndpointGroups";

/// Answers every DELETE with a finished Operation and remembers its path.
#[derive(Clone, Default)]
struct Deletes(Arc<Mutex<BTreeSet<String>>>);

impl wiremock::Respond for Deletes {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0
            .lock()
            .unwrap()
            .insert(request.url.path().to_string());
        ResponseTemplate::new(200).set_body_json(done_op("op-gc"))
    }
}

fn namer(name: &str) -> FrontendNamer {
    FrontendNamer::new(Scheme::Gke, UID, "kube-system-uid", "default", name)
}

fn backend(service: &str) -> String {
    namer::backend(Scheme::Gke, UID, "default", service, 80)
}

/// One live Ingress (`web`), one deleted (`old`), one backend each, a whitelist policy of
/// each, and a user's resource in every collection.
struct World {
    live: LiveSet,
    web: FrontendNamer,
    old: FrontendNamer,
    kept: String,
    gone: String,
}

async fn world(server: &MockServer) -> World {
    let (web, old) = (namer("web"), namer("old"));
    let (kept, gone) = (backend("web"), backend("old"));
    let policies = namer::frontend_prefix(Scheme::Gke, "sp", UID);
    let mut live = LiveSet {
        scheme: Scheme::Gke,
        cluster_uid: UID.into(),
        gke_uid: UID.into(),
        security_policy_prefix: policies.clone(),
        ..LiveSet::default()
    };
    live.frontends.insert(web.lb_name().to_string());
    live.certificate_prefixes.push(web.ssl_certificate_prefix());
    live.backends.insert(kept.clone());
    live.negs.insert(("zone-a".into(), kept.clone()));
    live.security_policies.insert(format!("{policies}web"));
    let named = |names: Vec<String>| {
        json!(names
            .into_iter()
            .map(|n| json!({"name": n}))
            .collect::<Vec<_>>())
    };
    let lists = [
        (
            "forwardingRules",
            vec![
                web.http_forwarding_rule(),
                old.http_forwarding_rule(),
                old.https_forwarding_rule(),
                "user-rule".into(),
            ],
        ),
        (
            "addresses",
            vec![old.http_forwarding_rule(), "user-ip".into()],
        ),
        (
            "targetHttpProxies",
            vec![web.target_http_proxy(), old.target_http_proxy()],
        ),
        (
            "targetHttpsProxies",
            vec![old.target_https_proxy(), "user-proxy".into()],
        ),
        (
            "urlMaps",
            vec![
                web.url_map(),
                old.url_map(),
                old.redirect_url_map(),
                "user-map".into(),
            ],
        ),
        (
            "sslCertificates",
            vec![
                web.ssl_certificate(b"pem"),
                old.ssl_certificate(b"pem"),
                "user-cert".into(),
            ],
        ),
        (
            "backendServices",
            vec![kept.clone(), gone.clone(), "user-service".into()],
        ),
        (
            "healthChecks",
            vec![kept.clone(), gone.clone(), "user-check".into()],
        ),
        (
            "securityPolicies",
            vec![
                format!("{policies}web"),
                format!("{policies}old"),
                "user-policy".into(),
            ],
        ),
    ];
    for (collection, names) in lists {
        list(server, &format!("{G}/{collection}"), named(names), None).await;
    }
    let negs = |names: &[&str]| json!({"networkEndpointGroups": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()});
    Mock::given(method("GET"))
        .and(path(NEGS))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": {
            "zones/zone-a": negs(&[&kept, &gone, "user-neg"]),
            "zones/zone-b": negs(&[&kept]),
        }})))
        .mount(server)
        .await;
    other_lists_empty(server).await;
    World {
        live,
        web,
        old,
        kept,
        gone,
    }
}

/// Answers `verb path` (ahead of every other mock) with a Compute error.
async fn error(
    server: &MockServer,
    verb: &str,
    at: String,
    code: u16,
    message: &str,
    reason: &str,
) {
    let body = json!({"error": {"code": code, "message": message, "errors": [{"reason": reason}]}});
    Mock::given(method(verb))
        .and(path(at))
        .respond_with(ResponseTemplate::new(code).set_body_json(body))
        .with_priority(1)
        .mount(server)
        .await;
}

/// Runs GC with every other DELETE answered by a finished Operation: its result, its changes
/// and the DELETE paths that reached the server.
async fn collect(
    server: &MockServer,
    live: &LiveSet,
) -> (Result<(), SyncError>, Changes, BTreeSet<String>) {
    let deletes = Deletes::default();
    Mock::given(method("DELETE"))
        .respond_with(deletes.clone())
        .with_priority(5)
        .mount(server)
        .await;
    let compute = compute_for(server).await;
    let mut changes = Changes::new();
    let result = match list_candidates(&compute, &live.security_policy_prefix).await {
        Ok(candidates) => delete_garbage(&compute, &candidates, live, &mut changes).await,
        Err(e) => Err(e),
    };
    let seen = deletes.0.lock().unwrap().clone();
    (result, changes, seen)
}

/// Exactly the stale names of this cluster go, the live Ingress's and the user's stay; a URL
/// map still in use is skipped without stopping the phases after it.
#[tokio::test]
async fn garbage_collection_deletes_exactly_the_stale_names() {
    let server = MockServer::start().await;
    let w = world(&server).await;
    let in_use = "The url_map resource is already being used by 'targetHttpProxies/x'";
    let url_map = format!("{G}/urlMaps/{}", w.old.url_map());
    error(
        &server,
        "DELETE",
        url_map,
        400,
        in_use,
        "resourceInUseByAnotherResource",
    )
    .await;
    let (result, changes, seen) = collect(&server, &w.live).await;
    result.unwrap();

    let (old, z) = (&w.old, "/compute/v1/projects/p1/zones");
    let expected: BTreeSet<String> = [
        format!("{G}/forwardingRules/{}", old.http_forwarding_rule()),
        format!("{G}/forwardingRules/{}", old.https_forwarding_rule()),
        format!("{G}/addresses/{}", old.http_forwarding_rule()),
        format!("{G}/targetHttpProxies/{}", old.target_http_proxy()),
        format!("{G}/targetHttpsProxies/{}", old.target_https_proxy()),
        format!("{G}/urlMaps/{}", old.redirect_url_map()),
        format!("{G}/sslCertificates/{}", old.ssl_certificate(b"pem")),
        format!("{G}/backendServices/{}", w.gone),
        format!("{z}/zone-a/networkEndpointGroups/{}", w.gone),
        format!("{z}/zone-b/networkEndpointGroups/{}", w.kept),
        format!("{G}/healthChecks/{}", w.gone),
        format!("{G}/securityPolicies/{}old", w.live.security_policy_prefix),
    ]
    .into();
    assert_eq!(seen, expected);
    // Each deletion is reported once; the URL map in use is not.
    assert_eq!(changes.len(), expected.len(), "{changes:?}");
    let deleted = |c: &crate::sync::Change| c.to_string().ends_with(" deleted");
    assert!(changes.iter().all(deleted), "{changes:?}");
    assert!(
        !changes.iter().any(|c| c.name == w.old.url_map()),
        "{changes:?}"
    );
    assert!(
        !changes.iter().any(|c| c.name.contains(w.web.lb_name())),
        "{changes:?}"
    );
}

/// A delete that fails for another reason than "in use" fails the collection, and the phases
/// after it (here the backends) wait for the next run.
#[tokio::test]
async fn a_failed_delete_fails_the_collection() {
    let server = MockServer::start().await;
    let w = world(&server).await;
    let url_map = format!("{G}/urlMaps/{}", w.old.url_map());
    let denied = "Required 'compute.urlMaps.delete' permission";
    error(&server, "DELETE", url_map, 403, denied, "forbidden").await;
    let (result, _, seen) = collect(&server, &w.live).await;
    let err = result.unwrap_err();
    assert!(err.to_string().contains(&w.old.url_map()), "{err}");
    let redirect = format!("{G}/urlMaps/{}", w.old.redirect_url_map());
    assert!(seen.contains(&redirect), "{seen:?}");
    assert!(
        !seen.iter().any(|p| p.contains("/backendServices/")),
        "{seen:?}"
    );
}

/// A project where the operator may not list security policies has none of ours: GC finishes
/// everything else and deletes no policy.
#[tokio::test]
async fn security_policies_that_may_not_be_listed_are_none_of_ours() {
    let server = MockServer::start().await;
    let denied = "Required 'compute.securityPolicies.list' permission";
    error(
        &server,
        "GET",
        format!("{G}/securityPolicies"),
        403,
        denied,
        "forbidden",
    )
    .await;
    let w = world(&server).await;
    let (result, _, seen) = collect(&server, &w.live).await;
    result.unwrap();
    let check = format!("{G}/healthChecks/{}", w.gone);
    assert!(seen.contains(&check), "{seen:?}");
    assert!(
        !seen.iter().any(|p| p.contains("/securityPolicies/")),
        "{seen:?}"
    );
}

/// The regional half: exactly the stale regional names of this cluster go (`old`'s frontend,
/// certificate and backend), in `r1`; the live Ingress's and the user's stay.
#[tokio::test]
async fn regional_garbage_collection_deletes_exactly_the_stale_names_of_the_region() {
    use crate::sync::regional_ingress::{delete_regional_garbage, list_regional_candidates};

    let server = MockServer::start().await;
    let (web, old) = (namer("web"), namer("old"));
    let (kept, gone) = (backend("web"), backend("old"));
    let mut live = LiveSet {
        scheme: Scheme::Gke,
        cluster_uid: UID.into(),
        gke_uid: UID.into(),
        ..LiveSet::default()
    };
    live.frontends.insert(web.lb_name().to_string());
    live.certificate_prefixes.push(web.ssl_certificate_prefix());
    live.backends.insert(kept.clone());
    let r = "/compute/v1/projects/p1/regions/r1";
    let lists = [
        (
            "forwardingRules",
            vec![
                web.http_forwarding_rule(),
                old.http_forwarding_rule(),
                old.https_forwarding_rule(),
                "user-rule".into(),
            ],
        ),
        (
            "targetHttpProxies",
            vec![web.target_http_proxy(), old.target_http_proxy()],
        ),
        (
            "targetHttpsProxies",
            vec![old.target_https_proxy(), "user-proxy".into()],
        ),
        (
            "urlMaps",
            vec![web.url_map(), old.url_map(), "user-map".into()],
        ),
        (
            "sslCertificates",
            vec![
                web.ssl_certificate(b"pem"),
                old.ssl_certificate(b"pem"),
                "user-cert".into(),
            ],
        ),
        (
            "backendServices",
            vec![kept.clone(), gone.clone(), "user-service".into()],
        ),
        (
            "healthChecks",
            vec![kept.clone(), gone.clone(), "user-check".into()],
        ),
    ];
    for (collection, names) in lists {
        let items: Vec<_> = names.into_iter().map(|n| json!({"name": n})).collect();
        list(&server, &format!("{r}/{collection}"), json!(items), Some(1)).await;
    }
    let deletes = Deletes::default();
    Mock::given(method("DELETE"))
        .respond_with(deletes.clone())
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let candidates = list_regional_candidates(&compute, "r1").await.unwrap();
    assert_eq!(
        candidates.url_maps,
        [web.url_map(), old.url_map(), "user-map".to_string()]
    );
    let mut changes = Changes::new();
    delete_regional_garbage(&compute, "r1", &candidates, &live, &mut changes)
        .await
        .unwrap();
    let seen = deletes.0.lock().unwrap().clone();
    let want: BTreeSet<String> = [
        format!("forwardingRules/{}", old.http_forwarding_rule()),
        format!("forwardingRules/{}", old.https_forwarding_rule()),
        format!("targetHttpProxies/{}", old.target_http_proxy()),
        format!("targetHttpsProxies/{}", old.target_https_proxy()),
        format!("urlMaps/{}", old.url_map()),
        format!("sslCertificates/{}", old.ssl_certificate(b"pem")),
        format!("backendServices/{gone}"),
        format!("healthChecks/{gone}"),
    ]
    .into_iter()
    .map(|p| format!("{r}/{p}"))
    .collect();
    assert_eq!(seen, want);
    assert_eq!(changes.len(), want.len(), "{changes:?}");
}

/// Only a 403 makes the security policies "none of ours"; any other failed listing fails the
/// collection, which deletes nothing it has not listed.
#[tokio::test]
async fn a_security_policy_listing_that_fails_otherwise_fails_the_collection() {
    let server = MockServer::start().await;
    error(
        &server,
        "GET",
        format!("{G}/securityPolicies"),
        400,
        "Invalid value for field 'filter'",
        "invalid",
    )
    .await;
    let w = world(&server).await;
    let (result, _, seen) = collect(&server, &w.live).await;
    let err = result.unwrap_err();
    assert!(
        err.to_string().contains("Invalid value for field 'filter'"),
        "{err}"
    );
    assert!(seen.is_empty(), "{seen:?}");
}
