//! The apps/v1 workloads' specs, as k8s.io/kubernetes `pkg/apis/apps/validation/validation.go`
//! does it (`ValidateDeploymentSpec`, `ValidateDeploymentStrategy`,
//! `ValidateRollingUpdateDeployment`, `ValidateReplicaSetSpec`,
//! `ValidatePodTemplateSpecForReplicaSet`, `ValidateStatefulSetSpec`, `ValidateDaemonSetSpec`,
//! `ValidateDaemonSetUpdateStrategy`): replicas and other counts not negative, a non-empty
//! selector that matches the template's labels, the strategy's fields, and `spec.template`
//! validated as a Pod template ([`super::pod::template`]) whose `restartPolicy` is `Always`.

use serde_json::Value;

use super::errors::{forbidden, invalid, invalid_raw, not_supported, required, s};
use super::go_format;
use super::names::percent;
use super::object_meta;
use super::pod;
use crate::crd_validation::FieldError;

/// Whether `selector` (`{matchLabels, matchExpressions}`) selects `labels`
/// (`metav1.LabelSelectorAsSelector(...).Matches`). An empty selector selects everything.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_exprs = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| {
            let key = s(r, &["key"]);
            let values: Vec<&str> = r["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match s(r, &["operator"]) {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_exprs
}

fn non_negative(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if v.as_i64().is_some_and(|n| n < 0) {
        errs.push(invalid(path, v, "must be greater than or equal to 0"));
    }
}

fn is_empty_selector(sel: &Value) -> bool {
    sel["matchLabels"].as_object().is_none_or(|m| m.is_empty())
        && sel["matchExpressions"]
            .as_array()
            .is_none_or(|a| a.is_empty())
}

/// The selector rules shared by Deployments, ReplicaSets and StatefulSets: required, its
/// `matchLabels` valid labels, not empty (`empty selector is invalid for <what>`).
fn selector(spec: &Value, what: &str, errs: &mut Vec<FieldError>) {
    let sel = &spec["selector"];
    if !sel.is_object() {
        errs.push(required("spec.selector", ""));
        return;
    }
    errs.extend(object_meta::labels(
        &sel["matchLabels"],
        "spec.selector.matchLabels",
    ));
    if is_empty_selector(sel) {
        errs.push(invalid_raw(
            "spec.selector",
            &go_format::label_selector(sel),
            &format!("empty selector is invalid for {what}"),
        ));
    }
}

/// `` `selector` does not match template `labels` `` at `spec.template.metadata.labels`: an
/// absent selector selects nothing (`LabelSelectorAsSelector(nil)` is `labels.Nothing()`), an
/// empty one everything (not checked), any other must select the template's labels.
fn template_labels(spec: &Value, errs: &mut Vec<FieldError>) {
    let sel = &spec["selector"];
    let labels = &spec["template"]["metadata"]["labels"];
    let matches = if sel.is_object() {
        is_empty_selector(sel) || selects(sel, labels)
    } else {
        false
    };
    if !matches {
        errs.push(invalid_raw(
            "spec.template.metadata.labels",
            &go_format::string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
}

/// What every workload requires of its template: `restartPolicy: Always` and no
/// `activeDeadlineSeconds` (`... in ReplicaSet is not Supported`).
fn template_policies(spec: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let t = &spec["template"]["spec"];
    if let Some(p) = t["restartPolicy"].as_str() {
        if p != "Always" {
            errs.push(not_supported(
                "spec.template.spec.restartPolicy",
                &Value::from(p),
                &["Always"],
            ));
        }
    }
    if let Some(d) = t.get("activeDeadlineSeconds").filter(|v| !v.is_null()) {
        let detail = format!("activeDeadlineSeconds in {kind} is not Supported");
        if kind == "DaemonSet" {
            errs.push(invalid(
                "spec.template.spec.activeDeadlineSeconds",
                d,
                detail,
            ));
        } else {
            errs.push(forbidden(
                "spec.template.spec.activeDeadlineSeconds",
                &detail,
            ));
        }
    }
}

/// `ValidatePodTemplateSpecForReplicaSet` (Deployments and ReplicaSets).
fn replica_set_template(spec: &Value, errs: &mut Vec<FieldError>) {
    if !spec["template"].is_object() {
        errs.push(required("spec.template", ""));
        return;
    }
    template_labels(spec, errs);
    errs.extend(pod::template(&spec["template"], "spec.template"));
    template_policies(spec, "ReplicaSet", errs);
}

/// The value of an int-or-percent (`getIntOrPercentValue`): the number, or the percent's
/// number.
fn int_or_percent_value(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.trim_end_matches('%').parse().unwrap_or(0),
        n => n.as_i64().unwrap_or(0),
    }
}

/// `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::String(text) => {
            for m in percent(text) {
                errs.push(invalid_raw(path, &go_format::int_or_string(v), &m));
            }
        }
        Value::Null => {}
        n => non_negative(n, path, errs),
    }
}

