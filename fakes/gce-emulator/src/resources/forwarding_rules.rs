//! `globalForwardingRules` and `forwardingRules` (regional): an IP address and port in front of
//! a target proxy (Compute API v1 reference, `globalForwardingRules` and `forwardingRules`). The
//! data plane opens a real listener for each.
//!
//! A global rule fronts a target HTTP(S), TCP or SSL proxy. `IPAddress` may be omitted (an
//! ephemeral address is allocated), name a reserved global address by URL or name, or give a
//! reserved address's IP.
//!
//! A regional rule is the frontend of a regional Application Load Balancer ("Internal
//! Application Load Balancer overview", "Proxy-only subnets for Envoy-based load balancers"):
//! - `loadBalancingScheme` INTERNAL_MANAGED (regional internal) or EXTERNAL_MANAGED (regional
//!   external) with a regional target HTTP(S) proxy of the same region; the passthrough
//!   schemes are not emulated (400 saying so). The scheme must be the one of the backend
//!   services behind the proxy's URL map (`load_balancing_schemes`).
//! - Both need an ACTIVE proxy-only subnetwork (`purpose: REGIONAL_MANAGED_PROXY`) in the
//!   rule's region and network, else 400 "An active proxy-only subnetwork is required in the
//!   same region and VPC as the forwarding rule."
//! - INTERNAL_MANAGED: `network` (default `default`) and a PRIVATE `subnetwork` of the region
//!   (required unless the network has exactly one there); `IPAddress` is a usable address of
//!   that subnet (given, a regional INTERNAL address's, or the lowest free one).
//! - EXTERNAL_MANAGED: `IPAddress` from the loopback range like global rules, or a regional
//!   EXTERNAL address's.
//! - `portRange` 80 or 8080 (HTTP) / 443 (HTTPS); the (address, port) pair must be free.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::addresses;
use crate::errors::ApiError;
use crate::resources::backend_services::PROXY_SCHEMES;
use crate::resources::collections::{collection_of_key, Scope};
use crate::resources::load_balancing_schemes;
use crate::resources::networks::network_field;
use crate::resources::references::Prepare;
use crate::resources::subnetworks;
use crate::snapshot::{key_from_url, key_in_project};
use crate::validate::{self, Obj};

/// Ports a classic (`EXTERNAL`) proxy Network Load Balancer accepts.
const CLASSIC_PROXY_PORTS: &[u16] = &[
    25, 43, 110, 143, 195, 443, 465, 587, 700, 993, 995, 1883, 3389, 5222, 5432, 5671, 5672, 5900,
    5901, 6379, 8085, 8099, 9092, 9200, 9300,
];

/// Validates a global forwarding rule: `target` (a target HTTP, HTTPS, TCP or SSL proxy, required),
/// `portRange` (80 or 8080 for HTTP proxies, 443 for HTTPS proxies, as classic external
/// load balancers allow), `IPProtocol` TCP, scheme EXTERNAL or EXTERNAL_MANAGED; the
/// (address, port) pair must be free. A regional forwarding rule (`scope` Regional) as the
/// module docs say. Errors: 400 `invalid` naming the field, 404 for a target, address or
/// network that does not exist.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj, scope: Scope) -> Result<(), ApiError> {
    if scope == Scope::Regional {
        return prepare_regional(cx, r);
    }
    let port = prepare_frontend(
        cx,
        r,
        &[
            "targetHttpProxies",
            "targetHttpsProxies",
            "targetTcpProxies",
            "targetSslProxies",
        ],
    )?;
    let ip = resolve_ip(cx, r)?;
    check_free(cx, ip, port)?;
    r.insert("IPAddress".into(), ip.to_string().into());
    Ok(())
}

