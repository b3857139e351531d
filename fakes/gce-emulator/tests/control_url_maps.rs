//! URL map route rules over real HTTP: what the Compute API accepts (ordered `fullPathMatch` and
//! `prefixMatch` rules, header matches) and what it refuses (pathRules beside routeRules, a
//! repeated or missing priority, a match rule with no or two path matches, a header match of two
//! kinds, and for the classic load balancer regexMatch and weighted backends), plus the URL
//! map's `tests`, judged by the data plane's own matcher.

mod control_support;

use control_support::Emulator;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

fn bs(name: &str) -> String {
    format!("{G}/backendServices/{name}")
}

async fn setup(emu: &Emulator) {
    let (c, v) = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc", "type": "HTTP"}),
        )
        .await;
    assert_eq!(c, 200, "{v}");
    for name in ["a", "b"] {
        let (c, v) = emu
            .post(
                &format!("{G}/backendServices"),
                &json!({"name": name, "healthChecks": [format!("{G}/healthChecks/hc")]}),
            )
            .await;
        assert_eq!(c, 200, "{v}");
    }
}

fn url_map(name: &str, matcher: Value) -> Value {
    let mut pm = json!({"name": "m", "defaultService": bs("a")});
    for (k, v) in matcher.as_object().unwrap() {
        pm[k] = v.clone();
    }
    json!({"name": name, "defaultService": bs("a"),
           "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}], "pathMatchers": [pm]})
}

async fn refused(emu: &Emulator, name: &str, matcher: Value, mentions: &str) {
    let (code, v) = emu
        .post(&format!("{G}/urlMaps"), &url_map(name, matcher.clone()))
        .await;
    assert_eq!(code, 400, "{matcher} should be refused: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(mentions),
        "{msg:?} should mention {mentions:?}"
    );
}

#[tokio::test]
async fn route_rules_are_validated_like_the_compute_api() {
    let emu = Emulator::start(&[]);
    setup(&emu).await;
    let ok = url_map(
        "ok",
        json!({"routeRules": [
            {"priority": 1, "matchRules": [{"fullPathMatch": "/foo/"}], "service": bs("b")},
            {"priority": 2, "matchRules": [{"prefixMatch": "/foo/", "headerMatches": [{"headerName": "x-v", "exactMatch": "2"}]}], "service": bs("a")},
            {"priority": 3, "matchRules": [{"prefixMatch": "/", "queryParameterMatches": [{"name": "q", "presentMatch": true}]}], "service": bs("b")},
        ]}),
    );
    let (code, v) = emu.post(&format!("{G}/urlMaps"), &ok).await;
    assert_eq!(code, 200, "{v}");

    refused(
        &emu,
        "both",
        json!({"pathRules": [{"paths": ["/x"], "service": bs("b")}],
               "routeRules": [{"priority": 1, "matchRules": [{"prefixMatch": "/"}], "service": bs("b")}]}),
        "only one of pathRules or routeRules",
    )
    .await;
    refused(
        &emu,
        "dup",
        json!({"routeRules": [
            {"priority": 7, "matchRules": [{"prefixMatch": "/a"}], "service": bs("b")},
            {"priority": 7, "matchRules": [{"prefixMatch": "/b"}], "service": bs("b")}]}),
        "same priority",
    )
    .await;
    refused(
        &emu,
        "nopri",
        json!({"routeRules": [{"matchRules": [{"prefixMatch": "/"}], "service": bs("b")}]}),
        "priority",
    )
    .await;
    refused(
        &emu,
        "twopaths",
        json!({"routeRules": [{"priority": 1, "matchRules": [{"prefixMatch": "/", "fullPathMatch": "/x"}], "service": bs("b")}]}),
        "Exactly one of prefixMatch",
    )
    .await;
    refused(
        &emu,
        "nopath",
        json!({"routeRules": [{"priority": 1, "matchRules": [{"headerMatches": [{"headerName": "x", "exactMatch": "1"}]}], "service": bs("b")}]}),
        "Exactly one of prefixMatch",
    )
    .await;
    refused(
        &emu,
        "twokinds",
        json!({"routeRules": [{"priority": 1, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x", "exactMatch": "1", "suffixMatch": "1"}]}], "service": bs("b")}]}),
        "Exactly one of exactMatch",
    )
    .await;
    refused(
        &emu,
        "regex",
        json!({"routeRules": [{"priority": 1, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": ":authority", "regexMatch": "[^.]+[.]foo[.]com"}]}], "service": bs("b")}]}),
        "loadBalancingScheme set to EXTERNAL",
    )
    .await;
    refused(
        &emu,
        "weighted",
        json!({"routeRules": [{"priority": 1, "matchRules": [{"prefixMatch": "/"}],
               "routeAction": {"weightedBackendServices": [{"backendService": bs("b"), "weight": 100}]}}]}),
        "weightedBackendServices",
    )
    .await;
}

/// `tests` use the data plane's matcher: `/foo/*` does not serve `/foo`, route rules go by
/// priority, and a path is normalized before matching.
#[tokio::test]
async fn url_map_tests_route_like_the_data_plane() {
    let emu = Emulator::start(&[]);
    setup(&emu).await;
    let with_tests = |tests: Value| {
        let mut um = url_map(
            "t",
            json!({"pathRules": [{"paths": ["/foo/*"], "service": bs("b")}]}),
        );
        um["tests"] = tests;
        um
    };
    let (code, v) = emu
        .post(
            &format!("{G}/urlMaps"),
            &with_tests(json!([{"host": "h", "path": "/foo", "service": bs("b")}])),
        )
        .await;
    assert_eq!(code, 400, "/foo/* must not serve /foo: {v}");
    let (code, v) = emu
        .post(
            &format!("{G}/urlMaps"),
            &with_tests(json!([
                {"host": "h", "path": "/foo", "service": bs("a")},
                {"host": "h", "path": "/foo/", "service": bs("b")},
                {"host": "h", "path": "/x/../foo/y", "service": bs("b")},
            ])),
        )
        .await;
    assert_eq!(code, 200, "{v}");
}
