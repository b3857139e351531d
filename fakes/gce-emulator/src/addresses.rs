//! Allocation of load balancer IPv4 addresses from `--address-range` (default 127.128.0.0/9):
//! random, so that many emulators on one machine rarely collide, and unique within this one.

use std::net::Ipv4Addr;

use crate::errors::ApiError;
use crate::store::State;

/// Picks a random free address in `range` (`(network, prefix length)`), skipping the network
/// and broadcast addresses. Errors: 400 `ipSpaceExhausted` when the range is full.
pub fn allocate(state: &State, (net, len): (Ipv4Addr, u8)) -> Result<Ipv4Addr, ApiError> {
    let size: u64 = 1u64 << (32 - u32::from(len));
    let base = u32::from(net) & if len == 0 { 0 } else { u32::MAX << (32 - len) };
    let usable = |off: u64| size <= 2 || (off != 0 && off != size - 1);
    for _ in 0..64 {
        let off = rand::random::<u64>() % size;
        let ip = Ipv4Addr::from(base.wrapping_add(off as u32));
        if usable(off) && state.ip_owners(ip).next().is_none() {
            return Ok(ip);
        }
    }
    // Dense range: scan in order.
    (0..size)
        .filter(|off| usable(*off))
        .map(|off| Ipv4Addr::from(base.wrapping_add(off as u32)))
        .find(|ip| state.ip_owners(*ip).next().is_none())
        .ok_or_else(|| {
            ApiError::new(
                400,
                "ipSpaceExhausted",
                format!("No free address left in the emulator's address range {net}/{len}."),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allocates_unique_addresses_in_range() {
        let mut s = State::new("b/".into());
        let range = ("127.200.0.0".parse().unwrap(), 30);
        let mut got = Vec::new();
        for i in 0..2 {
            let ip = allocate(&s, range).unwrap();
            assert!(crate::validate::cidr_contains(range, ip));
            s.put(
                format!("projects/p/global/addresses/a{i}"),
                json!({"address": ip.to_string()}),
            );
            got.push(ip);
        }
        assert_ne!(got[0], got[1]);
        assert!(allocate(&s, range).is_err());
    }
}
