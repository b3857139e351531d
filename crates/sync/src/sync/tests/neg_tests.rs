//! NEGs: one lock per NEG and collection, endpoints attached and detached by set
//! difference, and batches of at most 500.

use super::*;

fn neg_with(ips: &[&str]) -> DesiredNeg {
    DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints: ips
            .iter()
            .map(|ip| NegEndpoint {
                ip_address: (*ip).to_string(),
                port: 8080,
                instance: None,
            })
            .collect(),
    }
}

/// Backends sync in parallel under per-object locks: a NEG's lock is its own (collection, zone,
/// name), so the NEGs of one backend in two zones, or two NEGs, never wait on each other, while
/// two Ingresses sharing a NEG do.
#[test]
fn each_neg_has_its_own_lock_per_collection() {
    let a = neg_with(&[]);
    let mut other_zone = neg_with(&[]);
    other_zone.zone = "z2".into();
    let mut other_name = neg_with(&[]);
    other_name.neg = model::NetworkEndpointGroup::new().set_name("neg2");
    assert_eq!(
        ingress::neg_key("networkEndpointGroups", &a),
        "networkEndpointGroups/z1/neg1"
    );
    assert_eq!(
        ingress::neg_key("networkEndpoints", &a),
        "networkEndpoints/z1/neg1"
    );
    let keys: BTreeSet<String> = [&a, &other_zone, &other_name]
        .into_iter()
        .map(|n| ingress::neg_key("networkEndpointGroups", n))
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
}

/// Attach and detach by set difference from one `listNetworkEndpoints`; what they did is
/// recorded, so the next sync of the same endpoints sends nothing and a change sends only the
/// difference.
#[tokio::test]
async fn neg_endpoints_attach_and_detach_by_set_difference_and_are_remembered() {
    let server = MockServer::start().await;
    let neg_path = "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1";
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/listNetworkEndpoints")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"networkEndpoint": {"ipAddress": "127.64.0.1", "port": 8080, "instance": "n1"}},
            {"networkEndpoint": {"ipAddress": "127.64.0.2", "port": 8080}}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    for verb in ["attachNetworkEndpoints", "detachNetworkEndpoints"] {
        Mock::given(method("POST"))
            .and(path(format!("{neg_path}/{verb}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let neg = neg_with(&["127.64.0.1", "127.64.0.3"]);
    let done = network_endpoint_groups::sync_endpoints(&compute, &neg)
        .await
        .unwrap();
    assert_eq!(done, (1, 1));
    assert_eq!(
        network_endpoint_groups::sync_endpoints(&compute, &neg)
            .await
            .unwrap(),
        (0, 0)
    );
    let fewer = neg_with(&["127.64.0.3"]);
    assert_eq!(
        network_endpoint_groups::sync_endpoints(&compute, &fewer)
            .await
            .unwrap(),
        (0, 1)
    );
    let mut carried = Vec::new();
    for req in server.received_requests().await.unwrap() {
        let verb = req.url.path().rsplit('/').next().unwrap().to_string();
        if verb.ends_with("NetworkEndpoints") && verb != "listNetworkEndpoints" {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let ips: Vec<String> = body["networkEndpoints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["ipAddress"].as_str().unwrap().to_string())
                .collect();
            carried.push((verb, ips));
        }
    }
    let want = |v: &str, ip: &str| (v.to_string(), vec![ip.to_string()]);
    assert_eq!(
        carried,
        [
            want("attachNetworkEndpoints", "127.64.0.3"),
            want("detachNetworkEndpoints", "127.64.0.2"),
            want("detachNetworkEndpoints", "127.64.0.1"),
        ]
    );
}

/// `sync_endpoints` against a NEG holding 700 stale endpoints while 1201 are desired: every
/// attach and detach call carries at most 500 endpoints (the API's limit per call), and the calls
/// together carry each endpoint exactly once.
#[tokio::test]
async fn endpoint_batches_hold_at_most_500() {
    let server = MockServer::start().await;
    let neg_path = "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1";
    let ip = |net: u32, i: u32| format!("127.{net}.{}.{}", i / 250, i % 250);
    let stale: Vec<Value> = (0..700)
        .map(|i| json!({"networkEndpoint": {"ipAddress": ip(65, i), "port": 80}}))
        .collect();
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/listNetworkEndpoints")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "items": stale })))
        .expect(1)
        .mount(&server)
        .await;
    for verb in ["attachNetworkEndpoints", "detachNetworkEndpoints"] {
        Mock::given(method("POST"))
            .and(path(format!("{neg_path}/{verb}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-batch")))
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let endpoints: BTreeSet<NegEndpoint> = (0..1201)
        .map(|i| NegEndpoint {
            ip_address: ip(64, i),
            port: 80,
            instance: None,
        })
        .collect();
    let neg = DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints,
    };
    let (attached, detached) = network_endpoint_groups::sync_endpoints(&compute, &neg)
        .await
        .unwrap();
    assert_eq!((attached, detached), (1201, 700));

    // The endpoints each call carried, in call order, per verb.
    let mut batches: std::collections::BTreeMap<&str, Vec<Vec<String>>> = Default::default();
    for req in server.received_requests().await.unwrap() {
        let verb = req.url.path().rsplit('/').next().unwrap().to_string();
        let verb = match verb.as_str() {
            "attachNetworkEndpoints" => "attach",
            "detachNetworkEndpoints" => "detach",
            _ => continue,
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let ips = body["networkEndpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["ipAddress"].as_str().unwrap().to_string())
            .collect();
        batches.entry(verb).or_default().push(ips);
    }
    let sizes = |verb: &str| -> Vec<usize> { batches[verb].iter().map(Vec::len).collect() };
    assert_eq!(sizes("attach"), [500, 500, 201]);
    assert_eq!(sizes("detach"), [500, 200]);
    let carried =
        |verb: &str| -> BTreeSet<String> { batches[verb].iter().flatten().cloned().collect() };
    assert_eq!(carried("attach"), (0..1201).map(|i| ip(64, i)).collect());
    assert_eq!(carried("detach"), (0..700).map(|i| ip(65, i)).collect());
}
