//! An Ingress's frontend (`sync::ingress::sync_frontend`) against a scripted Compute API: which
//! IP it keeps, and what it repairs when the API shows a change made behind its back.

use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::graph_tests::{frontend, frontend_in_sync};
use super::{forbid_mutations, other_lists_empty, G};
use crate::compute::test_support::{compute_for, done_op, not_found};
use crate::sync::ingress;
use crate::sync::Changes;
use crate::translate::namer::{FrontendNamer, Scheme};

fn namer(scheme: Scheme) -> FrontendNamer {
    FrontendNamer::new(scheme, "abcd1234", "ks-uid", "default", "web")
}

/// A one-rule Ingress with an ephemeral IP and no managed address: in GKE's scheme the IP is
/// adopted as it is (GKE reserves an address only for Ingresses with both rules, ingress-gce
/// `checkStaticIP`), so nothing is written; in the operator's own scheme the rule's IP is
/// promoted to the managed address, so it survives the rule.
#[tokio::test]
async fn a_one_rule_ingress_ip_is_promoted_in_the_own_scheme_only() {
    for scheme in [Scheme::Gke, Scheme::Own] {
        let namer = namer(scheme);
        let server = MockServer::start().await;
        frontend_in_sync(&server, &namer, false).await;
        other_lists_empty(&server).await;
        let managed = namer.http_forwarding_rule();
        if scheme == Scheme::Gke {
            forbid_mutations(&server).await;
        } else {
            Mock::given(method("POST"))
                .and(path(format!("{G}/addresses")))
                .and(body_partial_json(
                    json!({"name": managed, "address": "127.130.0.9"}),
                ))
                .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-ad")))
                .expect(1)
                .mount(&server)
                .await;
        }
        let compute = compute_for(&server).await;
        let mut changes = Changes::new();
        let status =
            ingress::sync_frontend(&compute, &namer, &frontend(&namer), None, &mut changes)
                .await
                .unwrap();
        assert_eq!(status.ip.as_deref(), Some("127.130.0.9"), "{scheme:?}");
        let events: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        if scheme == Scheme::Gke {
            assert_eq!(status.managed_address, None);
            assert!(events.is_empty(), "{events:?}");
        } else {
            assert_eq!(status.managed_address, Some(managed.clone()));
            assert_eq!(events, [format!("Address {managed:?} created")]);
        }
    }
}

/// A forwarding rule pointed at another proxy behind the operator's back (same IP) makes the
/// next sync read the whole frontend again, so the proxy, moved to another URL map as well, is
/// put back too, not only the rule.
#[tokio::test]
async fn a_rule_retargeted_behind_our_back_has_its_whole_frontend_repaired() {
    let server = MockServer::start().await;
    let namer = namer(Scheme::Gke);
    let (fr, tp, um) = (
        namer.http_forwarding_rule(),
        namer.target_http_proxy(),
        namer.url_map(),
    );
    frontend_in_sync(&server, &namer, true).await;
    other_lists_empty(&server).await;
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(40)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let sync = || async {
        let mut changes = Changes::new();
        let status =
            ingress::sync_frontend(&compute, &namer, &frontend(&namer), None, &mut changes)
                .await
                .unwrap();
        assert_eq!(status.ip.as_deref(), Some("127.130.0.9"));
        changes.iter().map(|c| c.to_string()).collect::<Vec<_>>()
    };
    // In sync: the state cache is filled from the lists and nothing is written.
    assert_eq!(sync().await, Vec::<String>::new());

    // Then someone points the rule at another proxy and our proxy at another URL map.
    let reads = [
        (
            format!("{G}/forwardingRules/{fr}"),
            json!({"name": fr, "IPAddress": "127.130.0.9", "portRange": "80-80",
                "IPProtocol": "TCP", "target": "projects/p1/global/targetHttpProxies/someone-elses"}),
        ),
        (
            format!("{G}/urlMaps/{um}"),
            json!({"name": um, "fingerprint": "YWJj",
                "defaultService": "projects/p1/global/backendServices/b1"}),
        ),
        (
            format!("{G}/targetHttpProxies/{tp}"),
            json!({"name": tp, "urlMap": "projects/p1/global/urlMaps/someone-elses"}),
        ),
        (
            format!("{G}/addresses/{fr}"),
            json!({"name": fr, "address": "127.130.0.9"}),
        ),
    ];
    for (p, body) in reads {
        Mock::given(method("GET"))
            .and(path(p))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .with_priority(1)
            .mount(&server)
            .await;
    }
    for (p, body) in [
        (
            // setUrlMap has no `global/` in its path (Compute API reference).
            format!("/compute/v1/projects/p1/targetHttpProxies/{tp}/setUrlMap"),
            json!({"urlMap": format!("projects/p1/global/urlMaps/{um}")}),
        ),
        (
            format!("{G}/forwardingRules/{fr}/setTarget"),
            json!({"target": format!("projects/p1/global/targetHttpProxies/{tp}")}),
        ),
    ] {
        Mock::given(method("POST"))
            .and(path(p))
            .and(body_partial_json(body))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-set")))
            .expect(1)
            .mount(&server)
            .await;
    }
    assert_eq!(
        sync().await,
        [
            format!("TargetProxy {tp:?} updated"),
            format!("ForwardingRule {fr:?} updated")
        ]
    );
}
