//! Pod termination as the kubelet runs it: the grace period, the preStop hook (emulated as a
//! delay), and the final delete with `gracePeriodSeconds: 0`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use kube::{Api, ResourceExt};
use tokio::time::Instant;

/// When to stop serving after the deletion was seen: at the end of the grace period, or right
/// after the preStop hook for applications that exit on SIGTERM.
pub(super) fn termination_deadline(pod: &Pod, exit_on_sigterm: bool) -> Instant {
    let grace = Duration::from_secs(grace_period_seconds(pod));
    let now = Instant::now();
    if exit_on_sigterm {
        now + pre_stop_delay(pod).min(grace)
    } else {
        now + grace
    }
}

/// `metadata.deletionGracePeriodSeconds` (what the delete asked for), else
/// `spec.terminationGracePeriodSeconds`, else the API default of 30.
pub fn grace_period_seconds(pod: &Pod) -> u64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0) as u64
}

/// The longest preStop delay among the containers: `lifecycle.preStop.sleep.seconds`, or the
/// `N` of `sleep N` in a preStop exec command (the only command emulated).
pub fn pre_stop_delay(pod: &Pod) -> Duration {
    let pattern = regex::Regex::new(r"(?:^|[\s;&|])sleep\s+(\d+(?:\.\d+)?)").ok();
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.lifecycle.as_ref()?.pre_stop.as_ref())
        .filter_map(|hook| {
            if let Some(sleep) = &hook.sleep {
                return Some(Duration::from_secs(sleep.seconds.max(0) as u64));
            }
            let command = hook.exec.as_ref()?.command.as_ref()?.join(" ");
            let seconds: f64 = pattern
                .as_ref()?
                .captures(&command)?
                .get(1)?
                .as_str()
                .parse()
                .ok()?;
            Some(Duration::from_secs_f64(seconds))
        })
        .max()
        .unwrap_or_default()
}

/// Deletes the Pod with gracePeriodSeconds 0 once its servers are stopped; true when done.
pub(super) async fn finish_deletion(api: &Api<Pod>, key: &str, pod: &Pod) -> bool {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 404 => true,
        Err(error) => {
            tracing::warn!(pod = %key, %error, "cannot delete terminated Pod; retrying");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn pre_stop_sleep_forms_are_recognised() {
        let p = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "a", "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "echo bye; sleep 5"]}}}},
            {"name": "b", "lifecycle": {"preStop": {"sleep": {"seconds": 7}}}},
            {"name": "c", "lifecycle": {"preStop": {"exec": {"command": ["nginx", "-s", "quit"]}}}}
        ]}}));
        assert_eq!(pre_stop_delay(&p), Duration::from_secs(7));
        let q = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "a", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2.5"]}}}}
        ]}}));
        assert_eq!(pre_stop_delay(&q), Duration::from_millis(2500));
    }

    #[test]
    fn grace_period_prefers_the_delete_request() {
        let spec_only = pod(
            json!({"metadata": {"name": "a"}, "spec": {"terminationGracePeriodSeconds": 12, "containers": []}}),
        );
        assert_eq!(grace_period_seconds(&spec_only), 12);
        let asked = pod(
            json!({"metadata": {"name": "a", "deletionGracePeriodSeconds": 3}, "spec": {"terminationGracePeriodSeconds": 12, "containers": []}}),
        );
        assert_eq!(grace_period_seconds(&asked), 3);
        let default = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": []}}));
        assert_eq!(grace_period_seconds(&default), 30);
    }
}
