//! Pure translation of every Gateway of this controller's classes: listeners, route attachment,
//! the desired load balancer, and the status each Gateway and route parent should carry.
//! Same inputs, same output (ordered maps only; nothing reads the clock or the environment).

use std::collections::{BTreeMap, BTreeSet};

use super::api::gateways::Gateway;
use super::attach::{attach, AttachedRoute};
use super::backend_refs::{backend_header_action, resolve_ref, BackendSet, Ref, ResolvedRule};
use super::conditions::{reasons, types, Cond};
use super::desired::{AddressPlan, DesiredGateway};
use super::http_routes::{check_supported, CLASS_SCHEME};
use super::inputs::{GatewayInputs, RouteInfo, RouteKind};
use super::listeners::{self, ListenerPlan};
use super::namer::GatewayNamer;
use super::ports;
use crate::translate::{ObjectKey, TranslateConfig};

/// Settings of the Gateway controller.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// `spec.controllerName` of the GatewayClasses this controller owns.
    pub controller_name: String,
    /// Project, network, zones, cluster UID, default backend (shared with Ingress).
    pub translate: TranslateConfig,
}

/// What one Gateway should become.
#[derive(Clone, Debug)]
pub struct GatewayPlan {
    /// The Gateway.
    pub key: ObjectKey,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Its names.
    pub namer: GatewayNamer,
    /// The desired load balancer.
    pub desired: DesiredGateway,
    /// Listeners with their conditions.
    pub listeners: Vec<ListenerPlan>,
    /// Routes attached per listener (`status.listeners[].attachedRoutes`).
    pub attached_routes: Vec<i32>,
    /// Gateway-level `Accepted`; and a reason the Gateway cannot be programmed, if any.
    pub accepted: Cond,
    /// Why the Gateway cannot be programmed even when synced (address, default backend).
    pub not_programmable: Option<Cond>,
}

/// The status of one route towards one parent of ours.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentStatus {
    /// The `parentRefs` entry as written.
    pub parent_ref: serde_json::Value,
    /// The Gateway it names.
    pub gateway: ObjectKey,
    /// `Accepted` and `ResolvedRefs`.
    pub conditions: Vec<Cond>,
}

/// Route statuses towards our Gateways, by (kind, route): the route's generation and one entry
/// per parent of ours.
pub type RouteStatuses = BTreeMap<(RouteKind, ObjectKey), (Option<i64>, Vec<ParentStatus>)>;

/// Everything translation decided.
#[derive(Clone, Debug, Default)]
pub struct Translation {
    /// Gateways of our classes.
    pub gateways: BTreeMap<ObjectKey, GatewayPlan>,
    /// Route statuses towards our Gateways, by (kind, route).
    pub routes: RouteStatuses,
}