/// A regional forwarding rule (see the module docs).
fn prepare_regional(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    let port = prepare_frontend(cx, r, &["targetHttpProxies", "targetHttpsProxies"])?;
    let scheme = validate::req_str(r, "resource", "loadBalancingScheme")?.to_string();
    if !PROXY_SCHEMES.contains(&scheme.as_str()) {
        return Err(ApiError::invalid_value(
            "resource.loadBalancingScheme",
            &scheme,
            "The emulator serves regional forwarding rules of the regional Application Load Balancers only: use INTERNAL_MANAGED or EXTERNAL_MANAGED with a regional target proxy.",
        ));
    }
    let target = r["target"].as_str().unwrap_or_default().to_string();
    subnetworks::infer_network(cx, r)?;
    network_field(cx, r)?;
    let network = r["network"]
        .as_str()
        .and_then(key_from_url)
        .unwrap_or_default();
    let region = cx.zone.unwrap_or_default();
    if subnetworks::active_proxy_only(cx.state, &network, region).is_none() {
        return Err(ApiError::invalid_value(
            "resource.target",
            &target,
            "An active proxy-only subnetwork is required in the same region and VPC as the forwarding rule.",
        ));
    }
    let old_ip = cx
        .old
        .and_then(|o| o["IPAddress"].as_str())
        .map(str::to_string);
    let given = validate::opt_str(r, "resource", "IPAddress")?
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let given = match given {
        Some(g) if g.parse::<Ipv4Addr>().is_err() => Some(
            reserved_address(cx, &g, Scope::Regional)?["address"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ),
        other => other.or(old_ip),
    };
    let ip = if scheme == "INTERNAL_MANAGED" {
        let (_, range) = subnetworks::private_subnet(cx, r, &network)?;
        match &given {
            // A reserved address of this region holds the IP: the rule may use it.
            Some(g) if reserved_here(cx, g) => g.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
            g => subnetworks::internal_address(cx, "resource.IPAddress", g.as_deref(), range)?,
        }
    } else {
        if r.contains_key("subnetwork") {
            return Err(ApiError::invalid_value(
                "resource.subnetwork",
                validate::opt_str(r, "resource", "subnetwork")?.unwrap_or_default(),
                "subnetwork is only set on INTERNAL_MANAGED forwarding rules.",
            ));
        }
        match &given {
            Some(g) => {
                let ip: Ipv4Addr = g.parse().map_err(|_| {
                    ApiError::invalid_value("resource.IPAddress", g, "Must be an IPv4 address.")
                })?;
                if !(reserved_here(cx, g)
                    || Some(g)
                        == cx
                            .old
                            .and_then(|o| o["IPAddress"].as_str())
                            .map(str::to_string)
                            .as_ref()
                    || (validate::cidr_contains(cx.address_range, ip)
                        && cx.state.ip_owners(ip).next().is_none()))
                {
                    return Err(ApiError::invalid_value("resource.IPAddress", g, "The IP address is neither a reserved address of this region nor a free address of the emulator's range."));
                }
                ip
            }
            None => addresses::allocate(cx.state, cx.address_range)?,
        }
    };
    check_free(cx, ip, port)?;
    r.insert("IPAddress".into(), ip.to_string().into());
    Ok(())
}

/// What global and regional forwarding rules to target proxies share: `IPProtocol` TCP, the
/// enums, `target` (one of `targets`, required), `portRange` (normalised to `P-P`) and the
/// scheme of the backend services behind the target
/// ([`load_balancing_schemes::check_forwarding_rule`]); returns the port.
fn prepare_frontend(cx: &Prepare<'_>, r: &mut Obj, targets: &[&str]) -> Result<u16, ApiError> {
    validate::opt_str(r, "resource", "description")?;
    validate::enum_field(
        r,
        "resource",
        "IPProtocol",
        &["TCP", "UDP", "ESP", "AH", "SCTP", "ICMP", "L3_DEFAULT"],
        Some("TCP"),
    )?;
    if validate::opt_str(r, "resource", "IPProtocol")? != Some("TCP") {
        return Err(ApiError::invalid_value(
            "resource.IPProtocol",
            validate::opt_str(r, "resource", "IPProtocol")?.unwrap_or_default(),
            "Only TCP is emulated for global forwarding rules to target proxies.",
        ));
    }
    validate::enum_field(
        r,
        "resource",
        "loadBalancingScheme",
        &[
            "EXTERNAL",
            "EXTERNAL_MANAGED",
            "INTERNAL_SELF_MANAGED",
            "INTERNAL_MANAGED",
            "INTERNAL",
        ],
        Some("EXTERNAL"),
    )?;
    validate::enum_field(
        r,
        "resource",
        "networkTier",
        &["PREMIUM", "STANDARD"],
        Some("PREMIUM"),
    )?;
    validate::enum_field(r, "resource", "ipVersion", &["IPV4", "IPV6"], None)?;
    let target = cx
        .ref_field(r, "resource", "target", targets)?
        .ok_or_else(|| ApiError::required("resource.target"))?;
    let https = target.contains("/targetHttpsProxies/");
    let stream = target.contains("/targetTcpProxies/") || target.contains("/targetSslProxies/");
    let port_range = match r.get("portRange") {
        None | Some(Value::Null) => if https { "443" } else { "80" }.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(ApiError::invalid_value(
                "resource.portRange",
                &validate::show(other),
                "Expected a port such as 80.",
            ))
        }
    };
    let port = parse_port_range(&port_range).ok_or_else(|| {
        ApiError::invalid_value(
            "resource.portRange",
            &port_range,
            "Must be a single port such as 80 or 80-80.",
        )
    })?;
    let managed =
        validate::opt_str(r, "resource", "loadBalancingScheme")? == Some("EXTERNAL_MANAGED");
    let allowed: &[u16] = if https { &[443] } else { &[80, 8080] };
    // Proxy Network Load Balancers: any port with EXTERNAL_MANAGED, the classic list with
    // EXTERNAL ("Proxy Network Load Balancer overview", port specifications).
    let stream_ok = managed || CLASSIC_PROXY_PORTS.contains(&port);
    if (stream && !stream_ok) || (!stream && !allowed.contains(&port)) {
        let kind = if stream {
            "target TCP or SSL proxy with the EXTERNAL scheme: 25, 43, 110, 143, 195, 443, 465, 587, 700, 993, 995, 1883, 3389, 5222, 5432, 5671, 5672, 5900, 5901, 6379, 8085, 8099, 9092, 9200, 9300"
        } else if https {
            "target HTTPS proxy: 443"
        } else {
            "target HTTP proxy: 80, 8080"
        };
        return Err(ApiError::invalid_value(
            "resource.portRange",
            &port_range,
            &format!("The port range is not valid for a forwarding rule to a {kind}."),
        ));
    }
    r.insert("portRange".into(), format!("{port}-{port}").into());
    load_balancing_schemes::check_forwarding_rule(cx, r)?;
    Ok(port)
}

