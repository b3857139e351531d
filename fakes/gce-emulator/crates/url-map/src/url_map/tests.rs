//! Unit tests of URL map compilation and routing.

use super::*;
use http::HeaderMap;
use serde_json::json;
use serde_json::Value;

mod trace;

fn table(v: Value) -> UrlMapTable {
    UrlMapTable::compile(&v, &mut |url: &str| {
        url.rsplit('/')
            .next()
            .and_then(|n| n.strip_prefix("bs"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unknown {url}"))
    })
    .unwrap()
}

fn route(
    t: &UrlMapTable,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    query: Option<&str>,
) -> (String, String) {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let view = RequestView {
        method: "GET",
        host,
        path,
        query,
        headers: &h,
    };
    let r = t.route(&view);
    // Every row of these tables: the trace names the rule that routed.
    let mut trace = RouteTrace::default();
    let traced = t.route_traced(&view, Some(&mut trace));
    assert_eq!((traced.rule, trace.matched.as_str()), (r.rule, r.rule));
    let a = match r.action {
        RouteAction::Forward(f) => format!("bs{}", f.services[0].0),
        RouteAction::Redirect(rd) => format!(
            "redirect {}",
            redirect_location(rd, "http", host, path, query, r.matched_prefix)
        ),
        RouteAction::Unavailable(e) => e.clone(),
    };
    (a, r.rule.to_string())
}

/// The trace of a GET of `path` on `host` without headers.
fn traced(t: &UrlMapTable, host: &str, path: &str) -> RouteTrace {
    let h = HeaderMap::new();
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
}

fn bs(n: u32) -> String {
    format!("https://x/compute/v1/projects/p/global/backendServices/bs{n}")
}

#[test]
fn hosts_exact_wildcard_any_and_default() {
    let t = table(json!({
        "name": "um", "defaultService": bs(0),
        "hostRules": [
            {"hosts": ["shop.example"], "pathMatcher": "a"},
            {"hosts": ["*.example"], "pathMatcher": "b"},
            {"hosts": ["*.api.example"], "pathMatcher": "c"},
        ],
        "pathMatchers": [
            {"name": "a", "defaultService": bs(1)},
            {"name": "b", "defaultService": bs(2)},
            {"name": "c", "defaultService": bs(3)},
        ]
    }));
    assert_eq!(route(&t, "shop.example", "/", &[], None).0, "bs1");
    assert_eq!(route(&t, "SHOP.example", "/", &[], None).0, "bs1");
    assert_eq!(route(&t, "x.example", "/", &[], None).0, "bs2");
    assert_eq!(route(&t, "v1.api.example", "/", &[], None).0, "bs3");
    assert_eq!(route(&t, "example", "/", &[], None).0, "bs0");
    assert_eq!(
        route(&t, "other.test", "/", &[], None),
        ("bs0".into(), "defaultService".into())
    );
    let t2 = table(
        json!({"defaultService": bs(0), "hostRules": [{"hosts": ["*"], "pathMatcher": "a"}],
        "pathMatchers": [{"name": "a", "defaultService": bs(4)}]}),
    );
    assert_eq!(route(&t2, "anything", "/", &[], None).0, "bs4");
}

#[test]
fn path_rules_longest_match_and_matcher_default() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["h"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(9), "pathRules": [
            {"paths": ["/a/*"], "service": bs(1)},
            {"paths": ["/a/b/*"], "service": bs(2)},
            {"paths": ["/a/b/c"], "service": bs(3)},
            {"paths": ["/a"], "service": bs(4)},
        ]}]
    }));
    assert_eq!(route(&t, "h", "/a/x", &[], None).0, "bs1");
    assert_eq!(route(&t, "h", "/a/", &[], None).0, "bs1");
    assert_eq!(route(&t, "h", "/a/b/x", &[], None).0, "bs2");
    assert_eq!(
        route(&t, "h", "/a/b/c", &[], None),
        ("bs3".into(), "pathMatchers[m].pathRules[2]".into())
    );
    assert_eq!(route(&t, "h", "/a", &[], None).0, "bs4");
    assert_eq!(
        route(&t, "h", "/ab", &[], None),
        ("bs9".into(), "pathMatchers[m].defaultService".into())
    );
}

