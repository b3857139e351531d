//! Listener validation: protocol and TLS mode, supported route kinds, certificate references,
//! and conflicts between the listeners of one Gateway (Gateway API `ListenerStatus`,
//! `ListenerConditionType`/`ListenerConditionReason`; GEP-2643 "Conflict management").
//!
//! What each listener becomes on Google Cloud:
//! - `HTTP`: a port of a global external Application Load Balancer (target HTTP proxy);
//! - `HTTPS`: the same with a target HTTPS proxy and the listener's certificates;
//! - `TLS` + `Passthrough`: a global external proxy Network Load Balancer (target TCP proxy)
//!   with Network Services tlsRoutes routing by SNI;
//! - `TLS` + `Terminate`: a target SSL proxy with the listener's certificates.
//!
//! Listeners sharing a port must agree on what the port is: HTTP with HTTPS, or Passthrough with
//! Terminate (mixed mode, `TLSRouteModeMixed`, is not claimed: one forwarding rule per port),
//! are `Conflicted=True, ProtocolConflict`; two listeners of one kind on a port with the same
//! hostname are `Conflicted=True, HostnameConflict`. A conflicted listener is also
//! `Accepted=False` with the same reason, and takes no routes.

use std::collections::{BTreeMap, BTreeSet};

use super::api::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};
use super::conditions::{reasons, types, Cond};
use super::inputs::{GatewayInputs, RouteKind, GROUP};
use crate::translate::certificates::secret_pem;
use crate::translate::ObjectKey;

/// What a listener is, once valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// `HTTP`.
    Http,
    /// `HTTPS` (TLS terminated by the Application Load Balancer).
    Https,
    /// `TLS` with `tls.mode: Passthrough`.
    TlsPassthrough,
    /// `TLS` with `tls.mode: Terminate`.
    TlsTerminate,
}

impl Mode {
    /// The route kind this mode serves.
    pub fn route_kind(self) -> RouteKind {
        match self {
            Mode::Http | Mode::Https => RouteKind::Http,
            Mode::TlsPassthrough | Mode::TlsTerminate => RouteKind::Tls,
        }
    }
}

/// `allowedRoutes.namespaces`.
#[derive(Clone, Debug, PartialEq)]
pub enum AllowedNamespaces {
    /// `Same` (the default): the Gateway's namespace.
    Same,
    /// `All`.
    All,
    /// `Selector`: namespaces whose labels match.
    Selector(Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>),
}

/// A certificate from a listener's `certificateRefs`: the Secret and its PEM parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerCert {
    /// The Secret.
    pub secret: ObjectKey,
    /// `tls.crt`.
    pub cert_pem: String,
    /// `tls.key` (never log it).
    pub key_pem: String,
}

/// One listener after validation.
#[derive(Clone, Debug)]
pub struct ListenerPlan {
    /// `name`.
    pub name: String,
    /// `port`.
    pub port: u16,
    /// `hostname`, lower case.
    pub hostname: Option<String>,
    /// What the listener is; `None` when its protocol is not supported.
    pub mode: Option<Mode>,
    /// Route kinds it accepts (`status.listeners[].supportedKinds`).
    pub supported_kinds: Vec<RouteKind>,
    /// Which namespaces' routes it accepts.
    pub namespaces: AllowedNamespaces,
    /// Valid certificates (HTTPS, TLS Terminate), in `certificateRefs` order.
    pub certificates: Vec<ListenerCert>,
    /// `Accepted`, `ResolvedRefs` and `Conflicted` (`Programmed` is added once synced).
    pub conditions: Vec<Cond>,
    /// Accepted and not conflicted: routes may attach.
    pub usable: bool,
    /// Usable and its references resolved: it can be programmed.
    pub serves: bool,
}

fn mode_of(l: &GatewayListeners) -> Option<Mode> {
    match l.protocol.as_str() {
        "HTTP" => Some(Mode::Http),
        "HTTPS" => Some(Mode::Https),
        "TLS" => Some(match l.tls.as_ref().and_then(|t| t.mode.as_ref()) {
            Some(GatewayListenersTlsMode::Passthrough) => Mode::TlsPassthrough,
            _ => Mode::TlsTerminate,
        }),
        _ => None,
    }
}

