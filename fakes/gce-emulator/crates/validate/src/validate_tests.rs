//! Each helper as the Compute API answers: what it accepts, what it fills in, and the 400 that
//! names the field otherwise (the forms `tests/control_invalid_input.rs` checks end to end).

use serde_json::{json, Value};

use super::*;

fn obj(v: Value) -> Obj {
    v.as_object().expect("an object").clone()
}

/// The field and message of a refusal.
fn refusal(e: ApiError) -> (u16, String, String) {
    (e.code, e.field.unwrap_or_default(), e.message)
}

#[test]
fn names_follow_rfc1035() {
    assert!(check_name("resource.name", "a").is_ok());
    assert!(check_name("resource.name", "k8s1-abc-def-80-0").is_ok());
    assert!(check_name("resource.name", &"a".repeat(63)).is_ok());
    for bad in ["", "A", "1a", "a-", "a_b", &"a".repeat(64)] {
        let (code, field, message) = refusal(check_name("resource.name", bad).unwrap_err());
        assert_eq!((code, field.as_str()), (400, "resource.name"), "{bad}");
        assert!(message.contains("Must be a match of regex"), "{message}");
    }
}

#[test]
fn paths_join_with_a_dot_unless_at_the_top() {
    assert_eq!(path("", "name"), "name");
    assert_eq!(path("resource", "name"), "resource.name");
    assert_eq!(show(&json!("text")), "text");
    assert_eq!(show(&json!(7)), "7");
}

#[test]
fn strings_are_optional_or_required_and_never_another_type() {
    let o = obj(json!({"a": "x", "empty": "", "n": 5, "null": null}));
    assert_eq!(opt_str(&o, "resource", "a").unwrap(), Some("x"));
    assert_eq!(opt_str(&o, "resource", "missing").unwrap(), None);
    assert_eq!(opt_str(&o, "resource", "null").unwrap(), None);
    let (code, field, message) = refusal(opt_str(&o, "resource", "n").unwrap_err());
    assert_eq!((code, field.as_str()), (400, "resource.n"));
    assert!(message.contains("Expected a string."), "{message}");

    assert_eq!(req_str(&o, "resource", "a").unwrap(), "x");
    for missing in ["empty", "missing", "null"] {
        let (code, field, message) = refusal(req_str(&o, "resource", missing).unwrap_err());
        assert_eq!((code, field), (400, format!("resource.{missing}")));
        assert!(message.starts_with("Required field"), "{message}");
    }
}

#[test]
fn enums_accept_their_values_and_fill_the_default() {
    let mut o = obj(json!({"protocol": "HTTP", "bad": "FOO"}));
    enum_field(
        &mut o,
        "resource",
        "protocol",
        &["HTTP", "HTTPS"],
        Some("HTTPS"),
    )
    .unwrap();
    assert_eq!(o["protocol"], "HTTP", "a given value is kept");
    enum_field(
        &mut o,
        "resource",
        "scheme",
        &["EXTERNAL"],
        Some("EXTERNAL"),
    )
    .unwrap();
    assert_eq!(o["scheme"], "EXTERNAL", "the default is filled in");
    enum_field(&mut o, "resource", "other", &["X"], None).unwrap();
    assert!(!o.contains_key("other"), "no default, nothing filled");
    let (code, field, message) =
        refusal(enum_field(&mut o, "resource", "bad", &["HTTP", "HTTPS"], None).unwrap_err());
    assert_eq!((code, field.as_str()), (400, "resource.bad"));
    assert!(
        message.contains("\"FOO\"") && message.contains("HTTP, HTTPS"),
        "{message}"
    );
}

#[test]
fn integers_are_range_checked_stored_as_numbers_and_defaulted() {
    let mut o = obj(
        json!({"port": "8080", "n": 3, "low": 0, "high": 11, "float": 1.5,
                           "text": "x", "bool": true, "null": null}),
    );
    // int64 fields arrive as decimal strings: stored back as numbers.
    assert_eq!(
        int_field(&mut o, "r", "port", 1, 65535, None).unwrap(),
        Some(8080)
    );
    assert_eq!(o["port"], json!(8080));
    // The bounds themselves are inside the range.
    assert_eq!(int_field(&mut o, "r", "n", 3, 3, None).unwrap(), Some(3));
    for (key, why) in [
        ("low", "Must be between 1 and 10."),
        ("high", "Must be between 1 and 10."),
        ("float", "Expected an integer."),
        ("text", "Expected an integer."),
        ("bool", "Expected an integer."),
    ] {
        let (code, field, message) = refusal(int_field(&mut o, "r", key, 1, 10, None).unwrap_err());
        assert_eq!((code, field), (400, format!("r.{key}")));
        assert!(message.ends_with(why), "{key}: {message}");
    }
    assert_eq!(
        int_field(&mut o, "r", "absent", 1, 10, Some(5)).unwrap(),
        Some(5)
    );
    assert_eq!(o["absent"], json!(5), "the default is stored");
    assert_eq!(int_field(&mut o, "r", "null", 1, 10, None).unwrap(), None);
    assert!(!o.contains_key("null"), "a null without default is dropped");
}

