//! `instances` (zonal): VM instances as far as load balancing needs them. Nothing boots: an
//! inserted instance is `RUNNING` at once and holds its addresses, tags and service accounts,
//! which NEG endpoint validation and the data plane's firewall evaluation read
//! (Compute API v1 reference, `instances`; [`crate::network`]).
//!
//! Validated like the real API: `machineType` (a machine type URL in the instance's zone) and a
//! boot disk (`disks[0].boot`, from `source` or `initializeParams`) are required; each network
//! interface names a network (default: the project's `default`) that exists and is the
//! project's own or a Shared VPC host's the project is attached to; `networkIP` and
//! `aliasIpRanges` are unique within the network. Emulator rules: addresses must lie in
//! 127.0.0.0/8 or a private range `--private-ranges` allows ([`crate::network::ranges`]); a
//! missing `networkIP` is allocated from [`INSTANCE_RANGE`]; subnetworks are not a collection
//! of their own (a missing
//! `subnetwork` is the network's auto-mode subnetwork of the instance's region, named like the
//! network, and a given one is stored as given); disks and machine types are not collections
//! either (the boot disk's `source` names a disk that is not served).

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::network::{interfaces, ranges};
use crate::resources::collections::name_of;
use crate::resources::references::Prepare;
use crate::resources::{network_endpoint_groups, projects, zones};
use crate::snapshot::{key_in_project, ResourceKey};
use crate::store::{fingerprint, State};
use crate::validate::{self, cidr_contains, parse_cidr, Obj};

/// Where `networkIP` is allocated when an insert omits it (127.32.0.0/11).
pub const INSTANCE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(127, 32, 0, 0), 11);

/// Validates and normalises an instance (see the module docs).
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    let zone = cx.zone.unwrap_or_default().to_string();
    validate::opt_str(r, "resource", "description")?;
    machine_type(cx, r, &zone)?;
    disks(cx, r, &zone)?;
    network_interfaces(cx, r, &zone)?;
    tags(r)?;
    service_accounts(cx, r)?;
    metadata(r)?;
    validate::bool_field(r, "resource", "canIpForward", Some(false))?;
    validate::bool_field(r, "resource", "deletionProtection", Some(false))?;
    let sched = validate::object_mut(r, "resource", "scheduling", true)?.expect("created");
    validate::enum_field(
        sched,
        "resource.scheduling",
        "onHostMaintenance",
        &["MIGRATE", "TERMINATE"],
        Some("MIGRATE"),
    )?;
    validate::bool_field(sched, "resource.scheduling", "automaticRestart", Some(true))?;
    validate::bool_field(sched, "resource.scheduling", "preemptible", Some(false))?;
    validate::enum_field(
        sched,
        "resource.scheduling",
        "provisioningModel",
        &["STANDARD", "SPOT"],
        Some("STANDARD"),
    )?;
    r.insert("status".into(), json!("RUNNING"));
    r.insert("cpuPlatform".into(), json!("Intel Broadwell"));
    r.insert("startRestricted".into(), json!(false));
    let started = cx
        .old
        .and_then(|o| o.get("lastStartTimestamp"))
        .cloned()
        .unwrap_or_else(|| json!(crate::store::timestamp()));
    r.insert("lastStartTimestamp".into(), started);
    Ok(())
}

fn machine_type(cx: &Prepare<'_>, r: &mut Obj, zone: &str) -> Result<(), ApiError> {
    let field = "resource.machineType";
    let given = validate::opt_str(r, "resource", "machineType")?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::required(field))?
        .to_string();
    let key = key_in_project(cx.project, &given);
    let parts: Vec<&str> = key.as_deref().unwrap_or_default().split('/').collect();
    match parts.as_slice() {
        ["projects", p, "zones", z, "machineTypes", m]
            if *p == cx.project && validate::check_name(field, m).is_ok() =>
        {
            if *z != zone {
                return Err(ApiError::invalid_value(
                    field,
                    &given,
                    &format!("The machine type must be in the instance's zone {zone}."),
                ));
            }
            r.insert(
                "machineType".into(),
                json!(cx.url(&format!("projects/{p}/zones/{z}/machineTypes/{m}"))),
            );
            Ok(())
        }
        _ => Err(ApiError::invalid_value(
            field,
            &given,
            "The URL is malformed; expected zones/ZONE/machineTypes/TYPE.",
        )),
    }
}

