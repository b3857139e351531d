//! Custom verbs that are more than setting fields: `backendServices.getHealth`,
//! `networkEndpointGroups.{list,attach,detach}NetworkEndpoints`, `urlMaps.validate` and
//! `invalidateCache` (which empties the data plane's Cloud CDN cache), `securityPolicies.
//! {get,add,patch,remove}Rule`, `backendServices.{add,delete}SignedUrlKey` (keys kept beside the
//! certificate keys, never served). Field setters
//! (`setUrlMap`, `setLabels`, ...) go through [`crate::methods::set_fields`].

use std::sync::Arc;

use serde_json::{json, Value};

use crate::emulator::route::method_not_found;
use crate::emulator::{ApiRequest, Emulator};
use crate::errors::ApiError;
use crate::listing::ListParams;
use crate::methods::{self, Mutation, Target};
use crate::resources::{
    self, backend_services, network_endpoint_groups, security_policies, url_maps, Prepare,
};
use crate::validate;

impl Emulator {
    pub(crate) async fn custom(
        self: &Arc<Self>,
        t: Target,
        verb: &str,
        req: &ApiRequest,
    ) -> Result<Value, ApiError> {
        let range = self.config.address_range;
        let seg = t.coll.segment;
        if let Some(fields) = resources::setter(seg, verb) {
            return self
                .mutate(&t.project, req, |s| {
                    methods::set_fields(s, &t, verb, fields, &req.body, range)
                })
                .await;
        }
        let key = t.key();
        match (seg, verb) {
            ("backendServices", "getHealth") => {
                let body = methods::parse_body(&req.body)?;
                let state = self.state.lock().expect("state poisoned");
                backend_services::get_health(&state, &t.project, &key, &body, &self.health)
            }
            ("networkEndpointGroups", "listNetworkEndpoints") => {
                let body = methods::parse_body(&req.body)?;
                validate::enum_field(
                    &mut body.clone(),
                    "networkEndpointGroupsListEndpointsRequest",
                    "healthStatus",
                    &["SHOW", "SKIP"],
                    None,
                )?;
                let show = body.get("healthStatus").and_then(Value::as_str) == Some("SHOW");
                let params = ListParams::from_query(&req.query)?;
                let state = self.state.lock().expect("state poisoned");
                if !state.resources.contains_key(&key) {
                    return Err(ApiError::not_found(&key));
                }
                let items = network_endpoint_groups::list_items(&state, &key, show, &self.health);
                drop(state);
                let mut v = params.response(
                    "compute#networkEndpointGroupsListNetworkEndpoints",
                    &format!("{}{key}/listNetworkEndpoints", self.base),
                    &items,
                );
                v.as_object_mut().map(|o| o.remove("selfLink"));
                Ok(v)
            }
            ("networkEndpointGroups", "attachNetworkEndpoints" | "detachNetworkEndpoints") => {
                let attach = verb == "attachNetworkEndpoints";
                let body = methods::parse_body(&req.body)?;
                let check = attach && self.config.validate_neg_endpoints;
                self.mutate(&t.project, req, |s| {
                    let neg = s
                        .resources
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| ApiError::not_found(&key))?;
                    let eps = network_endpoint_groups::parse_endpoints(
                        &neg,
                        &body,
                        if attach {
                            "attachEndpoints"
                        } else {
                            "detachEndpoints"
                        },
                        check.then_some((&*s, key.as_str())),
                    )?;
                    self.calls.record_endpoints(
                        verb,
                        eps.iter().map(|e| (e.ip_address.as_str(), e.port)),
                    );
                    network_endpoint_groups::apply(s, &key, eps, attach);
                    Ok(Mutation {
                        op_type: verb.to_string(),
                        target: key.clone(),
                        zone: t.zone.clone(),
                        target_id: None,
                    })
                })
                .await
            }
            ("instances", "setTags") => {
                let body = methods::parse_body(&req.body)?;
                self.mutate(&t.project, req, |s| {
                    let old = s
                        .resources
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| ApiError::not_found(&key))?;
                    let obj = resources::instances::set_tags(&old, &key, &body)?;
                    methods::rewrite(s, &t, verb, obj, range)
                })
                .await
            }
            ("urlMaps", "validate") => {
                let body = methods::parse_body(&req.body)?;
                let state = self.state.lock().expect("state poisoned");
                let cx = Prepare {
                    state: &state,
                    project: &t.project,
                    zone: None,
                    key: &key,
                    old: None,
                    address_range: range,
                };
                Ok(url_maps::validate_verb(&cx, &body))
            }
            ("urlMaps", "invalidateCache") => {
                // CacheInvalidationRule: `path` (exact, or a prefix ending in `*`), `host`.
                let body = methods::parse_body(&req.body)?;
                let path = validate::req_str(&body, "cacheInvalidationRule", "path")?.to_string();
                if !path.starts_with('/') {
                    return Err(ApiError::invalid_value(
                        "cacheInvalidationRule.path",
                        &path,
                        "The path must start with '/'.",
                    ));
                }
                let host =
                    validate::opt_str(&body, "cacheInvalidationRule", "host")?.map(str::to_string);
                let mut services = Vec::new();
                let r = self
                    .mutate(&t.project, req, |s| {
                        let um = methods::get(s, &t)?;
                        services = backend_services::services_of_url_map(&um);
                        Ok(Mutation {
                            op_type: verb.to_string(),
                            target: key.clone(),
                            zone: None,
                            target_id: None,
                        })
                    })
                    .await;
                if r.is_ok() {
                    if let Some(dp) = self.dataplane.get() {
                        let n = dp.cdn().invalidate(&services, host.as_deref(), &path);
                        tracing::info!(url_map = %key, path, removed = n, "cache invalidated");
                    }
                }
                r
            }
            ("backendServices", "addSignedUrlKey" | "deleteSignedUrlKey") => {
                let body = if req.body.is_empty() {
                    Default::default()
                } else {
                    methods::parse_body(&req.body)?
                };
                self.mutate(&t.project, req, |s| {
                    let bs = s
                        .resources
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| ApiError::not_found(&key))?;
                    let change =
                        backend_services::signed_url_key_change(&bs, verb, &body, &req.query)?;
                    let patch = serde_json::to_vec(
                        &json!({"cdnPolicy": {"signedUrlKeyNames": change.names}}),
                    )
                    .expect("json");
                    let mut m = methods::update(s, &t, &patch, true, range)?;
                    let slot = backend_services::signed_url_key_slot(&key, &change.name);
                    match change.value {
                        Some(v) => {
                            s.private_keys.insert(slot, v);
                        }
                        None => {
                            s.private_keys.remove(&slot);
                        }
                    }
                    m.op_type = verb.to_string();
                    Ok(m)
                })
                .await
            }
            ("securityPolicies", "getRule") => {
                let state = self.state.lock().expect("state poisoned");
                let sp = state
                    .resources
                    .get(&key)
                    .ok_or_else(|| ApiError::not_found(&key))?;
                let p = priority_param(&req.query)?;
                sp["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["priority"].as_i64() == Some(p))
                    .cloned()
                    .ok_or_else(|| {
                        ApiError::invalid_value(
                            "priority",
                            &p.to_string(),
                            "No rule with this priority exists in the policy.",
                        )
                    })
            }
            ("securityPolicies", "addRule" | "patchRule" | "removeRule") => {
                let body = methods::parse_body(&req.body)?;
                let p = priority_param(&req.query);
                self.mutate(&t.project, req, |s| {
                    let sp = s
                        .resources
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| ApiError::not_found(&key))?;
                    let mut rules: Vec<Value> = sp["rules"].as_array().cloned().unwrap_or_default();
                    match verb {
                        "addRule" => {
                            let mut rule = body.clone();
                            let prio =
                                security_policies::check_rule(&mut rule, "securityPolicyRule")?;
                            if rules.iter().any(|r| r["priority"].as_i64() == Some(prio)) {
                                return Err(ApiError::invalid_value(
                                    "securityPolicyRule.priority",
                                    &prio.to_string(),
                                    "A rule with this priority already exists.",
                                ));
                            }
                            rules.push(Value::Object(rule));
                        }
                        _ => {
                            let prio = p.clone()?;
                            let i = rules
                                .iter()
                                .position(|r| r["priority"].as_i64() == Some(prio))
                                .ok_or_else(|| {
                                    ApiError::invalid_value(
                                        "priority",
                                        &prio.to_string(),
                                        "No rule with this priority exists in the policy.",
                                    )
                                })?;
                            if verb == "removeRule" {
                                if prio == security_policies::DEFAULT_PRIORITY {
                                    return Err(ApiError::invalid_value(
                                        "priority",
                                        &prio.to_string(),
                                        "The default rule cannot be removed.",
                                    ));
                                }
                                rules.remove(i);
                            } else {
                                methods::merge_patch(&mut rules[i], &Value::Object(body.clone()));
                            }
                        }
                    }
                    let patch = serde_json::to_vec(&json!({"rules": rules})).expect("json");
                    let mut m = methods::update(s, &t, &patch, true, range)?;
                    m.op_type = verb.to_string();
                    Ok(m)
                })
                .await
            }
            _ => Err(method_not_found(req)),
        }
    }
}

fn priority_param(query: &[(String, String)]) -> Result<i64, ApiError> {
    match query.iter().find(|(k, _)| k == "priority") {
        None => Ok(0),
        Some((_, v)) => v
            .parse()
            .map_err(|_| ApiError::invalid_value("priority", v, "Expected an integer.")),
    }
}
