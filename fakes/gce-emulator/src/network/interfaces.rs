//! What an instance holds on a network, read from its wire JSON (`compute#instance`,
//! Compute API v1 reference): `networkInterfaces[].network`, `networkIP` and
//! `aliasIpRanges[].ipCidrRange`, `tags.items`, `serviceAccounts[].email`.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::snapshot::{key_from_url, ResourceKey};
use crate::validate::{cidr_contains, parse_cidr};

/// One network interface of an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nic {
    /// Key of its network (`projects/p/global/networks/n`).
    pub network: ResourceKey,
    /// `networkIP` (primary internal address).
    pub ip: Option<Ipv4Addr>,
    /// `aliasIpRanges[].ipCidrRange`.
    pub aliases: Vec<(Ipv4Addr, u8)>,
}

impl Nic {
    /// Whether `ip` is this interface's primary address or inside one of its alias ranges
    /// (what the Compute API requires of a GCE_VM_IP_PORT endpoint's address).
    pub fn holds(&self, ip: Ipv4Addr) -> bool {
        self.ip == Some(ip) || self.aliases.iter().any(|r| cidr_contains(*r, ip))
    }
}

/// The network interfaces of `instance`.
pub fn nics(instance: &Value) -> Vec<Nic> {
    instance
        .get("networkInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| {
            let network = n
                .get("network")
                .and_then(Value::as_str)
                .and_then(key_from_url)?;
            let ip = n
                .get("networkIP")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok());
            let aliases = n
                .get("aliasIpRanges")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|a| parse_cidr(a.get("ipCidrRange")?.as_str()?))
                .collect();
            Some(Nic {
                network,
                ip,
                aliases,
            })
        })
        .collect()
}

/// The interface of `instance` on `network` (a key), if it has one.
pub fn nic_on(instance: &Value, network: &str) -> Option<Nic> {
    nics(instance).into_iter().find(|n| n.network == network)
}

/// `tags.items` of an instance.
pub fn tags(instance: &Value) -> Vec<String> {
    instance
        .pointer("/tags/items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_string))
        .collect()
}

/// `serviceAccounts[].email` of an instance.
pub fn service_accounts(instance: &Value) -> Vec<String> {
    instance
        .get("serviceAccounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("email")?.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn primary_and_alias_addresses() {
        let vm = json!({"networkInterfaces": [{"network": "http://h/compute/v1/projects/p/global/networks/default",
            "networkIP": "127.32.0.2", "aliasIpRanges": [{"ipCidrRange": "127.64.1.0/24"}]}],
            "tags": {"items": ["a"]}, "serviceAccounts": [{"email": "x@y"}]});
        let nic = nic_on(&vm, "projects/p/global/networks/default").unwrap();
        assert!(nic.holds("127.32.0.2".parse().unwrap()));
        assert!(nic.holds("127.64.1.77".parse().unwrap()));
        assert!(!nic.holds("127.64.2.1".parse().unwrap()));
        assert!(nic_on(&vm, "projects/p/global/networks/other").is_none());
        assert_eq!(tags(&vm), vec!["a"]);
        assert_eq!(service_accounts(&vm), vec!["x@y"]);
    }
}
