use super::*;
use serde_json::json;

fn service(extra: serde_json::Value) -> Service {
    let mut v = json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "labels": {"app": "web"}},
        "spec": {
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                {"name": "metrics", "port": 9090, "targetPort": 9091}
            ]
        }
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, ip: &str, ready: bool, extra: serde_json::Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"), "labels": {"app": "web"}},
        "spec": {
            "nodeName": "local-node-1",
            "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
        }
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn nodes() -> NodeZones {
    NodeZones::from([(
        "local-node-1".to_string(),
        Some("us-central1-a".to_string()),
    )])
}

fn merge(base: &mut serde_json::Value, patch: serde_json::Value) {
    json_patch::merge(base, &patch);
}

fn conditions(e: &Endpoint) -> (bool, bool, bool) {
    let c = e.conditions.clone().unwrap();
    (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
}

#[test]
fn ready_pod_is_ready_and_serving() {
    let e = endpoint_for(
        &service(json!({})),
        &pod("a", "127.64.0.1", true, json!({})),
    );
    assert_eq!(conditions(&e), (true, true, false));
    assert_eq!(e.addresses, vec!["127.64.0.1".to_string()]);
    assert_eq!(e.node_name.as_deref(), Some("local-node-1"));
    let target = e.target_ref.unwrap();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref()
        ),
        (Some("Pod"), Some("a"), Some("a-uid"))
    );
}

#[test]
fn terminating_ready_pod_is_serving_but_not_ready() {
    let p = pod(
        "a",
        "127.64.0.1",
        true,
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
    );
    assert_eq!(
        conditions(&endpoint_for(&service(json!({})), &p)),
        (false, true, true)
    );
}

#[test]
fn terminating_unready_pod_is_neither() {
    let p = pod(
        "a",
        "127.64.0.1",
        false,
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
    );
    assert_eq!(
        conditions(&endpoint_for(&service(json!({})), &p)),
        (false, false, true)
    );
}