fn disks(cx: &Prepare<'_>, r: &mut Obj, zone: &str) -> Result<(), ApiError> {
    let instance = name_of(cx.key).to_string();
    let list = validate::array_mut(r, "resource", "disks")?
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_value("resource.disks", "", "Boot disk must be specified.")
        })?;
    for (i, d) in list.iter_mut().enumerate() {
        let prefix = format!("resource.disks[{i}]");
        let Value::Object(o) = d else {
            return Err(ApiError::invalid_value(
                &prefix,
                &validate::show(d),
                "Expected an object.",
            ));
        };
        validate::bool_field(o, &prefix, "boot", Some(false))?;
        let boot = o.get("boot").and_then(Value::as_bool).unwrap_or(false);
        if boot != (i == 0) {
            return Err(ApiError::invalid_value(
                &format!("{prefix}.boot"),
                &boot.to_string(),
                "The boot disk must be the first disk attached to the instance, and only one disk may be a boot disk.",
            ));
        }
        validate::enum_field(
            o,
            &prefix,
            "type",
            &["PERSISTENT", "SCRATCH"],
            Some("PERSISTENT"),
        )?;
        validate::enum_field(
            o,
            &prefix,
            "mode",
            &["READ_WRITE", "READ_ONLY"],
            Some("READ_WRITE"),
        )?;
        validate::bool_field(o, &prefix, "autoDelete", Some(false))?;
        let init = o.remove("initializeParams");
        let source = validate::opt_str(o, &prefix, "source")?.map(str::to_string);
        let disk_name = match (&source, &init) {
            (Some(s), _) => name_of(s).to_string(),
            (None, Some(Value::Object(p))) => match p.get("diskName").and_then(Value::as_str) {
                Some(n) => n.to_string(),
                None if i == 0 => instance.clone(),
                None => format!("{instance}-{i}"),
            },
            _ => {
                return Err(ApiError::invalid_value(
                    &prefix,
                    "",
                    "A disk needs a source or initializeParams.",
                ))
            }
        };
        validate::check_name(&format!("{prefix}.source"), &disk_name)?;
        let size = init
            .as_ref()
            .and_then(|p| p.get("diskSizeGb"))
            .map(validate::show)
            .unwrap_or_else(|| "10".into());
        o.insert(
            "source".into(),
            json!(cx.url(&format!(
                "projects/{}/zones/{zone}/disks/{disk_name}",
                cx.project
            ))),
        );
        o.entry("deviceName")
            .or_insert_with(|| json!(format!("persistent-disk-{i}")));
        o.insert("index".into(), json!(i));
        o.insert("kind".into(), json!("compute#attachedDisk"));
        o.entry("interface").or_insert_with(|| json!("SCSI"));
        o.entry("diskSizeGb").or_insert_with(|| json!(size));
    }
    Ok(())
}

/// The (key of the) network a reference names, checked: it exists, and it is the project's
/// own or the Shared VPC host's the project is attached to (otherwise the real API's
/// "Cross-project references for this resource are not allowed.").
fn network_ref(cx: &Prepare<'_>, field: &str, given: &str) -> Result<ResourceKey, ApiError> {
    let key = cx.parse_reference(field, given, &["networks"])?;
    let owner = key.split('/').nth(1).unwrap_or_default();
    if owner != cx.project && !projects::attached(cx.state, owner, cx.project) {
        return Err(ApiError::invalid_value(
            field,
            given,
            "Cross-project references for this resource are not allowed.",
        ));
    }
    cx.reference(field, given, &["networks"])?;
    Ok(key)
}

