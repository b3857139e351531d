//! Cases ported from kubernetes/kubernetes `pkg/controller/deployment/util/deployment_util_test.go`
//! (TestResolveFenceposts, TestNewRSNewReplicas, TestMaxUnavailable, TestEqualIgnoreHash,
//! TestDeploymentComplete, TestDeploymentProgressing, TestDeploymentTimedOut) and
//! apimachinery's `GetScaledValueFromIntOrPercent` cases.

use super::*;
use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn s(v: &str) -> IntOrString {
    IntOrString::String(v.into())
}

fn rolling(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
    Deployment {
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(surge),
                    max_unavailable: Some(unavailable),
                }),
            }),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

#[test]
fn resolve_fenceposts_rounds_surge_up_and_unavailable_down() {
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a str>,
        i32,
        Result<(i32, i32), ()>,
    );
    let cases: [Case; 7] = [
        (Some("0%"), Some("0%"), 0, Ok((0, 1))),
        (Some("39%"), Some("39%"), 10, Ok((4, 3))),
        (Some("oops"), Some("39%"), 10, Err(())),
        (Some("55%"), Some("urg"), 10, Err(())),
        (None, Some("39%"), 10, Ok((0, 3))),
        (Some("39%"), None, 10, Ok((4, 0))),
        (None, None, 10, Ok((0, 1))),
    ];
    for (surge, unavailable, desired, want) in cases {
        let got = resolve_fenceposts(surge.map(s).as_ref(), unavailable.map(s).as_ref(), desired)
            .map_err(|_| ());
        assert_eq!(got, want, "{surge:?} {unavailable:?} of {desired}");
    }
    assert_eq!(
        scaled_value(Some(&s("25%")), 2, true),
        Ok(1),
        "25% of 2 rounds up to 1 surge"
    );
    assert_eq!(scaled_value(Some(&s("25%")), 2, false), Ok(0));
    assert_eq!(scaled_value(Some(&IntOrString::Int(3)), 2, false), Ok(3));
    let error = scaled_value(Some(&s("x")), 2, false).unwrap_err();
    assert!(error.to_string().contains("25%"), "{error}");
}

#[test]
fn new_rs_new_replicas_respects_surge_and_strategy() {
    // (strategy, deployment replicas, new RS replicas, maxSurge, expected); another RS holds 5.
    for (strategy, dep, new_rs, surge, want) in [
        ("RollingUpdate", 1, 5, 1, 5),
        ("RollingUpdate", 6, 2, 10, 6),
        ("Recreate", 3, 1, 1, 3),
    ] {
        let mut d = rolling(dep, IntOrString::Int(surge), IntOrString::Int(1));
        d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ = Some(strategy.into());
        assert_eq!(
            new_rs_new_replicas(&d, 5 + new_rs, new_rs),
            want,
            "{strategy} {dep} {new_rs} {surge}"
        );
    }
}

#[test]
fn max_unavailable_is_capped_by_replicas_and_zero_for_recreate() {
    for (replicas, unavailable, want) in [
        (10, IntOrString::Int(5), 5),
        (10, IntOrString::Int(10), 10),
        (5, IntOrString::Int(10), 5),
        (0, IntOrString::Int(10), 0),
        (10, s("50%"), 5),
        (10, s("100%"), 10),
        (5, s("100%"), 5),
    ] {
        let d = rolling(replicas, IntOrString::Int(1), unavailable.clone());
        assert_eq!(max_unavailable(&d), want, "{replicas} {unavailable:?}");
    }
    let recreate = Deployment {
        spec: Some(DeploymentSpec {
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            }),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    assert_eq!(max_unavailable(&recreate), 0);
    assert_eq!(max_surge(&recreate), 0);
    let defaults = rolling(2, s("25%"), s("25%"));
    assert_eq!((max_surge(&defaults), max_unavailable(&defaults)), (1, 0));
}

fn template(name: &str, labels: &[(&str, &str)]) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }),
        spec: None,
    }
}