/// Refuses an (address, port) pair another forwarding rule already serves.
fn check_free(cx: &Prepare<'_>, ip: Ipv4Addr, port: u16) -> Result<(), ApiError> {
    for owner in cx.state.ip_owners(ip) {
        if owner.as_str() == cx.key || !owner.contains("/forwardingRules/") {
            continue;
        }
        let other_port = cx
            .state
            .resources
            .get(owner)
            .and_then(|v| v["portRange"].as_str().and_then(parse_port_range));
        if other_port == Some(port) {
            return Err(ApiError::invalid_value(
                "resource.IPAddress",
                &ip.to_string(),
                &format!(
                    "The IP address and port are already in use by forwarding rule '{owner}'."
                ),
            ));
        }
    }
    Ok(())
}

/// `80`, `80-80` -> 80; ranges of more than one port are not served by target proxies.
pub fn parse_port_range(s: &str) -> Option<u16> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let (lo, hi) = (
        lo.trim().parse::<u16>().ok()?,
        hi.trim().parse::<u16>().ok()?,
    );
    (lo == hi && lo != 0).then_some(lo)
}

/// The rule's IPv4 address: kept on update, a reserved global address (by URL, name or IP),
/// or a fresh one from the range.
fn resolve_ip(cx: &Prepare<'_>, r: &Obj) -> Result<Ipv4Addr, ApiError> {
    let old_ip = cx
        .old
        .and_then(|o| o["IPAddress"].as_str())
        .and_then(|s| s.parse::<Ipv4Addr>().ok());
    let Some(given) = validate::opt_str(r, "resource", "IPAddress")?.filter(|s| !s.is_empty())
    else {
        return match old_ip {
            Some(ip) => Ok(ip),
            None => addresses::allocate(cx.state, cx.address_range),
        };
    };
    if let Ok(ip) = given.parse::<Ipv4Addr>() {
        if Some(ip) == old_ip {
            return Ok(ip);
        }
        let reserved = cx
            .state
            .ip_owners(ip)
            .any(|k| k.starts_with(&format!("projects/{}/global/addresses/", cx.project)));
        if reserved
            || (validate::cidr_contains(cx.address_range, ip)
                && cx.state.ip_owners(ip).next().is_none())
        {
            return Ok(ip);
        }
        return Err(ApiError::invalid_value("resource.IPAddress", given, "The IP address is neither a reserved global address of this project nor a free address of the emulator's range."));
    }
    reserved_address(cx, given, Scope::Global)?["address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ApiError::invalid_value(
                "resource.IPAddress",
                given,
                "The address has no IPv4 address.",
            )
        })
}

