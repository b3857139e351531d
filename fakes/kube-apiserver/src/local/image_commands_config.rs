//! The ConfigMap form of `--image-command`: `kube-system/local-image-commands`, each value one
//! `IMAGE=COMMAND` (keys are free names), read live into the kubelet's [`ImageCommands`]. A
//! value that is not `IMAGE=COMMAND` is left out and named in a Warning Event on the ConfigMap
//! (reason `MalformedImageCommand`), so `kubectl describe configmap` shows what to fix.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};

use super::user_command::ImageCommands;

/// Namespace of the ConfigMap.
pub const NAMESPACE: &str = "kube-system";
/// Name of the ConfigMap.
pub const NAME: &str = "local-image-commands";

/// Watches the ConfigMap and keeps `commands` in step with it until the future is dropped.
pub async fn run(client: Client, commands: Arc<ImageCommands>) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "local-kubelet".into(),
            instance: None,
        },
    );
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    let mut events = watcher(Api::<ConfigMap>::namespaced(client, NAMESPACE), config)
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                let malformed = commands.set_config_map(cm.data.as_ref());
                tracing::info!(
                    entries = cm.data.as_ref().map_or(0, |d| d.len()) - malformed.len(),
                    "image commands read from ConfigMap {NAMESPACE}/{NAME}"
                );
                if !malformed.is_empty() {
                    warn_malformed(&recorder, &cm, &malformed).await;
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                commands.set_config_map(None);
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "watching ConfigMap {NAMESPACE}/{NAME}"),
        }
    }
}

async fn warn_malformed(recorder: &Recorder, cm: &ConfigMap, keys: &[String]) {
    let note = format!(
        "ConfigMap {NAMESPACE}/{NAME}: data keys {} are not IMAGE=COMMAND and were left out; \
         write each value as e.g. `registry.example/shop/web=./shop --port $PORT`",
        keys.join(", ")
    );
    tracing::warn!("{note}");
    let event = Event {
        type_: EventType::Warning,
        reason: "MalformedImageCommand".into(),
        note: Some(note),
        action: "ReadImageCommands".into(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &cm.object_ref(&())).await {
        tracing::debug!(%error, "cannot publish the image commands Event");
    }
}
