use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use serde_json::json;

use super::*;
use crate::translate::{namer, ClusterSnapshot, TranslateConfig};

fn config() -> TranslateConfig {
    TranslateConfig::new(
        "p",
        "default",
        &["us-central1-a", "us-central1-b"],
        "c",
        "ks-uid",
    )
}

fn ingress(ns: &str, name: &str, spec: serde_json::Value) -> Ingress {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

fn service(ns: &str, name: &str, selector: serde_json::Value, ports: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name},
        "spec": {"selector": selector, "ports": ports}}))
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

struct World {
    ingresses: Vec<Ingress>,
    services: Vec<Service>,
    classes: ClusterSnapshot,
}

impl World {
    fn negs(&self, ns: &str, l: &[(&str, &str)]) -> Vec<NegRef> {
        negs_for_pod(
            &self.ingresses,
            |sns, name| {
                self.services
                    .iter()
                    .find(|s| {
                        s.metadata.namespace.as_deref() == Some(sns)
                            && s.metadata.name.as_deref() == Some(name)
                    })
                    .cloned()
            },
            &self.classes,
            &config(),
            ns,
            &labels(l),
        )
    }
}

fn world() -> World {
    World {
        ingresses: vec![
            ingress(
                "shop",
                "web",
                json!({"rules": [{"http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "products", "port": {"number": 60000}}}},
                    {"path": "/d", "pathType": "Prefix",
                     "backend": {"service": {"name": "discounted", "port": {"name": "http"}}}}
                ]}}]}),
            ),
            ingress(
                "shop",
                "other-class",
                json!({"ingressClassName": "nginx",
                "defaultBackend": {"service": {"name": "nginx-only", "port": {"number": 80}}}}),
            ),
        ],
        services: vec![
            service(
                "shop",
                "products",
                json!({"app": "products"}),
                json!([{"port": 60000, "targetPort": 50000}]),
            ),
            service(
                "shop",
                "discounted",
                json!({"app": "discounted"}),
                json!([{"name": "http", "port": 80, "targetPort": 8080}]),
            ),
            service(
                "shop",
                "nginx-only",
                json!({"app": "nginx-only"}),
                json!([{"port": 80}]),
            ),
            service(
                "kube-system",
                "default-http-backend",
                json!({"k8s-app": "glbc"}),
                json!([{"name": "http", "port": 80, "targetPort": 8080}]),
            ),
        ],
        classes: ClusterSnapshot::default(),
    }
}

fn expected(ns: &str, svc: &str, port: i32) -> Vec<NegRef> {
    let name = namer::backend(namer::Scheme::Gke, &config().cluster_uid, ns, svc, port);
    vec![
        NegRef::new("us-central1-a", name.clone()),
        NegRef::new("us-central1-b", name),
    ]
}

#[test]
fn pod_selected_by_a_rule_backend_is_in_its_negs_in_every_zone() {
    let w = world();
    assert_eq!(
        w.negs("shop", &[("app", "products"), ("pod-template-hash", "x")]),
        expected("shop", "products", 60000)
    );
}

#[test]
fn named_service_port_resolves_to_its_number() {
    let w = world();
    assert_eq!(
        w.negs("shop", &[("app", "discounted")]),
        expected("shop", "discounted", 80)
    );
}

#[test]
fn default_backend_of_the_cluster_counts_when_the_ingress_has_none() {
    let w = world();
    assert_eq!(
        w.negs("kube-system", &[("k8s-app", "glbc")]),
        expected("kube-system", "default-http-backend", 80)
    );
}

#[test]
fn pods_outside_owned_ingresses_get_nothing() {
    let w = world();
    // Not selected by any Service.
    assert!(w.negs("shop", &[("app", "unrelated")]).is_empty());
    // Same labels, other namespace.
    assert!(w.negs("other", &[("app", "products")]).is_empty());
    // Behind an Ingress of another class.
    assert!(w.negs("shop", &[("app", "nginx-only")]).is_empty());
}

#[test]
fn ingress_class_objects_decide_ownership() {
    let mut w = world();
    let nginx: IngressClass = serde_json::from_value(json!({"metadata": {"name": "nginx"},
        "spec": {"controller": "k8s.io/ingress-gce"}}))
    .unwrap();
    w.classes.insert(nginx);
    // An IngressClass named nginx whose controller is GCE's: the Ingress is ours after all.
    assert_eq!(
        w.negs("shop", &[("app", "nginx-only")]),
        expected("shop", "nginx-only", 80)
    );
}

