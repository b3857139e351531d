//! Bad input to the REST API over real HTTP, each answered in Google's error shape with the
//! reason the real API gives, and changing nothing: fields the v1 schema does not have (at the
//! top, nested, in a patch and in a custom verb's body) while fields it has but the emulator
//! does not model pass; a body over the 10 MiB limit; resource names against RFC 1035's 63
//! characters; a dangling reference; deleting what is in use; a stale fingerprint; 50 parallel
//! inserts of one name (exactly one succeeds); operations that do not exist.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

fn assert_error(got: &(u16, Value), code: u16, reason: &str, message: &str) {
    let (c, body) = got;
    assert_eq!(*c, code, "{body}");
    let e = &body["error"];
    assert_eq!(e["code"], code, "{body}");
    assert_eq!(e["errors"][0]["reason"], reason, "{body}");
    assert_eq!(e["errors"][0]["domain"], "global", "{body}");
    assert!(
        e["message"].as_str().unwrap().contains(message),
        "message should contain {message:?}: {body}"
    );
}

async fn setup(emu: &Emulator) {
    for (path, body) in [
        ("healthChecks", json!({"name": "hc1", "type": "HTTP"})),
        (
            "backendServices",
            json!({"name": "bs1", "healthChecks": [format!("{G}/healthChecks/hc1")]}),
        ),
        (
            "urlMaps",
            json!({"name": "um1", "defaultService": format!("{G}/backendServices/bs1")}),
        ),
        (
            "targetHttpProxies",
            json!({"name": "tp1", "urlMap": format!("{G}/urlMaps/um1")}),
        ),
    ] {
        let (c, v) = emu.post(&format!("{G}/{path}"), &body).await;
        assert_eq!(c, 200, "{path}: {v}");
    }
}

#[tokio::test]
async fn fields_outside_the_v1_schema_are_refused_and_fields_inside_it_pass() {
    let emu = Emulator::start(&[]);
    setup(&emu).await;
    let before = emu.admin_get("state").await;
    let unknown = |name: &str, at: &str| {
        format!(
            "Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."
        )
    };
    let got = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc2", "type": "HTTP", "x": 1}),
        )
        .await;
    assert_error(&got, 400, "invalid", &unknown("x", "resource"));
    assert_eq!(got.1["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        got.1["error"]["details"][0]["fieldViolations"][0]["field"],
        "resource"
    );
    let nested = json!({"name": "um2", "defaultService": format!("{G}/backendServices/bs1"),
        "hostRules": [{"hosts": ["a.example"], "pathMatcher": "pm"}],
        "pathMatchers": [{"name": "pm", "defaultService": format!("{G}/backendServices/bs1"),
            "pathRules": [{"paths": ["/a"], "service": format!("{G}/backendServices/bs1"), "weight": 3}]}]});
    assert_error(
        &emu.post(&format!("{G}/urlMaps"), &nested).await,
        400,
        "invalid",
        &unknown("weight", "resource.path_matchers[0].path_rules[0]"),
    );
    assert_error(
        &emu.send(
            Method::PATCH,
            &format!("{G}/backendServices/bs1"),
            r#"{"timeoutSec": 40, "timeout_sec": 40}"#,
        )
        .await,
        400,
        "invalid",
        &unknown("timeout_sec", "resource"),
    );
    assert_error(
        &emu.post(
            "projects/p1/targetHttpProxies/tp1/setUrlMap",
            &json!({"urlMap": format!("{G}/urlMaps/um1"), "force": true}),
        )
        .await,
        400,
        "invalid",
        &unknown("force", "resource"),
    );
    assert_eq!(
        emu.admin_get("state").await,
        before,
        "refused requests changed nothing"
    );

    // Fields the schema has, though the emulator does not model them, are accepted.
    let (c, v) = emu
        .post(
            &format!("{G}/backendServices"),
            &json!({"name": "bs2", "healthChecks": [format!("{G}/healthChecks/hc1")],
                "logConfig": {"enable": true, "sampleRate": 0.5},
                "compressionMode": "DISABLED"}),
        )
        .await;
    assert_eq!(c, 200, "{v}");
}

#[tokio::test]
async fn bodies_over_10_mib_are_refused_and_below_it_pass() {
    let emu = Emulator::start(&[]);
    let limit = 10 * 1024 * 1024;
    // Whitespace is valid JSON padding: the same body just under and just over the limit.
    let body = |size: usize| {
        let json = r#"{"name": "hc1", "type": "TCP"}"#;
        format!("{}{json}", " ".repeat(size - json.len()))
    };
    let over = emu
        .send(Method::POST, &format!("{G}/healthChecks"), &body(limit + 1))
        .await;
    assert_error(
        &over,
        400,
        "badRequest",
        "Request payload size exceeds the limit: 10485760 bytes.",
    );
    let (c, v) = emu
        .send(Method::POST, &format!("{G}/healthChecks"), &body(limit))
        .await;
    assert_eq!(c, 200, "{v}");
}