#[test]
fn floats_are_range_checked_and_defaulted() {
    let mut o = obj(json!({"scaler": 0.5, "one": 1.0, "over": 1.5, "under": -0.1, "text": "x"}));
    float_field(&mut o, "r", "scaler", 0.0, 1.0, None).unwrap();
    float_field(&mut o, "r", "one", 0.0, 1.0, None).unwrap();
    for key in ["over", "under"] {
        let (code, field, message) =
            refusal(float_field(&mut o, "r", key, 0.0, 1.0, None).unwrap_err());
        assert_eq!((code, field), (400, format!("r.{key}")));
        assert!(message.ends_with("Must be between 0 and 1."), "{message}");
    }
    let (_, _, message) = refusal(float_field(&mut o, "r", "text", 0.0, 1.0, None).unwrap_err());
    assert!(message.ends_with("Expected a number."), "{message}");
    float_field(&mut o, "r", "absent", 0.0, 1.0, Some(1.0)).unwrap();
    assert_eq!(o["absent"], json!(1.0));
    float_field(&mut o, "r", "none", 0.0, 1.0, None).unwrap();
    assert!(!o.contains_key("none"));
}

#[test]
fn booleans_are_booleans_and_defaulted() {
    let mut o = obj(json!({"on": false, "text": "true"}));
    bool_field(&mut o, "r", "on", Some(true)).unwrap();
    assert_eq!(o["on"], json!(false), "a given value is kept");
    bool_field(&mut o, "r", "absent", Some(true)).unwrap();
    assert_eq!(o["absent"], json!(true));
    bool_field(&mut o, "r", "none", None).unwrap();
    assert!(!o.contains_key("none"));
    let (code, field, message) = refusal(bool_field(&mut o, "r", "text", None).unwrap_err());
    assert_eq!((code, field.as_str()), (400, "r.text"));
    assert!(message.ends_with("Expected a boolean."), "{message}");
}

#[test]
fn nested_objects_and_lists_are_found_created_or_refused() {
    let mut o = obj(json!({"inner": {"a": 1}, "list": [1], "text": "x"}));
    assert_eq!(
        object_mut(&mut o, "r", "inner", false).unwrap().unwrap()["a"],
        json!(1)
    );
    assert!(object_mut(&mut o, "r", "absent", false).unwrap().is_none());
    assert!(!o.contains_key("absent"), "not created unless asked");
    assert!(object_mut(&mut o, "r", "made", true)
        .unwrap()
        .unwrap()
        .is_empty());
    assert_eq!(o["made"], json!({}));
    let (_, field, message) = refusal(object_mut(&mut o, "r", "text", false).unwrap_err());
    assert_eq!(field, "r.text");
    assert!(message.ends_with("Expected an object."), "{message}");

    assert_eq!(array_mut(&mut o, "r", "list").unwrap().unwrap().len(), 1);
    assert!(array_mut(&mut o, "r", "absent").unwrap().is_none());
    let (_, field, message) = refusal(array_mut(&mut o, "r", "text").unwrap_err());
    assert_eq!(field, "r.text");
    assert!(message.ends_with("Expected a list."), "{message}");
}

#[test]
fn string_lists_name_the_item_at_fault() {
    let o = obj(json!({"tags": ["a", "b"], "mixed": ["a", 2], "text": "x"}));
    assert_eq!(str_list(&o, "r", "tags").unwrap(), ["a", "b"]);
    assert!(str_list(&o, "r", "absent").unwrap().is_empty());
    let (_, field, message) = refusal(str_list(&o, "r", "mixed").unwrap_err());
    assert_eq!(field, "r.mixed[1]");
    assert!(message.ends_with("Expected a string."), "{message}");
    let (_, field, message) = refusal(str_list(&o, "r", "text").unwrap_err());
    assert_eq!(field, "r.text");
    assert!(message.ends_with("Expected a list."), "{message}");
}

