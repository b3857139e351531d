//! The emulator's settings from the command line ([`Config`]).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use crate::slow_cloud;

/// Settings from the command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// `--address-range`: where load balancer addresses come from.
    pub address_range: (Ipv4Addr, u8),
    /// `--operation-latency-ms`: how long each Operation stays RUNNING.
    pub operation_latency: Duration,
    /// `--managed-cert-provisioning-ms`: how long a served MANAGED certificate stays PROVISIONING.
    pub managed_cert_provisioning: Duration,
    /// `--require-token`: `None` accepts anything; `Some(None)` requires some bearer token;
    /// `Some(Some(t))` requires exactly `t`.
    pub require_token: Option<Option<String>>,
    /// `--state-file`.
    pub state_file: Option<PathBuf>,
    /// `--validate-neg-endpoints`: attachNetworkEndpoints checks each endpoint against its
    /// instance, as the real API does (on by default).
    pub validate_neg_endpoints: bool,
    /// `--private-ranges`: RFC 1918 ranges instances (and so NEG endpoints) may use besides
    /// loopback ([`crate::network::ranges`]); empty by default.
    pub private_ranges: Vec<(Ipv4Addr, u8)>,
    /// `--iam-grant`: the projects restricted tokens may change ([`crate::iam`]).
    pub grants: crate::iam::Grants,
    /// `--slow-cloud`: the profile applied from the start (admin API `/_emulator/slow-cloud`
    /// changes it).
    pub slow_cloud: slow_cloud::Profile,
    /// `--iam`: every call needs a valid token and its method's permissions ([`crate::identity`]).
    pub iam: bool,
    /// `--token-lifetime-sec`: how long issued access tokens live.
    pub token_lifetime: Duration,
    /// What the metadata server describes (`--metadata-*`); it is served on the API's own
    /// port too, so `GCE_METADATA_HOST=127.0.0.1:PORT` reaches it.
    pub metadata: crate::metadata::Metadata,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            address_range: (Ipv4Addr::new(127, 128, 0, 0), 9),
            operation_latency: Duration::ZERO,
            managed_cert_provisioning: Duration::from_millis(3000),
            require_token: None,
            state_file: None,
            validate_neg_endpoints: true,
            private_ranges: Vec::new(),
            grants: crate::iam::Grants::default(),
            slow_cloud: slow_cloud::Profile::default(),
            iam: false,
            token_lifetime: Duration::from_secs(3600),
            metadata: crate::metadata::Metadata::default(),
        }
    }
}
