//! TLSCertificateDelegation (`gclb-operator.dev/v1alpha1`, short name `tlscerts`): Contour's
//! TLS certificate delegation (reference 004, "TLS" and "TLS Delegation"; Contour's
//! `projectcontour.io/v1` TLSCertificateDelegation) under this project's API group, with the
//! same `spec` shape so Contour manifests move over by changing `apiVersion`.
//!
//! A delegation lives in the namespace of the Secrets it delegates. An Ingress may use a
//! Secret from another namespace only when a delegation there names that Secret and the
//! Ingress's namespace (or `*`); otherwise the Secret is not used (default deny, with a
//! Warning Event). See `crate::translate::secret_refs` for how an Ingress names such a Secret.
//!
//! `status.conditions` has Contour's `DetailedCondition` shape (`Valid`, with `errors` and
//! `warnings`); the operator writes it (`crate::translate::delegation_status`).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Spec of a TLSCertificateDelegation: which Secrets of this namespace which namespaces may use.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gclb-operator.dev",
    version = "v1alpha1",
    kind = "TLSCertificateDelegation",
    plural = "tlscertificatedelegations",
    namespaced,
    shortname = "tlscerts",
    status = "TLSCertificateDelegationStatus",
    doc = "TLSCertificateDelegation lets Ingresses in other namespaces use TLS Secrets of this namespace (Contour's TLSCertificateDelegation shape).",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TLSCertificateDelegationSpec {
    /// The delegations, at least one.
    #[schemars(length(min = 1))]
    pub delegations: Vec<CertificateDelegation>,
}

/// One delegated Secret (`spec.delegations[]`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateDelegation {
    /// Name of a Secret in this delegation's namespace (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = 253))]
    #[schemars(regex(
        pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    ))]
    pub secret_name: String,
    /// Namespaces whose Ingresses may use the Secret; `*` means every namespace. At least one.
    #[schemars(length(min = 1))]
    #[schemars(inner(regex(pattern = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")))]
    #[schemars(inner(length(min = 1, max = 63)))]
    pub target_namespaces: Vec<String>,
}

/// Status of a TLSCertificateDelegation, in Contour's shape (`projectcontour.io/v1`
/// `TLSCertificateDelegationStatus`): conditions of Contour's `DetailedCondition` type. This
/// controller writes one, `Valid` (normal-true polarity), and keeps other controllers'
/// conditions as they are, as Contour documents for the field.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TLSCertificateDelegationStatus {
    /// The conditions, one per `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DetailedCondition>,
}

/// Contour's `DetailedCondition`: a `metav1.Condition` with `errors` (sub-conditions that make
/// a `Valid` condition `False`) and `warnings` (that do not).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DetailedCondition {
    /// Condition type: `Valid`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// CamelCase reason: `Valid`, or `ErrorPresent` when `errors` is not empty.
    pub reason: String,
    /// Human-readable details.
    pub message: String,
    /// Fatal sub-conditions (abnormal-true polarity, e.g. `TLSError`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SubCondition>,
    /// Non-fatal sub-conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<SubCondition>,
}

/// Contour's `SubCondition`: one error or warning of a [`DetailedCondition`].
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SubCondition {
    /// Abnormal-true type, e.g. `TLSError`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` while the problem is present.
    pub status: String,
    /// CamelCase reason, e.g. `SecretNotValid`, `DelegationNotPermitted`.
    pub reason: String,
    /// What is wrong and where.
    pub message: String,
}

/// The `targetNamespaces` entry that delegates to every namespace.
pub const ALL_NAMESPACES: &str = "*";

impl TLSCertificateDelegationSpec {
    /// Whether this spec delegates Secret `secret_name` (of the delegation's own namespace) to
    /// `namespace`: some entry names the Secret and lists `namespace` or [`ALL_NAMESPACES`].
    pub fn delegates(&self, secret_name: &str, namespace: &str) -> bool {
        self.delegations.iter().any(|d| {
            d.secret_name == secret_name
                && d.target_namespaces
                    .iter()
                    .any(|t| t == namespace || t == ALL_NAMESPACES)
        })
    }
}
