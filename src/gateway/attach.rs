//! Route attachment: which listeners of a Gateway a route's `parentRefs` entry attaches to, and
//! the `Accepted` condition of that entry (Gateway API `RouteParentStatus`, "Attaching Routes to
//! Gateways"; GEP-2643 for TLSRoute).
//!
//! An entry selects the Gateway's listeners by `sectionName` and `port` (none:
//! `Accepted=False, NoMatchingParent`). Each selected listener takes the route when it is usable
//! (accepted, not conflicted), lists the route's kind in its supported kinds, allows the route's
//! namespace, and shares a hostname with it. The reason when no listener takes it:
//! - every selected listener failed only on hostnames: `NoMatchingListenerHostname`;
//! - a TLSRoute whose entry names (by `sectionName` or `port`) only listeners that are not
//!   `TLS`: `UnsupportedValue` (GEP-2643: "A Listener MUST be have protocol set to TLS when a
//!   TLSRoute attaches to it ... with the reason of UnsupportedValue in case a Listener of the
//!   wrong type is used");
//! - otherwise `NotAllowedByListeners` (also a TLSRoute naming a Gateway that has no TLS
//!   listener at all, as the conformance test TLSRouteInvalidNoMatchingListener expects).

use std::collections::BTreeMap;

use super::backend_refs::ResolvedRule;
use super::conditions::{reasons, types, Cond};
use super::hostnames;
use super::inputs::{ParentRef, RouteInfo, RouteKind};
use super::listeners::{namespace_allowed, ListenerPlan, Mode};

/// A route attached to a listener of a Gateway.
#[derive(Clone, Debug)]
pub struct AttachedRoute {
    /// The route.
    pub info: RouteInfo,
    /// The `parentRefs` entry it attached through, as written.
    pub parent_ref: serde_json::Value,
    /// Where.
    pub attachment: Attachment,
    /// Resolved rules (HTTPRoute: per rule; TLSRoute: its one rule).
    pub rules: Vec<ResolvedRule>,
}

/// A listener a route attached to, and the hostnames it serves there (empty: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// Index of the listener in the Gateway's listener plans.
    pub listener: usize,
    /// Effective hostnames (see [`hostnames::effective`]).
    pub hostnames: Vec<String>,
}

/// The result for one `parentRefs` entry.
#[derive(Clone, Debug)]
pub struct Attached {
    /// `Accepted`.
    pub accepted: Cond,
    /// Where it attached (empty when not accepted).
    pub attachments: Vec<Attachment>,
}

/// Attaches `route`'s entry `parent` to the Gateway in `gateway_namespace` with `listeners`.
pub fn attach(
    route: &RouteInfo,
    parent: &ParentRef,
    gateway_namespace: &str,
    listeners: &[ListenerPlan],
    namespace_labels: &BTreeMap<String, String>,
) -> Attached {
    let selected: Vec<(usize, &ListenerPlan)> = listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| parent.section_name.as_deref().is_none_or(|s| s == l.name))
        .filter(|(_, l)| parent.port.is_none_or(|p| i32::from(l.port) == p))
        .collect();
    if selected.is_empty() {
        return Attached {
            accepted: Cond::no(
                types::ACCEPTED,
                reasons::NO_MATCHING_PARENT,
                format!(
                    "Gateway {gateway_namespace}/{} has no listener{}{}",
                    parent.name,
                    parent
                        .section_name
                        .as_deref()
                        .map(|s| format!(" named {s:?}"))
                        .unwrap_or_default(),
                    parent
                        .port
                        .map(|p| format!(" on port {p}"))
                        .unwrap_or_default()
                ),
            ),
            attachments: Vec::new(),
        };
    }
    let mut attachments = Vec::new();
    let (mut by_hostname, mut others) = (0, 0);
    for (i, l) in &selected {
        if !l.usable || !l.supported_kinds.contains(&route.kind) {
            others += 1;
            continue;
        }
        if !namespace_allowed(
            &l.namespaces,
            gateway_namespace,
            &route.key.namespace,
            namespace_labels,
        ) {
            others += 1;
            continue;
        }
        match hostnames::effective(l.hostname.as_deref(), &route.hostnames) {
            Some(h) => attachments.push(Attachment {
                listener: *i,
                hostnames: h,
            }),
            None => by_hostname += 1,
        }
    }
    if !attachments.is_empty() {
        return Attached {
            accepted: Cond::yes(types::ACCEPTED, reasons::ACCEPTED, "route accepted"),
            attachments,
        };
    }
    let named = parent.section_name.is_some() || parent.port.is_some();
    let wrong_protocol = route.kind == RouteKind::Tls
        && selected
            .iter()
            .all(|(_, l)| !matches!(l.mode, Some(Mode::TlsPassthrough | Mode::TlsTerminate)));
    let accepted = if by_hostname > 0 && others == 0 {
        Cond::no(
            types::ACCEPTED,
            reasons::NO_MATCHING_LISTENER_HOSTNAME,
            format!(
                "none of the route's hostnames {:?} matches a listener hostname",
                route.hostnames
            ),
        )
    } else if named && wrong_protocol {
        Cond::no(
            types::ACCEPTED,
            reasons::UNSUPPORTED_VALUE,
            "a TLSRoute attaches only to listeners of protocol TLS; the listener it names is not one",
        )
    } else {
        Cond::no(
            types::ACCEPTED,
            reasons::NOT_ALLOWED_BY_LISTENERS,
            format!(
                "no listener of the Gateway allows a {} from namespace {}",
                route.kind.as_str(),
                route.key.namespace
            ),
        )
    };
    Attached {
        accepted,
        attachments,
    }
}
