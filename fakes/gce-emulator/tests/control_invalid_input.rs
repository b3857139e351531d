//! Invalid input over real HTTP gets Google's error shape (code, status, errors[].reason, a
//! message naming the field) and changes nothing: bad name, bad path pattern, reference to a
//! missing resource, malformed JSON, unknown enum, duplicate, stale fingerprint.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const G: &str = "projects/p1/global";

fn assert_error(got: &(u16, Value), code: u16, status: &str, reason: &str, mentions: &str) {
    let (c, body) = got;
    assert_eq!(*c, code, "{body}");
    let e = &body["error"];
    assert_eq!(e["code"], code, "{body}");
    assert_eq!(e["status"], status, "{body}");
    assert_eq!(e["errors"][0]["reason"], reason, "{body}");
    assert_eq!(e["errors"][0]["domain"], "global", "{body}");
    assert!(
        e["message"].as_str().unwrap().contains(mentions),
        "message should name {mentions}: {body}"
    );
}

#[tokio::test]
async fn invalid_requests_get_the_real_error_shape_and_change_nothing() {
    let emu = Emulator::start(&[]);
    assert_eq!(
        emu.post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc1", "type": "HTTP"})
        )
        .await
        .0,
        200
    );
    let um = json!({"name": "um1", "defaultService": format!("{G}/backendServices/bs1")});
    assert_eq!(
        emu.post(
            &format!("{G}/backendServices"),
            &json!({"name": "bs1", "healthChecks": [format!("{G}/healthChecks/hc1")]})
        )
        .await
        .0,
        200
    );
    assert_eq!(emu.post(&format!("{G}/urlMaps"), &um).await.0, 200);
    let before = emu.admin_get("state").await;

    let bad_name = emu
        .post(
            &format!("{G}/healthChecks"),
            &json!({"name": "Bad_Name", "type": "HTTP"}),
        )
        .await;
    assert_error(
        &bad_name,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.name",
    );
    assert_eq!(
        bad_name.1["error"]["details"][0]["fieldViolations"][0]["field"],
        "resource.name"
    );

    let bad_path = json!({"name": "um2", "defaultService": format!("{G}/backendServices/bs1"),
        "hostRules": [{"hosts": ["example.com"], "pathMatcher": "pm"}],
        "pathMatchers": [{"name": "pm", "defaultService": format!("{G}/backendServices/bs1"), "pathRules": [{"paths": ["/ok/*", "/foo*"], "service": format!("{G}/backendServices/bs1")}]}]});
    assert_error(
        &emu.post(&format!("{G}/urlMaps"), &bad_path).await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.pathMatchers[0].pathRules[0].paths[1]",
    );
    let unknown_matcher = json!({"name": "um3", "defaultService": format!("{G}/backendServices/bs1"), "hostRules": [{"hosts": ["a.com"], "pathMatcher": "nope"}]});
    assert_error(
        &emu.post(&format!("{G}/urlMaps"), &unknown_matcher).await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.hostRules[0].pathMatcher",
    );

    let missing_ref = json!({"name": "bs2", "healthChecks": [format!("{G}/healthChecks/nope")]});
    assert_error(
        &emu.post(&format!("{G}/backendServices"), &missing_ref)
            .await,
        404,
        "NOT_FOUND",
        "notFound",
        "resource.healthChecks[0]",
    );
    let wrong_kind = json!({"name": "thp1", "urlMap": format!("{G}/backendServices/bs1")});
    assert_error(
        &emu.post(&format!("{G}/targetHttpProxies"), &wrong_kind)
            .await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.urlMap",
    );

    assert_error(
        &emu.send(
            Method::POST,
            &format!("{G}/healthChecks"),
            "{\"name\": \"hc2\", ",
        )
        .await,
        400,
        "INVALID_ARGUMENT",
        "parseError",
        "Invalid JSON payload",
    );

    assert_error(
        &emu.post(
            &format!("{G}/backendServices"),
            &json!({"name": "bs3", "protocol": "FOO"}),
        )
        .await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.protocol",
    );
    assert_error(
        &emu.post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc3", "type": "HTTP", "checkIntervalSec": 5, "timeoutSec": 10}),
        )
        .await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.timeoutSec",
    );

    assert_error(
        &emu.post(
            &format!("{G}/healthChecks"),
            &json!({"name": "hc1", "type": "TCP"}),
        )
        .await,
        409,
        "ALREADY_EXISTS",
        "alreadyExists",
        "projects/p1/global/healthChecks/hc1",
    );
    assert_error(
        &emu.get(&format!("{G}/urlMaps/nope")).await,
        404,
        "NOT_FOUND",
        "notFound",
        "projects/p1/global/urlMaps/nope",
    );

    let stale = json!({"fingerprint": "AAAAAAAAAAA=", "description": "x"});
    assert_error(
        &emu.send(
            Method::PATCH,
            &format!("{G}/urlMaps/um1"),
            &stale.to_string(),
        )
        .await,
        412,
        "FAILED_PRECONDITION",
        "conditionNotMet",
        "fingerprint",
    );
    let bad_update = json!({"name": "um1", "defaultService": format!("{G}/backendServices/bs1"), "hostRules": [{"hosts": ["*bad"], "pathMatcher": "pm"}], "pathMatchers": [{"name": "pm", "defaultService": format!("{G}/backendServices/bs1")}]});
    assert_error(
        &emu.send(
            Method::PUT,
            &format!("{G}/urlMaps/um1"),
            &bad_update.to_string(),
        )
        .await,
        400,
        "INVALID_ARGUMENT",
        "invalid",
        "resource.hostRules[0].hosts[0]",
    );
    assert_error(
        &emu.send(Method::DELETE, &format!("{G}/healthChecks/hc1"), "")
            .await,
        400,
        "INVALID_ARGUMENT",
        "resourceInUseByAnotherResource",
        "projects/p1/global/backendServices/bs1",
    );

    let after = emu.admin_get("state").await;
    assert_eq!(before, after, "failed requests changed nothing");

    // urlMaps.validate reports the same problem without writing.
    let (c, v) = emu
        .post(
            &format!("{G}/urlMaps/um1/validate"),
            &json!({"resource": bad_path}),
        )
        .await;
    assert_eq!(c, 200);
    assert_eq!(v["result"]["loadSucceeded"], false);
    assert!(
        v["result"]["loadErrors"][0]
            .as_str()
            .unwrap()
            .contains("paths[1]"),
        "{v}"
    );
    let (_, v) = emu
        .post(
            &format!("{G}/urlMaps/um1/validate"),
            &json!({"resource": um}),
        )
        .await;
    assert_eq!(v["result"]["loadSucceeded"], true, "{v}");
}

