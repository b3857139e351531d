//! `subnetworks` (regional): the subnets of a VPC network, as far as load balancers use them
//! (Compute API v1 reference, `subnetworks`; "Proxy-only subnets for Envoy-based load
//! balancers").
//!
//! - `network` (required) and `ipCidrRange` (required, an IPv4 CIDR of prefix length 8-29) are
//!   immutable; ranges of one network may not overlap, in any region.
//! - `purpose`: PRIVATE (default) for VMs and internal forwarding rules; REGIONAL_MANAGED_PROXY
//!   (and its older name INTERNAL_HTTPS_LOAD_BALANCER) for the proxy-only subnet the Envoy
//!   proxies of the regional Application Load Balancers take their addresses from. The purpose
//!   is immutable.
//! - `role` (ACTIVE or BACKUP) is required for proxy-only subnets and refused for the others;
//!   a region and network have at most one ACTIVE proxy-only subnet (`patch` may change the
//!   role, as the "role" field's reference describes the BACKUP -> ACTIVE promotion).
//! - `gatewayAddress` is the range's first usable address (PRIVATE subnets only).
//!
//! Deviation: the auto-mode subnetworks of the `default` network are not materialised; create
//! the subnets a test needs (`gcloud compute networks subnets create`).

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::networks::network_field;
use crate::resources::references::Prepare;
use crate::snapshot::key_from_url;
use crate::validate::{self, parse_cidr, Obj};

/// The purposes of proxy-only subnets.
pub const PROXY_ONLY: &[&str] = &["REGIONAL_MANAGED_PROXY", "INTERNAL_HTTPS_LOAD_BALANCER"];

const PURPOSES: &[&str] = &[
    "PRIVATE",
    "PRIVATE_RFC_1918",
    "REGIONAL_MANAGED_PROXY",
    "INTERNAL_HTTPS_LOAD_BALANCER",
    "GLOBAL_MANAGED_PROXY",
    "PRIVATE_SERVICE_CONNECT",
    "PRIVATE_NAT",
    "PEER_MIGRATION",
];

/// Validates a subnetwork (see the module docs).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    r.remove("gatewayAddress");
    if validate::opt_str(r, "resource", "network")?.is_none() {
        return Err(ApiError::required("resource.network"));
    }
    network_field(cx, r)?;
    let range_s = validate::req_str(r, "resource", "ipCidrRange")?.to_string();
    let range = parse_cidr(&range_s)
        .filter(|(_, len)| (8..=29).contains(len))
        .ok_or_else(|| {
            ApiError::invalid_value(
                "resource.ipCidrRange",
                &range_s,
                "Must be an IPv4 CIDR with a prefix length between 8 and 29.",
            )
        })?;
    let range = (network_address(range), range.1);
    r.insert(
        "ipCidrRange".into(),
        format!("{}/{}", range.0, range.1).into(),
    );
    validate::enum_field(r, "resource", "purpose", PURPOSES, Some("PRIVATE"))?;
    let purpose = validate::req_str(r, "resource", "purpose")?.to_string();
    validate::enum_field(r, "resource", "role", &["ACTIVE", "BACKUP"], None)?;
    let role = validate::opt_str(r, "resource", "role")?.map(str::to_string);
    let proxy_only = PROXY_ONLY.contains(&purpose.as_str());
    match (&role, proxy_only) {
        (None, true) => return Err(ApiError::required("resource.role")),
        (Some(role), false) => {
            return Err(ApiError::invalid_value(
                "resource.role",
                role,
                "role can only be set on proxy-only subnetworks (purpose REGIONAL_MANAGED_PROXY).",
            ))
        }
        _ => {}
    }
    validate::bool_field(r, "resource", "privateIpGoogleAccess", Some(false))?;
    validate::enum_field(
        r,
        "resource",
        "stackType",
        &["IPV4_ONLY"],
        Some("IPV4_ONLY"),
    )?;
    let network = r["network"].as_str().unwrap_or_default().to_string();
    if let Some(old) = cx.old {
        for (field, now) in [
            ("network", network.as_str()),
            ("ipCidrRange", r["ipCidrRange"].as_str().unwrap_or_default()),
            ("purpose", purpose.as_str()),
        ] {
            if old[field].as_str() != Some(now) {
                return Err(ApiError::invalid_value(
                    &format!("resource.{field}"),
                    now,
                    &format!("The subnetwork's {field} cannot be changed."),
                ));
            }
        }
    }
    for (key, other) in cx.state.resources.iter() {
        if key.as_str() == cx.key
            || !key.contains("/subnetworks/")
            || other["network"].as_str().and_then(key_from_url) != key_from_url(&network)
        {
            continue;
        }
        let Some(o) = other["ipCidrRange"].as_str().and_then(parse_cidr) else {
            continue;
        };
        let len = o.1.min(range.1);
        if validate::cidr_contains((o.0, len), range.0) {
            return Err(ApiError::invalid_value(
                "resource.ipCidrRange",
                &range_s,
                &format!(
                    "The range overlaps the range {} of subnetwork '{key}'.",
                    other["ipCidrRange"].as_str().unwrap_or_default()
                ),
            ));
        }
        let same_region = key.rsplit_once("/subnetworks/").map(|(p, _)| p)
            == cx.key.rsplit_once("/subnetworks/").map(|(p, _)| p);
        if proxy_only
            && role.as_deref() == Some("ACTIVE")
            && same_region
            && other["role"] == "ACTIVE"
        {
            return Err(ApiError::invalid_value(
                "resource.role",
                "ACTIVE",
                &format!("There is already an ACTIVE proxy-only subnetwork in this region and network: '{key}'."),
            ));
        }
    }
    if !proxy_only {
        r.insert(
            "gatewayAddress".into(),
            Value::String(Ipv4Addr::from(u32::from(range.0) + 1).to_string()),
        );
    }
    Ok(())
}

