//! IPv4 ranges as VPC firewall rules and subnetworks give them: `10.0.0.0/8`, or a bare
//! address for `/32` (Compute API `firewalls.sourceRanges`, `subnetworks.ipCidrRange`), on
//! the `ipnet` crate.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// `s` as a range with its host bits cleared (`10.1.2.3/8` is `10.0.0.0/8`); `None` when it
/// is not an IPv4 range (an IPv6 one, a prefix over 32, text).
pub fn parse_v4(s: &str) -> Option<Ipv4Net> {
    let s = s.trim();
    if s.contains('/') {
        s.parse::<Ipv4Net>().ok().map(|n| n.trunc())
    } else {
        s.parse::<Ipv4Addr>().ok().map(Ipv4Net::from)
    }
}

/// Whether `outer` holds every address of `inner`.
pub fn covers(outer: &Ipv4Net, inner: &Ipv4Net) -> bool {
    outer.contains(inner)
}

/// Whether two ranges share an address (of two CIDR ranges, one then holds the other).
pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    covers(a, b) || covers(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_cover_and_overlap_as_cidr_says() {
        let net = |s: &str| parse_v4(s).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(net("130.211.1.7/22"), net("130.211.0.0/22"));
        assert_eq!(net(" 10.0.0.1 "), net("10.0.0.1/32"));
        assert_eq!(net("0.0.0.0/0").prefix_len(), 0);
        for bad in ["10.0.0.0/33", "fd00::/8", "10.0.0/8", "x", ""] {
            assert_eq!(parse_v4(bad), None, "{bad}");
        }
        let google = net("35.191.0.0/16");
        assert!(covers(&net("35.0.0.0/8"), &google));
        assert!(covers(&google, &google));
        assert!(covers(&net("0.0.0.0/0"), &google));
        assert!(!covers(&net("35.191.0.0/17"), &google));
        assert!(!covers(&net("35.192.0.0/10"), &google));
        assert!(overlaps(&net("35.191.128.0/17"), &google));
        assert!(overlaps(&google, &net("35.191.128.0/17")));
        assert!(overlaps(&net("35.191.4.4"), &google));
        assert!(!overlaps(&net("35.190.255.255"), &google));
        assert!(!overlaps(&net("130.211.0.0/22"), &google));
    }
}
