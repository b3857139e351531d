//! PURE: the `admission.k8s.io/v1` AdmissionReview for Pod CREATE -> the gate-injection answer.
//!
//! GKE adds the readiness gate `cloud.google.com/load-balancer-neg-ready` to Pods of NEG-backed
//! Services with a webhook (reference 000, "Pod readiness": "Pod readiness gates are automatically
//! enabled when using container-native load balancing through Ingress"). This one adds it to a
//! Pod iff the Pod is selected by a Service that an Ingress this operator owns uses (rule
//! backends, the default backend), the same answer as [`NegLookup::negs_for_pod`].
//!
//! Response shape (Kubernetes "Dynamic Admission Control"): `allowed: true` always (the webhook
//! never blocks Pod creation), and when mutating, `patchType: JSONPatch` with `patch` the
//! base64 of an RFC 6902 array. A Pod that already has the gate is left unpatched.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::readiness::rules::{has_gate, NEG_READINESS_GATE};
use crate::readiness::NegLookup;
use crate::translate::pod::PodRecord;

/// The only API version answered.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Errors for requests that are not an AdmissionReview v1 (answered with HTTP 400).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdmissionError {
    /// The body is not JSON of an AdmissionReview.
    #[error("request body is not an admission.k8s.io/v1 AdmissionReview: {0}; send the AdmissionReview JSON the API server posts to mutating webhooks")]
    Malformed(String),
    /// `apiVersion`/`kind` are not `admission.k8s.io/v1` / `AdmissionReview`.
    #[error("unsupported {field} {value:?}: this webhook answers admission.k8s.io/v1 AdmissionReview only; set admissionReviewVersions: [v1] in the MutatingWebhookConfiguration")]
    Unsupported {
        /// `apiVersion` or `kind`.
        field: &'static str,
        /// What was sent.
        value: String,
    },
    /// `request` or `request.uid` is missing.
    #[error("AdmissionReview has no request.uid; the API server always sends one")]
    MissingRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<Request>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    uid: Option<String>,
    kind: Option<GroupVersionKind>,
    operation: Option<String>,
    namespace: Option<String>,
    object: Option<Value>,
}

#[derive(Deserialize)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

/// What the webhook decided for one request (for logs and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The gate is added (the RFC 6902 operations).
    Patched(Vec<Value>),
    /// Admitted unchanged, with why.
    Unchanged(&'static str),
}

/// Handles one AdmissionReview body: returns the AdmissionReview response JSON and the decision.
///
/// Errors: [`AdmissionError`] when the body is not an AdmissionReview v1 with a request uid.
/// A request for something else than a Pod CREATE, or a Pod object that does not parse, is
/// admitted unchanged (the webhook must never block Pods).
pub fn review(body: &[u8], lookup: &dyn NegLookup) -> Result<(Value, Decision), AdmissionError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| AdmissionError::Malformed(e.to_string()))?;
    match review.api_version.as_deref() {
        Some(ADMISSION_API_VERSION) => {}
        other => {
            return Err(AdmissionError::Unsupported {
                field: "apiVersion",
                value: other.unwrap_or_default().to_owned(),
            })
        }
    }
    if review.kind.as_deref() != Some("AdmissionReview") {
        return Err(AdmissionError::Unsupported {
            field: "kind",
            value: review.kind.unwrap_or_default(),
        });
    }
    let request = review.request.ok_or(AdmissionError::MissingRequest)?;
    let uid = request.uid.clone().ok_or(AdmissionError::MissingRequest)?;
    let decision = decide(&request, lookup);
    let mut response = json!({ "uid": uid, "allowed": true });
    if let Decision::Patched(ops) = &decision {
        let patch = serde_json::to_vec(ops).unwrap_or_default();
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    let answer = json!({
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "response": response,
    });
    Ok((answer, decision))
}

fn decide(request: &Request, lookup: &dyn NegLookup) -> Decision {
    let is_pod = request
        .kind
        .as_ref()
        .is_some_and(|k| k.group.is_empty() && k.kind == "Pod");
    if !is_pod {
        return Decision::Unchanged("not a Pod");
    }
    if request.operation.as_deref() != Some("CREATE") {
        return Decision::Unchanged("not a CREATE");
    }
    let Some(pod) = request
        .object
        .clone()
        .and_then(|o| serde_json::from_value::<Pod>(o).ok())
    else {
        return Decision::Unchanged("object is not a Pod");
    };
    if PodRecord::from_pod(&pod).is_ok_and(|record| has_gate(&record)) {
        return Decision::Unchanged("Pod already has the readiness gate");
    }
    // On CREATE the object often has no namespace yet; the request names it.
    let namespace = request
        .namespace
        .clone()
        .or_else(|| pod.metadata.namespace.clone())
        .unwrap_or_else(|| "default".to_owned());
    let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
    if !lookup.gates_pod(&namespace, &labels) {
        return Decision::Unchanged("Pod is behind no Ingress-backed Service");
    }
    Decision::Patched(gate_patch(&pod))
}

/// RFC 6902 operations adding the gate: create `spec.readinessGates` when absent, else append.
pub fn gate_patch(pod: &Pod) -> Vec<Value> {
    let gate = json!({ "conditionType": NEG_READINESS_GATE });
    let has_list = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.readiness_gates.is_some());
    if has_list {
        vec![json!({ "op": "add", "path": "/spec/readinessGates/-", "value": gate })]
    } else {
        vec![json!({ "op": "add", "path": "/spec/readinessGates", "value": [gate] })]
    }
}
