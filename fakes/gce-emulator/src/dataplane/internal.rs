//! Internal (regional) load balancers on a machine that only has loopback.
//!
//! An internal Application Load Balancer's forwarding rule holds an address of a VPC subnet
//! (`10.128.0.5`), which no socket on this machine can carry. The data plane serves such an
//! address on a loopback address by a fixed, documented mapping:
//!
//! ```text
//! internal a.b.c.d  ->  loopback 127.(64 + b mod 64).c.d      (inside 127.64.0.0/10)
//! ```
//!
//! so `10.128.0.5` is served on `127.64.0.5` and `192.168.1.9` on `127.104.1.9`. The range
//! 127.64.0.0/10 is apart from the emulator's external addresses (`--address-range`, default
//! 127.128.0.0/9) and from instance addresses (127.32.0.0/11). Two internal addresses that
//! agree in `b mod 64`, `c` and `d` map to the same loopback address; the second listener on the
//! same port then fails to bind and is logged. `GET /_emulator/listeners` shows each rule's
//! `ipAddress` (the internal IP) beside `localAddr` (the loopback socket carrying it), and
//! `gce-emulator --loopback-for IP` prints the mapping.
//!
//! The proxies of regional Application Load Balancers reach backends from the region's
//! proxy-only subnet ("Proxy-only subnets for Envoy-based load balancers": firewall rules must
//! admit that range), so [`proxy_source`] gives the address the VPC firewall evaluates a
//! proxied connection from.

use std::net::{IpAddr, Ipv4Addr};

use crate::network::PROXY_SOURCE;
use crate::snapshot::{key_from_url, Snapshot};

/// The loopback address that carries `ip`: loopback addresses are themselves; other IPv4
/// addresses map into 127.64.0.0/10 as the module docs say; IPv6 is unchanged.
pub fn loopback_for(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if !v4.is_loopback() => {
            let [_, b, c, d] = v4.octets();
            IpAddr::V4(Ipv4Addr::new(127, 64 + b % 64, c, d))
        }
        other => other,
    }
}

/// The address the firewall evaluates a connection proxied by `backend_service` (a key) from:
/// for a regional backend service, the first usable address of the ACTIVE proxy-only subnet of
/// its region in `network` (a key); for a global one, or when the region has no proxy-only
/// subnet, the Google front end range's [`PROXY_SOURCE`].
pub fn proxy_source(snap: &Snapshot, backend_service: &str, network: &str) -> Ipv4Addr {
    let parts: Vec<&str> = backend_service.split('/').collect();
    let ["projects", _, "regions", region, ..] = parts.as_slice() else {
        return PROXY_SOURCE;
    };
    let project = network.split('/').nth(1).unwrap_or_default();
    let prefix = format!("projects/{project}/regions/{region}/subnetworks/");
    snap.resources
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(_, v)| v)
        .find(|v| {
            matches!(
                v["purpose"].as_str(),
                Some("REGIONAL_MANAGED_PROXY" | "INTERNAL_HTTPS_LOAD_BALANCER")
            ) && v["role"] == "ACTIVE"
                && v["network"].as_str().and_then(key_from_url).as_deref() == Some(network)
        })
        .and_then(|v| {
            v["ipCidrRange"]
                .as_str()
                .and_then(crate::validate::parse_cidr)
        })
        .map(|(net, _)| Ipv4Addr::from(u32::from(net) + 2))
        .unwrap_or(PROXY_SOURCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_map_into_127_64_slash_10() {
        let map = |s: &str| loopback_for(s.parse().unwrap()).to_string();
        assert_eq!(map("10.128.0.5"), "127.64.0.5");
        assert_eq!(map("192.168.1.9"), "127.104.1.9");
        assert_eq!(map("127.130.0.1"), "127.130.0.1");
    }
}
