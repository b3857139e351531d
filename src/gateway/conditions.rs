//! Status conditions with the Gateway API's types and reasons (gateway-api `apis/v1`:
//! `GatewayConditionType`, `ListenerConditionReason`, `RouteConditionReason` ...), kept as plain
//! data so translation stays pure: `lastTransitionTime` is filled in by the controller, which
//! keeps the previous time when a condition's status did not change.

use serde_json::{json, Value};

/// One condition before it gets its `lastTransitionTime`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    /// `type`: `Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`, ...
    pub type_: &'static str,
    /// `status` as a bool (`"True"` / `"False"`).
    pub status: bool,
    /// `reason`, one of the spec's reasons for this type.
    pub reason: &'static str,
    /// `message`: what was found and what to do.
    pub message: String,
}

impl Cond {
    /// A condition that holds.
    pub fn yes(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Cond {
        Cond {
            type_,
            status: true,
            reason,
            message: message.into(),
        }
    }

    /// A condition that does not hold.
    pub fn no(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Cond {
        Cond {
            type_,
            status: false,
            reason,
            message: message.into(),
        }
    }

    /// The wire form with `observedGeneration`; `previous` (the object's current conditions)
    /// supplies `lastTransitionTime` when type and status are unchanged, else `now`.
    pub fn to_json(&self, generation: Option<i64>, previous: &[Value], now: &str) -> Value {
        let status = if self.status { "True" } else { "False" };
        let kept = previous
            .iter()
            .find(|c| c["type"] == self.type_ && c["status"] == status)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now);
        json!({
            "type": self.type_,
            "status": status,
            "reason": self.reason,
            "message": self.message,
            "observedGeneration": generation.unwrap_or(0),
            "lastTransitionTime": kept,
        })
    }
}

/// Serialises `conds` (see [`Cond::to_json`]).
pub fn to_json(conds: &[Cond], generation: Option<i64>, previous: &[Value], now: &str) -> Value {
    Value::Array(
        conds
            .iter()
            .map(|c| c.to_json(generation, previous, now))
            .collect(),
    )
}

/// Condition types.
pub mod types {
    /// `Accepted`.
    pub const ACCEPTED: &str = "Accepted";
    /// `Programmed`.
    pub const PROGRAMMED: &str = "Programmed";
    /// `ResolvedRefs`.
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// `Conflicted`.
    pub const CONFLICTED: &str = "Conflicted";
    /// `SupportedVersion` (GatewayClass).
    pub const SUPPORTED_VERSION: &str = "SupportedVersion";
}

/// Reasons, as the spec spells them.
pub mod reasons {
    /// Accepted / Programmed / ResolvedRefs hold.
    pub const ACCEPTED: &str = "Accepted";
    /// `Programmed`.
    pub const PROGRAMMED: &str = "Programmed";
    /// `ResolvedRefs`.
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// `NoConflicts`.
    pub const NO_CONFLICTS: &str = "NoConflicts";
    /// `Invalid` (Gateway/Listener not programmed because invalid).
    pub const INVALID: &str = "Invalid";
    /// `Pending`.
    pub const PENDING: &str = "Pending";
    /// `InvalidParameters` (GatewayClass parametersRef).
    pub const INVALID_PARAMETERS: &str = "InvalidParameters";
    /// `UnsupportedProtocol` (Listener).
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    /// `PortUnavailable` (Listener).
    pub const PORT_UNAVAILABLE: &str = "PortUnavailable";
    /// `ProtocolConflict` (Listener).
    pub const PROTOCOL_CONFLICT: &str = "ProtocolConflict";
    /// `HostnameConflict` (Listener).
    pub const HOSTNAME_CONFLICT: &str = "HostnameConflict";
    /// `InvalidCertificateRef` (Listener).
    pub const INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
    /// `InvalidRouteKinds` (Listener).
    pub const INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";
    /// `RefNotPermitted` (Listener certificate, Route backend).
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    /// `AddressNotAssigned` / `AddressNotUsable` (Gateway).
    pub const ADDRESS_NOT_USABLE: &str = "AddressNotUsable";
    /// `UnsupportedAddress` (Gateway).
    pub const UNSUPPORTED_ADDRESS: &str = "UnsupportedAddress";
    /// `NotAllowedByListeners` (Route).
    pub const NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
    /// `NoMatchingListenerHostname` (Route).
    pub const NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
    /// `NoMatchingParent` (Route).
    pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";
    /// `UnsupportedValue` (Route).
    pub const UNSUPPORTED_VALUE: &str = "UnsupportedValue";
    /// `BackendNotFound` (Route).
    pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
    /// `InvalidKind` (Route).
    pub const INVALID_KIND: &str = "InvalidKind";
    /// `UnsupportedProtocol` on a Route backend (a Service port with an unsupported appProtocol).
    pub const UNSUPPORTED_BACKEND_PROTOCOL: &str = "UnsupportedProtocol";
}

/// Whether `conds` has `type_` with status True.
pub fn holds(conds: &[Cond], type_: &str) -> bool {
    conds.iter().any(|c| c.type_ == type_ && c.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_kept_only_while_status_is_unchanged() {
        let prev = vec![json!({"type": "Accepted", "status": "True", "lastTransitionTime": "t0"})];
        let same = Cond::yes("Accepted", "Accepted", "ok").to_json(Some(2), &prev, "t1");
        assert_eq!(same["lastTransitionTime"], "t0");
        assert_eq!(same["observedGeneration"], 2);
        let flipped = Cond::no("Accepted", "Invalid", "bad").to_json(Some(2), &prev, "t1");
        assert_eq!(flipped["lastTransitionTime"], "t1");
        assert_eq!(flipped["status"], "False");
    }
}