/// Whether a regional address of this project and region reserves `ip`.
fn reserved_here(cx: &Prepare<'_>, ip: &str) -> bool {
    let Ok(ip) = ip.parse::<Ipv4Addr>() else {
        return false;
    };
    let prefix = format!(
        "projects/{}/regions/{}/addresses/",
        cx.project,
        cx.zone.unwrap_or_default()
    );
    cx.state.ip_owners(ip).any(|k| k.starts_with(&prefix))
}

/// The stored address a forwarding rule's `IPAddress` names (a URL, a partial path, or a name
/// in the rule's scope: `projects/{p}/global/addresses/{name}` for a global rule,
/// `projects/{p}/regions/{region}/addresses/{name}` for a regional one). Errors: 400 `invalid`
/// on `resource.IPAddress` when `reference` names no address of the scope, 404 when the address
/// does not exist.
fn reserved_address<'s>(
    cx: &Prepare<'s>,
    reference: &str,
    scope: Scope,
) -> Result<&'s Value, ApiError> {
    let regional = scope == Scope::Regional;
    let home = if regional {
        format!(
            "projects/{}/regions/{}/addresses/",
            cx.project,
            cx.zone.unwrap_or_default()
        )
    } else {
        format!("projects/{}/global/addresses/", cx.project)
    };
    let of_scope = |k: &String| {
        if regional {
            k.contains("/regions/") && k.contains("/addresses/")
        } else {
            collection_of_key(k).is_some_and(|c| c.segment == "addresses")
        }
    };
    let key = key_in_project(cx.project, reference)
        .or_else(|| {
            validate::check_name("", reference)
                .ok()
                .map(|_| format!("{home}{reference}"))
        })
        .filter(of_scope)
        .ok_or_else(|| {
            ApiError::invalid_value(
                "resource.IPAddress",
                reference,
                if regional {
                    "Must be an IPv4 address or a reference to a regional address."
                } else {
                    "Must be an IPv4 address or a reference to a global address."
                },
            )
        })?;
    let addr = cx.state.resources.get(&key).ok_or_else(|| {
        let mut e = ApiError::not_found(&key);
        e.field = Some("resource.IPAddress".into());
        e
    })?;
    Ok(addr.as_ref())
}
