//! Metadata, the core and apps kinds' contents and update rules through [`super::validate`],
//! each with the real server's field path and message (k8s.io/kubernetes v1.26
//! `pkg/apis/core/validation`, `pkg/apis/apps/validation`, apimachinery's `objectmeta.go`).

use serde_json::{json, Value};

use super::validate;
use crate::registry::{builtin_resources, ResourceInfo};

fn res(group: &str, plural: &str) -> ResourceInfo {
    builtin_resources()
        .into_iter()
        .find(|r| r.group == group && r.plural == plural)
        .expect("served resource")
}

fn create(group: &str, plural: &str, obj: Value) -> Vec<String> {
    let errs = validate(&res(group, plural), "ns", &obj, None, false, true);
    errs.iter().map(|e| e.to_line()).collect()
}

fn update(group: &str, plural: &str, obj: Value, old: Value) -> Vec<String> {
    let errs = validate(&res(group, plural), "ns", &obj, Some(&old), false, true);
    errs.iter().map(|e| e.to_line()).collect()
}

fn pod(spec: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": spec})
}

fn web() -> Value {
    json!({"name": "web", "image": "nginx"})
}

#[test]
fn metadata_labels_annotations_finalizers_owners() {
    let long = "a".repeat(64);
    let obj = json!({"metadata": {"name": "c",
        "labels": {"app": long, "bad key": "x"},
        "annotations": {"Example.com/OK": "1", "not ok": "x"},
        "finalizers": ["example.com/f", "bad finalizer!", "plain"],
        "ownerReferences": [{"apiVersion": "apps/", "kind": "Deployment", "name": "", "uid": "u"}]}});
    let got = create("", "configmaps", obj);
    assert_eq!(
        got,
        [
            format!("metadata.labels: Invalid value: \"{long}\": must be no more than 63 characters"),
            "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into(),
            "metadata.annotations: Invalid value: \"not ok\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into(),
            "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty".into(),
            "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty".into(),
            "metadata.finalizers: Invalid value: \"bad finalizer!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into(),
            "metadata.finalizers[1]: Invalid value: \"bad finalizer!\": name is neither a standard finalizer name nor is it fully qualified".into(),
            "metadata.finalizers[2]: Invalid value: \"plain\": name is neither a standard finalizer name nor is it fully qualified".into(),
        ]
    );
    let big = json!({"metadata": {"name": "c", "annotations": {"a": "x".repeat(256 * 1024)}}});
    assert_eq!(
        create("", "configmaps", big),
        ["metadata.annotations: Too long: must have at most 262144 bytes"]
    );
}

#[test]
fn pod_spec_rules() {
    assert_eq!(
        create("", "pods", pod(json!({}))),
        ["spec.containers: Required value"]
    );
    let bad = pod(json!({
        "containers": [
            {"name": "Web", "ports": [{"containerPort": 0, "name": "http"}, {"containerPort": 80, "name": "http"}],
             "livenessProbe": {"successThreshold": 2, "httpGet": {"path": "/", "port": 70000}},
             "readinessProbe": {}},
            web(), web()],
        "readinessGates": [{"conditionType": "bad gate"}]}));
    assert_eq!(
        create("", "pods", bad),
        [
            "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.containers[0].image: Required value",
            "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
            "spec.containers[0].readinessProbe: Required value: must specify a handler type",
            "spec.containers[0].ports[0].containerPort: Required value",
            "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
            "spec.containers[2].name: Duplicate value: \"web\"",
            "spec.readinessGates[0].conditionType: Invalid value: \"bad gate\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ]
    );
    assert!(create("", "pods", pod(json!({"containers": [web()]}))).is_empty());
}

#[test]
fn pod_spec_is_immutable_but_images() {
    let old = pod(json!({"containers": [web()]}));
    let image = pod(json!({"containers": [{"name": "web", "image": "nginx:2"}]}));
    assert!(update("", "pods", image, old.clone()).is_empty());
    let port = pod(
        json!({"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}),
    );
    let got = update("", "pods", port, old);
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{got:?}");
}

#[test]
fn config_map_and_secret_keys_and_immutability() {
    assert_eq!(
        create("", "configmaps", json!({"metadata": {"name": "c"}, "data": {"bad key": "v", "ok": "v"}})),
        ["data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]
    );
    let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {"k": "YQ=="}});
    let changed = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {"k": "Yg=="}});
    assert_eq!(
        update("", "secrets", changed, old.clone()),
        ["data: Forbidden: field is immutable when `immutable` is set"]
    );
    let unset = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "YQ=="}});
    assert_eq!(
        update("", "secrets", unset, old.clone()),
        ["immutable: Forbidden: field is immutable when `immutable` is set"]
    );
    let retyped = json!({"metadata": {"name": "s"}, "type": "example.com/x", "immutable": true, "data": {"k": "YQ=="}});
    assert_eq!(
        update("", "secrets", retyped, old),
        ["type: Invalid value: \"example.com/x\": field is immutable"]
    );
}

