//! The status of a TLSCertificateDelegation: which of its Secrets are served to Ingresses of
//! other namespaces and which uses it refuses, as one `Valid` condition in Contour's
//! `DetailedCondition` shape (projectcontour/contour `apis/projectcontour/v1`:
//! `TLSCertificateDelegationStatus`, `DetailedCondition.AddError`/`AddWarning`; reference 004
//! "TLS"). Pure: reads the snapshot only.
//!
//! - `Valid=True`, reason `Valid`: every `spec.delegations[].secretName` names a usable TLS
//!   Secret (what [`super::certificates::secret_pem`] accepts); the message says which Secrets
//!   are served to which Ingresses (`Valid TLSCertificateDelegation; serving shared to Ingress
//!   default/web`).
//! - `Valid=False`, reason `ErrorPresent` (Contour's wording: "At least one error present, see
//!   Errors for details"): an `errors[]` entry `TLSError`/`SecretNotValid` per delegated Secret
//!   that is missing or not a TLS Secret, naming the field.
//! - `warnings[]` `TLSError`/`DelegationNotPermitted` per Ingress this operator manages whose
//!   `spec.tls` names a Secret this delegation delegates, but not to the Ingress's namespace,
//!   and that no other delegation permits: the Secret is refused (default deny). Warnings
//!   leave `reason` and `message` as they are, as in Contour.
//!
//! Ingresses being deleted and Ingresses of other controllers' classes are not counted.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;

use super::certificates::secret_pem;
use super::secret_refs::tls_secrets;
use super::{owns_ingress, ClusterSnapshot, ObjectKey, TranslateConfig};
use crate::crd::{DetailedCondition, SubCondition, TLSCertificateDelegation};

/// The condition type this controller writes.
pub const VALID: &str = "Valid";
/// Sub-condition type of TLS problems (Contour's `ConditionTypeTLSError`).
pub const TLS_ERROR: &str = "TLSError";

/// The `Valid` condition of `delegation`, computed from `snapshot` (its namespace's Secrets,
/// the TLSCertificateDelegations and IngressClasses) and `ingresses` (every Ingress of the
/// cluster). `previous` is the condition the object carries: its `lastTransitionTime` is kept
/// while `status` does not change, else it becomes `now` (RFC 3339).
pub fn valid_condition<'a>(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    delegation: &TLSCertificateDelegation,
    ingresses: impl IntoIterator<Item = &'a Ingress>,
    previous: Option<&DetailedCondition>,
    now: &str,
) -> DetailedCondition {
    let namespace = delegation.namespace().unwrap_or_default();
    let mut errors = Vec::new();
    for (i, d) in delegation.spec.delegations.iter().enumerate() {
        let key = ObjectKey::new(namespace.clone(), d.secret_name.clone());
        if let Err(problem) = secret_pem(snapshot, &key) {
            errors.push(sub(
                "SecretNotValid",
                format!("spec.delegations[{i}].secretName: Secret {key} {problem}; nothing can be served from it (create it as a kubernetes.io/tls Secret with PEM tls.crt and tls.key)"),
            ));
        }
    }
    // Secret name -> Ingresses it is served to, in order.
    let mut served: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut warnings = Vec::new();
    for ingress in ingresses {
        if ingress.metadata.deletion_timestamp.is_some() || !owns_ingress(snapshot, ingress, config)
        {
            continue;
        }
        let own = ingress.namespace().unwrap_or_default();
        let ingress_key = ObjectKey::of(ingress);
        for r in tls_secrets(snapshot, ingress).unwrap_or_default() {
            if !r.cross_namespace || r.key.namespace != namespace {
                continue;
            }
            let Some(entry) = delegation
                .spec
                .delegations
                .iter()
                .find(|d| d.secret_name == r.key.name)
            else {
                continue;
            };
            if delegation.spec.delegates(&r.key.name, &own) {
                if secret_pem(snapshot, &r.key).is_ok() {
                    served
                        .entry(entry.secret_name.as_str())
                        .or_default()
                        .push(ingress_key.to_string());
                }
            } else if !r.permitted {
                warnings.push(sub(
                    "DelegationNotPermitted",
                    format!("Ingress {ingress_key} ({}) names Secret {}, which this delegation does not delegate to namespace {own}; it is not served there (add {own} to the targetNamespaces of secretName {})", r.field, r.key, r.key.name),
                ));
            }
        }
    }
    let (status, reason, message) = if errors.is_empty() {
        let uses: Vec<String> = served
            .iter()
            .map(|(secret, to)| {
                let noun = if to.len() == 1 {
                    "Ingress"
                } else {
                    "Ingresses"
                };
                format!("{secret} to {noun} {}", to.join(", "))
            })
            .collect();
        let message = if uses.is_empty() {
            "Valid TLSCertificateDelegation; no Ingress of another namespace uses its Secrets"
                .to_owned()
        } else {
            format!(
                "Valid TLSCertificateDelegation; serving {}",
                uses.join("; ")
            )
        };
        ("True", "Valid", message)
    } else {
        (
            "False",
            "ErrorPresent",
            "At least one error present, see Errors for details".to_owned(),
        )
    };
    let last_transition_time = previous
        .filter(|p| p.status == status)
        .map(|p| p.last_transition_time.clone())
        .unwrap_or_else(|| now.to_owned());
    DetailedCondition {
        type_: VALID.to_owned(),
        status: status.to_owned(),
        observed_generation: delegation.metadata.generation,
        last_transition_time,
        reason: reason.to_owned(),
        message,
        errors,
        warnings,
    }
}