#[test]
fn route_rules_by_priority_with_regex_header_and_query() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(9), "routeRules": [
            {"priority": 10, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x-canary", "exactMatch": "1"}]}], "service": bs(1)},
            {"priority": 5, "matchRules": [{"regexMatch": "/items/[0-9]+"}], "service": bs(2)},
            {"priority": 20, "matchRules": [{"fullPathMatch": "/q", "queryParameterMatches": [{"name": "v", "exactMatch": "2"}]}], "service": bs(3)},
            {"priority": 30, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x-user", "presentMatch": true, "invertMatch": true}]}], "service": bs(4)},
        ]}]
    }));
    assert_eq!(
        route(&t, "h", "/items/12", &[("x-canary", "1")], None).0,
        "bs2"
    );
    assert_eq!(
        route(
            &t,
            "h",
            "/items/x",
            &[("x-canary", "1"), ("x-user", "u")],
            None
        )
        .0,
        "bs1"
    );
    assert_eq!(
        route(&t, "h", "/q", &[("x-user", "u")], Some("a=1&v=2")).0,
        "bs3"
    );
    assert_eq!(
        route(&t, "h", "/q", &[("x-user", "u")], Some("v=3")).0,
        "bs9"
    );
    assert_eq!(route(&t, "h", "/z", &[], None).0, "bs4");
}

#[test]
fn redirects_and_rewrites() {
    let t = table(json!({
        "defaultUrlRedirect": {"httpsRedirect": true, "redirectResponseCode": "PERMANENT_REDIRECT"},
        "hostRules": [{"hosts": ["h"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(1), "pathRules": [
            {"paths": ["/old/*"], "urlRedirect": {"prefixRedirect": "/new/", "redirectResponseCode": "FOUND", "stripQuery": true}},
            {"paths": ["/go"], "urlRedirect": {"hostRedirect": "other", "pathRedirect": "/landing", "redirectResponseCode": "SEE_OTHER"}},
            {"paths": ["/api/*"], "service": bs(2), "routeAction": {"urlRewrite": {"pathPrefixRewrite": "/v2/", "hostRewrite": "backend"}}},
        ]}]
    }));
    assert_eq!(
        route(&t, "x", "/p", &[], Some("a=1")).0,
        "redirect https://x/p?a=1"
    );
    assert_eq!(
        route(&t, "h", "/old/a/b", &[], Some("a=1")).0,
        "redirect http://h/new/a/b"
    );
    assert_eq!(
        route(&t, "h", "/go", &[], Some("a=1")).0,
        "redirect http://other/landing?a=1"
    );
    let mut hm = HeaderMap::new();
    hm.insert("a", "b".parse().unwrap());
    let r = t.route(&RequestView {
        method: "GET",
        host: "h",
        path: "/api/items",
        query: None,
        headers: &hm,
    });
    let RouteAction::Forward(f) = r.action else {
        panic!("forward expected")
    };
    let rw = f.rewrite.as_ref().unwrap();
    assert_eq!(
        rewrite_path(
            rw.path_prefix_rewrite.as_deref().unwrap(),
            "/api/items",
            r.matched_prefix
        ),
        "/v2/items"
    );
    assert_eq!(rw.host_rewrite.as_deref(), Some("backend"));
    for (code, want) in [
        ("MOVED_PERMANENTLY_DEFAULT", 301),
        ("FOUND", 302),
        ("SEE_OTHER", 303),
        ("TEMPORARY_REDIRECT", 307),
        ("PERMANENT_REDIRECT", 308),
    ] {
        assert_eq!(redirect_status(Some(code)), want);
    }
}

#[test]
fn errors_name_the_field() {
    let v = json!({"defaultService": bs(0), "pathMatchers": [{"name": "m", "defaultService": bs(0),
        "routeRules": [{"priority": 1, "matchRules": [{"regexMatch": "("}], "service": bs(0)}]}]});
    let e = UrlMapTable::compile(&v, &mut |_: &str| Ok(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("routeRules[0].matchRules[0].regexMatch"), "{e}");
    let v = json!({"defaultService": bs(0), "hostRules": [{"hosts": ["a"], "pathMatcher": "zz"}]});
    let e = UrlMapTable::compile(&v, &mut |_: &str| Ok(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("hostRules[0].pathMatcher"), "{e}");
}

#[test]
fn weighted_pick_follows_weights() {
    let f = Forward {
        services: vec![(0, 1), (1, 3)],
        service_headers: vec![None, None],
        total_weight: 4,
        rewrite: None,
        headers: None,
        timeout: None,
        mirror: None,
        abort: None,
    };
    let picks: Vec<usize> = (0..4).map(|r| f.pick(r)).collect();
    assert_eq!(picks, vec![0, 1, 1, 1]);
}

#[test]
fn wildcard_hosts_match_any_number_of_labels_of_the_allowed_characters() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [
            {"hosts": ["*.foo.com"], "pathMatcher": "w"},
            {"hosts": ["exact.example:8080"], "pathMatcher": "e"},
        ],
        "pathMatchers": [
            {"name": "w", "defaultService": bs(1)},
            {"name": "e", "defaultService": bs(2)},
        ]
    }));
    assert_eq!(route(&t, "bar.foo.com", "/", &[], None).0, "bs1");
    // The Compute API's `*` matches any string of [a-z0-9-.]: deeper names too.
    assert_eq!(route(&t, "baz.bar.foo.com", "/", &[], None).0, "bs1");
    assert_eq!(route(&t, "foo.com", "/", &[], None).0, "bs0");
    assert_eq!(route(&t, "under_score.foo.com", "/", &[], None).0, "bs0");
    assert_eq!(route(&t, "exact.example", "/", &[], None).0, "bs2");
}