fn network_interfaces(cx: &Prepare<'_>, r: &mut Obj, zone: &str) -> Result<(), ApiError> {
    let region = zones::region_of(zone).to_string();
    let Some(list) = validate::array_mut(r, "resource", "networkInterfaces")? else {
        r.insert(
            "networkInterfaces".into(),
            json!([{"network": format!("projects/{}/global/networks/default", cx.project)}]),
        );
        return network_interfaces(cx, r, zone);
    };
    if list.is_empty() {
        return Err(ApiError::invalid_value(
            "resource.networkInterfaces",
            "[]",
            "At least one network interface is required.",
        ));
    }
    let mut nics = std::mem::take(list);
    let mut seen_networks: Vec<ResourceKey> = Vec::new();
    let mut mine: Vec<(Ipv4Addr, u8)> = Vec::new();
    for (i, n) in nics.iter_mut().enumerate() {
        let prefix = format!("resource.networkInterfaces[{i}]");
        let Value::Object(o) = n else {
            return Err(ApiError::invalid_value(
                &prefix,
                &validate::show(n),
                "Expected an object.",
            ));
        };
        // The network: given, or the one the subnetwork belongs to (auto mode: same name),
        // or the project's `default`.
        let subnet = validate::opt_str(o, &prefix, "subnetwork")?
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let subnet_key = subnet
            .as_deref()
            .map(|s| subnetwork_key(cx, &format!("{prefix}.subnetwork"), s, &region))
            .transpose()?;
        let net_given = match validate::opt_str(o, &prefix, "network")?.filter(|s| !s.is_empty()) {
            Some(n) => n.to_string(),
            None => match &subnet_key {
                Some(sk) => {
                    let p = sk.split('/').nth(1).unwrap_or_default();
                    format!("projects/{p}/global/networks/{}", name_of(sk))
                }
                None => format!("projects/{}/global/networks/default", cx.project),
            },
        };
        let net_field = format!("{prefix}.network");
        let network = network_ref(cx, &net_field, &net_given)?;
        if seen_networks.contains(&network) {
            return Err(ApiError::invalid_value(
                &net_field,
                &net_given,
                "Each network interface of an instance must be in a different network.",
            ));
        }
        seen_networks.push(network.clone());
        let net_project = network.split('/').nth(1).unwrap_or_default().to_string();
        let subnet_key = match subnet_key {
            Some(k) => {
                let sp = k.split('/').nth(1).unwrap_or_default();
                if sp != net_project {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.subnetwork"),
                        subnet.as_deref().unwrap_or_default(),
                        "The subnetwork must belong to the interface's network.",
                    ));
                }
                k
            }
            None => format!(
                "projects/{net_project}/regions/{region}/subnetworks/{}",
                name_of(&network)
            ),
        };
        o.insert("network".into(), json!(cx.url(&network)));
        o.insert("subnetwork".into(), json!(cx.url(&subnet_key)));
        // Addresses.
        let taken = taken_on(cx.state, &network, cx.key);
        let ip = match validate::opt_str(o, &prefix, "networkIP")?.filter(|s| !s.is_empty()) {
            Some(s) => {
                let field = format!("{prefix}.networkIP");
                let ip: Ipv4Addr = s
                    .parse()
                    .map_err(|_| ApiError::invalid_value(&field, s, "Must be an IPv4 address."))?;
                ranges::check(&field, s, (ip, 32), &cx.state.private_ranges)?;
                if overlaps(&taken, (ip, 32)) {
                    return Err(in_use(&field, s, &network));
                }
                ip
            }
            None => allocate(&taken).ok_or_else(|| {
                ApiError::new(
                    503,
                    "ipSpaceExhausted",
                    format!(
                        "No internal address is left in {}/{} on network {network}.",
                        INSTANCE_RANGE.0, INSTANCE_RANGE.1
                    ),
                )
            })?,
        };
        o.insert("networkIP".into(), json!(ip.to_string()));
        mine.push((ip, 32));
        if let Some(aliases) = validate::array_mut(o, &prefix, "aliasIpRanges")? {
            for (j, a) in aliases.iter_mut().enumerate() {
                let field = format!("{prefix}.aliasIpRanges[{j}].ipCidrRange");
                let Value::Object(ao) = a else {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.aliasIpRanges[{j}]"),
                        &validate::show(a),
                        "Expected an object.",
                    ));
                };
                let s =
                    validate::req_str(ao, &format!("{prefix}.aliasIpRanges[{j}]"), "ipCidrRange")?
                        .to_string();
                let cidr = parse_cidr(&s).ok_or_else(|| {
                    ApiError::invalid_value(
                        &field,
                        &s,
                        "Must be an IPv4 CIDR range such as 10.4.0.0/24.",
                    )
                })?;
                ranges::check(&field, &s, cidr, &cx.state.private_ranges)?;
                if overlaps(&taken, cidr) || overlaps(&mine, cidr) {
                    return Err(in_use(&field, &s, &network));
                }
                mine.push(cidr);
                let shown = if s.contains('/') {
                    s
                } else {
                    format!("{s}/32")
                };
                ao.insert("ipCidrRange".into(), json!(shown));
                validate::opt_str(
                    ao,
                    &format!("{prefix}.aliasIpRanges[{j}]"),
                    "subnetworkRangeName",
                )?;
            }
        }
        if let Some(acs) = validate::array_mut(o, &prefix, "accessConfigs")? {
            for (j, ac) in acs.iter_mut().enumerate() {
                let Value::Object(ao) = ac else {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.accessConfigs[{j}]"),
                        &validate::show(ac),
                        "Expected an object.",
                    ));
                };
                let p = format!("{prefix}.accessConfigs[{j}]");
                validate::enum_field(
                    ao,
                    &p,
                    "type",
                    &["ONE_TO_ONE_NAT", "DIRECT_IPV6"],
                    Some("ONE_TO_ONE_NAT"),
                )?;
                validate::enum_field(
                    ao,
                    &p,
                    "networkTier",
                    &["PREMIUM", "STANDARD"],
                    Some("PREMIUM"),
                )?;
                ao.entry("name").or_insert_with(|| json!("External NAT"));
                ao.insert("kind".into(), json!("compute#accessConfig"));
            }
        }
        o.insert("name".into(), json!(format!("nic{i}")));
        o.insert("kind".into(), json!("compute#networkInterface"));
        o.entry("stackType").or_insert_with(|| json!("IPV4_ONLY"));
        o.remove("fingerprint");
        let fp = fingerprint(&Value::Object(o.clone()));
        o.insert("fingerprint".into(), json!(fp));
    }
    r.insert("networkInterfaces".into(), Value::Array(nics));
    Ok(())
}

