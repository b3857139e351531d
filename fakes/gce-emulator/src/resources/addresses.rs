//! `addresses` (regional): reserved regional IPv4 addresses (Compute API v1 reference,
//! `addresses`). EXTERNAL ones come from the loopback range like global addresses
//! ([`super::global_addresses`]); INTERNAL ones are reserved in a PRIVATE `subnetwork` of the
//! region (required unless the network has exactly one there), from its range minus the four
//! addresses Google Cloud reserves, lowest free first, or the requested `address`. `purpose`
//! GCE_ENDPOINT (default) or SHARED_LOADBALANCER_VIP (the `kubernetes.io/ingress.regional-static-ip-name`
//! address of an internal Ingress) for INTERNAL addresses.
//!
//! The data plane serves an internal address on loopback (see `dataplane::internal`).

use crate::errors::ApiError;
use crate::resources::{global_addresses, subnetworks, Prepare};
use crate::snapshot::key_from_url;
use crate::validate::{self, Obj};

/// Validates a regional address (see the module docs).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
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
        return global_addresses::prepare(cx, r);
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
    cx.network_field(r)?;
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
