//! Defaulting of the built-in kinds, the part clients read back: Secret `type` and
//! `stringData`; Service `type`, `clusterIP`, port `protocol`/`targetPort`, `nodePort`; Pod
//! `restartPolicy`, `terminationGracePeriodSeconds`, `dnsPolicy`, container port `protocol`,
//! probe `timeoutSeconds`/`periodSeconds`/`successThreshold`/`failureThreshold` and `httpGet`
//! `path`/`scheme`; Deployment `replicas`, `strategy`, `revisionHistoryLimit`,
//! `progressDeadlineSeconds` and its Pod template (as a Pod spec); ReplicaSet, StatefulSet and
//! DaemonSet `replicas`, strategies, history limits and templates; initial `status` of Pods,
//! Namespaces, Services and Ingresses. Values follow the real API's defaulting functions
//! (k8s.io/kubernetes pkg/apis/core/v1/defaults.go and pkg/apis/apps/v1/defaults.go).

use base64::Engine;
use rand::Rng;
use serde_json::{json, Value};

use crate::registry::ResourceInfo;

fn set_default(obj: &mut Value, field: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        if map.get(field).is_none_or(Value::is_null) {
            map.insert(field.to_string(), value);
        }
    }
}

/// Defaults `obj` (storage form) of resource `res` in place; `old` is the stored object on updates
/// (allocated values such as `clusterIP` are carried over from it).
pub fn apply(res: &ResourceInfo, obj: &mut Value, old: Option<&Value>) {
    match res.storage.as_str() {
        "/services" => service(obj, old),
        "/pods" => {
            set_default(obj, "spec", json!({}));
            set_default(obj, "status", json!({"phase": "Pending"}));
            pod_spec(&mut obj["spec"]);
        }
        "apps/deployments" => deployment(obj),
        "apps/replicasets" | "apps/statefulsets" | "apps/daemonsets" => workload(res, obj),
        "/namespaces" => {
            set_default(obj, "spec", json!({"finalizers": ["kubernetes"]}));
            set_default(obj, "status", json!({"phase": "Active"}));
        }
        "networking.k8s.io/ingresses" => set_default(obj, "status", json!({"loadBalancer": {}})),
        "/secrets" => secret(obj),
        _ => {}
    }
}

/// Secret `type` defaults to `Opaque`; `stringData` is write-only and merged into `data`.
fn secret(obj: &mut Value) {
    if obj["type"].as_str().is_none_or(str::is_empty) {
        obj["type"] = json!("Opaque");
    }
    let Some(string_data) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    set_default(obj, "data", json!({}));
    for (k, v) in string_data.as_object().into_iter().flatten() {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
        obj["data"][k] = json!(encoded);
    }
}

fn service(obj: &mut Value, old: Option<&Value>) {
    set_default(obj, "spec", json!({}));
    set_default(obj, "status", json!({"loadBalancer": {}}));
    let old_spec = old.map(|o| o["spec"].clone()).unwrap_or(Value::Null);
    let spec = &mut obj["spec"];
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if kind != "ExternalName" {
        if spec.get("clusterIP").is_none_or(Value::is_null) {
            let ip = old_spec["clusterIP"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| {
                    let mut rng = rand::rng();
                    format!(
                        "10.96.{}.{}",
                        rng.random_range(0..=255),
                        rng.random_range(1..=254)
                    )
                });
            spec["clusterIP"] = json!(ip);
        }
        let ip = spec["clusterIP"].clone();
        set_default(spec, "clusterIPs", json!([ip]));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    let needs_node_port = kind == "NodePort" || kind == "LoadBalancer";
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            set_default(port, "protocol", json!("TCP"));
            let p = port["port"].clone();
            set_default(port, "targetPort", p);
            if needs_node_port && port.get("nodePort").is_none_or(Value::is_null) {
                let carried = old_spec["ports"]
                    .as_array()
                    .and_then(|ps| {
                        ps.iter().find(|o| {
                            o["port"] == port["port"] && o["protocol"] == port["protocol"]
                        })
                    })
                    .and_then(|o| o["nodePort"].as_i64());
                let np = carried.unwrap_or_else(|| rand::rng().random_range(30000..=32767));
                port["nodePort"] = json!(np);
            }
        }
    }
    if needs_node_port {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
}

