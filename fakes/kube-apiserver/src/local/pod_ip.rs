//! Pod IP allocation for local Pods: random addresses from a loopback CIDR (default
//! `127.64.0.0/10`, see docs/architecture.md "Network rules"). Random picks in a large range let
//! many API server instances run side by side without coordinating; each pick is checked to be
//! bindable and not already handed out by this process.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Mutex;

use rand::Rng;

/// Errors of Pod IP allocation.
#[derive(Debug, thiserror::Error)]
pub enum PodIpError {
    /// `--pod-ip-range` is not an IPv4 CIDR inside 127.0.0.0/8.
    #[error("--pod-ip-range {value:?}: {reason}; give an IPv4 CIDR inside 127.0.0.0/8 such as 127.64.0.0/10")]
    InvalidRange {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No free, bindable address was found after many random picks.
    #[error("no bindable free Pod IP in {range} after {attempts} attempts; widen --pod-ip-range")]
    Exhausted {
        /// The configured range.
        range: String,
        /// How many addresses were tried.
        attempts: u32,
    },
}

/// Hands out unique random Pod IPs from a loopback CIDR.
#[derive(Debug)]
pub struct PodIpAllocator {
    range: String,
    first: u32,
    count: u32,
    in_use: Mutex<HashSet<Ipv4Addr>>,
}

impl PodIpAllocator {
    /// Parses `a.b.c.d/len` (inside 127.0.0.0/8, at most /30). Errors: [`PodIpError::InvalidRange`].
    pub fn new(cidr: &str) -> Result<PodIpAllocator, PodIpError> {
        let invalid = |reason| PodIpError::InvalidRange {
            value: cidr.to_string(),
            reason,
        };
        let (addr, len) = cidr
            .split_once('/')
            .ok_or_else(|| invalid("missing /prefix-length"))?;
        let addr: Ipv4Addr = addr
            .trim()
            .parse()
            .map_err(|_| invalid("not an IPv4 address"))?;
        let len: u32 = len
            .trim()
            .parse()
            .map_err(|_| invalid("prefix length is not a number"))?;
        if !(8..=30).contains(&len) {
            return Err(invalid("prefix length must be between 8 and 30"));
        }
        if !addr.is_loopback() {
            return Err(invalid("only loopback addresses (127.0.0.0/8) may be used"));
        }
        let mask = u32::MAX << (32 - len);
        let network = u32::from(addr) & mask;
        // Leave out the range's first and last address (network and broadcast by convention).
        Ok(PodIpAllocator {
            range: cidr.to_string(),
            first: network + 1,
            count: (1u32 << (32 - len)) - 2,
            in_use: Mutex::new(HashSet::new()),
        })
    }

    /// A random address of the range that is free in this process and bindable on this host.
    /// Errors: [`PodIpError::Exhausted`] after 64 unlucky picks.
    pub fn allocate(&self) -> Result<Ipv4Addr, PodIpError> {
        const ATTEMPTS: u32 = 64;
        let mut rng = rand::rng();
        for _ in 0..ATTEMPTS {
            let ip = Ipv4Addr::from(self.first + rng.random_range(0..self.count));
            let fresh = self
                .in_use
                .lock()
                .map(|mut set| set.insert(ip))
                .unwrap_or(false);
            if !fresh {
                continue;
            }
            if TcpListener::bind(SocketAddr::from((ip, 0))).is_ok() {
                return Ok(ip);
            }
            self.release(ip);
        }
        Err(PodIpError::Exhausted {
            range: self.range.clone(),
            attempts: ATTEMPTS,
        })
    }

    /// Takes a specific address (e.g. a Pod's IP from before a restart) when it lies in the
    /// range, is free in this process and is bindable; false otherwise.
    pub fn claim(&self, ip: Ipv4Addr) -> bool {
        if !self.contains(ip) {
            return false;
        }
        let fresh = self
            .in_use
            .lock()
            .map(|mut set| set.insert(ip))
            .unwrap_or(false);
        if fresh && TcpListener::bind(SocketAddr::from((ip, 0))).is_ok() {
            return true;
        }
        if fresh {
            self.release(ip);
        }
        false
    }

    /// Returns an address to the pool.
    pub fn release(&self, ip: Ipv4Addr) {
        if let Ok(mut set) = self.in_use.lock() {
            set.remove(&ip);
        }
    }

    /// Whether `ip` lies in the range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        n >= self.first && n < self.first + self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_bindable_addresses_in_range() {
        let alloc = PodIpAllocator::new("127.64.0.0/10").unwrap();
        let ips: HashSet<Ipv4Addr> = (0..50).map(|_| alloc.allocate().unwrap()).collect();
        assert_eq!(ips.len(), 50);
        assert!(ips.iter().all(|ip| alloc.contains(*ip)
            && ip.octets()[0] == 127
            && (64..128).contains(&ip.octets()[1])));
    }

    #[test]
    fn a_tiny_range_is_exhausted_then_refilled_by_release() {
        let alloc = PodIpAllocator::new("127.250.1.0/30").unwrap();
        let a = alloc.allocate().unwrap();
        let b = alloc.allocate().unwrap();
        assert_ne!(a, b);
        assert!(matches!(
            alloc.allocate(),
            Err(PodIpError::Exhausted { .. })
        ));
        alloc.release(a);
        assert_eq!(alloc.allocate().unwrap(), a);
    }

    #[test]
    fn claim_takes_a_free_address_in_range_once() {
        let alloc = PodIpAllocator::new("127.64.0.0/10").unwrap();
        let ip: Ipv4Addr = "127.70.1.2".parse().unwrap();
        assert!(alloc.claim(ip));
        assert!(!alloc.claim(ip), "already in use");
        assert!(
            !alloc.claim("127.200.0.1".parse().unwrap()),
            "outside the range"
        );
        alloc.release(ip);
        assert!(alloc.claim(ip));
    }

    #[test]
    fn rejects_non_loopback_and_malformed_ranges() {
        for bad in [
            "10.0.0.0/8",
            "127.0.0.1",
            "127.0.0.0/40",
            "127.0.0.0/4",
            "x/10",
        ] {
            let err = PodIpAllocator::new(bad).unwrap_err();
            assert!(err.to_string().contains("--pod-ip-range"), "{bad}: {err}");
        }
    }
}