/// The key of a subnetwork reference (`regions/R/subnetworks/S`, with or without project or
/// host), which must be in the instance's region.
fn subnetwork_key(
    cx: &Prepare<'_>,
    field: &str,
    given: &str,
    region: &str,
) -> Result<ResourceKey, ApiError> {
    let key = key_in_project(cx.project, given).unwrap_or_default();
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["projects", _, "regions", r, "subnetworks", s]
            if validate::check_name(field, s).is_ok() =>
        {
            if *r != region {
                return Err(ApiError::invalid_value(
                    field,
                    given,
                    &format!("The subnetwork must be in the instance's region {region}."),
                ));
            }
            Ok(key)
        }
        _ => Err(ApiError::invalid_value(
            field,
            given,
            "The URL is malformed; expected regions/REGION/subnetworks/NAME.",
        )),
    }
}

fn in_use(field: &str, given: &str, network: &str) -> ApiError {
    ApiError::invalid_value(
        field,
        given,
        &format!(
            "IP address {given} is already being used by another resource on network {network}."
        ),
    )
}

/// Every address and range the other instances on `network` hold.
fn taken_on(state: &State, network: &str, except: &str) -> Vec<(Ipv4Addr, u8)> {
    state
        .referrers(network)
        .filter(|k| k.contains("/instances/") && k.as_str() != except)
        .filter_map(|k| state.resources.get(k))
        .filter_map(|v| interfaces::nic_on(v, network))
        .flat_map(|nic| nic.ip.map(|ip| (ip, 32)).into_iter().chain(nic.aliases))
        .collect()
}

fn overlaps(taken: &[(Ipv4Addr, u8)], (ip, len): (Ipv4Addr, u8)) -> bool {
    taken.iter().any(|&(t, tl)| {
        let shorter = len.min(tl);
        cidr_contains((t, shorter), ip)
    })
}

fn allocate(taken: &[(Ipv4Addr, u8)]) -> Option<Ipv4Addr> {
    let base = u32::from(INSTANCE_RANGE.0);
    let size = 1u32 << (32 - INSTANCE_RANGE.1);
    // .0 and .1 of the range are the network and gateway addresses, as in a subnetwork.
    (2..size - 1)
        .map(|i| Ipv4Addr::from(base + i))
        .find(|ip| !overlaps(taken, (*ip, 32)))
}

fn tags(r: &mut Obj) -> Result<(), ApiError> {
    let t = validate::object_mut(r, "resource", "tags", true)?.expect("created");
    let items = validate::str_list(t, "resource.tags", "items")?;
    for (i, tag) in items.iter().enumerate() {
        validate::check_name(&format!("resource.tags.items[{i}]"), tag)?;
    }
    let mut items = items;
    items.sort();
    items.dedup();
    t.remove("fingerprint");
    if items.is_empty() {
        t.remove("items");
    } else {
        t.insert("items".into(), json!(items));
    }
    let fp = fingerprint(&Value::Object(t.clone()));
    t.insert("fingerprint".into(), json!(fp));
    Ok(())
}