#[tokio::test]
async fn names_references_use_and_fingerprints() {
    let emu = Emulator::start(&[]);
    setup(&emu).await;
    let longest = format!("a{}", "b".repeat(62));
    let (c, v) = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": longest, "type": "TCP"}),
        )
        .await;
    assert_eq!(c, 200, "63 characters is a valid name: {v}");
    for bad in [
        format!("{longest}c"),
        "Upper".into(),
        "1st".into(),
        "dash-".into(),
        "".into(),
    ] {
        let got = emu
            .post(
                &format!("{G}/healthChecks"),
                &json!({"name": bad, "type": "TCP"}),
            )
            .await;
        let reason = if bad.is_empty() {
            "required"
        } else {
            "invalid"
        };
        assert_error(&got, 400, reason, "resource.name");
    }
    assert_error(
        &emu.post(
            &format!("{G}/urlMaps"),
            &json!({"name": "um9", "defaultService": format!("{G}/backendServices/missing")}),
        )
        .await,
        404,
        "notFound",
        "projects/p1/global/backendServices/missing",
    );
    assert_error(
        &emu.send(Method::DELETE, &format!("{G}/urlMaps/um1"), "")
            .await,
        400,
        "resourceInUseByAnotherResource",
        "projects/p1/global/targetHttpProxies/tp1",
    );
    let (_, bs) = emu.get(&format!("{G}/backendServices/bs1")).await;
    let fp = bs["fingerprint"].as_str().unwrap().to_string();
    let patch = |fp: &str| json!({"fingerprint": fp, "timeoutSec": 45}).to_string();
    let (c, v) = emu
        .send(
            Method::PATCH,
            &format!("{G}/backendServices/bs1"),
            &patch(&fp),
        )
        .await;
    assert_eq!(c, 200, "{v}");
    // The same fingerprint again is stale now.
    assert_error(
        &emu.send(
            Method::PATCH,
            &format!("{G}/backendServices/bs1"),
            &patch(&fp),
        )
        .await,
        412,
        "conditionNotMet",
        "fingerprint",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_parallel_inserts_of_one_name_make_one_resource() {
    let emu = Emulator::start(&[]);
    let path = format!("{G}/healthChecks");
    let bodies: Vec<Value> = (0..50)
        .map(|i| json!({"name": "same", "type": "TCP", "description": format!("insert {i}")}))
        .collect();
    let inserts = bodies.iter().map(|b| emu.post(&path, b));
    let results = futures::future::join_all(inserts).await;
    let ok: Vec<_> = results.iter().filter(|(c, _)| *c == 200).collect();
    assert_eq!(ok.len(), 1, "exactly one insert succeeds");
    for r in results.iter().filter(|(c, _)| *c != 200) {
        assert_error(
            r,
            409,
            "alreadyExists",
            "projects/p1/global/healthChecks/same",
        );
    }
    let (_, list) = emu.get(&format!("{G}/healthChecks")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    // The one stored is the one whose Operation succeeded.
    let (_, hc) = emu.get(&format!("{G}/healthChecks/same")).await;
    assert_eq!(ok[0].1["targetId"], hc["id"]);
}

#[tokio::test]
async fn operations_that_do_not_exist() {
    let emu = Emulator::start(&[]);
    let z = "projects/p1/zones/us-central1-a";
    for (method, path) in [
        (Method::GET, format!("{G}/operations/operation-nope")),
        (Method::POST, format!("{G}/operations/operation-nope/wait")),
        (Method::DELETE, format!("{G}/operations/operation-nope")),
        (Method::GET, format!("{z}/operations/operation-nope")),
        (Method::POST, format!("{z}/operations/operation-nope/wait")),
    ] {
        let got = emu.send(method.clone(), &path, "").await;
        assert_error(&got, 404, "notFound", "operation-nope");
    }
    // An unknown collection or verb is a 404 too, in the same shape.
    assert_error(
        &emu.get("projects/p1/global/gizmos").await,
        404,
        "notFound",
        "gizmos",
    );
    assert_error(
        &emu.post(&format!("{G}/urlMaps/um1/frobnicate"), &json!({}))
            .await,
        404,
        "notFound",
        "frobnicate",
    );
}