#[test]
fn pod_with_unmet_readiness_gate_is_not_ready() {
    // The kubelet keeps Ready False while a gate is not True, even with ContainersReady True.
    let p = pod(
        "a",
        "127.64.0.1",
        false,
        json!({
            "spec": {"readinessGates": [{"conditionType": "cloud.google.com/load-balancer-neg-ready"}]},
            "status": {"conditions": [
                {"type": "ContainersReady", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady"}
            ]}
        }),
    );
    assert_eq!(
        conditions(&endpoint_for(&service(json!({})), &p)),
        (false, false, false)
    );
}

#[test]
fn publish_not_ready_addresses_is_always_ready() {
    let svc = service(json!({"spec": {"publishNotReadyAddresses": true}}));
    let p = pod(
        "a",
        "127.64.0.1",
        false,
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
    );
    assert_eq!(conditions(&endpoint_for(&svc, &p)), (true, true, true));
}

#[test]
fn hostname_only_under_matching_subdomain() {
    let svc = service(json!({}));
    let named = pod(
        "a",
        "127.64.0.1",
        true,
        json!({"spec": {"hostname": "a0", "subdomain": "web"}}),
    );
    assert_eq!(endpoint_for(&svc, &named).hostname.as_deref(), Some("a0"));
    let other = pod(
        "a",
        "127.64.0.1",
        true,
        json!({"spec": {"hostname": "a0", "subdomain": "db"}}),
    );
    assert_eq!(endpoint_for(&svc, &other).hostname, None);
}

#[test]
fn named_target_port_resolves_per_pod_and_unresolved_ports_are_dropped() {
    let svc = service(json!({}));
    let p = pod("a", "127.64.0.1", true, json!({}));
    let ports = endpoint_ports(&svc, &p);
    assert_eq!(ports.len(), 2);
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].port),
        (Some("http"), Some(8080))
    );
    assert_eq!(
        (
            ports[1].name.as_deref(),
            ports[1].port,
            ports[1].protocol.as_deref()
        ),
        (Some("metrics"), Some(9091), Some("TCP"))
    );
    let unnamed = pod(
        "b",
        "127.64.0.2",
        true,
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]}}),
    );
    let ports = endpoint_ports(&svc, &unnamed);
    assert_eq!(
        ports.iter().map(|p| p.port).collect::<Vec<_>>(),
        vec![Some(9091)]
    );
    // A named port with another protocol does not match.
    let udp = pod(
        "c",
        "127.64.0.3",
        true,
        json!({"spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080, "protocol": "UDP"}]}]}}),
    );
    assert_eq!(endpoint_ports(&svc, &udp).len(), 1);
}

#[test]
fn unset_target_port_defaults_to_port() {
    let svc = service(json!({"spec": {"ports": [{"name": "", "port": 8000}]}}));
    let ports = endpoint_ports(&svc, &pod("a", "127.64.0.1", true, json!({})));
    assert_eq!(ports[0].port, Some(8000));
    assert_eq!(ports[0].name.as_deref(), Some(""));
}

#[test]
fn selection_requires_namespace_and_all_labels() {
    let svc = service(json!({}));
    assert!(selects(&svc, &pod("a", "127.64.0.1", true, json!({}))));
    assert!(!selects(
        &svc,
        &pod(
            "a",
            "127.64.0.1",
            true,
            json!({"metadata": {"namespace": "other"}})
        )
    ));
    assert!(!selects(
        &svc,
        &pod(
            "a",
            "127.64.0.1",
            true,
            json!({"metadata": {"labels": {"app": "db"}}})
        )
    ));
    let no_selector = service(json!({"spec": {"selector": null}}));
    assert!(
        !manages(&no_selector) && !selects(&no_selector, &pod("a", "127.64.0.1", true, json!({})))
    );
    let external = service(json!({"spec": {"type": "ExternalName"}}));
    assert!(!manages(&external));
}

#[test]
fn terminal_pods_and_pods_without_ip_are_not_endpoints() {
    assert!(!should_pod_be_in_endpoints(&pod("a", "", true, json!({}))));
    assert!(!should_pod_be_in_endpoints(&pod(
        "a",
        "127.64.0.1",
        true,
        json!({"status": {"phase": "Succeeded"}})
    )));
    assert!(!should_pod_be_in_endpoints(&pod(
        "a",
        "127.64.0.1",
        true,
        json!({"status": {"phase": "Failed"}})
    )));
    assert!(should_pod_be_in_endpoints(&pod(
        "a",
        "127.64.0.1",
        true,
        json!({"status": {"phase": "Pending"}})
    )));
}

#[test]
fn pods_with_different_ports_get_different_slices() {
    let svc = service(json!({}));
    let a = pod("a", "127.64.0.1", true, json!({}));
    let b = pod(
        "b",
        "127.64.0.2",
        true,
        json!({"spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 9000}]}]}}),
    );
    let c = pod("c", "127.64.0.3", true, json!({}));
    let groups = endpoint_groups(&svc, [&c, &a, &b], &nodes());
    assert_eq!(groups.len(), 2);
    let sizes: Vec<usize> = groups.iter().map(|g| g.endpoints.len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 3);
    let big = groups.iter().find(|g| g.endpoints.len() == 2).unwrap();
    let names: Vec<_> = big
        .endpoints
        .iter()
        .map(|e| e.target_ref.as_ref().unwrap().name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "c"]);
}

#[test]
fn plan_creates_labelled_owned_slice_then_is_a_no_op() {
    let svc = service(json!({}));
    let pods = [
        pod("a", "127.64.0.1", true, json!({})),
        pod("b", "127.64.0.2", false, json!({})),
    ];
    let first = plan(&svc, &pods, &nodes(), &[]).unwrap();
    assert_eq!(
        (first.create.len(), first.update.len(), first.delete.len()),
        (1, 0, 0)
    );
    let slice = &first.create[0];
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get(SERVICE_NAME_LABEL).map(String::as_str),
        Some("web")
    );
    assert_eq!(
        labels.get(MANAGED_BY_LABEL).map(String::as_str),
        Some(CONTROLLER_NAME)
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Service", "svc-uid", Some(true))
    );
    assert_eq!(slice.endpoints.len(), 2);

    // What the server stores comes back with a name; the same input must plan nothing.
    let mut stored = slice.clone();
    stored.metadata.name = Some("web-abcde".to_string());
    stored.metadata.resource_version = Some("7".to_string());
    assert!(plan(&svc, &pods, &nodes(), &[stored.clone()])
        .unwrap()
        .is_empty());

    // A readiness change rewrites that slice in place.
    let pods2 = [
        pod("a", "127.64.0.1", true, json!({})),
        pod("b", "127.64.0.2", true, json!({})),
    ];
    let second = plan(&svc, &pods2, &nodes(), &[stored]).unwrap();
    assert_eq!(
        (
            second.create.len(),
            second.update.len(),
            second.delete.len()
        ),
        (0, 1, 0)
    );
    assert_eq!(second.update[0].metadata.name.as_deref(), Some("web-abcde"));
    assert_eq!(
        second.update[0].metadata.resource_version.as_deref(),
        Some("7")
    );
    assert!(second.update[0].endpoints.iter().all(|e| conditions(e).0));
}

#[test]
fn no_pods_leaves_one_placeholder_slice() {
    let svc = service(json!({}));
    let p = plan(&svc, &[], &nodes(), &[]).unwrap();
    assert_eq!(p.create.len(), 1);
    assert!(p.create[0].endpoints.is_empty() && p.create[0].ports.is_none());
    // From one real slice to none: the slice becomes the placeholder rather than churning.
    let mut stored = plan(
        &svc,
        &[pod("a", "127.64.0.1", true, json!({}))],
        &nodes(),
        &[],
    )
    .unwrap()
    .create
    .remove(0);
    stored.metadata.name = Some("web-1".to_string());
    let p = plan(&svc, &[], &nodes(), &[stored]).unwrap();
    assert_eq!((p.create.len(), p.update.len(), p.delete.len()), (0, 1, 0));
    assert!(p.update[0].endpoints.is_empty());
}

#[test]
fn slices_of_another_owner_are_deleted_and_surplus_removed() {
    let svc = service(json!({}));
    let pods = [pod("a", "127.64.0.1", true, json!({}))];
    let mut mine = plan(&svc, &pods, &nodes(), &[]).unwrap().create.remove(0);
    mine.metadata.name = Some("web-1".to_string());
    let mut surplus = mine.clone();
    surplus.metadata.name = Some("web-2".to_string());
    let mut stale = mine.clone();
    stale.metadata.name = Some("web-old".to_string());
    stale.metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".to_string();
    let p = plan(&svc, &pods, &nodes(), &[surplus, stale, mine]).unwrap();
    assert!(p.create.is_empty() && p.update.is_empty());
    let mut deleted = p.delete.clone();
    deleted.sort();
    assert_eq!(deleted, vec!["web-2".to_string(), "web-old".to_string()]);
}

#[test]
fn more_than_max_endpoints_split_into_slices() {
    let svc = service(json!({}));
    let pods: Vec<Pod> = (0..(MAX_ENDPOINTS_PER_SLICE + 5))
        .map(|i| {
            pod(
                &format!("p{i:03}"),
                &format!("127.64.1.{}", i % 250),
                true,
                json!({}),
            )
        })
        .collect();
    let p = plan(&svc, &pods, &nodes(), &[]).unwrap();
    let sizes: Vec<usize> = p.create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, vec![MAX_ENDPOINTS_PER_SLICE, 5]);
}

