//! Command-line options of `gce-emulator` (docs/architecture.md, "Command-line contracts").

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;

/// Errors in option values.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    /// `--port-map` is not `PORT=LOCAL[,PORT=LOCAL...]`.
    #[error(
        "--port-map {0:?}: expected PORT=LOCAL_PORT[,PORT=LOCAL_PORT...], e.g. 80=18080,443=18443"
    )]
    PortMap(String),
    /// `--address-range` is not an IPv4 CIDR inside 127.0.0.0/8.
    #[error("--address-range {0:?}: expected an IPv4 CIDR inside 127.0.0.0/8, e.g. 127.128.0.0/9")]
    AddressRange(String),
}

/// Compute Engine API v1 emulator with a real load balancer data plane.
#[derive(Debug, Parser)]
#[command(name = "gce-emulator", version, about)]
pub struct Options {
    /// Print the loopback address that carries this internal (subnet) address of a regional
    /// load balancer, and exit (dataplane/internal.rs; docs/internal-load-balancers.md).
    #[arg(long, value_name = "IP")]
    pub loopback_for: Option<std::net::Ipv4Addr>,
    /// Address to serve the API on; prints `http://ADDR/` as the first stdout line.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Keep all state in this JSON file (written atomically after each change, loaded at start).
    #[arg(long)]
    pub state_file: Option<PathBuf>,
    /// Milliseconds each Operation stays RUNNING before it reads DONE.
    #[arg(long, default_value_t = 0)]
    pub operation_latency_ms: u64,
    /// Require `Authorization: Bearer ...` (any token, or exactly the given one).
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub require_token: Option<String>,
    /// Forwarding-rule port to local port, e.g. `80=18080,443=18443` (0 = ephemeral).
    #[arg(long, default_value = "")]
    pub port_map: String,
    /// Where load balancer addresses are allocated (inside 127.0.0.0/8).
    #[arg(long, default_value = "127.128.0.0/9")]
    pub address_range: String,
    /// Append a JSON-lines access log of the data plane to this file.
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Milliseconds a served MANAGED certificate stays PROVISIONING before it becomes ACTIVE.
    #[arg(long, default_value_t = 3000)]
    pub managed_cert_provisioning_ms: u64,
    /// Worker threads of the data plane's own runtime.
    #[arg(long, default_value_t = 2)]
    pub dataplane_threads: usize,
    /// Also serve a GCE metadata server here (project, zone, the default service account's
    /// token) for clients that read it, reached with `GCE_METADATA_HOST=ADDR`; its URL is the
    /// second stdout line (`metadata http://ADDR/`).
    #[arg(long)]
    pub metadata_listen: Option<SocketAddr>,
    /// The project the metadata server describes.
    #[arg(long, default_value = "p1")]
    pub metadata_project: String,
    /// The zone the metadata server describes (a served zone).
    #[arg(long, default_value = "us-central1-a")]
    pub metadata_zone: String,
    /// The Google service account whose tokens the metadata server hands out (with Workload
    /// Identity, the one the Kubernetes ServiceAccount impersonates); default: the project's
    /// Compute Engine default service account.
    #[arg(long, value_name = "EMAIL")]
    pub metadata_service_account: Option<String>,
    /// Enforce IAM: every API call needs a token the emulator issued (metadata server, token
    /// endpoint, or a self-signed JWT of a key it issued) and the permissions its method
    /// needs through the project's bindings (admin API `/_emulator/iam`; docs/emulator.md).
    #[arg(long, default_value_t = false)]
    pub iam: bool,
    /// Seconds an issued access token lives (Google's: 3600; at least 2); short, clients
    /// refresh. `expires_in` answers one second less, as the real server rounds down.
    #[arg(long, default_value_t = 3600)]
    pub token_lifetime_sec: u64,
    /// Whether VPC firewall rules decide which health-check probes (from 35.191.0.0/16) and
    /// proxied connections (from 130.211.0.0/22) reach NEG endpoints; `=false` lets all through.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enforce_firewall: bool,
    /// Whether attachNetworkEndpoints checks each endpoint against its instance (exists in the
    /// NEG's zone, on its network, holds the IP) as the real API does; `=false` accepts any.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub validate_neg_endpoints: bool,
    /// Private IPv4 ranges (RFC 1918 only, comma-separated CIDRs) instances may take their
    /// `networkIP` and alias IP ranges from besides loopback, so NEG endpoints in them are
    /// validated: the subnetwork, node and Pod ranges of a cluster whose addresses this host
    /// routes to itself (a test's network namespace, a kind network). Empty: loopback only.
    #[arg(long, default_value = "", value_parser = parse_private_ranges_arg)]
    pub private_ranges: crate::network::ranges::PrivateRanges,
    /// `TOKEN=PROJECT[,PROJECT...]` (repeatable): requests with this bearer token may change
    /// resources in these projects only (403 elsewhere, as IAM answers); other tokens are open.
    #[arg(long = "iam-grant", value_name = "TOKEN=PROJECTS")]
    pub iam_grants: Vec<String>,
    /// Answer as slowly as Google's Compute API: `realistic`, `uniform:MS` (every call MS
    /// milliseconds), `off`, a JSON profile or `@FILE` (docs/performance.md, "The slow cloud").
    #[arg(long, default_value = "off", value_parser = crate::slow_cloud::Profile::parse)]
    pub slow_cloud: crate::slow_cloud::Profile,
    /// Seconds a client connection of the data plane has to send a request's headers, which
    /// is also its keep-alive idle time.
    #[arg(long, default_value_t = 60)]
    pub header_read_timeout_sec: u64,
}

/// `--private-ranges` for clap (`crate::network::ranges::parse_private_ranges`).
fn parse_private_ranges_arg(s: &str) -> Result<crate::network::ranges::PrivateRanges, String> {
    crate::network::ranges::parse_private_ranges(s).map_err(|e| e.to_string())
}

/// Parses `80=18080,443=18443` (empty: no mapping).
pub fn parse_port_map(s: &str) -> Result<BTreeMap<u16, u16>, OptionsError> {
    let mut out = BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (a, b) = item
            .split_once('=')
            .ok_or_else(|| OptionsError::PortMap(s.into()))?;
        let a: u16 = a
            .trim()
            .parse()
            .map_err(|_| OptionsError::PortMap(s.into()))?;
        let b: u16 = b
            .trim()
            .parse()
            .map_err(|_| OptionsError::PortMap(s.into()))?;
        if a == 0 {
            return Err(OptionsError::PortMap(s.into()));
        }
        out.insert(a, b);
    }
    Ok(out)
}

/// Parses the address range; it must lie inside 127.0.0.0/8 (only loopback is ever used).
pub fn parse_address_range(s: &str) -> Result<(Ipv4Addr, u8), OptionsError> {
    let (ip, len) =
        crate::validate::parse_cidr(s).ok_or_else(|| OptionsError::AddressRange(s.into()))?;
    if len < 8 || ip.octets()[0] != 127 {
        return Err(OptionsError::AddressRange(s.into()));
    }
    Ok((ip, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_maps_and_ranges() {
        assert_eq!(
            parse_port_map("80=18080, 443=0").unwrap(),
            BTreeMap::from([(80, 18080), (443, 0)])
        );
        assert!(parse_port_map("").unwrap().is_empty());
        assert!(parse_port_map("80").is_err());
        assert!(parse_port_map("80=x").is_err());
        assert_eq!(parse_address_range("127.128.0.0/9").unwrap().1, 9);
        assert!(parse_address_range("10.0.0.0/8").is_err());
        assert!(parse_address_range("127.0.0.0/4").is_err());
    }
}
