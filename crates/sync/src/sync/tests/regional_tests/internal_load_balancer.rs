//! An internal load balancer end to end: built in order on its address, taken down users
//! first, and the preconditions (a proxy-only subnet, a firewall that lets it through).

use super::*;

/// Every request a scripted regional API received, in order, as `VERB path`; GETs of regional
/// resources answer 404 (nothing exists yet), writes a finished Operation, DELETEs 404 (gone).
#[derive(Clone, Default)]
struct Recorded(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl wiremock::Respond for Recorded {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let line = format!("{} {}", request.method, request.url.path());
        self.0.lock().unwrap().push(line);
        match request.method.as_str() {
            "GET" | "DELETE" => not_found(),
            _ => ResponseTemplate::new(200).set_body_json(done_op("op")),
        }
    }
}

impl Recorded {
    fn writes(&self) -> Vec<String> {
        let r = "/compute/v1/projects/p1/";
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| !l.starts_with("GET"))
            .map(|l| l.replacen(r, "", 1))
            .collect()
    }
}

/// A whole internal load balancer: backends, then the frontend in dependency order, both
/// forwarding rules on the reserved address; an Ingress that drops HTTPS then deletes its HTTPS
/// rule and proxy, and deleting the frontend deletes all of it, users first.
#[tokio::test]
async fn an_internal_load_balancer_is_built_in_order_on_its_address_and_taken_down_users_first() {
    use crate::sync::ingress::BackendLocks;
    use crate::sync::test_support::backend_named;
    use crate::translate::namer::{FrontendNamer, Scheme};
    use crate::translate::regional_address::ResolvedAddress;
    use crate::translate::DesiredIngress;

    let server = MockServer::start().await;
    let namer = FrontendNamer::new(Scheme::Gke, "abcd1234", "kube-system-uid", "default", "web");
    let r = "/compute/v1/projects/p1/regions/r1";
    // The HTTP rule reads back the address the API gave it.
    Mock::given(method("GET"))
        .and(path(format!(
            "{r}/forwardingRules/{}",
            namer.http_forwarding_rule()
        )))
        .respond_with(not_found())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!(
            "{r}/forwardingRules/{}",
            namer.http_forwarding_rule()
        )))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"IPAddress": "10.0.0.7"})))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    // The certificate it keeps is the region's only one of this Ingress.
    Mock::given(method("GET"))
        .and(path(format!("{r}/sslCertificates")))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"items": [{"name": namer.ssl_certificate(b"pem")}, {"name": "user-cert"}]}),
        ))
        .mount(&server)
        .await;
    super::super::test_support::other_lists_empty(&server).await;
    let recorded = Recorded::default();
    Mock::given(wiremock::matchers::any())
        .respond_with(recorded.clone())
        .with_priority(40)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;

    let um = format!("projects/p1/regions/r1/urlMaps/{}", namer.url_map());
    let mut desired = DesiredIngress {
        region: Some("r1".into()),
        ..DesiredIngress::default()
    };
    desired.backends.insert("b1".into(), backend_named("b1"));
    let f = &mut desired.frontend;
    f.url_map = Some(
        model::UrlMap::new()
            .set_name(namer.url_map())
            .set_default_service("b1"),
    );
    f.target_http_proxy = Some(
        model::TargetHttpProxy::new()
            .set_name(namer.target_http_proxy())
            .set_url_map(&um),
    );
    f.http_forwarding_rule = Some(
        model::ForwardingRule::new()
            .set_name(namer.http_forwarding_rule())
            .set_port_range("80"),
    );
    f.ssl_certificates = vec![model::SslCertificate::new().set_name(namer.ssl_certificate(b"pem"))];
    f.target_https_proxy = Some(
        model::TargetHttpsProxy::new()
            .set_name(namer.target_https_proxy())
            .set_url_map(&um),
    );
    f.https_forwarding_rule = Some(
        model::ForwardingRule::new()
            .set_name(namer.https_forwarding_rule())
            .set_port_range("443"),
    );
    let address = ResolvedAddress {
        ip: "10.0.0.7".into(),
        network_tier: None,
    };
    let locks = BackendLocks::default();
    let mut changes = Changes::new();
    let status = regional_ingress::sync_internal(
        &compute,
        &locks,
        &namer,
        &desired,
        Some(&address),
        &mut changes,
    )
    .await
    .unwrap();
    assert_eq!(status.ip.as_deref(), Some("10.0.0.7"));
    let writes = recorded.writes();
    let at = |w: &str| {
        writes
            .iter()
            .position(|x| x == w)
            .unwrap_or_else(|| panic!("no {w} in {writes:#?}"))
    };
    let hc = at("POST regions/r1/healthChecks");
    let neg = at("POST zones/z1/networkEndpointGroups");
    let bs = at("POST regions/r1/backendServices");
    let map = at("POST regions/r1/urlMaps");
    let cert = at("POST regions/r1/sslCertificates");
    let tp = at("POST regions/r1/targetHttpProxies");
    let ts = at("POST regions/r1/targetHttpsProxies");
    let rules: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| *w == "POST regions/r1/forwardingRules")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(rules.len(), 2, "{writes:#?}");
    assert!(
        hc < bs && neg < bs && bs < map,
        "backends before the URL map: {writes:#?}"
    );
    assert!(
        map < tp && map < ts && cert < ts,
        "the URL map and certificate before the proxies"
    );
    assert!(
        tp < rules[0] && ts < rules[0],
        "the proxies before the rules: {writes:#?}"
    );
    assert!(
        writes.iter().all(|w| !w.starts_with("DELETE")),
        "nothing deleted while both rules are wanted: {writes:#?}"
    );

    // Both rules asked for the reserved address.
    let bodies: Vec<serde_json::Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|q| q.method.as_str() == "POST" && q.url.path() == format!("{r}/forwardingRules"))
        .map(|q| serde_json::from_slice(&q.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies.iter().all(|b| b["IPAddress"] == "10.0.0.7"),
        "{bodies:#?}"
    );

    // HTTPS dropped: its rule and proxy are deleted, rule first.
    recorded.0.lock().unwrap().clear();
    desired.frontend.https_forwarding_rule = None;
    desired.frontend.target_https_proxy = None;
    regional_ingress::sync_internal(
        &compute,
        &locks,
        &namer,
        &desired,
        Some(&address),
        &mut changes,
    )
    .await
    .unwrap();
    let deletes: Vec<String> = recorded
        .writes()
        .into_iter()
        .filter(|w| w.starts_with("DELETE"))
        .collect();
    assert_eq!(
        deletes,
        [
            format!(
                "DELETE regions/r1/forwardingRules/{}",
                namer.https_forwarding_rule()
            ),
            format!(
                "DELETE regions/r1/targetHttpsProxies/{}",
                namer.target_https_proxy()
            ),
        ]
    );

    // The whole frontend, users first.
    recorded.0.lock().unwrap().clear();
    regional_ingress::delete_internal_frontend(&compute, "r1", &namer, &mut changes)
        .await
        .unwrap();
    assert_eq!(
        recorded.writes(),
        [
            format!(
                "DELETE regions/r1/forwardingRules/{}",
                namer.http_forwarding_rule()
            ),
            format!(
                "DELETE regions/r1/forwardingRules/{}",
                namer.https_forwarding_rule()
            ),
            format!(
                "DELETE regions/r1/targetHttpProxies/{}",
                namer.target_http_proxy()
            ),
            format!(
                "DELETE regions/r1/targetHttpsProxies/{}",
                namer.target_https_proxy()
            ),
            format!("DELETE regions/r1/urlMaps/{}", namer.url_map()),
            // The regional external class's HTTP-to-HTTPS redirect map, if it had one.
            format!("DELETE regions/r1/urlMaps/{}", namer.redirect_url_map()),
            // Its certificates (by prefix), not the user's.
            format!(
                "DELETE regions/r1/sslCertificates/{}",
                namer.ssl_certificate(b"pem")
            ),
        ]
    );
}