/// `ValidateDeploymentStrategy` and `ValidateRollingUpdateDeployment`.
fn deployment_strategy(strategy: &Value, errs: &mut Vec<FieldError>) {
    let rolling = strategy.get("rollingUpdate").filter(|v| !v.is_null());
    match s(strategy, &["type"]) {
        "Recreate" => {
            if rolling.is_some() {
                errs.push(forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let Some(r) = rolling else {
                errs.push(required(
                    "spec.strategy.rollingUpdate",
                    "this should be defaulted and never be nil",
                ));
                return;
            };
            let unavailable = &r["maxUnavailable"];
            let path = "spec.strategy.rollingUpdate.maxUnavailable";
            positive_int_or_percent(unavailable, path, errs);
            positive_int_or_percent(&r["maxSurge"], "spec.strategy.rollingUpdate.maxSurge", errs);
            if int_or_percent_value(unavailable) == 0 && int_or_percent_value(&r["maxSurge"]) == 0
            {
                errs.push(invalid_raw(
                    path,
                    &go_format::int_or_string(unavailable),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            if unavailable.is_string() && int_or_percent_value(unavailable) > 100 {
                errs.push(invalid_raw(
                    path,
                    &go_format::int_or_string(unavailable),
                    "must not be greater than 100%",
                ));
            }
        }
        other => errs.push(FieldError {
            reason: "FieldValueNotSupported",
            field: "spec.strategy".into(),
            message: format!(
                "Unsupported value: apps.DeploymentStrategy{{Type:{other:?}, RollingUpdate:{}}}: supported values: \"Recreate\", \"RollingUpdate\"",
                go_pointer(rolling, "apps.RollingUpdateDeployment")
            ),
        }),
    }
}

/// `%#v` of a struct pointer field: `(*T)(nil)`, or (set) a stand-in for the address Go prints,
/// which no client can predict.
fn go_pointer(v: Option<&Value>, ty: &str) -> String {
    match v {
        None => format!("(*{ty})(nil)"),
        Some(_) => format!("(*{ty})(0xc000000000)"),
    }
}

/// `ValidateDeploymentSpec`.
pub fn deployment(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    non_negative(&spec["replicas"], "spec.replicas", &mut errs);
    selector(spec, "deployment", &mut errs);
    replica_set_template(spec, &mut errs);
    deployment_strategy(&spec["strategy"], &mut errs);
    non_negative(&spec["minReadySeconds"], "spec.minReadySeconds", &mut errs);
    non_negative(
        &spec["revisionHistoryLimit"],
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    if let Some(deadline) = spec["progressDeadlineSeconds"].as_i64() {
        non_negative(
            &spec["progressDeadlineSeconds"],
            "spec.progressDeadlineSeconds",
            &mut errs,
        );
        if deadline <= spec["minReadySeconds"].as_i64().unwrap_or(0) {
            errs.push(invalid(
                "spec.progressDeadlineSeconds",
                &Value::from(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

/// `ValidateReplicaSetSpec` (its selector message says "deployment", as upstream's does).
pub fn replica_set(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    non_negative(&spec["replicas"], "spec.replicas", &mut errs);
    non_negative(&spec["minReadySeconds"], "spec.minReadySeconds", &mut errs);
    selector(spec, "deployment", &mut errs);
    replica_set_template(spec, &mut errs);
    errs
}

/// `ValidateStatefulSetSpec`: pod management policy, update strategy, replicas, selector,
/// template.
pub fn stateful_set(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    match spec["podManagementPolicy"].as_str() {
        None | Some("OrderedReady" | "Parallel") => {}
        Some(other) => errs.push(invalid(
            "spec.podManagementPolicy",
            &Value::from(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = &spec["updateStrategy"];
    match strategy["type"].as_str() {
        None | Some("RollingUpdate") => {}
        Some("OnDelete") => {
            if let Some(r) = strategy.get("rollingUpdate").filter(|v| !v.is_null()) {
                let partition = match r.get("partition").filter(|v| !v.is_null()) {
                    None => "(*int32)(nil)".to_string(),
                    Some(_) => "(*int32)(0xc000000000)".to_string(),
                };
                errs.push(invalid_raw(
                    "spec.updateStrategy.rollingUpdate",
                    &format!("apps.RollingUpdateStatefulSetStrategy{{Partition:{partition}, MaxUnavailable:(*intstr.IntOrString)(nil)}}"),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        Some(other) => errs.push(invalid_raw(
            "spec.updateStrategy",
            &format!(
                "apps.StatefulSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{}}}",
                go_pointer(
                    strategy.get("rollingUpdate").filter(|v| !v.is_null()),
                    "apps.RollingUpdateStatefulSetStrategy"
                )
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    non_negative(&spec["replicas"], "spec.replicas", &mut errs);
    non_negative(&spec["minReadySeconds"], "spec.minReadySeconds", &mut errs);
    selector(spec, "statefulset", &mut errs);
    if spec["template"].is_object() {
        template_labels(spec, &mut errs);
        errs.extend(pod::template(&spec["template"], "spec.template"));
    }
    template_policies(spec, "StatefulSet", &mut errs);
    errs
}

/// `ValidateDaemonSetSpec` and `ValidateDaemonSetUpdateStrategy`.
pub fn daemon_set(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    let sel = &spec["selector"];
    errs.extend(object_meta::labels(
        &sel["matchLabels"],
        "spec.selector.matchLabels",
    ));
    template_labels(spec, &mut errs);
    if sel.is_object() && is_empty_selector(sel) {
        errs.push(invalid_raw(
            "spec.selector",
            &go_format::label_selector(sel),
            "empty selector is invalid for daemonset",
        ));
    }
    errs.extend(pod::template(&spec["template"], "spec.template"));
    template_policies(spec, "DaemonSet", &mut errs);
    non_negative(&spec["minReadySeconds"], "spec.minReadySeconds", &mut errs);
    let strategy = &spec["updateStrategy"];
    match strategy["type"].as_str() {
        None | Some("OnDelete") => {}
        Some("RollingUpdate") => {
            let r = &strategy["rollingUpdate"];
            let path = "spec.updateStrategy.rollingUpdate.maxUnavailable";
            positive_int_or_percent(&r["maxUnavailable"], path, &mut errs);
            let surge_path = "spec.updateStrategy.rollingUpdate.maxSurge";
            positive_int_or_percent(&r["maxSurge"], surge_path, &mut errs);
            // `ValidateRollingUpdateDaemonSet`: exactly one of the two is non-zero.
            match (
                int_or_percent_value(&r["maxUnavailable"]) != 0,
                int_or_percent_value(&r["maxSurge"]) != 0,
            ) {
                (true, true) => errs.push(invalid_raw(
                    surge_path,
                    &go_format::int_or_string(&r["maxSurge"]),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => errs.push(required(path, "cannot be 0 when maxSurge is 0")),
                _ => {}
            }
        }
        Some(other) => errs.push(not_supported(
            "spec.updateStrategy.type",
            &Value::from(other),
            &["OnDelete", "RollingUpdate"],
        )),
    }
    non_negative(
        &spec["revisionHistoryLimit"],
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    errs
}
