//! `networkEndpointGroups` (zonal, GCE_VM_IP_PORT): insert/get/list/delete plus
//! `attachNetworkEndpoints`, `detachNetworkEndpoints` and `listNetworkEndpoints` with
//! `healthStatus: SHOW` (states from the health checker's [`HealthTable`]).

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::health_state::{HealthKey, HealthState, HealthTable};
use crate::network::interfaces::{self, Nic};
use crate::resources::collections::name_of;
use crate::resources::networks::network_field;
use crate::resources::references::Prepare;
use crate::snapshot::{key_from_url, NetworkEndpoint};
use crate::store::State;
use crate::validate::{self, Obj};

/// Largest number of endpoints one attach or detach call may carry (as the real API).
pub const MAX_ENDPOINTS_PER_CALL: usize = 500;

/// Validates a NEG: type GCE_VM_IP_PORT (others are refused), `network` (default `default`),
/// `subnetwork` stored as given, `defaultPort` 1-65535; `size` is derived.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    let types = [
        "GCE_VM_IP_PORT",
        "GCE_VM_IP",
        "NON_GCP_PRIVATE_IP_PORT",
        "INTERNET_IP_PORT",
        "INTERNET_FQDN_PORT",
        "SERVERLESS",
        "PRIVATE_SERVICE_CONNECT",
    ];
    validate::enum_field(
        r,
        "resource",
        "networkEndpointType",
        &types,
        Some("GCE_VM_IP_PORT"),
    )?;
    let t = validate::opt_str(r, "resource", "networkEndpointType")?.unwrap_or_default();
    if t != "GCE_VM_IP_PORT" {
        return Err(ApiError::invalid_value(
            "resource.networkEndpointType",
            t,
            "Only GCE_VM_IP_PORT network endpoint groups are emulated.",
        ));
    }
    network_field(cx, r)?;
    validate::opt_str(r, "resource", "subnetwork")?;
    validate::int_field(r, "resource", "defaultPort", 1, 65535, None)?;
    let size = cx.state.neg_endpoints.get(cx.key).map_or(0, Vec::len);
    r.insert("size".into(), json!(size));
    Ok(())
}

/// Parses `{"networkEndpoints":[{"ipAddress"?,"port"?,"instance"?}]}`; the NEG's
/// `defaultPort` fills a missing port. With `validate` (the NEG's key and the store, for
/// attachNetworkEndpoints), each endpoint is checked against its instance as the real API
/// does ([`resolve_endpoint`]); without it `ipAddress` is required.
///
/// Errors: 400 naming `networkEndpoints[i].field`, and those of [`resolve_endpoint`].
pub fn parse_endpoints(
    neg: &Value,
    body: &Obj,
    verb: &str,
    validate: Option<(&State, &str)>,
) -> Result<Vec<NetworkEndpoint>, ApiError> {
    let prefix = format!("networkEndpointGroups{}Request", capitalise(verb));
    let list = match body.get("networkEndpoints") {
        Some(Value::Array(a)) => a,
        None | Some(Value::Null) => {
            return Err(ApiError::required(&format!("{prefix}.networkEndpoints")))
        }
        Some(other) => {
            return Err(ApiError::invalid_value(
                &format!("{prefix}.networkEndpoints"),
                &validate::show(other),
                "Expected a list.",
            ))
        }
    };
    if list.len() > MAX_ENDPOINTS_PER_CALL {
        return Err(ApiError::invalid_value(
            &format!("{prefix}.networkEndpoints"),
            &list.len().to_string(),
            "At most 500 network endpoints per request.",
        ));
    }
    let default_port = neg["defaultPort"].as_u64();
    let mut out = Vec::with_capacity(list.len());
    for (i, ep) in list.iter().enumerate() {
        let p = format!("{prefix}.networkEndpoints[{i}]");
        let mut o = ep.as_object().cloned().ok_or_else(|| {
            ApiError::invalid_value(&p, &validate::show(ep), "Expected an object.")
        })?;
        let ip = match validate::opt_str(&o, &p, "ipAddress")?.filter(|s| !s.is_empty()) {
            Some(s) => Some(s.parse::<Ipv4Addr>().map_err(|_| {
                ApiError::invalid_value(&format!("{p}.ipAddress"), s, "Must be an IPv4 address.")
            })?),
            None => None,
        };
        let port =
            validate::int_field(&mut o, &p, "port", 1, 65535, default_port.map(|d| d as i64))?
                .ok_or_else(|| ApiError::required(&format!("{p}.port")))?;
        let instance = validate::opt_str(&o, &p, "instance")?
            .map(|i| i.rsplit('/').next().unwrap_or(i).to_string());
        let (ip, instance) = match (validate, ip) {
            (Some((state, key)), ip) => resolve_endpoint(state, key, ip, instance)?,
            (None, Some(ip)) => (ip, instance),
            (None, None) => return Err(ApiError::required(&format!("{p}.ipAddress"))),
        };
        out.push(NetworkEndpoint {
            ip_address: ip.to_string(),
            port: port as u16,
            instance,
        });
    }
    Ok(out)
}