#[test]
fn missing_uid_is_an_error_naming_the_service() {
    let svc = service(json!({"metadata": {"uid": null}}));
    let err = plan(&svc, &[], &nodes(), &[]).unwrap_err();
    assert!(
        err.to_string().contains("default/web") && err.to_string().contains("uid"),
        "{err}"
    );
}

#[test]
fn endpoints_carry_their_nodes_zone_and_pods_on_missing_nodes_are_left_out() {
    let svc = service(json!({}));
    let nodes = NodeZones::from([
        ("n-a".to_string(), Some("us-central1-a".to_string())),
        ("n-b".to_string(), Some("us-central1-b".to_string())),
        ("n-none".to_string(), None),
    ]);
    let on =
        |name: &str, ip: &str, node: &str| pod(name, ip, true, json!({"spec": {"nodeName": node}}));
    let pods = [
        on("a", "127.64.0.1", "n-a"),
        on("b", "127.64.0.2", "n-b"),
        on("c", "127.64.0.3", "n-none"),
        on("d", "127.64.0.4", "gone"),
    ];
    let groups = endpoint_groups(&svc, &pods, &nodes);
    let zones: Vec<(Option<&str>, Option<&str>)> = groups[0]
        .endpoints
        .iter()
        .map(|e| (e.node_name.as_deref(), e.zone.as_deref()))
        .collect();
    assert_eq!(
        zones,
        vec![
            (Some("n-a"), Some("us-central1-a")),
            (Some("n-b"), Some("us-central1-b")),
            (Some("n-none"), None),
        ]
    );
    let publish = service(json!({"spec": {"publishNotReadyAddresses": true}}));
    let all = endpoint_groups(&publish, &pods, &nodes);
    assert_eq!(all[0].endpoints.len(), 4, "published even without its Node");
    assert_eq!(all[0].endpoints[3].zone, None);
}