/// An internal Ingress (class `gce-internal`) gates its Pods on the same zonal NEGs: the regional
/// backend service uses them as a global one would.
#[test]
fn internal_ingresses_gate_their_pods_on_the_shared_negs() {
    let mut w = world();
    let mut internal = ingress(
        "shop",
        "internal",
        json!({"defaultBackend": {"service": {"name": "nginx-only", "port": {"number": 80}}}}),
    );
    internal.metadata.annotations = Some(
        [(
            "kubernetes.io/ingress.class".to_string(),
            "gce-internal".to_string(),
        )]
        .into(),
    );
    w.ingresses.push(internal);
    assert_eq!(
        w.negs("shop", &[("app", "nginx-only")]),
        expected("shop", "nginx-only", 80)
    );
}

#[test]
fn services_without_selector_or_missing_port_are_skipped() {
    let mut w = world();
    w.services[0] = service("shop", "products", json!({}), json!([{"port": 60000}]));
    assert!(w.negs("shop", &[("app", "products")]).is_empty());
    let mut w = world();
    w.services[0] = service(
        "shop",
        "products",
        json!({"app": "products"}),
        json!([{"port": 1}]),
    );
    assert!(w.negs("shop", &[("app", "products")]).is_empty());
    let mut w = world();
    w.services.remove(0);
    assert!(w.negs("shop", &[("app", "products")]).is_empty());
}

#[test]
fn static_lookup_unions_matching_entries() {
    let a = NegRef::new("z", "a");
    let b = NegRef::new("z", "b");
    let lookup = StaticLookup {
        entries: vec![
            ("ns".into(), labels(&[("app", "x")]), vec![b.clone()]),
            ("ns".into(), labels(&[]), vec![a.clone(), b.clone()]),
            ("other".into(), labels(&[]), vec![NegRef::new("z", "c")]),
        ],
    };
    assert_eq!(
        lookup.negs_for_pod("ns", &labels(&[("app", "x")])),
        vec![a.clone(), b]
    );
    assert_eq!(
        lookup.negs_for_pod("ns", &labels(&[])),
        vec![a, NegRef::new("z", "b")]
    );
}

/// The webhook's question: a Pod is gated when it is in any NEG, and only then.
#[test]
fn a_pod_is_gated_exactly_when_it_is_in_a_neg() {
    let lookup = StaticLookup {
        entries: vec![(
            "ns".into(),
            labels(&[("app", "x")]),
            vec![NegRef::new("z", "a")],
        )],
    };
    assert!(lookup.gates_pod("ns", &labels(&[("app", "x")])));
    assert!(!lookup.gates_pod("ns", &labels(&[("app", "y")])));
    assert!(!lookup.gates_pod("other", &labels(&[("app", "x")])));
}

/// The store-backed lookup the operator runs: IngressClass objects from their store decide
/// ownership, Node zones from the Node store decide the NEG zones (no `--zone`), and the
/// webhook's `gates_pod` needs no zone.
#[tokio::test]
async fn the_store_lookup_reads_classes_and_node_zones_from_its_stores() {
    use kube::runtime::watcher::Event;

    fn store_of<K>(objects: Vec<K>) -> Store<K>
    where
        K: kube::Resource + Clone + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for o in objects {
            writer.apply_watcher_event(&Event::InitApply(o));
        }
        writer.apply_watcher_event(&Event::InitDone);
        store
    }
    let unpinned = TranslateConfig::new("p", "default", &[], "c", "ks-uid");
    // Only the IngressClass object makes "lb" ours: no flag names it.
    let class: IngressClass = serde_json::from_value(json!({
        "metadata": {"name": "lb"},
        "spec": {"controller": unpinned.mode.controller()}}))
    .unwrap();
    let web = ingress(
        "shop",
        "web",
        json!({"ingressClassName": "lb",
               "defaultBackend": {"service": {"name": "products", "port": {"number": 60000}}}}),
    );
    let products = service(
        "shop",
        "products",
        json!({"app": "products"}),
        json!([{"port": 60000, "targetPort": 50000}]),
    );
    let node: NodeMeta = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "us-east1-c"}}}))
    .unwrap();
    let lookup = StoreLookup::new(
        store_of(vec![web]),
        store_of(vec![products]),
        store_of(vec![class]),
        unpinned.clone(),
    )
    .with_nodes(store_of(vec![node]));
    tokio::time::timeout(std::time::Duration::from_secs(10), lookup.wait_synced())
        .await
        .expect("stores are ready");
    let backend = namer::backend(
        namer::Scheme::Gke,
        &unpinned.cluster_uid,
        "shop",
        "products",
        60000,
    );
    let pod = labels(&[("app", "products")]);
    assert_eq!(
        lookup.negs_for_pod("shop", &pod),
        vec![NegRef::new("us-east1-c", backend)]
    );
    assert!(lookup.gates_pod("shop", &pod));
    assert!(!lookup.gates_pod("shop", &labels(&[("app", "other")])));
    assert!(!lookup.gates_pod("default", &pod));
}
