//! What `GET /_emulator/listeners` reports of each forwarding rule's socket: below the
//! listeners that bind the sockets and the TLS routes that report theirs, so both can name it.

use std::net::SocketAddr;

use crate::snapshot::ResourceKey;

/// The effective socket of one forwarding rule, for `GET /_emulator/listeners`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerInfo {
    /// The forwarding rule (global or regional).
    pub forwarding_rule: ResourceKey,
    /// The rule's `IPAddress`.
    pub ip_address: String,
    /// The rule's port (from `portRange`).
    pub port: u16,
    /// The socket actually bound (differs in port when a port map applies).
    pub local_addr: SocketAddr,
}
