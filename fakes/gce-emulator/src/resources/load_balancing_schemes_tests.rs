//! The scheme checks through the API's own methods (`insert`, `update`, `setTarget`,
//! `setUrlMap`), over an in-memory [`State`].

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::methods::{self, Target};
use crate::resources::{collection, Scope};
use crate::store::State;

const RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(127, 1, 0, 0), 16);
const G: &str = "http://h/compute/v1/projects/p/global";
const R: &str = "http://h/compute/v1/projects/p/regions/r1";

fn target(scope: Scope, segment: &str, name: Option<&str>) -> Target {
    Target {
        coll: collection(scope, segment).unwrap(),
        project: "p".into(),
        zone: (scope == Scope::Regional).then(|| "r1".to_string()),
        name: name.map(str::to_string),
    }
}

fn insert(s: &mut State, scope: Scope, segment: &str, body: Value) -> Result<(), ApiError> {
    let t = target(scope, segment, None);
    methods::insert(s, &t, body.to_string().as_bytes(), RANGE).map(|_| ())
}

fn ok(s: &mut State, scope: Scope, segment: &str, body: Value) {
    if let Err(e) = insert(s, scope, segment, body.clone()) {
        panic!("{segment} {body} refused: {e}");
    }
}

/// Global backend services `classic` (EXTERNAL) and `managed` (EXTERNAL_MANAGED), a URL map
/// and target HTTP proxy over each, and two regional backend services of the regional schemes.
fn state() -> State {
    let mut s = State::new("http://h/compute/v1/".into());
    for (name, scheme) in [("classic", "EXTERNAL"), ("managed", "EXTERNAL_MANAGED")] {
        ok(
            &mut s,
            Scope::Global,
            "backendServices",
            json!({"name": name, "loadBalancingScheme": scheme}),
        );
        ok(
            &mut s,
            Scope::Global,
            "urlMaps",
            json!({"name": name, "defaultService": format!("{G}/backendServices/{name}")}),
        );
        ok(
            &mut s,
            Scope::Global,
            "targetHttpProxies",
            json!({"name": name, "urlMap": format!("{G}/urlMaps/{name}")}),
        );
    }
    for (name, scheme) in [("ilb", "INTERNAL_MANAGED"), ("rxlb", "EXTERNAL_MANAGED")] {
        ok(
            &mut s,
            Scope::Regional,
            "backendServices",
            json!({"name": name, "loadBalancingScheme": scheme}),
        );
    }
    s
}

fn assert_refused(r: Result<(), ApiError>, field: &str, words: &str) {
    let e = r.expect_err("refused");
    assert_eq!((e.code, e.reason.as_str()), (400, "invalid"), "{e}");
    assert_eq!(e.field.as_deref(), Some(field), "{e}");
    assert!(e.message.contains(words), "{:?} lacks {words:?}", e.message);
}

#[test]
fn forwarding_rule_insert_needs_its_backend_services_scheme() {
    let mut s = state();
    let rule = |name: &str, scheme: &str, proxy: &str| {
        json!({"name": name, "loadBalancingScheme": scheme,
               "target": format!("{G}/targetHttpProxies/{proxy}"), "portRange": "80"})
    };
    assert_refused(
        insert(&mut s, Scope::Global, "forwardingRules", rule("a", "EXTERNAL_MANAGED", "classic")),
        "resource.backendService",
        "Invalid value for field 'resource.backendService': ''. Load balancing scheme EXTERNAL_MANAGED does not match the backend service load balancing scheme EXTERNAL.",
    );
    assert_refused(
        insert(&mut s, Scope::Global, "forwardingRules", rule("b", "EXTERNAL", "managed")),
        "resource.backendService",
        "Load balancing scheme EXTERNAL does not match the backend service load balancing scheme EXTERNAL_MANAGED.",
    );
    // The default scheme of a global forwarding rule is EXTERNAL.
    let mut no_scheme = rule("c", "", "managed");
    no_scheme
        .as_object_mut()
        .unwrap()
        .remove("loadBalancingScheme");
    assert_refused(
        insert(&mut s, Scope::Global, "forwardingRules", no_scheme),
        "resource.backendService",
        "scheme EXTERNAL does not match",
    );
    ok(
        &mut s,
        Scope::Global,
        "forwardingRules",
        rule("d", "EXTERNAL", "classic"),
    );
    ok(
        &mut s,
        Scope::Global,
        "forwardingRules",
        rule("e", "EXTERNAL_MANAGED", "managed"),
    );
}

