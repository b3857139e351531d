//! Each check's wording, CEL rules and defaulting, on small schemas.

use super::*;
use serde_json::json;

fn schema() -> Value {
    json!({"type": "object", "required": ["spec"], "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [{
        "rule": "!has(self.timeoutSec) || !has(self.checkIntervalSec) || self.timeoutSec <= self.checkIntervalSec",
        "message": "timeoutSec must not exceed checkIntervalSec"}],
    "properties": {
        "domains": {"type": "array", "maxItems": 2, "minItems": 1,
            "items": {"type": "string", "pattern": "^[a-z.]+$", "maxLength": 10}},
        "affinity": {"type": "string", "enum": ["NONE", "CLIENT_IP"]},
        "ttl": {"type": "integer", "minimum": 0.0, "maximum": 86400.0},
        "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": true},
        "port": {"x-kubernetes-int-or-string": true},
        "opt": {"type": "object", "nullable": true, "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "timeoutSec": {"type": "integer"},
        "checkIntervalSec": {"type": "integer"}
    }}}})
}

fn errors(spec: Value) -> Vec<String> {
    validate(
        &json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec}),
        &schema(),
    )
    .iter()
    .map(FieldError::to_line)
    .collect()
}

#[test]
fn defaults_fill_missing_fields_inside_existing_objects() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "cdn": {"type": "object", "properties": {
            "enabled": {"type": "boolean", "default": false},
            "ttl": {"type": "integer", "default": 0, "nullable": true}}},
        "absent": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}},
        "list": {"type": "array", "items": {"type": "object",
            "properties": {"k": {"type": "string", "default": "v"}}}},
        "tags": {"type": "array", "default": []}}}}});
    let mut obj = json!({"metadata": {"name": "a"},
        "spec": {"cdn": {"ttl": null}, "absent": null, "list": [{}, {"k": "x"}]}});
    apply_defaults(&mut obj, &schema);
    assert_eq!(
        obj["spec"],
        json!({"cdn": {"enabled": false, "ttl": null}, "list": [{"k": "v"}, {"k": "x"}], "tags": []})
    );
}

#[test]
fn string_extension_functions_are_available_to_rules() {
    // The rule the Gateway API CRDs put on `spec.infrastructure.labels`/`annotations`.
    let schema = json!({"type": "object", "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(key, key.split(\"/\")[0].size() < 253)",
            "message": "If specified, the label key's prefix must be a DNS subdomain not longer than 253 characters in total."}]});
    let check = |v: Value| validate_at(&v, &schema, "spec.infrastructure.labels");
    assert_eq!(
        check(json!({"example.com/team": "a", "plain": "b"})),
        Vec::new()
    );
    let long = format!("{}/team", "a".repeat(253));
    let e = check(json!({ long: "a" }));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].message.contains("not longer than 253"), "{e:?}");
}

#[test]
fn a_rule_calling_an_unknown_function_refuses_the_object() {
    let schema = json!({"type": "string",
        "x-kubernetes-validations": [{"rule": "self.noSuchFunction() == 1"}]});
    let e = validate_at(&json!("x"), &schema, "spec.name");
    assert_eq!(e.len(), 1, "an unsupported function must not pass: {e:?}");
    assert!(e[0].message.contains("noSuchFunction"), "{e:?}");
}

#[test]
fn kubernetes_is_ip_is_available_to_rules() {
    let schema = json!({"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(h, !isIP(h))", "message": "hostnames cannot be IP addresses"}]});
    let check = |v: Value| validate_at(&v, &schema, "spec.hostnames");
    assert_eq!(check(json!(["a.example", "*.b.example"])), Vec::new());
    for ip in ["10.0.0.1", "2001:db8::1"] {
        let e = check(json!(["a.example", ip]));
        assert_eq!(e.len(), 1, "{ip}: {e:?}");
        assert!(
            e[0].message.contains("hostnames cannot be IP addresses"),
            "{e:?}"
        );
    }
    // IPv4-mapped IPv6 is no IP to Kubernetes' library.
    assert_eq!(check(json!(["::ffff:10.0.0.1"])), Vec::new());
}

#[test]
fn valid_objects_pass() {
    assert_eq!(
        errors(
            json!({"domains": ["a.b"], "affinity": "NONE", "ttl": 86400, "ratio": 0.5,
            "port": "http", "opt": null, "labels": {"a": "b"}, "timeoutSec": 5, "checkIntervalSec": 5})
        ),
        Vec::<String>::new()
    );
    assert_eq!(errors(json!({"port": 80})), Vec::<String>::new());
}

#[test]
fn each_keyword_reports_the_real_wording() {
    assert_eq!(
        errors(json!({"affinity": "STICKY"})),
        vec![
            r#"spec.affinity: Unsupported value: "STICKY": supported values: "NONE", "CLIENT_IP""#
        ]
    );
    assert_eq!(
        errors(json!({"ttl": 100000})),
        vec![
        "spec.ttl: Invalid value: 100000: spec.ttl in body should be less than or equal to 86400"]
    );
    assert_eq!(
        errors(json!({"ttl": -1})),
        vec!["spec.ttl: Invalid value: -1: spec.ttl in body should be greater than or equal to 0"]
    );
    assert_eq!(
        errors(json!({"ratio": 1})),
        vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]
    );
    assert_eq!(
        errors(json!({"domains": ["*.x"]})),
        vec![
            r#"spec.domains[0]: Invalid value: "*.x": spec.domains[0] in body should match '^[a-z.]+$'"#
        ]
    );
    assert_eq!(
        errors(json!({"domains": ["abcdefghijk"]})),
        vec!["spec.domains[0]: Too long: may not be more than 10 bytes"]
    );
    assert_eq!(
        errors(json!({"domains": ["a", "b", "c"]})),
        vec!["spec.domains: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        errors(json!({"domains": []})),
        vec![
            r#"spec.domains: Invalid value: "array": spec.domains in body should have at least 1 items"#
        ]
    );
    assert_eq!(
        errors(json!({"ttl": "1"})),
        vec![r#"spec.ttl: Invalid value: "string": spec.ttl in body must be of type integer: "1""#]
    );
    assert_eq!(
        errors(json!({"port": true})),
        vec![
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: true"#
        ]
    );
    assert_eq!(
        errors(json!({"opt": {}})),
        vec!["spec.opt.name: Required value"]
    );
    assert_eq!(
        errors(json!({"opt": {"name": ""}})),
        vec![
            r#"spec.opt.name: Invalid value: "": spec.opt.name in body should be at least 1 chars long"#
        ]
    );
    assert_eq!(
        errors(json!({"labels": {"k": 1}})),
        vec![
            r#"spec.labels[k]: Invalid value: "integer": spec.labels[k] in body must be of type string: 1"#
        ]
    );
    assert_eq!(
        errors(json!({"timeoutSec": 6, "checkIntervalSec": 5})),
        vec![r#"spec: Invalid value: "object": timeoutSec must not exceed checkIntervalSec"#]
    );
    let missing = validate(&json!({"metadata": {"name": "a"}}), &schema());
    assert_eq!(missing[0].to_line(), "spec: Required value");
    assert_eq!(missing[0].reason, "FieldValueRequired");
}