/// Validates every listener of `gw` (see the module docs).
pub fn plan(inputs: &GatewayInputs, gw: &Gateway) -> Vec<ListenerPlan> {
    let gw_key = ObjectKey::of(gw);
    let mut plans: Vec<ListenerPlan> = gw
        .spec
        .listeners
        .iter()
        .map(|l| one(inputs, &gw_key, l))
        .collect();
    // Conflicts, per port.
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        if p.mode.is_some() {
            by_port.entry(p.port).or_default().push(i);
        }
    }
    for idx in by_port.values() {
        let families: BTreeSet<u8> = idx
            .iter()
            .filter_map(|i| plans[*i].mode)
            .map(|m| match m {
                Mode::Http => 0,
                Mode::Https => 1,
                Mode::TlsPassthrough => 2,
                Mode::TlsTerminate => 3,
            })
            .collect();
        if families.len() > 1 {
            for i in idx {
                let port = plans[*i].port;
                plans[*i].conditions.push(Cond::yes(
                    types::CONFLICTED,
                    reasons::PROTOCOL_CONFLICT,
                    format!("listeners on port {port} disagree on protocol or TLS mode: one Google Cloud forwarding rule serves one port, as HTTP, HTTPS, TLS passthrough or TLS terminate"),
                ));
            }
            continue;
        }
        let mut seen: BTreeMap<Option<String>, usize> = BTreeMap::new();
        for i in idx {
            *seen.entry(plans[*i].hostname.clone()).or_default() += 1;
        }
        for i in idx {
            if seen[&plans[*i].hostname] > 1 {
                let message = format!(
                    "another listener on port {} has the same hostname {:?}",
                    plans[*i].port,
                    plans[*i].hostname.as_deref().unwrap_or("(none)")
                );
                plans[*i].conditions.push(Cond::yes(
                    types::CONFLICTED,
                    reasons::HOSTNAME_CONFLICT,
                    message,
                ));
            }
        }
    }
    for p in &mut plans {
        // A conflicted listener is not accepted either, with the conflict as the reason (the
        // conformance suite's TLSRouteListenerMixedTerminationNotSupported reads Accepted).
        if let Some(c) = p
            .conditions
            .iter()
            .find(|c| c.type_ == types::CONFLICTED && c.status)
            .cloned()
        {
            for a in p
                .conditions
                .iter_mut()
                .filter(|a| a.type_ == types::ACCEPTED && a.status)
            {
                *a = Cond::no(types::ACCEPTED, c.reason, c.message.clone());
            }
        }
        if !p.conditions.iter().any(|c| c.type_ == types::CONFLICTED) {
            p.conditions.push(Cond::no(
                types::CONFLICTED,
                reasons::NO_CONFLICTS,
                "no conflicts",
            ));
        }
        let accepted = super::conditions::holds(&p.conditions, types::ACCEPTED);
        let conflicted = super::conditions::holds(&p.conditions, types::CONFLICTED);
        p.usable = accepted && !conflicted;
        let refs_ok = super::conditions::holds(&p.conditions, types::RESOLVED_REFS);
        let certs_ok = match p.mode {
            Some(Mode::Https | Mode::TlsTerminate) => !p.certificates.is_empty(),
            _ => true,
        };
        p.serves = p.usable && refs_ok && certs_ok;
    }
    plans
}

