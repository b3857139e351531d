//! The status this controller writes: GatewayClass (`Accepted`, `supportedFeatures`), Gateway
//! (`Accepted`, `Programmed`, `addresses`, listeners with `supportedKinds`, `attachedRoutes` and
//! their conditions) and the route parents it owns (`Accepted`, `ResolvedRefs`, with its
//! `controllerName`), each condition with `observedGeneration` (Gateway API `GatewayStatus`,
//! `RouteParentStatus`).

use serde_json::{json, Value};

use super::conditions::{self, reasons, types, Cond};
use super::inputs::GROUP;
use super::translate::{GatewayPlan, ParentStatus};

/// The Gateway API features this controller claims in `GatewayClass.status.supportedFeatures`
/// (conformance feature names, sorted): exactly the features of the conformance cases that
/// pass through real traffic in tests/gateway_conformance_e2e.rs (which checks this list against
/// them; docs/gateway-api.md carries the report).
pub const SUPPORTED_FEATURES: &[&str] = &[
    "Gateway",
    "HTTPRoute",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ReferenceGrant",
    "TLSRoute",
    "TLSRouteModeTerminate",
];

/// `status` of one of our GatewayClasses.
pub fn gateway_class(generation: Option<i64>, previous: &[Value], now: &str) -> Value {
    let conds = [
        Cond::yes(
            types::ACCEPTED,
            reasons::ACCEPTED,
            "gclb-operator manages Gateways of this class",
        ),
        Cond::yes(
            types::SUPPORTED_VERSION,
            "SupportedVersion",
            "Gateway API v1.5 (standard channel)",
        ),
    ];
    json!({
        "conditions": conditions::to_json(&conds, generation, previous, now),
        "supportedFeatures": SUPPORTED_FEATURES.iter().map(|f| json!({"name": f})).collect::<Vec<_>>(),
    })
}

/// How the sync of a Gateway went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Synced; the IP.
    Ok(Option<String>),
    /// `spec.addresses` cannot be used.
    Address(String),
    /// A call failed; retried later.
    Failed(String),
}

/// `status` of a Gateway after its sync.
pub fn gateway(plan: &GatewayPlan, outcome: &SyncOutcome, previous: &Value, now: &str) -> Value {
    let g = plan.generation;
    let prev_conds = previous["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let programmed = match (outcome, &plan.not_programmable) {
        _ if !plan.accepted.status => Cond::no(
            types::PROGRAMMED,
            reasons::INVALID,
            plan.accepted.message.clone(),
        ),
        (SyncOutcome::Address(why), _) => {
            Cond::no(types::PROGRAMMED, reasons::ADDRESS_NOT_USABLE, why.clone())
        }
        (SyncOutcome::Failed(why), _) => Cond::no(
            types::PROGRAMMED,
            reasons::PENDING,
            format!("Google Cloud resources are being created or a call failed (retrying): {why}"),
        ),
        (SyncOutcome::Ok(_), Some(c)) => c.clone(),
        (SyncOutcome::Ok(None), None) => {
            Cond::no(types::PROGRAMMED, reasons::PENDING, "no address yet")
        }
        (SyncOutcome::Ok(Some(_)), None) => Cond::yes(
            types::PROGRAMMED,
            reasons::PROGRAMMED,
            "load balancer programmed",
        ),
    };
    let synced = matches!(outcome, SyncOutcome::Ok(Some(_)));
    let listeners: Vec<Value> = plan
        .listeners
        .iter()
        .zip(&plan.attached_routes)
        .map(|(l, attached)| {
            let prev = previous["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == l.name.as_str())
                .and_then(|p| p["conditions"].as_array().cloned())
                .unwrap_or_default();
            let mut conds = l.conditions.clone();
            conds.push(if l.serves && synced {
                Cond::yes(types::PROGRAMMED, reasons::PROGRAMMED, "listener programmed")
            } else if l.serves {
                Cond::no(types::PROGRAMMED, reasons::PENDING, "waiting for the load balancer")
            } else {
                Cond::no(types::PROGRAMMED, reasons::INVALID, "listener not valid (see its other conditions)")
            });
            json!({
                "name": l.name,
                "supportedKinds": l.supported_kinds.iter().map(|k| json!({"group": GROUP, "kind": k.as_str()})).collect::<Vec<_>>(),
                "attachedRoutes": attached,
                "conditions": conditions::to_json(&conds, g, &prev, now),
            })
        })
        .collect();
    let addresses: Vec<Value> = match outcome {
        SyncOutcome::Ok(Some(ip)) => vec![json!({"type": "IPAddress", "value": ip})],
        _ => previous["addresses"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    json!({
        "addresses": addresses,
        "conditions": conditions::to_json(&[plan.accepted.clone(), programmed], g, &prev_conds, now),
        "listeners": listeners,
    })
}

/// `status.parents` of a route: entries of other controllers kept, ours replaced by `ours`.
pub fn route_parents(
    controller_name: &str,
    generation: Option<i64>,
    ours: &[ParentStatus],
    previous: &Value,
    now: &str,
) -> Value {
    let prev: Vec<Value> = previous["parents"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Value> = prev
        .iter()
        .filter(|p| p["controllerName"] != controller_name)
        .cloned()
        .collect();
    for p in ours {
        let prev_conds = prev
            .iter()
            .find(|x| x["controllerName"] == controller_name && x["parentRef"] == p.parent_ref)
            .and_then(|x| x["conditions"].as_array().cloned())
            .unwrap_or_default();
        out.push(json!({
            "parentRef": p.parent_ref,
            "controllerName": controller_name,
            "conditions": conditions::to_json(&p.conditions, generation, &prev_conds, now),
        }));
    }
    Value::Array(out)
}