#[test]
fn equal_ignore_hash_cases() {
    let h = POD_TEMPLATE_HASH;
    let cases = [
        (
            template("foo", &[(h, "value-1"), ("something", "else")]),
            template("foo", &[(h, "value-2"), ("something", "else")]),
            true,
        ),
        (
            template("foo", &[("something", "else")]),
            template("foo", &[(h, "value-2"), ("something", "else")]),
            true,
        ),
        (
            template("foo", &[("something", "else")]),
            template("foo", &[(h, "value-2")]),
            false,
        ),
        (
            template("foo", &[(h, "value-1")]),
            template("foo", &[(h, "value-1"), ("something", "else")]),
            false,
        ),
        (
            template("foo-1", &[(h, "value-1"), ("something", "else")]),
            template("foo-2", &[(h, "value-2"), ("something", "else")]),
            false,
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(equal_ignore_hash(&a, &b), want, "{a:?} {b:?}");
        assert_eq!(equal_ignore_hash(&b, &a), want, "reversed");
    }
    let with_empty: PodTemplateSpec = serde_json::from_value(serde_json::json!({
        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}]}
    }))
    .unwrap();
    let stored: PodTemplateSpec = serde_json::from_value(serde_json::json!({
        "metadata": {"labels": {"app": "web", h: "abc"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    }))
    .unwrap();
    assert!(
        equal_ignore_hash(&with_empty, &stored),
        "`resources: {{}}` (as kubectl rollout undo sends it) is the same as none"
    );
    let a = template("foo", &[("app", "web")]);
    assert_eq!(pod_template_hash(&a, None), pod_template_hash(&a, None));
    assert_ne!(pod_template_hash(&a, None), pod_template_hash(&a, Some(1)));
    assert_ne!(
        pod_template_hash(&a, None),
        pod_template_hash(&template("bar", &[("app", "web")]), None)
    );
    assert!(pod_template_hash(&a, None)
        .chars()
        .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
}

fn status(current: i32, updated: i32, ready: i32, available: i32) -> DeploymentStatus {
    DeploymentStatus {
        replicas: Some(current),
        updated_replicas: Some(updated),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        ..DeploymentStatus::default()
    }
}

#[test]
fn deployment_complete_cases() {
    for (desired, current, updated, available, unavailable, surge, want) in [
        (5, 5, 5, 4, 1, 0, false),
        (5, 5, 5, 3, 1, 0, false),
        (5, 5, 5, 5, 0, 0, true),
        (5, 5, 4, 5, 0, 0, false),
        (1, 2, 1, 1, 0, 1, false),
        (1, 1, 1, 0, 1, 1, false),
    ] {
        let d = rolling(
            desired,
            IntOrString::Int(surge),
            IntOrString::Int(unavailable),
        );
        let st = status(current, updated, 0, available);
        assert_eq!(deployment_complete(&d, &st), want, "{st:?}");
    }
}

#[test]
fn deployment_progressing_cases() {
    for (old, new, want) in [
        ((10, 4, 4, 4), (10, 6, 4, 4), true),
        ((10, 4, 4, 4), (10, 4, 4, 4), false),
        ((10, 4, 6, 6), (8, 4, 6, 6), true),
        ((10, 7, 3, 3), (10, 6, 3, 3), false),
        ((10, 4, 7, 7), (8, 8, 5, 5), true),
        ((10, 10, 9, 8), (10, 10, 10, 8), true),
        ((10, 10, 10, 9), (10, 10, 10, 10), true),
    ] {
        let d = Deployment {
            status: Some(status(old.0, old.1, old.2, old.3)),
            ..Deployment::default()
        };
        let st = status(new.0, new.1, new.2, new.3);
        assert_eq!(deployment_progressing(&d, &st), want, "{old:?} -> {new:?}");
    }
}

#[test]
fn deployment_timed_out_cases() {
    let at = |min: i64, sec: i64| Timestamp::from_second(1_451_606_400 + min * 60 + sec).unwrap();
    let d = |deadline: Option<i32>, reason: &str, from: Timestamp| {
        let d = Deployment {
            spec: Some(DeploymentSpec {
                progress_deadline_seconds: deadline,
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        };
        let st = DeploymentStatus {
            conditions: Some(vec![DeploymentCondition {
                type_: "Progressing".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                last_update_time: Some(Time(from)),
                ..DeploymentCondition::default()
            }]),
            ..DeploymentStatus::default()
        };
        (d, st)
    };
    for (deadline, reason, from, now, want) in [
        (None, "", at(1, 9), at(1, 20), false),
        (Some(i32::MAX), "", at(1, 9), at(1, 20), false),
        (Some(10), "", at(1, 9), at(1, 20), true),
        (Some(10), "", at(1, 11), at(1, 20), false),
        (Some(10), NEW_RS_AVAILABLE, at(0, 0), at(1, 20), false),
    ] {
        let (d, st) = d(deadline, reason, from);
        assert_eq!(
            deployment_timed_out(&d, &st, now),
            want,
            "{deadline:?} {reason}"
        );
    }
}

#[test]
fn availability_needs_ready_for_min_ready_seconds() {
    let ready_at = |t: Timestamp| -> Pod {
        serde_json::from_value(serde_json::json!({
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": t.to_string()}]}
        }))
        .unwrap()
    };
    let t0 = Timestamp::from_second(1_700_000_000).unwrap();
    let later = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
    let pod = ready_at(t0);
    assert!(is_pod_available(&pod, 0, t0));
    assert!(!is_pod_available(&pod, 5, later(4)));
    assert_eq!(seconds_until_available(&pod, 5, later(4)), Some(1));
    assert!(is_pod_available(&pod, 5, later(5)));
    assert_eq!(seconds_until_available(&pod, 5, later(5)), None);
    let not_ready: Pod = serde_json::from_value(serde_json::json!({
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}
    }))
    .unwrap();
    assert!(!is_pod_available(&not_ready, 0, t0));
}
