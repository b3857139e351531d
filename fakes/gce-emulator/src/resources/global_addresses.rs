//! `globalAddresses`: reserved external IPv4 addresses. On this machine they come from the
//! loopback range given by `--address-range` (default 127.128.0.0/9), chosen at random and
//! unique within the emulator; `status` becomes `IN_USE` with `users` while a forwarding rule
//! holds the address.
//!
//! Promotion: `insert` with `address` set to the ephemeral IP of this project's global
//! forwarding rules reserves that IP without touching the rules (the Compute API reference,
//! `globalAddresses.insert`, and "Promote an ephemeral external IP address": the documented way
//! to keep an IP). The address is `IN_USE` by those rules from the start. An IP that another
//! address already reserves, or that another project's rule holds, is refused.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::addresses;
use crate::errors::ApiError;
use crate::resources::Prepare;
use crate::validate::{self, Obj};

/// Validates an address: IPv4 only, EXTERNAL, PREMIUM; a requested `address` must be inside the
/// range and either free or the ephemeral IP of this project's forwarding rules (promotion);
/// otherwise one is allocated.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
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
