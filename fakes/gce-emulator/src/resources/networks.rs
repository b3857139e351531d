//! `networks`: VPC networks. Every project has `default` (auto mode); others may be inserted so
//! firewall rules and NEGs can name them. Subnetworks are not emulated.

use crate::errors::ApiError;
use crate::resources::Prepare;
use crate::validate::{self, Obj};

/// Validates a network (`autoCreateSubnetworks`, `routingConfig.routingMode`, `mtu`).
pub fn prepare(_cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    if r.contains_key("IPv4Range") {
        return Err(ApiError::invalid_value(
            "resource.IPv4Range",
            &validate::show(&r["IPv4Range"]),
            "Legacy networks are not emulated; use autoCreateSubnetworks.",
        ));
    }
    validate::bool_field(r, "resource", "autoCreateSubnetworks", Some(true))?;
    validate::int_field(r, "resource", "mtu", 1300, 8896, Some(1460))?;
    if let Some(rc) = validate::object_mut(r, "resource", "routingConfig", true)? {
        validate::enum_field(
            rc,
            "resource.routingConfig",
            "routingMode",
            &["REGIONAL", "GLOBAL"],
            Some("REGIONAL"),
        )?;
    }
    Ok(())
}
