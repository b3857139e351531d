//! What the kubelet loop (mod.rs) and every Pod worker (pod_worker.rs) share: the API client,
//! the images run as a user's program, the status lag, the Event queue, and the errors of
//! starting a Pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource};
use tokio::sync::mpsc;

use super::super::echo;
use super::super::user_command::ImageCommands;

/// The field manager of the kubelet's writes.
pub const FIELD_MANAGER: &str = "kubelet";

/// Errors starting a local Pod.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// No Pod IP could be allocated.
    #[error("Pod {pod}: {source}")]
    PodIp {
        /// `namespace/name`.
        pod: String,
        /// The allocation error.
        source: super::super::pod_ip::PodIpError,
    },
    /// A container port could not be served.
    #[error(transparent)]
    Echo(#[from] echo::EchoError),
    /// A user's program mapped to an image could not start.
    #[error(transparent)]
    UserCommand(#[from] super::super::user_command::UserCommandError),
}

pub(super) struct Kubelet {
    pub(super) client: Client,
    /// Images run as a user's program.
    pub(super) commands: Arc<ImageCommands>,
    /// How long a status write lags what caused it ([`super::super::LocalOptions`]).
    pub(super) status_delay: std::time::Duration,
    /// Events to publish, drained by one task so Pod workers never wait on the API.
    pub(super) events: mpsc::UnboundedSender<(ObjectReference, Event)>,
}

impl Kubelet {
    pub(super) fn record(
        &self,
        pod: &Pod,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        let _ = self.events.send((pod.object_ref(&()), event));
    }
}

/// Publishes the kubelet's Events (events.k8s.io/v1, reporting controller `kubelet`).
pub(super) async fn publish_events(
    recorder: Recorder,
    mut events: mpsc::UnboundedReceiver<(ObjectReference, Event)>,
) {
    while let Some((reference, event)) = events.recv().await {
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::debug!(%error, reason = %event.reason, "cannot publish kubelet Event");
        }
    }
}