#[test]
fn labels_follow_the_compute_label_rules() {
    let ok = obj(json!({"labels": {"env": "prod", "team_1": "", "k-2": "v_2-x"}}));
    labels(&ok, "resource").unwrap();
    labels(&obj(json!({})), "resource").unwrap();
    let max: Obj = (0..64).map(|i| (format!("k{i}"), json!("v"))).collect();
    labels(&obj(json!({ "labels": max })), "resource").unwrap();
    let over: Obj = (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    for (labels_value, field, why) in [
        (json!(over), "resource.labels", "At most 64 labels"),
        (json!({"Env": "x"}), "resource.labels.Env", "Label keys"),
        (json!({"1env": "x"}), "resource.labels.1env", "Label keys"),
        (
            json!({"env": "Prod"}),
            "resource.labels.env",
            "Label values",
        ),
        (json!({"env": 3}), "resource.labels.env", "Label values"),
        (
            json!({"env": "a".repeat(64)}),
            "resource.labels.env",
            "Label values",
        ),
        (
            json!(["env"]),
            "resource.labels",
            "Expected a map of strings.",
        ),
    ] {
        let o = obj(json!({ "labels": labels_value }));
        let (code, got, message) = refusal(labels(&o, "resource").unwrap_err());
        assert_eq!((code, got.as_str()), (400, field), "{message}");
        assert!(message.contains(why), "{message}");
    }
}

#[test]
fn cidrs_parse_contain_and_list_as_the_api_reads_them() {
    assert_eq!(
        parse_cidr("10.0.0.0/8"),
        Some(("10.0.0.0".parse().unwrap(), 8))
    );
    assert_eq!(
        parse_cidr("10.1.2.3"),
        Some(("10.1.2.3".parse().unwrap(), 32))
    );
    assert_eq!(
        parse_cidr("0.0.0.0/0"),
        Some(("0.0.0.0".parse().unwrap(), 0))
    );
    for bad in ["10.0.0.0/33", "10.0.0/8", "10.0.0.0/x", "", "::1/128", "*"] {
        assert_eq!(parse_cidr(bad), None, "{bad}");
    }
    let net = parse_cidr("127.128.0.0/9").unwrap();
    assert!(cidr_contains(net, "127.200.1.1".parse().unwrap()));
    assert!(cidr_contains(net, "127.128.0.0".parse().unwrap()));
    assert!(!cidr_contains(net, "127.1.1.1".parse().unwrap()));
    assert!(cidr_contains(
        parse_cidr("0.0.0.0/0").unwrap(),
        "8.8.8.8".parse().unwrap()
    ));
    let host = parse_cidr("10.1.2.3").unwrap();
    assert!(cidr_contains(host, "10.1.2.3".parse().unwrap()));
    assert!(!cidr_contains(host, "10.1.2.4".parse().unwrap()));

    let o =
        obj(json!({"ok": ["10.0.0.0/8", "1.2.3.4"], "star": ["*"], "bad": ["10.0.0.0/8", "x"]}));
    assert_eq!(
        cidr_list(&o, "r", "ok", false).unwrap(),
        ["10.0.0.0/8", "1.2.3.4"]
    );
    assert_eq!(cidr_list(&o, "r", "star", true).unwrap(), ["*"]);
    let (_, field, message) = refusal(cidr_list(&o, "r", "star", false).unwrap_err());
    assert_eq!(field, "r.star[0]");
    assert!(
        message.ends_with("Must be an IPv4 CIDR range such as 10.0.0.0/8."),
        "{message}"
    );
    let (_, field, _) = refusal(cidr_list(&o, "r", "bad", true).unwrap_err());
    assert_eq!(field, "r.bad[1]");
}

#[test]
fn a_list_item_must_be_an_object() {
    let mut item = json!({"name": "m"});
    let o = object_item_mut(&mut item, "r.pathMatchers[0]").unwrap();
    o.insert("added".into(), json!(1));
    assert_eq!(
        item["added"], 1,
        "the object is the item itself, for editing"
    );
    let mut bad = json!("m");
    let (code, field, message) =
        refusal(object_item_mut(&mut bad, "r.pathMatchers[1]").unwrap_err());
    assert_eq!((code, field.as_str()), (400, "r.pathMatchers[1]"));
    assert!(message.ends_with("Expected an object."), "{message}");
}