#[test]
fn set_target_to_a_proxy_of_another_scheme_is_refused() {
    let mut s = state();
    ok(
        &mut s,
        Scope::Global,
        "forwardingRules",
        json!({"name": "fr", "loadBalancingScheme": "EXTERNAL",
               "target": format!("{G}/targetHttpProxies/classic"), "portRange": "80"}),
    );
    let t = target(Scope::Global, "forwardingRules", Some("fr"));
    let body = json!({"target": format!("{G}/targetHttpProxies/managed")}).to_string();
    assert_refused(
        methods::set_fields(&mut s, &t, "setTarget", &["target"], body.as_bytes(), RANGE)
            .map(|_| ()),
        "resource.backendService",
        "scheme EXTERNAL does not match the backend service load balancing scheme EXTERNAL_MANAGED",
    );
    let rule = &s.resources["projects/p/global/forwardingRules/fr"];
    assert!(
        rule["target"].as_str().unwrap().ends_with("/classic"),
        "{rule}"
    );
}

#[test]
fn url_map_may_not_mix_schemes() {
    let mut s = state();
    let mixed = json!({"name": "mixed", "defaultService": format!("{G}/backendServices/classic"),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": format!("{G}/backendServices/managed")}]});
    assert_refused(
        insert(&mut s, Scope::Global, "urlMaps", mixed),
        "resource.pathMatchers[0].defaultService",
        "Load balancing scheme EXTERNAL_MANAGED of the backend service does not match the load balancing scheme EXTERNAL of the other backend services",
    );
    // Regional: INTERNAL_MANAGED beside EXTERNAL_MANAGED.
    let regional = json!({"name": "mixed", "defaultService": format!("{R}/backendServices/ilb"),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": format!("{R}/backendServices/rxlb")}]});
    assert_refused(
        insert(&mut s, Scope::Regional, "urlMaps", regional),
        "resource.pathMatchers[0].defaultService",
        "scheme EXTERNAL_MANAGED of the backend service does not match the load balancing scheme INTERNAL_MANAGED",
    );
}

#[test]
fn url_map_update_keeps_the_scheme_of_the_forwarding_rules_serving_it() {
    let mut s = state();
    ok(
        &mut s,
        Scope::Global,
        "forwardingRules",
        json!({"name": "fr", "loadBalancingScheme": "EXTERNAL",
               "target": format!("{G}/targetHttpProxies/classic"), "portRange": "80"}),
    );
    let t = target(Scope::Global, "urlMaps", Some("classic"));
    let body = json!({"name": "classic", "defaultService": format!("{G}/backendServices/managed")});
    assert_refused(
        methods::update(&mut s, &t, body.to_string().as_bytes(), false, RANGE).map(|_| ()),
        "resource.defaultService",
        "does not match the load balancing scheme EXTERNAL of forwarding rule 'projects/p/global/forwardingRules/fr'",
    );
    // A URL map no forwarding rule serves may change scheme.
    let t = target(Scope::Global, "urlMaps", Some("managed"));
    let body = json!({"name": "managed", "defaultService": format!("{G}/backendServices/classic")});
    methods::update(&mut s, &t, body.to_string().as_bytes(), false, RANGE).unwrap();
}

#[test]
fn set_url_map_keeps_the_scheme_of_the_forwarding_rules_serving_the_proxy() {
    let mut s = state();
    ok(
        &mut s,
        Scope::Global,
        "forwardingRules",
        json!({"name": "fr", "loadBalancingScheme": "EXTERNAL",
               "target": format!("{G}/targetHttpProxies/classic"), "portRange": "80"}),
    );
    let set_url_map = |s: &mut State, proxy: &str, map: &str| {
        let t = target(Scope::Global, "targetHttpProxies", Some(proxy));
        let body = json!({"urlMap": format!("{G}/urlMaps/{map}")}).to_string();
        methods::set_fields(s, &t, "setUrlMap", &["urlMap"], body.as_bytes(), RANGE).map(|_| ())
    };
    assert_refused(
        set_url_map(&mut s, "classic", "managed"),
        "resource.urlMap",
        "Load balancing scheme EXTERNAL_MANAGED of the backend services of the URL map does not match the load balancing scheme EXTERNAL of forwarding rule 'projects/p/global/forwardingRules/fr', which serves this target proxy.",
    );
    let proxy = &s.resources["projects/p/global/targetHttpProxies/classic"];
    assert!(
        proxy["urlMap"]
            .as_str()
            .unwrap()
            .ends_with("/urlMaps/classic"),
        "{proxy}"
    );
    // A proxy no forwarding rule serves may take a URL map of any scheme; a redirect map (no
    // backend service) fits any rule.
    set_url_map(&mut s, "managed", "classic").unwrap();
    ok(
        &mut s,
        Scope::Global,
        "urlMaps",
        json!({"name": "redirect", "defaultUrlRedirect": {"httpsRedirect": true}}),
    );
    set_url_map(&mut s, "classic", "redirect").unwrap();
}

/// A URL map whose one path matcher has a route rule with `matches` (a `matchRules` entry).
fn regex_map(name: &str, service: &str, matches: Value) -> Value {
    json!({"name": name, "defaultService": service,
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": service,
            "routeRules": [{"priority": 1, "matchRules": [matches], "service": service}]}]})
}

#[test]
fn regex_match_only_where_the_reference_allows_it() {
    let mut s = state();
    ok(
        &mut s,
        Scope::Global,
        "backendServices",
        json!({"name": "mesh", "loadBalancingScheme": "INTERNAL_SELF_MANAGED"}),
    );
    let managed = format!("{G}/backendServices/managed");
    // Global EXTERNAL_MANAGED: path, header and query regexMatch refused, the field named.
    for (matches, field) in [
        (
            json!({"regexMatch": "/items/[0-9]+"}),
            "resource.pathMatchers[0].routeRules[0].matchRules[0].regexMatch",
        ),
        (
            json!({"prefixMatch": "/", "headerMatches": [{"headerName": "x-v", "regexMatch": "v[0-9]"}]}),
            "resource.pathMatchers[0].routeRules[0].matchRules[0].headerMatches[0].regexMatch",
        ),
        (
            json!({"prefixMatch": "/", "queryParameterMatches": [{"name": "q", "regexMatch": "a+"}]}),
            "resource.pathMatchers[0].routeRules[0].matchRules[0].queryParameterMatches[0].regexMatch",
        ),
    ] {
        assert_refused(
            insert(&mut s, Scope::Global, "urlMaps", regex_map("gx", &managed, matches)),
            field,
            "Regular expressions can only be used when the loadBalancingScheme is set to INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED.",
        );
    }
    let path_regex = json!({"regexMatch": "/items/[0-9]+"});
    // Regional EXTERNAL_MANAGED and INTERNAL_MANAGED, global INTERNAL_SELF_MANAGED: accepted.
    for (name, service) in [
        ("rx", format!("{R}/backendServices/rxlb")),
        ("ri", format!("{R}/backendServices/ilb")),
    ] {
        ok(
            &mut s,
            Scope::Regional,
            "urlMaps",
            regex_map(name, &service, path_regex.clone()),
        );
    }
    ok(
        &mut s,
        Scope::Global,
        "urlMaps",
        regex_map("td", &format!("{G}/backendServices/mesh"), path_regex),
    );
}