#[tokio::test]
async fn fault_injection_refuses_firewall_writes_like_shared_vpc_and_counts_calls() {
    let emu = Emulator::start(&[]);
    let (c, v) = emu.admin(Method::POST, "faults", &json!({"method": "compute.firewalls.*", "code": 403, "message": "Required 'compute.firewalls.create' permission for 'projects/p1'"})).await;
    assert_eq!(c, 200, "{v}");
    let fw = json!({"name": "fw1", "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}], "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"]});
    let got = emu.post(&format!("{G}/firewalls"), &fw).await;
    assert_error(
        &got,
        403,
        "PERMISSION_DENIED",
        "forbidden",
        "compute.firewalls.create",
    );
    emu.admin(Method::DELETE, "faults", &json!({})).await;
    assert!(emu
        .keys("p1")
        .await
        .iter()
        .all(|k| !k.contains("/firewalls/")));
    assert_eq!(emu.post(&format!("{G}/firewalls"), &fw).await.0, 200);
    let (_, list) = emu
        .get(&format!(
            "{G}/firewalls?filter=name%20eq%20%22.*%5Cbfw1%5Cb.*%22&maxResults=500"
        ))
        .await;
    assert_eq!(list["items"][0]["priority"], 1000);
    assert_eq!(
        list["items"][0]["network"],
        format!("{}{G}/networks/default", emu.base)
    );

    emu.admin(Method::DELETE, "calls", &json!({})).await;
    emu.get(&format!("{G}/firewalls/fw1")).await;
    emu.get(&format!("{G}/firewalls")).await;
    emu.get("projects/p1/aggregated/backendServices").await;
    let calls = emu.admin_get("calls").await;
    assert_eq!(calls["mutating"], 0, "{calls}");
    assert_eq!(calls["reading"], 3, "{calls}");
    emu.send(
        Method::PATCH,
        &format!("{G}/firewalls/fw1"),
        "{\"priority\": 900}",
    )
    .await;
    assert_eq!(emu.admin_get("calls").await["mutating"], 1);

    // Latency and next-N faults; a 429 keeps its reason.
    emu.admin(
        Method::POST,
        "faults",
        &json!({"method": "compute.firewalls.get", "code": 429, "count": 1}),
    )
    .await;
    assert_error(
        &emu.get(&format!("{G}/firewalls/fw1")).await,
        429,
        "RESOURCE_EXHAUSTED",
        "rateLimitExceeded",
        "compute.firewalls.get",
    );
    assert_eq!(emu.get(&format!("{G}/firewalls/fw1")).await.0, 200);
}

#[tokio::test]
async fn operations_paging_and_auth() {
    let emu = Emulator::start(&["--operation-latency-ms", "60000", "--require-token"]);
    let anon = emu.get("projects/p1/global/healthChecks").await;
    assert_error(
        &anon,
        401,
        "UNAUTHENTICATED",
        "required",
        "authentication credential",
    );
    let auth = |r: reqwest::RequestBuilder| r.bearer_auth("any-token");
    let post = |path: String, body: Value| {
        auth(emu.http.post(format!("{}{path}", emu.base)))
            .json(&body)
            .send()
    };
    let mut op = Value::Null;
    for i in 0..5 {
        op = post(
            format!("{G}/healthChecks"),
            json!({"name": format!("hc{i}"), "type": "TCP"}),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        assert_eq!(op["status"], "RUNNING");
        assert_eq!(op["operationType"], "insert");
        assert_eq!(
            op["targetLink"],
            format!("{}{G}/healthChecks/hc{i}", emu.base)
        );
    }
    let got: Value = auth(emu.http.get(op["selfLink"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["selfLink"], op["selfLink"]);
    assert_eq!(got["status"], "RUNNING");
    let hc4: Value = auth(emu.http.get(op["targetLink"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(op["targetId"], hc4["id"], "targetId is the resource's id");

    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let url = format!(
            "{}{G}/healthChecks?maxResults=2&pageToken={token}&orderBy=name%20desc",
            emu.base
        );
        let page: Value = auth(emu.http.get(url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap().to_string()),
        );
        match page["nextPageToken"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
    }
    assert_eq!(names, ["hc4", "hc3", "hc2", "hc1", "hc0"]);
    let ops: Value = auth(emu.http.get(format!(
        "{}{G}/operations?filter=operationType%3Dinsert",
        emu.base
    )))
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(ops["items"].as_array().unwrap().len(), 5);

    // The same requestId twice: one insert, the same Operation.
    let url = format!(
        "{}{G}/healthChecks?requestId=0f6a7c1e-1111-4222-8333-944455556666",
        emu.base
    );
    let first: Value = auth(emu.http.post(&url))
        .json(&json!({"name": "hc9", "type": "TCP"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let again = auth(emu.http.post(&url))
        .json(&json!({"name": "hc9", "type": "TCP"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        again.status(),
        200,
        "a retried request id is not a conflict"
    );
    assert_eq!(again.json::<Value>().await.unwrap()["name"], first["name"]);

    // A zonal operation carries its zone and is served under zoneOperations.
    let zop: Value = post(
        "projects/p1/zones/europe-west1-b/networkEndpointGroups".into(),
        json!({"name": "neg1", "defaultPort": 80}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        zop["zone"],
        format!("{}projects/p1/zones/europe-west1-b", emu.base)
    );
    assert!(zop["selfLink"]
        .as_str()
        .unwrap()
        .contains("/zones/europe-west1-b/operations/operation-"));
    let del = auth(emu.http.delete(zop["selfLink"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    let gone = auth(emu.http.get(zop["selfLink"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    let bad_zone = post(
        "projects/p1/zones/mars-north1-a/networkEndpointGroups".into(),
        json!({"name": "neg2"}),
    )
    .await
    .unwrap();
    assert_eq!(bad_zone.status(), 404);
    let zones: Value = auth(emu.http.get(format!("{}projects/p1/zones", emu.base)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(zones["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|z| z["name"] == "us-central1-f"));
}
