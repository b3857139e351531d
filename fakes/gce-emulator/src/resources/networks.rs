//! `networks`: VPC networks. Every project has `default` (auto mode); others may be inserted so
//! firewall rules and NEGs can name them. Also the `network` field other resources carry
//! ([`network_field`]).

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::projects;
use crate::resources::references::Prepare;
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

/// Sets `network` to the project's `default` network when absent, else normalises it to a full
/// URL. A network of another project is accepted only when that project is a Shared VPC host
/// this project is attached to (400 "Cross-project references for this resource are not
/// allowed." otherwise, as the real API answers); 404 when the network does not exist.
pub fn network_field(cx: &Prepare<'_>, obj: &mut Obj) -> Result<(), ApiError> {
    match validate::opt_str(obj, "resource", "network")?.filter(|n| !n.is_empty()) {
        None => {
            obj.insert(
                "network".into(),
                Value::String(format!("projects/{}/global/networks/default", cx.project)),
            );
        }
        Some(n) => {
            let key = cx.parse_reference("resource.network", n, &["networks"])?;
            let owner = key.split('/').nth(1).unwrap_or_default();
            if owner != cx.project && !projects::attached(cx.state, owner, cx.project) {
                return Err(ApiError::invalid_value(
                    "resource.network",
                    n,
                    "Cross-project references for this resource are not allowed.",
                ));
            }
        }
    }
    cx.ref_field(obj, "resource", "network", &["networks"])?;
    Ok(())
}