#[test]
fn paths_are_normalized_per_rfc_3986() {
    for (raw, want) in [
        ("/plain/path", "/plain/path"),
        ("/a/./b/../c", "/a/c"),
        ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"),
        ("/../../x", "/x"),
        ("/%7Euser/%2e%2E/admin", "/admin"),
        ("/a%2Fb", "/a%2Fb"),
        ("/a%2fb", "/a%2Fb"),
        ("/%41%42c", "/ABc"),
        ("/a//b", "/a//b"),
        ("/100%", "/100%"),
        // An escape that ends the path is decoded; a `%` with one character after it is kept.
        ("/a%41", "/aA"),
        ("/a%4", "/a%4"),
        ("/public/..%2Fadmin", "/public/..%2Fadmin"),
    ] {
        assert_eq!(normalize_path(raw), want, "{raw}");
    }
    assert!(matches!(
        normalize_path("/no/change"),
        std::borrow::Cow::Borrowed(_)
    ));
}

/// The one-pass check that lets a path through unchanged agrees with the definition it
/// replaced (no `%`, no segment that is `.` or `..`) on every path of up to 7 characters over
/// the bytes that matter.
#[test]
fn the_fast_check_agrees_with_the_definition_of_a_normal_path() {
    let alphabet = [b'/', b'.', b'%', b'a'];
    let mut checked = 0;
    for len in 0..=7u32 {
        for n in 0..alphabet.len().pow(len) {
            let mut k = n;
            let path: String = (0..len)
                .map(|_| {
                    let c = alphabet[k % alphabet.len()] as char;
                    k /= alphabet.len();
                    c
                })
                .collect();
            let definition =
                !path.contains('%') && !path.split('/').any(|seg| seg == "." || seg == "..");
            assert_eq!(
                super::paths::is_normal(path.as_bytes()),
                definition,
                "{path:?}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, (0..=7).map(|l| 4usize.pow(l)).sum::<usize>());
}

#[test]
fn method_matches_header_actions_timeouts_mirrors_and_aborts_compile() {
    let rule = |extra: serde_json::Value| {
        let mut r = json!({"priority": 0, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": ":method", "exactMatch": "POST"}]}],
            "routeAction": {"weightedBackendServices": [{"backendService": bs(1), "weight": 1,
                "headerAction": {"requestHeadersToAdd": [{"headerName": "x-b", "headerValue": "1"}]}}],
                "timeout": {"seconds": "2", "nanos": 500000000},
                "requestMirrorPolicy": {"backendService": bs(2), "mirrorPercent": 50.0},
                "faultInjectionPolicy": {"abort": {"httpStatus": 500, "percentage": 25.0}}},
            "headerAction": {"responseHeadersToRemove": ["server"]}});
        if let (Some(o), Some(e)) = (r.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        r
    };
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [rule(json!({}))]}],
    }));
    let h = HeaderMap::new();
    let view = |method| RequestView {
        method,
        host: "h",
        path: "/x",
        query: None,
        headers: &h,
    };
    let post = t.route(&view("POST"));
    let RouteAction::Forward(f) = post.action else {
        panic!("{:?}", post.action)
    };
    assert_eq!(f.services, vec![(1, 1)]);
    assert_eq!(f.timeout, Some(std::time::Duration::from_millis(2500)));
    assert_eq!(f.mirror, Some((2, 50.0)));
    assert_eq!(f.abort, Some((500, 25.0)));
    assert_eq!(
        f.service_headers[0].as_ref().unwrap().request_add[0].name,
        "x-b"
    );
    assert_eq!(f.headers.as_ref().unwrap().response_remove[0], "server");
    let get = t.route(&view("GET"));
    assert_eq!(
        get.rule, "pathMatchers[m].defaultService",
        ":method GET does not match POST"
    );
}

