//! Which internal addresses the emulated network may give instances (their `networkIP` and
//! alias IP ranges, and so the NEG endpoints they hold): loopback (127.0.0.0/8) always, since
//! every 127.x.y.z address is local on Linux; and, when `--private-ranges` names them, ranges
//! of private IPv4 space (RFC 1918: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) that the host
//! routes to itself, such as a test's network namespace holding 10.244.0.0/24 on its `lo` or a
//! kind cluster's network on a laptop. A VPC-native GKE cluster uses exactly such ranges: node
//! addresses from the subnet's primary range, Pod addresses from a secondary range carried as
//! each node's alias IP range ("VPC-native clusters", Google Kubernetes Engine documentation).
//! Public addresses are never accepted: the emulator must never send traffic off the machine.

use std::net::Ipv4Addr;

use crate::errors::ApiError;
use crate::validate::{cidr_contains, parse_cidr};

/// The three private IPv4 blocks of RFC 1918, section 3.
pub const RFC1918: [(Ipv4Addr, u8); 3] = [
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
];

/// Private ranges, each `(network address, prefix length)` (an alias, so clap reads the
/// option as one value).
pub type PrivateRanges = Vec<(Ipv4Addr, u8)>;

/// A `--private-ranges` value that is not a list of CIDRs inside RFC 1918 space.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--private-ranges {given:?}: {item:?} is {why}; expected IPv4 CIDRs inside RFC 1918 private \
     space (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) that this host routes to itself, e.g. \
     10.128.0.0/20,10.244.0.0/16"
)]
pub struct PrivateRangeError {
    /// The whole option value.
    pub given: String,
    /// The offending item.
    pub item: String,
    /// Why it was refused.
    pub why: &'static str,
}

/// Whether the whole range `(ip, len)` lies inside `outer`.
fn within(outer: (Ipv4Addr, u8), (ip, len): (Ipv4Addr, u8)) -> bool {
    len >= outer.1 && cidr_contains(outer, ip)
}

/// Parses `--private-ranges`: comma-separated IPv4 CIDRs (a bare address is a /32), each
/// entirely inside one RFC 1918 block. Empty: none (loopback only, the default).
///
/// Errors: [`PrivateRangeError`] naming the item that is malformed or not private (a public
/// range such as 8.8.8.0/24, or one straddling a block's edge such as 172.0.0.0/8).
pub fn parse_private_ranges(s: &str) -> Result<PrivateRanges, PrivateRangeError> {
    let err = |item: &str, why| PrivateRangeError {
        given: s.to_string(),
        item: item.to_string(),
        why,
    };
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let cidr = parse_cidr(item).ok_or_else(|| err(item, "not an IPv4 CIDR"))?;
        if !RFC1918.iter().any(|b| within(*b, cidr)) {
            return Err(err(item, "not inside RFC 1918 private space"));
        }
        out.push(cidr);
    }
    Ok(out)
}

/// Whether an instance may hold the address or range `cidr`: inside 127.0.0.0/8, or entirely
/// inside one of `private` (the ranges `--private-ranges` allowed).
pub fn allowed(cidr: (Ipv4Addr, u8), private: &[(Ipv4Addr, u8)]) -> bool {
    within((Ipv4Addr::new(127, 0, 0, 0), 8), cidr) || private.iter().any(|r| within(*r, cidr))
}

/// Checks that an instance may hold `cidr` (given as `given` in `field`), see [`allowed`].
///
/// Errors: 400 `invalid` on `field`, saying which addresses the emulator uses ([`refusal`]).
pub fn check(
    field: &str,
    given: &str,
    cidr: (Ipv4Addr, u8),
    private: &[(Ipv4Addr, u8)],
) -> Result<(), ApiError> {
    if allowed(cidr, private) {
        Ok(())
    } else {
        Err(ApiError::invalid_value(field, given, &refusal(private)))
    }
}

/// The sentence a refusal of an instance address adds to the API's `invalid` error.
pub fn refusal(private: &[(Ipv4Addr, u8)]) -> String {
    if private.is_empty() {
        "The emulator only uses loopback addresses: give an address or range inside \
         127.0.0.0/8, or start it with --private-ranges naming the RFC 1918 range that holds \
         this one."
            .to_string()
    } else {
        let list: Vec<String> = private.iter().map(|(ip, l)| format!("{ip}/{l}")).collect();
        format!(
            "The emulator only uses loopback addresses and its --private-ranges ({}): give an \
             address or range inside 127.0.0.0/8 or one of those.",
            list.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> (Ipv4Addr, u8) {
        parse_cidr(s).unwrap()
    }

    #[test]
    fn only_rfc1918_ranges_are_accepted_as_flag_values() {
        assert_eq!(
            parse_private_ranges("10.128.0.0/20, 10.244.0.0/16,192.168.1.0/24").unwrap(),
            vec![
                cidr("10.128.0.0/20"),
                cidr("10.244.0.0/16"),
                cidr("192.168.1.0/24")
            ]
        );
        assert_eq!(parse_private_ranges("").unwrap(), vec![]);
        assert_eq!(
            parse_private_ranges("172.31.0.0/16").unwrap(),
            vec![cidr("172.31.0.0/16")]
        );
        // Public space, and ranges that straddle a private block's edge.
        for bad in [
            "8.8.8.0/24",
            "35.191.0.0/16",
            "172.32.0.0/16",
            "172.0.0.0/8",
            "10.0.0.0/7",
        ] {
            let e = parse_private_ranges(&format!("10.244.0.0/16,{bad}")).unwrap_err();
            assert_eq!(e.item, bad);
            assert_eq!(e.why, "not inside RFC 1918 private space");
            assert!(e.to_string().contains("RFC 1918"), "{e}");
        }
        // Loopback is always allowed and is no value of this flag.
        assert!(parse_private_ranges("127.0.0.0/8").is_err());
        assert_eq!(
            parse_private_ranges("10.1.2.0/33").unwrap_err().why,
            "not an IPv4 CIDR"
        );
    }

    #[test]
    fn instance_addresses_are_loopback_or_inside_a_configured_range() {
        let none: &[(Ipv4Addr, u8)] = &[];
        let pods = [cidr("10.244.0.0/16")];
        assert!(allowed(cidr("127.64.1.0/24"), none));
        assert!(!allowed(cidr("10.244.0.0/24"), none));
        assert!(allowed(cidr("10.244.0.0/24"), &pods));
        assert!(allowed(cidr("10.244.3.7/32"), &pods));
        // Partly outside the configured range.
        assert!(!allowed(cidr("10.244.0.0/15"), &pods));
        assert!(!allowed(cidr("10.245.0.1/32"), &pods));
        assert!(refusal(none).contains("--private-ranges"));
        assert!(refusal(&pods).contains("10.244.0.0/16"));
    }
}