fn one(inputs: &GatewayInputs, gw: &ObjectKey, l: &GatewayListeners) -> ListenerPlan {
    let mode = mode_of(l);
    let mut conditions = Vec::new();
    let port = u16::try_from(l.port).unwrap_or(0);
    match mode {
        None => conditions.push(Cond::no(
            types::ACCEPTED,
            reasons::UNSUPPORTED_PROTOCOL,
            format!(
                "protocol {:?} is not supported; use HTTP, HTTPS or TLS",
                l.protocol
            ),
        )),
        Some(_) if port == 0 => conditions.push(Cond::no(
            types::ACCEPTED,
            reasons::PORT_UNAVAILABLE,
            format!("port {} is not a TCP port", l.port),
        )),
        Some(_) => conditions.push(Cond::yes(
            types::ACCEPTED,
            reasons::ACCEPTED,
            "listener accepted",
        )),
    }
    // Supported kinds, narrowed by allowedRoutes.kinds.
    let natural: Vec<RouteKind> = mode.map(|m| vec![m.route_kind()]).unwrap_or_default();
    let mut refs_problem: Option<Cond> = None;
    let supported_kinds = match l.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) {
        None => natural,
        Some(kinds) => {
            let mut out = Vec::new();
            for k in kinds {
                let group = k.group.as_deref().unwrap_or(GROUP);
                let found = natural
                    .iter()
                    .find(|n| group == GROUP && n.as_str() == k.kind);
                match found {
                    Some(n) if !out.contains(n) => out.push(*n),
                    Some(_) => {}
                    None => {
                        refs_problem.get_or_insert(Cond::no(
                            types::RESOLVED_REFS,
                            reasons::INVALID_ROUTE_KINDS,
                            format!(
                                "route kind {group}/{} is not supported on a {} listener",
                                k.kind, l.protocol
                            ),
                        ));
                    }
                }
            }
            out
        }
    };
    let namespaces = match l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    {
        None => AllowedNamespaces::Same,
        Some(n) => match n.from {
            Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => AllowedNamespaces::All,
            Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
                let sel = n
                    .selector
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default();
                AllowedNamespaces::Selector(Box::new(sel))
            }
            _ => AllowedNamespaces::Same,
        },
    };
    let mut certificates = Vec::new();
    if matches!(mode, Some(Mode::Https | Mode::TlsTerminate)) {
        for r in l
            .tls
            .iter()
            .flat_map(|t| t.certificate_refs.iter().flatten())
        {
            let group = r.group.as_deref().unwrap_or("");
            let kind = r.kind.as_deref().unwrap_or("Secret");
            let ns = r.namespace.clone().unwrap_or_else(|| gw.namespace.clone());
            let secret = ObjectKey::new(ns.clone(), r.name.clone());
            if !group.is_empty() || kind != "Secret" {
                refs_problem.get_or_insert(Cond::no(
                    types::RESOLVED_REFS,
                    reasons::INVALID_CERTIFICATE_REF,
                    format!("certificateRef {group}/{kind} {secret} is not a core Secret; only Secrets are supported"),
                ));
                continue;
            }
            if !inputs.reference_granted(
                (GROUP, "Gateway", &gw.namespace),
                ("", "Secret", &ns, &r.name),
            ) {
                refs_problem.get_or_insert(Cond::no(
                    types::RESOLVED_REFS,
                    reasons::REF_NOT_PERMITTED,
                    format!("certificateRef to Secret {secret} in another namespace needs a ReferenceGrant in {ns} from Gateways in {}", gw.namespace),
                ));
                continue;
            }
            match secret_pem(&inputs.cluster, &secret) {
                Ok((cert_pem, key_pem)) => certificates.push(ListenerCert {
                    secret,
                    cert_pem,
                    key_pem,
                }),
                Err(why) => {
                    refs_problem.get_or_insert(Cond::no(
                        types::RESOLVED_REFS,
                        reasons::INVALID_CERTIFICATE_REF,
                        format!("certificateRef Secret {secret} {why}"),
                    ));
                }
            }
        }
    }
    conditions.push(refs_problem.unwrap_or_else(|| {
        Cond::yes(
            types::RESOLVED_REFS,
            reasons::RESOLVED_REFS,
            "references resolved",
        )
    }));
    ListenerPlan {
        name: l.name.clone(),
        port,
        hostname: l.hostname.as_ref().map(|h| h.to_ascii_lowercase()),
        mode,
        supported_kinds,
        namespaces,
        certificates,
        conditions,
        usable: false,
        serves: false,
    }
}

/// Whether `namespace` (with `labels`) may attach routes under `allowed`, for a Gateway in
/// `gateway_namespace`.
pub fn namespace_allowed(
    allowed: &AllowedNamespaces,
    gateway_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    match allowed {
        AllowedNamespaces::Same => namespace == gateway_namespace,
        AllowedNamespaces::All => true,
        AllowedNamespaces::Selector(sel) => selector_matches(sel, labels),
    }
}

/// A `metav1.LabelSelector` against a label set (`matchLabels` and `matchExpressions` with
/// `In`, `NotIn`, `Exists`, `DoesNotExist`).
pub fn selector_matches(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}