/// The GatewayClasses this controller owns.
pub fn our_classes(inputs: &GatewayInputs, config: &GatewayConfig) -> BTreeSet<String> {
    inputs
        .classes
        .iter()
        .filter(|(_, c)| c.spec.controller_name == config.controller_name)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Translates every Gateway of our classes and every route that names one.
pub fn translate(inputs: &GatewayInputs, config: &GatewayConfig) -> Translation {
    let classes = our_classes(inputs, config);
    let gateways: BTreeMap<ObjectKey, (&Gateway, Vec<ListenerPlan>)> = inputs
        .gateways
        .iter()
        .filter(|(_, g)| classes.contains(&g.spec.gateway_class_name))
        .map(|(k, g)| (k.clone(), (g.as_ref(), listeners::plan(inputs, g))))
        .collect();
    let mut out = Translation::default();
    let mut attached: BTreeMap<ObjectKey, Vec<AttachedRoute>> = BTreeMap::new();
    let mut backends: BTreeMap<ObjectKey, BackendSet> = BTreeMap::new();
    let no_labels = BTreeMap::new();
    for route in inputs.routes() {
        let unsupported = match route.kind {
            RouteKind::Http => inputs
                .http_routes
                .get(&route.key)
                .map(|r| check_supported(r, CLASS_SCHEME))
                .unwrap_or(Ok(())),
            RouteKind::Tls => Ok(()),
        };
        let refs = resolved_refs(inputs, &route);
        let mut parents = Vec::new();
        for parent in &route.parents {
            let Some(gw_key) = parent.gateway() else {
                continue;
            };
            let Some((_, plans)) = gateways.get(&gw_key) else {
                continue;
            };
            let labels = inputs
                .namespaces
                .get(&route.key.namespace)
                .unwrap_or(&no_labels);
            let mut result = attach(&route, parent, &gw_key.namespace, plans, labels);
            if let (Err(why), true) = (&unsupported, result.accepted.status) {
                result.accepted =
                    Cond::no(types::ACCEPTED, reasons::UNSUPPORTED_VALUE, why.clone());
                result.attachments.clear();
            }
            let set = backends.entry(gw_key.clone()).or_default();
            if !result.attachments.is_empty() {
                let rules = resolve_rules(inputs, &config.translate, &route, set);
                for a in &result.attachments {
                    attached
                        .entry(gw_key.clone())
                        .or_default()
                        .push(AttachedRoute {
                            info: route.clone(),
                            parent_ref: parent.as_written.clone(),
                            attachment: a.clone(),
                            rules: rules.clone(),
                        });
                }
            }
            parents.push(ParentStatus {
                parent_ref: parent.as_written.clone(),
                gateway: gw_key.clone(),
                conditions: vec![result.accepted, refs.clone()],
            });
        }
        if !parents.is_empty() {
            out.routes
                .insert((route.kind, route.key.clone()), (route.generation, parents));
        }
    }
    for (key, (gw, plans)) in gateways {
        let routes = attached.remove(&key).unwrap_or_default();
        let set = backends.remove(&key).unwrap_or_default();
        let plan = gateway_plan(
            inputs,
            config,
            &key,
            gw,
            plans,
            routes,
            set,
            &mut out.routes,
        );
        out.gateways.insert(key, plan);
    }
    out
}

/// `ResolvedRefs` of a route: the first backendRef that does not resolve, else True.
fn resolved_refs(inputs: &GatewayInputs, route: &RouteInfo) -> Cond {
    let mut refs: Vec<Ref<'_>> = Vec::new();
    match route.kind {
        RouteKind::Http => {
            if let Some(r) = inputs.http_routes.get(&route.key) {
                for rule in r.spec.rules.iter().flatten() {
                    for b in rule.backend_refs.iter().flatten() {
                        refs.push(Ref {
                            group: b.group.as_deref(),
                            kind: b.kind.as_deref(),
                            namespace: b.namespace.as_deref(),
                            name: &b.name,
                            port: b.port,
                        });
                    }
                }
            }
        }
        RouteKind::Tls => {
            if let Some(r) = inputs.tls_routes.get(&route.key) {
                for rule in &r.spec.rules {
                    for b in &rule.backend_refs {
                        refs.push(Ref {
                            group: b.group.as_deref(),
                            kind: b.kind.as_deref(),
                            namespace: b.namespace.as_deref(),
                            name: &b.name,
                            port: b.port,
                        });
                    }
                }
            }
        }
    }
    for r in &refs {
        if let Err(c) = resolve_ref(inputs, route.kind, &route.key, r) {
            return c;
        }
    }
    Cond::yes(
        types::RESOLVED_REFS,
        reasons::RESOLVED_REFS,
        "all backendRefs resolved",
    )
}

/// Resolves one backendRef into `rule`: a weighted backend, or its weight counted invalid.
#[allow(clippy::too_many_arguments)]
fn resolve_one(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    route: &RouteInfo,
    r: Ref<'_>,
    weight: Option<i32>,
    filters: Option<serde_json::Value>,
    rule: &mut ResolvedRule,
    tcp: bool,
    set: &mut BackendSet,
) {
    let weight = u32::try_from(weight.unwrap_or(1)).unwrap_or(0);
    let resolved = resolve_ref(inputs, route.kind, &route.key, &r)
        .ok()
        .map(|rb| {
            if tcp {
                set.tcp(inputs, config, &rb)
            } else {
                set.http(inputs, config, &rb)
            }
        });
    match resolved {
        Some(Ok(service_ref)) => rule.backends.push(super::backend_refs::WeightedBackend {
            service_ref,
            weight,
            header_action: filters
                .as_ref()
                .and_then(|f| f.as_array().map(|a| backend_header_action(a)))
                .flatten(),
        }),
        _ => rule.invalid_weight += weight,
    }
}

/// Resolves the rules of `route` (TLSRoutes get TCP backends), adding backends to `set`.
fn resolve_rules(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    route: &RouteInfo,
    set: &mut BackendSet,
) -> Vec<ResolvedRule> {
    let mut out = Vec::new();
    match route.kind {
        RouteKind::Http => {
            let Some(r) = inputs.http_routes.get(&route.key) else {
                return out;
            };
            for rule in r.spec.rules.iter().flatten() {
                let mut rr = ResolvedRule::default();
                for b in rule.backend_refs.iter().flatten() {
                    let filters = b
                        .filters
                        .as_ref()
                        .and_then(|f| serde_json::to_value(f).ok());
                    let r = Ref {
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        namespace: b.namespace.as_deref(),
                        name: &b.name,
                        port: b.port,
                    };
                    resolve_one(
                        inputs, config, route, r, b.weight, filters, &mut rr, false, set,
                    );
                }
                for f in rule.filters.iter().flatten() {
                    let Some(m) = &f.request_mirror else { continue };
                    let b = &m.backend_ref;
                    let r = Ref {
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        namespace: b.namespace.as_deref(),
                        name: &b.name,
                        port: b.port,
                    };
                    let Ok(rb) = resolve_ref(inputs, route.kind, &route.key, &r) else {
                        continue;
                    };
                    if let Ok(service) = set.http(inputs, config, &rb) {
                        let percent = match (&m.fraction, m.percent) {
                            (Some(fr), _) => {
                                f64::from(fr.numerator) * 100.0
                                    / f64::from(fr.denominator.unwrap_or(100).max(1))
                            }
                            (None, Some(p)) => f64::from(p),
                            (None, None) => 100.0,
                        };
                        rr.mirror = Some((service, percent));
                    }
                }
                out.push(rr);
            }
        }
        RouteKind::Tls => {
            let Some(r) = inputs.tls_routes.get(&route.key) else {
                return out;
            };
            for rule in &r.spec.rules {
                let mut rr = ResolvedRule::default();
                for b in &rule.backend_refs {
                    let r = Ref {
                        group: b.group.as_deref(),
                        kind: b.kind.as_deref(),
                        namespace: b.namespace.as_deref(),
                        name: &b.name,
                        port: b.port,
                    };
                    resolve_one(inputs, config, route, r, b.weight, None, &mut rr, true, set);
                }
                out.push(rr);
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn gateway_plan(
    inputs: &GatewayInputs,
    config: &GatewayConfig,
    key: &ObjectKey,
    gw: &Gateway,
    mut plans: Vec<ListenerPlan>,
    routes: Vec<AttachedRoute>,
    mut set: BackendSet,
    route_statuses: &mut RouteStatuses,
) -> GatewayPlan {
    let tc = &config.translate;
    let namer = GatewayNamer::new(
        &tc.cluster_uid,
        &tc.kube_system_uid,
        &key.namespace,
        &key.name,
    );
    let mut attached_routes = vec![0; plans.len()];
    let mut counted: BTreeSet<(usize, RouteKind, ObjectKey)> = BTreeSet::new();
    for r in &routes {
        if counted.insert((r.attachment.listener, r.info.kind, r.info.key.clone())) {
            attached_routes[r.attachment.listener] += 1;
        }
    }
    let mut accepted = Cond::yes(types::ACCEPTED, reasons::ACCEPTED, "Gateway accepted");
    let address = match gw.spec.addresses.as_deref() {
        None | Some([]) => AddressPlan::Managed(namer.address()),
        Some([a]) => match (
            a.r#type.as_deref().unwrap_or("IPAddress"),
            a.value.as_deref(),
        ) {
            ("NamedAddress", Some(v)) => AddressPlan::Named(v.to_owned()),
            ("IPAddress", Some(v)) => AddressPlan::Ip(v.to_owned()),
            (t, _) => {
                accepted = Cond::no(
                    types::ACCEPTED,
                    reasons::UNSUPPORTED_ADDRESS,
                    format!("spec.addresses: type {t:?} needs a value; use IPAddress or NamedAddress (a reserved global address)"),
                );
                AddressPlan::Managed(namer.address())
            }
        },
        Some(_) => {
            accepted = Cond::no(
                types::ACCEPTED,
                reasons::UNSUPPORTED_ADDRESS,
                "spec.addresses: a Google Cloud load balancer has one IP address; name at most one",
            );
            AddressPlan::Managed(namer.address())
        }
    };
    let built = ports::build(inputs, tc, key, &namer, &mut plans, &routes, &mut set);
    for ((kind, route), (parent_ref, cond)) in built.route_overrides {
        if let Some((_, parents)) = route_statuses.get_mut(&(kind, route)) {
            for p in parents
                .iter_mut()
                .filter(|p| p.gateway == *key && p.parent_ref == parent_ref)
            {
                p.conditions[0] = cond.clone();
            }
        }
    }
    let desired = DesiredGateway {
        backends: set.backends,
        address,
        ssl_certificates: built.ssl_certificates,
        ports: built.ports,
        tls_routes: built.tls_routes,
    };
    GatewayPlan {
        key: key.clone(),
        generation: kube::Resource::meta(gw).generation,
        namer,
        desired,
        listeners: plans,
        attached_routes,
        accepted,
        not_programmable: built.not_programmable,
    }
}
