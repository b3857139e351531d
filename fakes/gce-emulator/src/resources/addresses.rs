//! `globalAddresses` and `addresses` (regional): reserved IPv4 addresses (Compute API v1
//! reference, `globalAddresses` and `addresses`).
//!
//! Global and regional EXTERNAL addresses come from the loopback range given by
//! `--address-range` (default 127.128.0.0/9), chosen at random and unique within the emulator;
//! `status` becomes `IN_USE` with `users` while a forwarding rule holds the address.
//!
//! Promotion: `insert` with `address` set to the ephemeral IP of this project's global
//! forwarding rules reserves that IP without touching the rules (the Compute API reference,
//! `globalAddresses.insert`, and "Promote an ephemeral external IP address": the documented way
//! to keep an IP). The address is `IN_USE` by those rules from the start. An IP that another
//! address already reserves, or that another project's rule holds, is refused.
//!
//! Regional INTERNAL addresses are reserved in a PRIVATE `subnetwork` of the region (required
//! unless the network has exactly one there), from its range minus the four addresses Google
//! Cloud reserves, lowest free first, or the requested `address`. `purpose` GCE_ENDPOINT
//! (default) or SHARED_LOADBALANCER_VIP (the `kubernetes.io/ingress.regional-static-ip-name`
//! address of an internal Ingress) for INTERNAL addresses. The data plane serves an internal
//! address on loopback (see `dataplane::internal`).

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::addresses;
use crate::errors::ApiError;
use crate::resources::collections::Scope;
use crate::resources::networks::network_field;
use crate::resources::references::Prepare;
use crate::resources::subnetworks;
use crate::snapshot::key_from_url;
use crate::validate::{self, Obj};

/// Validates an address of `scope` (global or regional; see the module docs). Errors: 400
/// `invalid` naming the field (an IPv6 or out-of-range address, an IP already reserved, a
/// `subnetwork` on an EXTERNAL address ...), 404 for a subnetwork or network that does not
/// exist.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj, scope: Scope) -> Result<(), ApiError> {
    if scope == Scope::Regional {
        return prepare_regional(cx, r);
    }
    prepare_external(cx, r)
}

/// A regional address (see the module docs): EXTERNAL ones as global addresses, INTERNAL ones
/// from a subnetwork of the region.
fn prepare_regional(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::enum_field(
        r,
        "resource",
        "addressType",
        &["EXTERNAL", "INTERNAL"],
        Some("EXTERNAL"),
    )?;
    if validate::opt_str(r, "resource", "addressType")? == Some("EXTERNAL") {
        if r.contains_key("subnetwork") {
            return Err(ApiError::invalid_value(
                "resource.subnetwork",
                validate::opt_str(r, "resource", "subnetwork")?.unwrap_or_default(),
                "subnetwork can only be set on INTERNAL addresses.",
            ));
        }
        return prepare_external(cx, r);
    }
    validate::opt_str(r, "resource", "description")?;
    validate::enum_field(r, "resource", "ipVersion", &["IPV4"], Some("IPV4"))?;
    validate::enum_field(
        r,
        "resource",
        "purpose",
        &["GCE_ENDPOINT", "SHARED_LOADBALANCER_VIP", "DNS_RESOLVER"],
        Some("GCE_ENDPOINT"),
    )?;
    r.remove("networkTier");
    subnetworks::infer_network(cx, r)?;
    network_field(cx, r)?;
    let network = r["network"]
        .as_str()
        .and_then(key_from_url)
        .unwrap_or_default();
    let (_, range) = subnetworks::private_subnet(cx, r, &network)?;
    let old = cx
        .old
        .and_then(|o| o["address"].as_str())
        .map(str::to_string);
    let given = validate::opt_str(r, "resource", "address")?
        .map(str::to_string)
        .or(old);
    let ip = subnetworks::internal_address(cx, "resource.address", given.as_deref(), range)?;
    r.insert("address".into(), ip.to_string().into());
    r.insert("status".into(), "RESERVED".into());
    r.remove("users");
    Ok(())
}

/// An external address (every global one): IPv4 only, EXTERNAL, PREMIUM; a requested `address`
/// must be inside the range and either free or the ephemeral IP of this project's forwarding
/// rules (promotion); otherwise one is allocated.
fn prepare_external(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    validate::enum_field(r, "resource", "ipVersion", &["IPV4", "IPV6"], Some("IPV4"))?;
    if validate::opt_str(r, "resource", "ipVersion")? == Some("IPV6") {
        return Err(ApiError::invalid_value(
            "resource.ipVersion",
            "IPV6",
            "Only IPV4 addresses are emulated (loopback 127.0.0.0/8).",
        ));
    }
    validate::enum_field(
        r,
        "resource",
        "addressType",
        &["EXTERNAL", "INTERNAL"],
        Some("EXTERNAL"),
    )?;
    validate::enum_field(
        r,
        "resource",
        "networkTier",
        &["PREMIUM", "STANDARD"],
        Some("PREMIUM"),
    )?;
    validate::enum_field(
        r,
        "resource",
        "purpose",
        &[
            "GCE_ENDPOINT",
            "VPC_PEERING",
            "PRIVATE_SERVICE_CONNECT",
            "SHARED_LOADBALANCER_VIP",
            "IPSEC_INTERCONNECT",
            "NAT_AUTO",
            "DNS_RESOLVER",
            "SERVERLESS",
        ],
        None,
    )?;
    let old_ip = cx
        .old
        .and_then(|o| o.get("address"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let ip = match validate::opt_str(r, "resource", "address")? {
        Some(a) if Some(a) == old_ip.as_deref() => a.to_string(),
        Some(a) => {
            let ip: Ipv4Addr = a.parse().map_err(|_| {
                ApiError::invalid_value("resource.address", a, "Must be an IPv4 address.")
            })?;
            if !validate::cidr_contains(cx.address_range, ip) {
                return Err(ApiError::invalid_value(
                    "resource.address",
                    a,
                    &format!(
                        "The address must be inside the emulator's address range {}/{}.",
                        cx.address_range.0, cx.address_range.1
                    ),
                ));
            }
            check_promotion(cx, ip, a)?;
            a.to_string()
        }
        None => addresses::allocate(cx.state, cx.address_range)?.to_string(),
    };
    r.insert("address".into(), ip.into());
    r.insert("status".into(), "RESERVED".into());
    r.remove("users");
    Ok(())
}

/// A requested IP may be reserved when nothing holds it, or when only this project's global
/// forwarding rules hold it as their ephemeral IP (promotion). Errors: 400 `invalid` naming
/// the address that already reserves it or the other project's rule.
fn check_promotion(cx: &Prepare<'_>, ip: Ipv4Addr, given: &str) -> Result<(), ApiError> {
    let own_rules = format!("projects/{}/global/forwardingRules/", cx.project);
    for owner in cx.state.ip_owners(ip) {
        if owner.as_str() == cx.key || owner.starts_with(&own_rules) {
            continue;
        }
        let why = if owner.contains("/addresses/") {
            format!("The IP address is already reserved by '{owner}'.")
        } else {
            format!("The IP address is in use by '{owner}' of another project.")
        };
        return Err(ApiError::invalid_value("resource.address", given, &why));
    }
    Ok(())
}