/// Before an internal load balancer: no active proxy-only subnet in the region is an error
/// naming the command that makes one; a firewall that does not admit the subnet's range to the
/// Pods' ports is a warning naming the rule to add; one that does is nothing.
#[tokio::test]
async fn preconditions_need_a_proxy_only_subnet_and_warn_about_a_firewall_that_blocks_it() {
    use crate::sync::SyncError;
    use crate::translate::TranslateConfig;

    let net = "https://www.googleapis.com/compute/v1/projects/p1/global/networks/default";
    let subnets = |items: serde_json::Value| {
        Mock::given(method("GET"))
            .and(path("/compute/v1/projects/p1/regions/r1/subnetworks"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "items": items })))
    };
    let config = TranslateConfig::new("p1", "default", &["r1-a"], "c", "uid");

    let none = MockServer::start().await;
    subnets(json!([{"name": "nodes", "network": net, "ipCidrRange": "10.0.0.0/20"}]))
        .mount(&none)
        .await;
    let compute = compute_for(&none).await;
    match regional_ingress::check_preconditions(&compute, &config, "r1", &[8080]).await {
        Err(SyncError::NoProxyOnlySubnet {
            region, command, ..
        }) => {
            assert_eq!(region, "r1");
            assert!(
                command.contains("--purpose=REGIONAL_MANAGED_PROXY"),
                "{command}"
            );
        }
        other => panic!("expected NoProxyOnlySubnet: {other:?}"),
    }

    let server = MockServer::start().await;
    subnets(json!([
        {"name": "nodes", "network": net, "ipCidrRange": "10.0.0.0/20"},
        {"name": "proxy", "network": net, "ipCidrRange": "10.129.0.0/23",
         "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"},
    ]))
    .mount(&server)
    .await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/firewalls"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"name": "allow-proxy", "network": net, "direction": "INGRESS", "priority": 1000,
             "sourceRanges": ["10.129.0.0/23"], "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}]}
        ]})))
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let admitted = regional_ingress::check_preconditions(&compute, &config, "r1", &[8080]).await;
    assert_eq!(admitted.unwrap(), None);
    let warning = regional_ingress::check_preconditions(&compute, &config, "r1", &[9090])
        .await
        .unwrap()
        .expect("a warning");
    assert!(
        warning.contains("proxy-only subnet proxy (10.129.0.0/23) of region r1")
            && warning.contains("gcloud compute firewall-rules create")
            && warning.contains("9090"),
        "{warning}"
    );
}
