//! `forwardingRules` (regional): the frontend of a regional Application Load Balancer
//! (Compute API v1 reference, `forwardingRules`; "Internal Application Load Balancer
//! overview", "Proxy-only subnets for Envoy-based load balancers").
//!
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

use crate::addresses;
use crate::errors::ApiError;
use crate::resources::region_backend_services::PROXY_SCHEMES;
use crate::resources::{global_forwarding_rules, subnetworks, Prepare};
use crate::snapshot::{key_from_url, key_in_project};
use crate::validate::{self, Obj};

/// Validates a regional forwarding rule (see the module docs).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    let port = global_forwarding_rules::prepare_frontend(
        cx,
        r,
        &["targetHttpProxies", "targetHttpsProxies"],
    )?;
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
    cx.network_field(r)?;
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
        Some(g) if g.parse::<Ipv4Addr>().is_err() => Some(address_of(cx, &g)?),
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
    global_forwarding_rules::check_free(cx, ip, port)?;
    r.insert("IPAddress".into(), ip.to_string().into());
    Ok(())
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

/// The IP of the regional address `reference` names (URL, `regions/R/addresses/N` or a name).
fn address_of(cx: &Prepare<'_>, reference: &str) -> Result<String, ApiError> {
    let region = cx.zone.unwrap_or_default();
    let key = key_in_project(cx.project, reference)
        .or_else(|| {
            validate::check_name("", reference).ok().map(|_| {
                format!(
                    "projects/{}/regions/{region}/addresses/{reference}",
                    cx.project
                )
            })
        })
        .filter(|k| k.contains("/regions/") && k.contains("/addresses/"))
        .ok_or_else(|| {
            ApiError::invalid_value(
                "resource.IPAddress",
                reference,
                "Must be an IPv4 address or a reference to a regional address.",
            )
        })?;
    let addr = cx.state.resources.get(&key).ok_or_else(|| {
        let mut e = ApiError::not_found(&key);
        e.field = Some("resource.IPAddress".into());
        e
    })?;
    Ok(addr["address"].as_str().unwrap_or_default().to_string())
}