/// The first address of a range (`10.0.0.7/24` -> `10.0.0.0`).
pub fn network_address((ip, len): (Ipv4Addr, u8)) -> Ipv4Addr {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Ipv4Addr::from(u32::from(ip) & mask)
}

/// The usable host addresses of a subnet's range, lowest first: Google Cloud reserves the
/// network and gateway addresses (the first two) and the last two ("Reserved IP addresses in
/// IPv4 subnets").
pub fn usable_hosts(range: (Ipv4Addr, u8)) -> impl Iterator<Item = Ipv4Addr> {
    let base = u32::from(network_address(range));
    let size = 1u64 << (32 - u32::from(range.1));
    (2..size.saturating_sub(2)).map(move |off| Ipv4Addr::from(base + off as u32))
}

/// The ACTIVE proxy-only subnetwork of `network` (a key) in the region of `region_prefix`
/// (`projects/p/regions/r/`), if any; Shared VPC subnets live in the network's project.
pub fn active_proxy_only<'s>(
    state: &'s crate::store::State,
    network: &str,
    region: &str,
) -> Option<(&'s String, &'s Value)> {
    let project = network.split('/').nth(1).unwrap_or_default();
    let prefix = format!("projects/{project}/regions/{region}/subnetworks/");
    let found = state
        .resources
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k, v.as_ref()))
        .find(|(_, v)| {
            v["purpose"]
                .as_str()
                .is_some_and(|p| PROXY_ONLY.contains(&p))
                && v["role"] == "ACTIVE"
                && v["network"].as_str().and_then(key_from_url).as_deref() == Some(network)
        });
    found
}

/// Fills a missing `network` of `r` from its `subnetwork`, as the API infers it.
pub fn infer_network(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    if validate::opt_str(r, "resource", "network")?.is_some_and(|n| !n.is_empty()) {
        return Ok(());
    }
    let Some(subnet) = validate::opt_str(r, "resource", "subnetwork")?.filter(|s| !s.is_empty())
    else {
        return Ok(());
    };
    let key = cx.parse_reference("resource.subnetwork", subnet, &["subnetworks"])?;
    if let Some(net) = cx
        .state
        .resources
        .get(&key)
        .and_then(|v| v["network"].as_str())
    {
        r.insert("network".into(), Value::String(net.to_string()));
    }
    Ok(())
}

