//! A reflector store's objects by namespace, kept beside the store from the same watch events.
//!
//! kube-runtime's `Store` answers "everything" (`state()`, a new `Vec` of every object) or one
//! object by name; a reconcile needs "everything in these namespaces". Scanning the store for it
//! cost O(cluster) per reconcile: at 2000 Ingresses with 10k Pods and 2k Secrets, building the
//! reconciles' snapshots was 41 % of the operator's CPU (perf, docs/performance.md), the two
//! tokio workers were always runnable and every Compute call waited about a second for one.
//! With this index a reconcile's snapshot costs O(objects of its namespaces).
//!
//! The index holds the store's own `Arc`s (no copies). It follows kube-runtime 5's reflector
//! semantics ([`watcher::Event`]): `Apply` and `Delete` change one object; a re-list (`Init`,
//! `InitApply`..., `InitDone`) replaces the store's contents at `InitDone`, when the index is
//! rebuilt from the store. The index is synced once it has followed the store's first list
//! ([`NamespaceIndex::wait_until_synced`]): the store is ready a moment before (the reflector
//! writes the store, then the index follows), and a reconcile reading the index in between
//! would translate without Pods (a default backend's health check lost its probe's interval
//! and was updated twice on every operator start).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;

/// Objects by namespace, then name.
type ByNamespace<K> = HashMap<String, BTreeMap<String, Arc<K>>>;

/// The objects of a reflector [`Store`] by namespace.
pub struct NamespaceIndex<K: Lookup + Clone + 'static>
where
    <K as Lookup>::DynamicType: Eq + std::hash::Hash + Clone,
{
    store: Store<K>,
    by_namespace: Arc<RwLock<ByNamespace<K>>>,
    synced: Arc<tokio::sync::watch::Sender<bool>>,
}

impl<K: Lookup + Clone + 'static> Clone for NamespaceIndex<K>
where
    <K as Lookup>::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            by_namespace: self.by_namespace.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<K> NamespaceIndex<K>
where
    K: Lookup + ResourceExt + Clone + 'static,
    <K as Lookup>::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// An index of `store`, filled with what it holds now; kept current by [`Self::apply`].
    pub fn new(store: Store<K>) -> Self {
        let index = Self {
            store,
            by_namespace: Arc::default(),
            synced: Arc::new(tokio::sync::watch::channel(false).0),
        };
        index.rebuild();
        index
    }

    /// The store this indexes.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Follows one watch event, after the reflector applied it to the store (the index takes
    /// the store's `Arc` of an applied object).
    pub fn apply(&self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                let Some(stored) = self.store.get(&ObjectRef::from_obj(object)) else {
                    return;
                };
                let mut map = self.by_namespace.write().unwrap_or_else(|e| e.into_inner());
                map.entry(ResourceExt::namespace(object).unwrap_or_default())
                    .or_default()
                    .insert(object.name_any(), stored);
            }
            watcher::Event::Delete(object) => {
                let namespace = ResourceExt::namespace(object).unwrap_or_default();
                let mut map = self.by_namespace.write().unwrap_or_else(|e| e.into_inner());
                if let Some(objects) = map.get_mut(&namespace) {
                    objects.remove(&object.name_any());
                    if objects.is_empty() {
                        map.remove(&namespace);
                    }
                }
            }
            watcher::Event::InitDone => {
                self.rebuild();
                self.synced.send_replace(true);
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }

    /// Waits until the index has followed its store's first full list (`InitDone`). Any
    /// number of tasks may wait at once.
    pub async fn wait_until_synced(&self) {
        let mut rx = self.synced.subscribe();
        // The sender lives in `self`, so this only ends once the index is synced.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// Every object of `namespace` (the store's `Arc`s), in name order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let map = self.by_namespace.read().unwrap_or_else(|e| e.into_inner());
        map.get(namespace)
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Re-reads the whole store (after a re-list, and at creation).
    fn rebuild(&self) {
        let mut fresh: ByNamespace<K> = HashMap::new();
        for object in self.store.state() {
            fresh
                .entry(ResourceExt::namespace(object.as_ref()).unwrap_or_default())
                .or_default()
                .insert(object.name_any(), object);
        }
        *self.by_namespace.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    fn cm(namespace: &str, name: &str, value: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(namespace.into());
        cm.metadata.name = Some(name.into());
        cm.data = Some([("v".to_string(), value.to_string())].into());
        cm
    }

    fn names(objects: &[Arc<ConfigMap>]) -> Vec<(String, String)> {
        objects
            .iter()
            .map(|o| (o.name_any(), o.data.as_ref().unwrap()["v"].clone()))
            .collect()
    }

    /// Feeds `event` to the store's writer, then to the index, as the reflector stream does.
    fn feed(
        writer: &mut reflector::store::Writer<ConfigMap>,
        index: &NamespaceIndex<ConfigMap>,
        event: watcher::Event<ConfigMap>,
    ) {
        writer.apply_watcher_event(&event);
        index.apply(&event);
    }

    #[tokio::test]
    async fn follows_applies_deletes_and_relists() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let index = NamespaceIndex::new(store.clone());
        feed(
            &mut writer,
            &index,
            watcher::Event::Apply(cm("a", "x", "1")),
        );
        feed(
            &mut writer,
            &index,
            watcher::Event::Apply(cm("a", "w", "1")),
        );
        feed(
            &mut writer,
            &index,
            watcher::Event::Apply(cm("b", "x", "1")),
        );
        assert_eq!(
            names(&index.in_namespace("a")),
            [("w".into(), "1".into()), ("x".into(), "1".into())]
        );
        // The index shares the store's object, not a copy.
        let stored = store.get(&ObjectRef::new("x").within("a")).unwrap();
        assert!(Arc::ptr_eq(&index.in_namespace("a")[1], &stored));
        // An update replaces, a delete removes, other namespaces are untouched.
        feed(
            &mut writer,
            &index,
            watcher::Event::Apply(cm("a", "x", "2")),
        );
        feed(
            &mut writer,
            &index,
            watcher::Event::Delete(cm("a", "w", "1")),
        );
        assert_eq!(names(&index.in_namespace("a")), [("x".into(), "2".into())]);
        assert_eq!(names(&index.in_namespace("b")), [("x".into(), "1".into())]);
        assert!(index.in_namespace("c").is_empty());
        // A re-list: nothing changes until it is done, then the index is what the list held.
        assert!(!*index.synced.borrow(), "synced before any list");
        feed(&mut writer, &index, watcher::Event::Init);
        feed(
            &mut writer,
            &index,
            watcher::Event::InitApply(cm("c", "y", "3")),
        );
        assert_eq!(names(&index.in_namespace("a")), [("x".into(), "2".into())]);
        feed(&mut writer, &index, watcher::Event::InitDone);
        index.wait_until_synced().await;
        assert!(index.in_namespace("a").is_empty());
        assert!(index.in_namespace("b").is_empty());
        assert_eq!(names(&index.in_namespace("c")), [("y".into(), "3".into())]);
    }

    #[test]
    fn a_new_index_holds_what_the_store_holds() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&watcher::Event::Apply(cm("a", "x", "1")));
        let index = NamespaceIndex::new(store);
        assert_eq!(names(&index.in_namespace("a")), [("x".into(), "1".into())]);
    }
}
