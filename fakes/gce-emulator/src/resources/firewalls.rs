//! `firewalls`: VPC firewall rules (Compute API v1 reference, `firewalls`). The data plane
//! enforces the INGRESS rules on health-check probes and proxied connections
//! ([`crate::network::firewall`]); a Shared VPC host's rules are written by its own
//! principals only (IAM, `crate::iam`).

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::networks::network_field;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

const PROTOCOLS: &[&str] = &["tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"];

/// Validates a firewall rule: `network` (default `default`), `direction`, `priority`
/// (0-65535, default 1000), exactly one of `allowed`/`denied` with protocols and ports,
/// `sourceRanges`/`destinationRanges` CIDRs.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    if let Some(n) = validate::opt_str(r, "resource", "network")?.filter(|n| !n.is_empty()) {
        let key = cx.parse_reference("resource.network", n, &["networks"])?;
        if key.split('/').nth(1) != Some(cx.project) {
            return Err(ApiError::invalid_value(
                "resource.network",
                n,
                "Cross-project references for this resource are not allowed.",
            ));
        }
    }
    network_field(cx, r)?;
    validate::enum_field(
        r,
        "resource",
        "direction",
        &["INGRESS", "EGRESS"],
        Some("INGRESS"),
    )?;
    validate::int_field(r, "resource", "priority", 0, 65535, Some(1000))?;
    validate::bool_field(r, "resource", "disabled", Some(false))?;
    let has_allowed = r.get("allowed").is_some_and(|v| !v.is_null());
    let has_denied = r.get("denied").is_some_and(|v| !v.is_null());
    if has_allowed == has_denied {
        return Err(ApiError::invalid_value(
            "resource.allowed",
            "",
            "Exactly one of 'allowed' or 'denied' must be set.",
        ));
    }
    for key in ["allowed", "denied"] {
        let Some(list) = validate::array_mut(r, "resource", key)? else {
            continue;
        };
        for (i, item) in list.iter_mut().enumerate() {
            let prefix = format!("resource.{key}[{i}]");
            let Value::Object(o) = item else {
                return Err(ApiError::invalid_value(
                    &prefix,
                    &validate::show(item),
                    "Expected an object.",
                ));
            };
            let proto = validate::req_str(o, &prefix, "IPProtocol")?;
            if !PROTOCOLS.contains(&proto) && proto.parse::<u8>().is_err() {
                return Err(ApiError::invalid_value(
                    &format!("{prefix}.IPProtocol"),
                    proto,
                    "Must be tcp, udp, icmp, esp, ah, sctp, ipip, all or an IP protocol number.",
                ));
            }
            for (j, p) in validate::str_list(o, &prefix, "ports")?.iter().enumerate() {
                if !valid_port_range(p) {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.ports[{j}]"),
                        p,
                        "Must be a port or a port range such as 8000-8080.",
                    ));
                }
            }
        }
    }
    let sources = validate::cidr_list(r, "resource", "sourceRanges", false)?;
    validate::cidr_list(r, "resource", "destinationRanges", false)?;
    let target_tags = validate::str_list(r, "resource", "targetTags")?;
    let target_sas = validate::str_list(r, "resource", "targetServiceAccounts")?;
    let source_tags = validate::str_list(r, "resource", "sourceTags")?;
    let source_sas = validate::str_list(r, "resource", "sourceServiceAccounts")?;
    if !target_sas.is_empty() && !target_tags.is_empty() {
        return Err(ApiError::invalid_value(
            "resource.targetServiceAccounts",
            &target_sas.join(","),
            "targetServiceAccounts cannot be used together with targetTags.",
        ));
    }
    if !source_sas.is_empty() && !source_tags.is_empty() {
        return Err(ApiError::invalid_value(
            "resource.sourceServiceAccounts",
            &source_sas.join(","),
            "sourceServiceAccounts cannot be used together with sourceTags.",
        ));
    }
    // An INGRESS rule with no source at all admits every source: the API stores 0.0.0.0/0.
    if r.get("direction").and_then(Value::as_str) == Some("INGRESS")
        && sources.is_empty()
        && source_tags.is_empty()
        && source_sas.is_empty()
    {
        r.insert("sourceRanges".into(), json!(["0.0.0.0/0"]));
    }
    if let Some(lc) = validate::object_mut(r, "resource", "logConfig", false)? {
        validate::bool_field(lc, "resource.logConfig", "enable", None)?;
    }
    Ok(())
}

/// `80` or `8000-8080` with ports in 0-65535 and low <= high.
pub fn valid_port_range(s: &str) -> bool {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    match (lo.parse::<u16>(), hi.parse::<u16>()) {
        (Ok(lo), Ok(hi)) => lo <= hi,
        _ => false,
    }
}