fn sub(reason: &str, message: String) -> SubCondition {
    SubCondition {
        type_: TLS_ERROR.to_owned(),
        status: "True".to_owned(),
        reason: reason.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::test_support::{config, snapshot_from_yaml};

    const NOW: &str = "2026-11-28T10:00:00Z";

    fn secret(name: &str) -> String {
        // "-----BEGIN CERTIFICATE-----" / "-----BEGIN PRIVATE KEY-----", base64.
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: certs}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n  tls.key: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCg==\n---\n")
    }

    fn ingress(namespace: &str, name: &str, secrets: &[&str]) -> String {
        let tls: Vec<String> = secrets
            .iter()
            .map(|s| format!("{{secretName: {s}}}"))
            .collect();
        format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  annotations: {{kubernetes.io/ingress.class: gce, projectcontour.io/tls-cert-namespace: certs}}\nspec:\n  tls: [{}]\n---\n", tls.join(", "))
    }

    const DELEGATION: &str = "apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: to-others, namespace: certs, generation: 3}\nspec:\n  delegations:\n  - {secretName: shared, targetNamespaces: [default, shop]}\n  - {secretName: private, targetNamespaces: [other]}\n---\n";

    fn condition(yaml: &str, previous: Option<&DetailedCondition>) -> DetailedCondition {
        let snapshot = snapshot_from_yaml(yaml);
        let d = snapshot
            .tls_certificate_delegations
            .get(&ObjectKey::new("certs", "to-others"))
            .expect("the delegation")
            .clone();
        let ingresses: Vec<_> = snapshot.ingresses.values().cloned().collect();
        valid_condition(
            &snapshot,
            &config(),
            &d,
            ingresses.iter().map(|i| &**i),
            previous,
            NOW,
        )
    }

    #[test]
    fn served_secrets_are_listed_and_refused_uses_are_warnings() {
        let yaml = format!(
            "{DELEGATION}{}{}{}{}{}",
            secret("shared"),
            secret("private"),
            ingress("default", "web", &["shared", "private"]),
            ingress("shop", "store", &["shared"]),
            // Another controller's Ingress counts for nothing.
            ingress("default", "theirs", &["private"])
                .replace("ingress.class: gce", "ingress.class: nginx"),
        );
        let c = condition(&yaml, None);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Valid"));
        assert_eq!(
            c.message,
            "Valid TLSCertificateDelegation; serving shared to Ingresses default/web, shop/store"
        );
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(c.last_transition_time, NOW);
        assert!(c.errors.is_empty(), "{c:?}");
        assert_eq!(c.warnings.len(), 1, "{c:?}");
        let w = &c.warnings[0];
        assert_eq!(
            (w.type_.as_str(), w.reason.as_str(), w.status.as_str()),
            ("TLSError", "DelegationNotPermitted", "True")
        );
        assert!(
            w.message.starts_with("Ingress default/web (spec.tls[1].secretName) names Secret certs/private, which this delegation does not delegate to namespace default"),
            "{}",
            w.message
        );
    }

    #[test]
    fn a_missing_secret_is_an_error_and_the_transition_time_follows_the_status() {
        let yaml = format!(
            "{DELEGATION}{}{}",
            secret("shared"),
            ingress("default", "web", &["shared"])
        );
        let c = condition(&yaml, None);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ErrorPresent")
        );
        assert_eq!(
            c.message,
            "At least one error present, see Errors for details"
        );
        assert_eq!(c.errors.len(), 1, "{c:?}");
        assert_eq!(
            (c.errors[0].type_.as_str(), c.errors[0].reason.as_str()),
            ("TLSError", "SecretNotValid")
        );
        assert!(
            c.errors[0]
                .message
                .starts_with("spec.delegations[1].secretName: Secret certs/private does not exist"),
            "{}",
            c.errors[0].message
        );
        // Same status: the transition time stays; another status: it moves to now.
        let earlier = DetailedCondition {
            last_transition_time: "2026-01-01T00:00:00Z".into(),
            ..c.clone()
        };
        assert_eq!(
            condition(&yaml, Some(&earlier)).last_transition_time,
            "2026-01-01T00:00:00Z"
        );
        let fixed = format!("{yaml}{}", secret("private"));
        let c = condition(&fixed, Some(&earlier));
        assert_eq!(
            (c.status.as_str(), c.last_transition_time.as_str()),
            ("True", NOW)
        );
        assert_eq!(
            c.message,
            "Valid TLSCertificateDelegation; serving shared to Ingress default/web"
        );
    }

    #[test]
    fn a_use_another_delegation_permits_is_not_refused() {
        let other = "apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: everyone, namespace: certs}\nspec:\n  delegations:\n  - {secretName: private, targetNamespaces: ['*']}\n---\n";
        let yaml = format!(
            "{DELEGATION}{other}{}{}{}",
            secret("shared"),
            secret("private"),
            ingress("default", "web", &["private"])
        );
        let c = condition(&yaml, None);
        assert!(c.warnings.is_empty(), "{c:?}");
        assert_eq!(
            c.message,
            "Valid TLSCertificateDelegation; no Ingress of another namespace uses its Secrets"
        );
    }
}