fn service(ty: &str, ip: &str, node_port: i64) -> Value {
    json!({"metadata": {"name": "s"}, "spec": {"type": ty, "clusterIP": ip, "clusterIPs": [ip],
        "sessionAffinity": "None",
        "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP", "nodePort": node_port}]}})
}

#[test]
fn service_node_port_range_and_cluster_ip() {
    assert_eq!(
        create("", "services", service("NodePort", "10.96.0.5", 80)),
        ["spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"]
    );
    assert!(create("", "services", service("NodePort", "10.96.0.5", 30080)).is_empty());
    let mut moved = service("NodePort", "10.96.0.9", 30080);
    moved["spec"]["clusterIPs"] = json!(["10.96.0.5"]);
    assert_eq!(
        update(
            "",
            "services",
            moved,
            service("NodePort", "10.96.0.5", 30080)
        ),
        ["spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.9\"}: may not change once set"]
    );
}

fn deployment(selector: Value, labels: Value) -> Value {
    json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": selector,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [web()], "restartPolicy": "Always"}}}})
}

#[test]
fn workload_selectors_templates_and_strategies() {
    let ok = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web"}),
    );
    assert!(create("apps", "deployments", ok.clone()).is_empty());
    assert_eq!(
        create("apps", "deployments", deployment(json!({"matchLabels": {"app": "web"}}), json!({"app": "api"}))),
        ["spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"]
    );
    let mut neg = ok.clone();
    neg["spec"]["replicas"] = json!(-1);
    neg["spec"]["strategy"]["rollingUpdate"] = json!({"maxUnavailable": 0, "maxSurge": "50"});
    assert_eq!(
        create("apps", "deployments", neg),
        [
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"50\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        ]
    );
    let moved = deployment(
        json!({"matchLabels": {"app": "api"}}),
        json!({"app": "api"}),
    );
    assert_eq!(
        update("apps", "deployments", moved, ok),
        ["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"api\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    );
    let mut rs = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web"}),
    );
    rs["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    rs["spec"]["template"]["spec"]["containers"] = json!([]);
    assert_eq!(
        create("apps", "replicasets", rs),
        [
            "spec.template.spec.containers: Required value",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ]
    );
    let ds = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {}},
        "template": {"metadata": {"labels": {"Bad Key": "x"}}, "spec": {"containers": [web()]}}}});
    assert_eq!(
        create("apps", "daemonsets", ds),
        [
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for daemonset",
            "spec.template.labels: Invalid value: \"Bad Key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ]
    );
    let sts = |service: &str| {
        json!({"metadata": {"name": "s"}, "spec": {"serviceName": service, "replicas": 1,
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [web()]}}}})
    };
    assert_eq!(
        update("apps", "statefulsets", sts("b"), sts("a")),
        ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
    );
}
