//! What every local controller sets up first, as kube-controller-manager's shared informers and
//! event broadcaster give each controller: a cluster-wide watch of a kind kept in a reflector
//! store (its stream yields each touched object, for `Controller::for_stream`/`owns_stream`/
//! `watches_stream`), and an Event recorder in the controller's name.

use std::fmt::Debug;

use futures::Stream;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// A store of every `K` in the cluster, and the stream of touched objects that fills it (with
/// the watcher's default backoff). The store is empty until the stream is polled.
pub fn reflect_all<K>(
    client: &Client,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    (store, events)
}

/// An Event recorder reporting as `controller`.
pub fn recorder(client: &Client, controller: &str) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: controller.into(),
            instance: None,
        },
    )
}