fn service_accounts(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    let Some(list) = validate::array_mut(r, "resource", "serviceAccounts")? else {
        return Ok(());
    };
    for (i, sa) in list.iter_mut().enumerate() {
        let prefix = format!("resource.serviceAccounts[{i}]");
        let Value::Object(o) = sa else {
            return Err(ApiError::invalid_value(
                &prefix,
                &validate::show(sa),
                "Expected an object.",
            ));
        };
        let email = validate::opt_str(o, &prefix, "email")?.unwrap_or("default");
        if email == "default" {
            o.insert(
                "email".into(),
                json!(projects::default_service_account(cx.project)),
            );
        } else if !email.contains('@') {
            return Err(ApiError::invalid_value(
                &format!("{prefix}.email"),
                email,
                "Must be a service account email address or 'default'.",
            ));
        }
        validate::str_list(o, &prefix, "scopes")?;
    }
    Ok(())
}

fn metadata(r: &mut Obj) -> Result<(), ApiError> {
    let m = validate::object_mut(r, "resource", "metadata", true)?.expect("created");
    if let Some(items) = validate::array_mut(m, "resource.metadata", "items")? {
        for (i, it) in items.iter().enumerate() {
            let p = format!("resource.metadata.items[{i}]");
            let o = it.as_object().ok_or_else(|| {
                ApiError::invalid_value(&p, &validate::show(it), "Expected an object.")
            })?;
            validate::req_str(o, &p, "key")?;
        }
    }
    m.remove("fingerprint");
    m.insert("kind".into(), json!("compute#metadata"));
    let fp = fingerprint(&Value::Object(m.clone()));
    m.insert("fingerprint".into(), json!(fp));
    Ok(())
}

/// `instances.setTags`: the body is a `Tags` object (`items`, `fingerprint`); the fingerprint
/// must be the instance's current `tags.fingerprint` (412 `conditionNotMet` otherwise, as the
/// real API answers a missing or stale one). Returns the instance with the new tags, for
/// [`crate::methods::rewrite`].
pub fn set_tags(old: &Value, key: &str, body: &Obj) -> Result<Obj, ApiError> {
    let current = old.pointer("/tags/fingerprint").and_then(Value::as_str);
    let sent = validate::opt_str(body, "tags", "fingerprint")?;
    if sent.is_none() || sent != current {
        return Err(ApiError {
            field: Some("tags.fingerprint".into()),
            ..ApiError::new(
                412,
                "conditionNotMet",
                format!("Supplied fingerprint does not match current tags fingerprint of '{key}'; get the instance again and retry."),
            )
        });
    }
    let mut obj = old.as_object().cloned().unwrap_or_default();
    let mut tags = body.clone();
    tags.remove("fingerprint");
    obj.insert("tags".into(), Value::Object(tags));
    Ok(obj)
}

/// Detaches every NEG endpoint that names the deleted instance `key` (the real API removes a
/// deleted VM's network endpoints from their NEGs).
pub fn forget_endpoints(state: &mut State, key: &str) {
    let Some((zone_prefix, name)) = key.rsplit_once("/instances/") else {
        return;
    };
    let prefix = format!("{zone_prefix}/networkEndpointGroups/");
    let negs: Vec<(ResourceKey, Vec<crate::snapshot::NetworkEndpoint>)> = state
        .neg_endpoints
        .range::<str, _>((
            std::ops::Bound::Included(prefix.as_str()),
            std::ops::Bound::Unbounded,
        ))
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(_, eps)| eps.iter().any(|e| e.instance.as_deref() == Some(name)))
        .map(|(k, eps)| {
            (
                k.clone(),
                eps.iter()
                    .filter(|e| e.instance.as_deref() == Some(name))
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    for (neg, eps) in negs {
        network_endpoint_groups::apply(state, &neg, eps, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_and_allocation() {
        let taken = vec![
            (Ipv4Addr::new(127, 32, 0, 2), 32),
            (Ipv4Addr::new(127, 64, 1, 0), 24),
        ];
        assert!(overlaps(&taken, (Ipv4Addr::new(127, 64, 1, 9), 32)));
        assert!(overlaps(&taken, (Ipv4Addr::new(127, 64, 0, 0), 16)));
        assert!(!overlaps(&taken, (Ipv4Addr::new(127, 64, 2, 0), 24)));
        assert_eq!(allocate(&taken), Some(Ipv4Addr::new(127, 32, 0, 3)));
    }
}