/// The key and range of subnetwork `field` of `r` (a reference, normalised in place), which
/// must be a PRIVATE subnetwork of the region of `cx.key`; when `r` names none, the one
/// PRIVATE subnetwork of `network` in that region. Errors: 400 naming `resource.subnetwork`.
pub fn private_subnet(
    cx: &Prepare<'_>,
    r: &mut Obj,
    network: &str,
) -> Result<(String, (Ipv4Addr, u8)), ApiError> {
    let key = match cx.ref_field(r, "resource", "subnetwork", &["subnetworks"])? {
        Some(url) => key_from_url(&url).unwrap_or_default(),
        None => {
            let region = cx.zone.unwrap_or_default();
            let project = network.split('/').nth(1).unwrap_or_default();
            let prefix = format!("projects/{project}/regions/{region}/subnetworks/");
            let candidates: Vec<&String> = cx
                .state
                .scan(&prefix)
                .filter(|(_, v)| {
                    v["purpose"] == "PRIVATE"
                        && v["network"].as_str().and_then(key_from_url).as_deref() == Some(network)
                })
                .map(|(k, _)| k)
                .collect();
            let [one] = candidates.as_slice() else {
                return Err(ApiError::required("resource.subnetwork"));
            };
            r.insert("subnetwork".into(), Value::String(cx.url(one)));
            (*one).clone()
        }
    };
    let subnet = cx
        .state
        .resources
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key))?;
    let url = cx.url(&key);
    if subnet["purpose"] != "PRIVATE" {
        return Err(ApiError::invalid_value(
            "resource.subnetwork",
            &url,
            "Internal addresses come from a PRIVATE subnetwork; a proxy-only subnetwork cannot hold them.",
        ));
    }
    if subnet["network"].as_str().and_then(key_from_url).as_deref() != Some(network) {
        return Err(ApiError::invalid_value(
            "resource.subnetwork",
            &url,
            "The subnetwork does not belong to the resource's network.",
        ));
    }
    let range = subnet["ipCidrRange"]
        .as_str()
        .and_then(parse_cidr)
        .unwrap_or((Ipv4Addr::UNSPECIFIED, 32));
    Ok((key, range))
}

/// The internal address of an address or forwarding rule in subnet `range`: `given` when it
/// is a usable host of the range that nothing else (but `cx.key`) holds, else the lowest free
/// usable host. Errors: 400 naming `field`; `ipSpaceExhausted` when the range is full.
pub fn internal_address(
    cx: &Prepare<'_>,
    field: &str,
    given: Option<&str>,
    range: (Ipv4Addr, u8),
) -> Result<Ipv4Addr, ApiError> {
    let held_by_other = |ip: Ipv4Addr| cx.state.ip_owners(ip).any(|k| k.as_str() != cx.key);
    match given {
        Some(s) => {
            let ip: Ipv4Addr = s
                .parse()
                .map_err(|_| ApiError::invalid_value(field, s, "Must be an IPv4 address."))?;
            if !usable_hosts(range).any(|h| h == ip) {
                return Err(ApiError::invalid_value(
                    field,
                    s,
                    &format!(
                        "The address is not a usable address of the subnetwork's range {}/{}.",
                        range.0, range.1
                    ),
                ));
            }
            if held_by_other(ip) {
                return Err(ApiError::invalid_value(
                    field,
                    s,
                    "The IP address is already in use.",
                ));
            }
            Ok(ip)
        }
        None => usable_hosts(range)
            .find(|ip| !held_by_other(*ip))
            .ok_or_else(|| {
                ApiError::new(
                    400,
                    "ipSpaceExhausted",
                    format!(
                        "No free address left in the subnetwork's range {}/{}.",
                        range.0, range.1
                    ),
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_hosts_skip_the_reserved_four() {
        let hosts: Vec<Ipv4Addr> = usable_hosts(("10.0.0.0".parse().unwrap(), 29)).collect();
        assert_eq!(hosts.first(), Some(&"10.0.0.2".parse().unwrap()));
        assert_eq!(hosts.last(), Some(&"10.0.0.5".parse().unwrap()));
        assert_eq!(hosts.len(), 4);
    }
}