/// A weighted backend service of weight 0 gets no traffic: it is left out of the route, and a
/// route whose services all weigh 0 has none (as the reference's `weight` says: 0 sends none).
#[test]
fn weight_zero_services_are_left_out_of_a_route() {
    let weighted = |weights: &[(u32, u64)]| {
        json!({"priority": 0, "matchRules": [{"prefixMatch": "/"}], "routeAction": {
            "weightedBackendServices": weights.iter()
                .map(|(n, w)| json!({"backendService": bs(*n), "weight": w}))
                .collect::<Vec<_>>()}})
    };
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["a"], "pathMatcher": "a"}, {"hosts": ["b"], "pathMatcher": "b"}],
        "pathMatchers": [
            {"name": "a", "defaultService": bs(0), "routeRules": [weighted(&[(1, 0), (2, 3)])]},
            {"name": "b", "defaultService": bs(0), "routeRules": [weighted(&[(1, 0)])]},
        ],
    }));
    let h = HeaderMap::new();
    let view = |host| RequestView {
        method: "GET",
        host,
        path: "/x",
        query: None,
        headers: &h,
    };
    let RouteAction::Forward(f) = t.route(&view("a")).action else {
        panic!("a forward")
    };
    assert_eq!((f.services.clone(), f.total_weight), (vec![(2, 3)], 3));
    assert!(
        matches!(t.route(&view("b")).action, RouteAction::Unavailable(_)),
        "all weights 0: no service"
    );
}

/// `rangeMatch` holds `[rangeStart, rangeEnd)`: the start is in, the end is out, and a value
/// that is not an integer never matches.
#[test]
fn a_range_match_holds_its_start_but_not_its_end() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            {"priority": 0, "matchRules": [{"prefixMatch": "/", "headerMatches": [
                {"headerName": "x-n", "rangeMatch": {"rangeStart": "10", "rangeEnd": "20"}}]}],
             "service": bs(1)}]}],
    }));
    for (n, want) in [
        ("9", "bs0"),
        ("10", "bs1"),
        ("15", "bs1"),
        ("19", "bs1"),
        ("20", "bs0"),
        ("x", "bs0"),
    ] {
        assert_eq!(route(&t, "h", "/", &[("x-n", n)], None).0, want, "x-n: {n}");
    }
}

/// A route rule's `prefixRedirect` replaces the prefix its `prefixMatch` matched (and a
/// `fullPathMatch` the whole path).
#[test]
fn a_route_rule_prefix_redirect_replaces_the_matched_prefix() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            {"priority": 0, "matchRules": [{"prefixMatch": "/old/"}],
             "urlRedirect": {"prefixRedirect": "/new/"}},
            {"priority": 1, "matchRules": [{"fullPathMatch": "/exact"}],
             "urlRedirect": {"prefixRedirect": "/moved"}}]}],
    }));
    assert_eq!(
        route(&t, "h", "/old/page", &[], None).0,
        "redirect http://h/new/page"
    );
    assert_eq!(
        route(&t, "h", "/exact", &[], None).0,
        "redirect http://h/moved"
    );
}

/// `ignoreCase` applies to `prefixMatch` and `fullPathMatch`, and only when set; a path shorter
/// than the prefix, or cut inside a character, does not match (and does not panic).
#[test]
fn ignore_case_applies_to_prefix_and_full_path_matches_only_when_set() {
    let rule = |priority: u32, m: Value, n: u32| json!({"priority": priority, "matchRules": [m], "service": bs(n)});
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            rule(0, json!({"prefixMatch": "/API/", "ignoreCase": true}), 1),
            rule(1, json!({"fullPathMatch": "/Exact", "ignoreCase": true}), 2),
            rule(2, json!({"prefixMatch": "/Case/"}), 3),
            rule(3, json!({"fullPathMatch": "/Full"}), 4),
            rule(4, json!({"prefixMatch": "/ab", "ignoreCase": true}), 5),
        ]}],
    }));
    for (path, want) in [
        ("/api/items", "bs1"),
        ("/API/items", "bs1"),
        ("/AP", "bs0"),
        ("/exact", "bs2"),
        ("/EXACT", "bs2"),
        ("/exact/more", "bs0"),
        ("/Case/x", "bs3"),
        ("/case/x", "bs0"),
        ("/Full", "bs4"),
        ("/full", "bs0"),
        ("/AB", "bs5"),
        // "/a" then a two-byte character: byte 3 is inside it.
        ("/a\u{e9}", "bs0"),
    ] {
        assert_eq!(route(&t, "h", path, &[], None).0, want, "{path}");
    }
}

/// A header match on the pseudo-header `:authority` reads the request's host.
#[test]
fn an_authority_header_match_reads_the_host() {
    let t = table(json!({
        "defaultService": bs(0),
        "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
        "pathMatchers": [{"name": "m", "defaultService": bs(0), "routeRules": [
            {"priority": 0, "matchRules": [{"prefixMatch": "/", "headerMatches": [
                {"headerName": ":authority", "exactMatch": "a.example"}]}], "service": bs(1)}]}],
    }));
    assert_eq!(route(&t, "a.example", "/", &[], None).0, "bs1");
    assert_eq!(route(&t, "b.example", "/", &[], None).0, "bs0");
}
