//! `globalForwardingRules`: an IP address and port in front of a target HTTP(S), TCP or SSL proxy. The data
//! plane opens a real listener for each. `IPAddress` may be omitted (an ephemeral address is
//! allocated), name a reserved global address by URL or name, or give a reserved address's IP.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::addresses;
use crate::errors::ApiError;
use crate::resources::{collection_of_key, load_balancing_schemes, Prepare};
use crate::snapshot::key_in_project;
use crate::validate::{self, Obj};

/// Ports a classic (`EXTERNAL`) proxy Network Load Balancer accepts.
const CLASSIC_PROXY_PORTS: &[u16] = &[
    25, 43, 110, 143, 195, 443, 465, 587, 700, 993, 995, 1883, 3389, 5222, 5432, 5671, 5672, 5900,
    5901, 6379, 8085, 8099, 9092, 9200, 9300,
];

/// Validates a global forwarding rule: `target` (a target HTTP, HTTPS, TCP or SSL proxy, required),
/// `portRange` (80 or 8080 for HTTP proxies, 443 for HTTPS proxies, as classic external
/// load balancers allow), `IPProtocol` TCP, scheme EXTERNAL or EXTERNAL_MANAGED; the
/// (address, port) pair must be free.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
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

/// What global and regional forwarding rules to target proxies share: `IPProtocol` TCP, the
/// enums, `target` (one of `targets`, required), `portRange` (normalised to `P-P`) and the
/// scheme of the backend services behind the target
/// ([`load_balancing_schemes::check_forwarding_rule`]); returns the port.
pub fn prepare_frontend(cx: &Prepare<'_>, r: &mut Obj, targets: &[&str]) -> Result<u16, ApiError> {
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
pub fn check_free(cx: &Prepare<'_>, ip: Ipv4Addr, port: u16) -> Result<(), ApiError> {
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
    let key = key_in_project(cx.project, given)
        .or_else(|| {
            validate::check_name("", given)
                .ok()
                .map(|_| format!("projects/{}/global/addresses/{given}", cx.project))
        })
        .filter(|k| collection_of_key(k).is_some_and(|c| c.segment == "addresses"))
        .ok_or_else(|| {
            ApiError::invalid_value(
                "resource.IPAddress",
                given,
                "Must be an IPv4 address or a reference to a global address.",
            )
        })?;
    let addr = cx.state.resources.get(&key).ok_or_else(|| {
        let mut e = ApiError::not_found(&key);
        e.field = Some("resource.IPAddress".into());
        e
    })?;
    addr["address"]
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
