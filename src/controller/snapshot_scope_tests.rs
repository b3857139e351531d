//! A reconcile's snapshot holds Pods and Secrets of the Ingress's namespace and the default
//! backend's only ([`super::Stores::snapshot_for`]); translating with it must give exactly what
//! translating with the whole cluster gives.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::reconcile::translation_namespaces;
use super::stores::stores_holding;
use crate::translate::source_ranges::reads_other_ingresses;
use crate::translate::test_support::{config, snapshot_from_yaml};
use crate::translate::{translate_ingress, ClusterSnapshot, ObjectKey};

/// Copies of `objects` in namespace `elsewhere`.
fn moved<K: kube::Resource + Clone>(
    objects: &BTreeMap<ObjectKey, Arc<K>>,
) -> Vec<(ObjectKey, Arc<K>)> {
    objects
        .iter()
        .map(|(key, object)| {
            let mut object = K::clone(object);
            object.meta_mut().namespace = Some("elsewhere".into());
            (
                ObjectKey::new("elsewhere", key.name.clone()),
                Arc::new(object),
            )
        })
        .collect()
}

/// Two Ingresses of namespace `edge` route to one Service, one with `ncp/whitelist-source-range`
/// and one without: the first's translation reads the second (its policy is not applied to the
/// shared backend), so its scoped snapshot must hold the namespace's Ingresses.
const SHARED_WHITELIST: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: api, namespace: edge}
spec:
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: guarded
  namespace: edge
  annotations: {ncp/whitelist-source-range: 10.0.0.0/8}
spec:
  ingressClassName: gce
  defaultBackend: {service: {name: api, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: open, namespace: edge}
spec:
  ingressClassName: gce
  defaultBackend: {service: {name: api, port: {number: 80}}}
"#;

/// The translation golden test's cluster plus a copy of every Pod and Secret in another
/// namespace (same labels and names: a big cluster's other workloads).
fn cluster() -> ClusterSnapshot {
    let yaml = format!(
        "{}\n---\n{SHARED_WHITELIST}",
        include_str!("../../crates/translate/src/translate/testdata/features.yaml")
    );
    let mut snapshot = snapshot_from_yaml(&yaml);
    let (pods, secrets) = (moved(&snapshot.pods), moved(&snapshot.secrets));
    snapshot.pods.extend(pods);
    snapshot.secrets.extend(secrets);
    snapshot
}

/// Every Ingress of the cluster translates the same from its scoped snapshot as from the whole
/// one, and the scoped one leaves the other namespace's Pods and Secrets out. Fails when the
/// scope misses a namespace translation reads (e.g. without the Ingress's own namespace the
/// health checks lose their readiness-probe paths and the TLS certificates their Secrets).
#[test]
fn scoped_snapshot_translates_like_the_whole_cluster() {
    let cluster = cluster();
    let stores = stores_holding(&cluster);
    let config = config();
    let whole = stores.snapshot();
    assert_eq!(whole.pods.len(), cluster.pods.len());
    let mut translated = 0;
    for (key, ingress) in &cluster.ingresses {
        let scoped = stores.snapshot_for(
            &translation_namespaces(ingress, &config),
            reads_other_ingresses(ingress),
        );
        assert!(
            scoped
                .pods
                .keys()
                .chain(scoped.secrets.keys())
                .all(|k| k.namespace != "elsewhere"),
            "{key}: the scoped snapshot holds another namespace's Pods or Secrets"
        );
        assert!(scoped.pods.len() < whole.pods.len());
        let show = |s: &ClusterSnapshot| {
            translate_ingress(s, ingress, &config)
                .map(|d| d.to_json())
                .map_err(|e| e.to_string())
        };
        let (from_whole, from_scoped) = (show(&whole), show(&scoped));
        assert_eq!(from_scoped, from_whole, "{key}");
        translated += usize::from(from_whole.is_ok());
    }
    assert!(translated >= 3, "only {translated} Ingresses translated");
    // The case that needs other Ingresses did read them: the shared Service is named.
    let guarded = &cluster.ingresses[&ObjectKey::new("edge", "guarded")];
    let scoped = stores.snapshot_for(
        &translation_namespaces(guarded, &config),
        reads_other_ingresses(guarded),
    );
    let findings = translate_ingress(&scoped, guarded, &config)
        .map(|d| format!("{:?}", d.findings))
        .unwrap_or_default();
    assert!(findings.contains("edge/open"), "{findings}");
}