/// Checks one GCE_VM_IP_PORT endpoint of the NEG `neg_key` as the Compute API reference
/// (`NetworkEndpoint`) describes it: the `instance`, named in the NEG's zone and project, must
/// exist (404 `The resource '.../instances/NAME' was not found`: an instance of that name in
/// another zone is not found either) and have an interface on the NEG's network; the IP must be
/// that interface's primary address or inside one of its alias IP ranges, and a missing IP is
/// the primary address. Without an `instance`, the instance of the zone holding the IP on that
/// network is found. Otherwise 400, worded as the real API words it: `Invalid value for field
/// 'resource.ipAddress': 'IP'. Specified IP address IP doesn't belong to the (sub)network NET
/// or to the instance NAME.` (as quoted from the API in kubernetes/ingress-gce issue 1463).
/// Returns the IP and the instance name.
pub fn resolve_endpoint(
    state: &State,
    neg_key: &str,
    ip: Option<Ipv4Addr>,
    instance: Option<String>,
) -> Result<(Ipv4Addr, Option<String>), ApiError> {
    let zone_prefix = neg_key
        .rsplit_once("/networkEndpointGroups/")
        .map_or(neg_key, |(z, _)| z);
    let network = state
        .resources
        .get(neg_key)
        .and_then(|n| n.get("network")?.as_str().and_then(key_from_url))
        .unwrap_or_default();
    let net_name = name_of(&network).to_string();
    let refuse = |ip: &str, owner: Option<&str>| {
        let whose = match owner {
            Some(i) => format!(" or to the instance {i}"),
            None => String::new(),
        };
        ApiError::invalid_value(
            "resource.ipAddress",
            ip,
            &format!(
                "Specified IP address {ip} doesn't belong to the (sub)network {net_name}{whose}."
            ),
        )
    };
    let Some(name) = instance else {
        let ip = ip.ok_or_else(|| ApiError::required("resource.ipAddress"))?;
        let prefix = format!("{zone_prefix}/instances/");
        return state
            .scan(&prefix)
            .find(|(_, vm)| interfaces::nic_on(vm, &network).is_some_and(|n| n.holds(ip)))
            .map(|(k, _)| (ip, Some(name_of(k).to_string())))
            .ok_or_else(|| refuse(&ip.to_string(), None));
    };
    let key = format!("{zone_prefix}/instances/{name}");
    let vm = state
        .resources
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key))?;
    let nic = interfaces::nic_on(vm, &network);
    match (ip, nic) {
        (Some(ip), Some(nic)) if nic.holds(ip) => Ok((ip, Some(name))),
        (None, Some(Nic { ip: Some(ip), .. })) => Ok((ip, Some(name))),
        (ip, _) => Err(refuse(
            &ip.map(|i| i.to_string()).unwrap_or_default(),
            Some(&name),
        )),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Applies an attach (`attach == true`: new endpoints are added, existing ones kept) or a
/// detach (listed endpoints removed; unknown ones ignored) to `key`, and refreshes `size`.
pub fn apply(state: &mut State, key: &str, endpoints: Vec<NetworkEndpoint>, attach: bool) {
    let list = state.neg_endpoints.entry(key.to_string()).or_default();
    for ep in endpoints {
        let pos = list
            .iter()
            .position(|e| e.ip_address == ep.ip_address && e.port == ep.port);
        match (attach, pos) {
            (true, None) => list.push(ep),
            (true, Some(i)) => list[i] = ep,
            (false, Some(i)) => {
                list.remove(i);
            }
            (false, None) => {}
        }
    }
    list.sort();
    let size = list.len();
    if let Some(mut neg) = state.resources.get(key).map(|v| v.as_ref().clone()) {
        neg["size"] = json!(size);
        let endpoints = state.neg_endpoints.remove(key).unwrap_or_default();
        state.put(key.to_string(), neg);
        state.neg_endpoints.insert(key.to_string(), endpoints);
    }
}

/// The items of `listNetworkEndpoints`: `{"networkEndpoint":{...},"healths":[...]}`; with
/// `show_health`, one health entry per backend service (with a health check) that has this NEG
/// as a backend.
pub fn list_items(state: &State, key: &str, show_health: bool, health: &HealthTable) -> Vec<Value> {
    let services: Vec<(String, String)> = if show_health {
        state
            .referrers(key)
            .filter(|k| k.contains("/backendServices/"))
            .filter_map(|bs| {
                let v = state.resources.get(bs)?;
                let hc = v["healthChecks"].as_array()?.first()?.as_str()?.to_string();
                Some((bs.clone(), hc))
            })
            .collect()
    } else {
        Vec::new()
    };
    state
        .neg_endpoints
        .get(key)
        .into_iter()
        .flatten()
        .map(|ep| {
            let mut ne = json!({"ipAddress": ep.ip_address, "port": ep.port});
            if let Some(i) = &ep.instance {
                ne["instance"] = json!(i);
            }
            let mut item = json!({"networkEndpoint": ne});
            if show_health {
                let healths: Vec<Value> = services
                    .iter()
                    .map(|(bs, hc)| {
                        let st = health
                            .get(&HealthKey {
                                backend_service: bs.clone(),
                                neg: key.to_string(),
                                ip_address: ep.ip_address.clone(),
                                port: ep.port,
                            })
                            .unwrap_or(HealthState::Unknown);
                        json!({
                            "backendService": {"backendService": format!("{}{bs}", state.base)},
                            "healthCheck": {"healthCheck": hc},
                            "healthState": st.as_str(),
                        })
                    })
                    .collect();
                item["healths"] = json!(healths);
            }
            item
        })
        .collect()
}
