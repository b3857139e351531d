//! Route traces: the rules tried, why each missed, and which is closest.

use super::*;

#[test]
fn trace_names_the_rules_tried_and_the_closest() {
    let t = table(json!({
        "name": "um", "defaultService": bs(0),
        "hostRules": [{"hosts": ["shop.example"], "pathMatcher": "a"},
                      {"hosts": ["*.api.example"], "pathMatcher": "b"}],
        "pathMatchers": [
            {"name": "a", "defaultService": bs(1), "pathRules": [
                {"paths": ["/cart/*"], "service": bs(2)},
                {"paths": ["/cart/checkout/*"], "service": bs(3)},
                {"paths": ["/about"], "service": bs(4)},
            ]},
            {"name": "b", "defaultService": bs(5), "routeRules": [
                {"priority": 1, "matchRules": [{"prefixMatch": "/v2/", "headerMatches": [{"headerName": "x-beta", "exactMatch": "1"}]}], "service": bs(6)},
            ]},
        ]
    }));
    let h = HeaderMap::new();
    let trace = |host: &str, path: &str| {
        let mut tr = RouteTrace::default();
        t.route_traced(
            &RequestView {
                method: "GET",
                host,
                path,
                query: None,
                headers: &h,
            },
            Some(&mut tr),
        );
        tr
    };
    let tr = trace("shop.example", "/cart");
    assert_eq!(tr.host_rule, "hostRules[0] host \"shop.example\" (exact)");
    assert_eq!(tr.path_matcher.as_deref(), Some("a"));
    assert_eq!(tr.matched, "pathMatchers[a].defaultService");
    let closest = tr.closest.expect("closest");
    assert_eq!(closest.rule, "pathMatchers[a].pathRules[0] \"/cart/*\"");
    assert_eq!(tr.tried.len(), 3, "{:?}", tr.tried);

    let tr = trace("shop.example", "/cart/checkout/pay");
    assert_eq!(tr.matched, "pathMatchers[a].pathRules[1]");
    assert!(tr.closest.is_none(), "a rule matched: no closest");

    let tr = trace("x.api.example", "/v2/items");
    assert_eq!(
        tr.host_rule,
        "hostRules[1] host \"*.api.example\" (wildcard)"
    );
    assert_eq!(tr.matched, "pathMatchers[b].defaultService");
    let closest = tr.closest.expect("closest");
    assert!(
        closest
            .rule
            .starts_with("pathMatchers[b].routeRules[0].matchRules[0]"),
        "{closest:?}"
    );
    assert!(closest.why_not.contains("header x-beta"), "{closest:?}");

    let tr = trace("api.example", "/");
    assert!(
        tr.host_rule.starts_with("no hostRules entry matches"),
        "{}",
        tr.host_rule
    );
    assert_eq!(tr.matched, "defaultService");
    assert_eq!(
        tr.closest.expect("closest").rule,
        "hostRules[1] host \"*.api.example\""
    );
}

/// Why each host rule missed: a wildcard whose suffix the host ends with missed on the part
/// before it; one it does not end with, on the suffix; an exact host, on the name.
#[test]
fn a_host_miss_says_why_each_host_rule_missed() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*.example.com"], "pathMatcher": "m"},
                      {"hosts": ["*.other.org"], "pathMatcher": "m"},
                      {"hosts": ["exact.example.com"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(1)}],
    }));
    let tr = traced(&t, "a_b.example.com", "/");
    assert_eq!(tr.matched, "defaultService");
    let why: Vec<(&str, &str)> = tr
        .tried
        .iter()
        .map(|t| (t.rule.as_str(), t.why_not.as_str()))
        .collect();
    assert_eq!(
        why,
        [
            (
                "hostRules[0] host \"*.example.com\"",
                "the part before \".example.com\" is empty or not [a-z0-9-.]"
            ),
            (
                "hostRules[1] host \"*.other.org\"",
                "host does not end with \".other.org\""
            ),
            (
                "hostRules[2] host \"exact.example.com\"",
                "host is not \"exact.example.com\""
            ),
        ]
    );
}

/// Of the route rules tried, one whose path matched (and a header did not) is closer than one
/// whose path did not, however long the common prefix of the other.
#[test]
fn a_route_rule_whose_path_matched_is_closer_than_one_whose_path_did_not() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            {"priority": 0, "matchRules": [{"prefixMatch": "/api/v2/items/long"}], "service": bs(1)},
            {"priority": 1, "matchRules": [{"prefixMatch": "/api/", "headerMatches": [
                {"headerName": "x-beta", "exactMatch": "1"}]}], "service": bs(2)}]}],
    }));
    let tr = traced(&t, "h", "/api/v2/items");
    let closest = tr.closest.expect("closest");
    assert!(
        closest
            .rule
            .starts_with("pathMatchers[m].routeRules[1].matchRules[0]"),
        "{closest:?} of {:?}",
        tr.tried
    );
    assert!(tr.tried[1].score > tr.tried[0].score, "{:?}", tr.tried);
}

/// A trace names what each route rule's path match wanted, and among rules whose paths all
/// missed, the one agreeing with more of the path is the closest.
#[test]
fn a_trace_describes_route_rule_paths_and_ranks_them_by_agreement() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            {"priority": 0, "matchRules": [{"prefixMatch": "/apx/"}], "service": bs(1)},
            {"priority": 1, "matchRules": [{"fullPathMatch": "/api/v1"}], "service": bs(2)},
            {"priority": 2, "matchRules": [{"regexMatch": "/z.*"}], "service": bs(3)}]}],
    }));
    let tr = traced(&t, "h", "/api/v2");
    let why: Vec<&str> = tr.tried.iter().map(|t| t.why_not.as_str()).collect();
    assert_eq!(
        why,
        [
            "path does not satisfy prefixMatch \"/apx/\"",
            "path does not satisfy fullPathMatch \"/api/v1\"",
            "path does not satisfy regexMatch \"/z.*\"",
        ]
    );
    assert!(
        tr.tried[0]
            .rule
            .ends_with("(priority 0, prefixMatch \"/apx/\")"),
        "{:?}",
        tr.tried[0]
    );
    let closest = tr.closest.expect("closest");
    assert!(
        closest.rule.starts_with("pathMatchers[m].routeRules[1]"),
        "{closest:?}"
    );
}

/// Closeness of path rules: agreeing on more of the path beats a shorter leftover.
#[test]
fn a_path_rule_agreeing_on_more_of_the_path_is_closer_whatever_its_length() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "pathRules": [
            {"paths": ["/shop/c"], "service": bs(1)},
            {"paths": ["/shop/cart-and-a-long-tail-of-more-letters/*"], "service": bs(2)}]}],
    }));
    let tr = traced(&t, "h", "/shop/cart");
    let closest = tr.closest.expect("closest");
    assert_eq!(
        closest.rule,
        "pathMatchers[m].pathRules[1] \"/shop/cart-and-a-long-tail-of-more-letters/*\""
    );
}