/// Deployment defaults (`SetDefaults_Deployment`): 1 replica, a 25%/25% rolling update unless
/// `Recreate`, 10 old ReplicaSets kept, a 600 s progress deadline; the template as a Pod spec.
fn deployment(obj: &mut Value) {
    set_default(obj, "spec", json!({}));
    let spec = &mut obj["spec"];
    // Ill-typed bodies are stored as sent (built-in kinds get no value validation).
    if !spec.is_object() {
        return;
    }
    set_default(spec, "replicas", json!(1));
    set_default(spec, "strategy", json!({}));
    let strategy = &mut spec["strategy"];
    if strategy.is_object() {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            set_default(strategy, "rollingUpdate", json!({}));
            let rolling = &mut strategy["rollingUpdate"];
            set_default(rolling, "maxUnavailable", json!("25%"));
            set_default(rolling, "maxSurge", json!("25%"));
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if spec["template"].is_object() {
        set_default(&mut spec["template"], "spec", json!({}));
        pod_spec(&mut spec["template"]["spec"]);
    }
}

/// ReplicaSet, StatefulSet and DaemonSet defaults (`SetDefaults_ReplicaSet`,
/// `SetDefaults_StatefulSet`, `SetDefaults_DaemonSet`): 1 replica (not DaemonSets);
/// StatefulSets `OrderedReady`, a `RollingUpdate` with partition 0, Retain PVC policies;
/// DaemonSets a `RollingUpdate` of maxUnavailable 1, maxSurge 0; both keep 10 revisions; the
/// template as a Pod spec.
fn workload(res: &ResourceInfo, obj: &mut Value) {
    set_default(obj, "spec", json!({}));
    let spec = &mut obj["spec"];
    if !spec.is_object() {
        return;
    }
    match res.storage.as_str() {
        "apps/statefulsets" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        "apps/daemonsets" => {
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
        }
        _ => set_default(spec, "replicas", json!(1)),
    }
    if spec["template"].is_object() {
        set_default(&mut spec["template"], "spec", json!({}));
        pod_spec(&mut spec["template"]["spec"]);
    }
}

/// Probe defaults (`SetDefaults_Probe`, `SetDefaults_HTTPGetAction`): 1 s timeout, 10 s period,
/// success threshold 1, failure threshold 3; `httpGet` path `/` and scheme `HTTP`.
fn probe(p: &mut Value) {
    if !p.is_object() {
        return;
    }
    set_default(p, "timeoutSeconds", json!(1));
    set_default(p, "periodSeconds", json!(10));
    set_default(p, "successThreshold", json!(1));
    set_default(p, "failureThreshold", json!(3));
    if p["httpGet"].is_object() {
        set_default(&mut p["httpGet"], "path", json!("/"));
        set_default(&mut p["httpGet"], "scheme", json!("HTTP"));
    }
}

/// Pod spec defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`), for Pods and templates.
fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers {
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "imagePullPolicy", json!("IfNotPresent"));
                for p in ["readinessProbe", "livenessProbe", "startupProbe"] {
                    if let Some(node) = c.get_mut(p) {
                        probe(node);
                    }
                }
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn res(group: &str, plural: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::new().find(group, "v1", plural).expect("served")
    }

    #[test]
    fn pod_probes_get_the_real_defaults_and_explicit_values_stay() {
        let mut pod = json!({"spec": {"containers": [{"name": "c",
            "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 2},
            "livenessProbe": {"tcpSocket": {"port": 8080}}}]}});
        apply(&res("", "pods"), &mut pod, None);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "periodSeconds": 2,
                "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["livenessProbe"]["periodSeconds"], 10);
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["dnsPolicy"], "ClusterFirst");
    }

    #[test]
    fn deployments_default_strategy_and_template() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "c",
            "readinessProbe": {"httpGet": {"port": 80}}}]}}}});
        apply(&res("apps", "deployments"), &mut d, None);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let t = &d["spec"]["template"]["spec"];
        assert_eq!(t["containers"][0]["readinessProbe"]["timeoutSeconds"], 1);
        assert_eq!(t["dnsPolicy"], "ClusterFirst");

        let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply(&res("apps", "deployments"), &mut recreate, None);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
        // Ill-typed bodies do not panic.
        let mut odd = json!({"spec": {"strategy": "x", "template": 3}});
        apply(&res("apps", "deployments"), &mut odd, None);
        assert_eq!(odd["spec"]["strategy"], "x");
    }
}
