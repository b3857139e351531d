//! The Pod annotations through which a Pod chooses what the local kubelet runs (or opts out)
//! and through which tests steer its built-in server. They are read live: the kubelet applies a change to a running Pod
//! as soon as its watch sees it. See docs/kube-apiserver.md, "Local Pods and controllers".

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// `local.gclb-operator.dev/run`: absent (or `image`), the Pod runs what its images serve
/// ([`super::images`]); `echo` or `default-backend` run that server whatever the image; any
/// other value, e.g. `none`, opts the Pod out: it is left alone, as a real cluster's Pod waiting
/// for a node would be.
pub const RUN: &str = "local.gclb-operator.dev/run";
/// `local.gclb-operator.dev/fail-paths`: comma-separated request paths answered with 500
/// (exact match on the path without the query; `*` alone fails every path).
pub const FAIL_PATHS: &str = "local.gclb-operator.dev/fail-paths";
/// `local.gclb-operator.dev/latency-ms`: milliseconds added before every response.
pub const LATENCY_MS: &str = "local.gclb-operator.dev/latency-ms";
/// `local.gclb-operator.dev/stopped`: `"true"` closes the Pod's listeners (connections are
/// refused) until the annotation is removed or set to anything else.
pub const STOPPED: &str = "local.gclb-operator.dev/stopped";
/// `local.gclb-operator.dev/tls-ports`: comma-separated container port numbers or names served
/// over HTTPS (in addition to ports whose name starts with `https`).
pub const TLS_PORTS: &str = "local.gclb-operator.dev/tls-ports";
/// `local.gclb-operator.dev/on-sigterm`: what the emulated application does when the kubelet
/// would send SIGTERM (after the preStop hook). `drain` (default): keeps serving until
/// `terminationGracePeriodSeconds` has passed since deletion, like an application that ignores
/// SIGTERM and gets SIGKILL. `exit`: stops serving at once.
pub const ON_SIGTERM: &str = "local.gclb-operator.dev/on-sigterm";
/// `local.gclb-operator.dev/grpc-health`: `NOT_SERVING` makes the Pod's gRPC health service
/// (`grpc.health.v1.Health/Check`) answer NOT_SERVING for the server (`""`) and for
/// `gclb.echo.v1.Echo`; any other value (or none) answers SERVING.
pub const GRPC_HEALTH: &str = "local.gclb-operator.dev/grpc-health";

/// What a Pod runs, from [`RUN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// What each container's image serves ([`super::images::app_for`]).
    Image,
    /// The echo server: a JSON body naming the Pod and the request.
    Echo,
    /// GKE's default backend: 404 `default backend - 404` on every path, 200 `ok` on `/healthz`
    /// (reference 000_8e2dd831946c5b72.txt, "default backend").
    DefaultBackend,
}

impl RunMode {
    /// The run mode the annotations ask for; `None` when the Pod opted out.
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Option<RunMode> {
        let Some(value) = annotations.and_then(|a| a.get(RUN)) else {
            return Some(RunMode::Image);
        };
        match value.trim() {
            "image" => Some(RunMode::Image),
            "echo" => Some(RunMode::Echo),
            "default-backend" => Some(RunMode::DefaultBackend),
            _ => None,
        }
    }
}

/// The per-Pod test controls an echo server obeys; parsed leniently (a malformed value is
/// ignored rather than failing the Pod, as a real application would ignore an unknown setting).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodControls {
    /// Paths answered with 500; `*` means every path.
    pub fail_paths: BTreeSet<String>,
    /// Delay before every response.
    pub latency: Duration,
    /// Listeners closed: connections are refused.
    pub stopped: bool,
    /// Stop serving right after the preStop hook instead of at the end of the grace period.
    pub exit_on_sigterm: bool,
    /// The gRPC health service answers NOT_SERVING.
    pub grpc_not_serving: bool,
}

impl PodControls {
    /// Reads the controls from a Pod's annotations.
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> PodControls {
        let Some(a) = annotations else {
            return PodControls::default();
        };
        PodControls {
            fail_paths: a
                .get(FAIL_PATHS)
                .map(|v| split_list(v).collect())
                .unwrap_or_default(),
            latency: a
                .get(LATENCY_MS)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_millis)
                .unwrap_or_default(),
            stopped: a
                .get(STOPPED)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            exit_on_sigterm: a.get(ON_SIGTERM).is_some_and(|v| v.trim() == "exit"),
            grpc_not_serving: a
                .get(GRPC_HEALTH)
                .is_some_and(|v| v.trim() == "NOT_SERVING"),
        }
    }

    /// Whether a request for `path` (without query) must fail with 500.
    pub fn fails(&self, path: &str) -> bool {
        self.fail_paths.contains("*") || self.fail_paths.contains(path)
    }
}

/// The entries of [`TLS_PORTS`]: port numbers or names.
pub fn tls_ports(annotations: Option<&BTreeMap<String, String>>) -> BTreeSet<String> {
    annotations
        .and_then(|a| a.get(TLS_PORTS))
        .map(|v| split_list(v).collect())
        .unwrap_or_default()
}

fn split_list(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_pod_runs_unless_it_opts_out() {
        assert_eq!(RunMode::from_annotations(None), Some(RunMode::Image));
        assert_eq!(
            RunMode::from_annotations(Some(&ann(&[("app", "web")]))),
            Some(RunMode::Image)
        );
        assert_eq!(
            RunMode::from_annotations(Some(&ann(&[(RUN, "none")]))),
            None
        );
        assert_eq!(
            RunMode::from_annotations(Some(&ann(&[(RUN, "echo")]))),
            Some(RunMode::Echo)
        );
        assert_eq!(
            RunMode::from_annotations(Some(&ann(&[(RUN, "default-backend")]))),
            Some(RunMode::DefaultBackend)
        );
        assert_eq!(
            RunMode::from_annotations(Some(&ann(&[(RUN, "nginx")]))),
            None
        );
    }

    #[test]
    fn controls_parse_lists_numbers_and_flags() {
        let c = PodControls::from_annotations(Some(&ann(&[
            (FAIL_PATHS, " /healthz, /,,"),
            (LATENCY_MS, "250"),
            (STOPPED, "True"),
            (ON_SIGTERM, "exit"),
            (GRPC_HEALTH, "NOT_SERVING"),
        ])));
        assert!(c.fails("/healthz") && c.fails("/") && !c.fails("/other"));
        assert_eq!(c.latency, Duration::from_millis(250));
        assert!(c.stopped && c.exit_on_sigterm && c.grpc_not_serving);
    }

    #[test]
    fn malformed_controls_are_ignored() {
        let c =
            PodControls::from_annotations(Some(&ann(&[(LATENCY_MS, "soon"), (STOPPED, "yes")])));
        assert_eq!(c, PodControls::default());
        let all = PodControls::from_annotations(Some(&ann(&[(FAIL_PATHS, "*")])));
        assert!(all.fails("/anything"));
    }

    #[test]
    fn tls_ports_lists_names_and_numbers() {
        let ports = tls_ports(Some(&ann(&[(TLS_PORTS, "8443, web")])));
        assert_eq!(
            ports,
            ["8443".to_string(), "web".to_string()]
                .into_iter()
                .collect()
        );
    }
}
