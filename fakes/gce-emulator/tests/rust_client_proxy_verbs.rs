//! The target proxies' custom methods through the official Rust crate: `setUrlMap` on HTTP and
//! HTTPS proxies and `setSslCertificates`, whose v1 paths have no `/global/` segment
//! (`projects/{p}/targetHttpsProxies/{name}/setSslCertificates`, Compute API v1 reference). The
//! operator swaps URL maps and rotates certificates with exactly these calls.

mod control_support;

use control_support::Emulator;
use google_cloud_compute_v1::client::{
    BackendServices, SslCertificates, TargetHttpProxies, TargetHttpsProxies, UrlMaps,
};
use google_cloud_compute_v1::model;
use google_cloud_lro::Poller;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

const P: &str = "p1";
const G: &str = "projects/p1/global";

fn m<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("model from JSON")
}

fn assert_done(op: &model::Operation) {
    assert_eq!(op.status, Some(model::operation::Status::Done), "{op:?}");
    assert!(op.error.is_none(), "{op:?}");
}

macro_rules! client {
    ($t:ty, $base:expr) => {
        <$t>::builder()
            .with_endpoint($base)
            .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
            .build()
            .await
            .expect("client")
    };
}

fn pem_pair(host: &str) -> (String, String) {
    let c = rcgen::generate_simple_self_signed(vec![host.to_string()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_url_map_and_set_ssl_certificates_use_the_paths_without_global() {
    let emu = Emulator::start(&[]);
    let host = emu.root.trim_end_matches('/').to_string();
    let bss: BackendServices = client!(BackendServices, &host);
    let ums: UrlMaps = client!(UrlMaps, &host);
    let certs: SslCertificates = client!(SslCertificates, &host);
    let thp: TargetHttpProxies = client!(TargetHttpProxies, &host);
    let thps: TargetHttpsProxies = client!(TargetHttpsProxies, &host);

    let bs = m::<model::BackendService>(json!({"name": "bs1", "protocol": "HTTP"}));
    assert_done(
        &bss.insert()
            .set_project(P)
            .set_body(bs)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    for name in ["um1", "um2"] {
        let um = m::<model::UrlMap>(
            json!({"name": name, "defaultService": format!("{G}/backendServices/bs1")}),
        );
        assert_done(
            &ums.insert()
                .set_project(P)
                .set_body(um)
                .poller()
                .until_done()
                .await
                .unwrap(),
        );
    }
    for (name, host) in [("c1", "a.example"), ("c2", "b.example")] {
        let (certificate, private_key) = pem_pair(host);
        let c = m::<model::SslCertificate>(
            json!({"name": name, "certificate": certificate, "privateKey": private_key}),
        );
        assert_done(
            &certs
                .insert()
                .set_project(P)
                .set_body(c)
                .poller()
                .until_done()
                .await
                .unwrap(),
        );
    }
    let http =
        m::<model::TargetHttpProxy>(json!({"name": "thp1", "urlMap": format!("{G}/urlMaps/um1")}));
    assert_done(
        &thp.insert()
            .set_project(P)
            .set_body(http)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let https = m::<model::TargetHttpsProxy>(json!({
        "name": "thps1", "urlMap": format!("{G}/urlMaps/um1"),
        "sslCertificates": [format!("{G}/sslCertificates/c1")]
    }));
    assert_done(
        &thps
            .insert()
            .set_project(P)
            .set_body(https)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );

    // setUrlMap on the HTTP proxy.
    let to_um2 = model::UrlMapReference::new().set_url_map(format!("{G}/urlMaps/um2"));
    let op = thp
        .set_url_map()
        .set_project(P)
        .set_target_http_proxy("thp1")
        .set_body(to_um2.clone())
        .poller()
        .until_done()
        .await
        .unwrap();
    assert_done(&op);
    assert_eq!(op.operation_type.as_deref(), Some("setUrlMap"));
    let got = thp
        .get()
        .set_project(P)
        .set_target_http_proxy("thp1")
        .send()
        .await
        .unwrap();
    assert!(
        got.url_map
            .as_deref()
            .unwrap()
            .ends_with("/global/urlMaps/um2"),
        "{got:?}"
    );

    // setUrlMap and setSslCertificates on the HTTPS proxy.
    assert_done(
        &thps
            .set_url_map()
            .set_project(P)
            .set_target_https_proxy("thps1")
            .set_body(to_um2)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let swap = model::TargetHttpsProxiesSetSslCertificatesRequest::new().set_ssl_certificates([
        format!("{G}/sslCertificates/c2"),
        format!("{G}/sslCertificates/c1"),
    ]);
    assert_done(
        &thps
            .set_ssl_certificates()
            .set_project(P)
            .set_target_https_proxy("thps1")
            .set_body(swap)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let got = thps
        .get()
        .set_project(P)
        .set_target_https_proxy("thps1")
        .send()
        .await
        .unwrap();
    assert!(
        got.url_map
            .as_deref()
            .unwrap()
            .ends_with("/global/urlMaps/um2"),
        "{got:?}"
    );
    let names: Vec<&str> = got
        .ssl_certificates
        .iter()
        .map(|c| c.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["c2", "c1"],
        "order kept: the first is the default certificate"
    );

    // A reference to a missing certificate is refused and changes nothing.
    let missing = model::TargetHttpsProxiesSetSslCertificatesRequest::new()
        .set_ssl_certificates([format!("{G}/sslCertificates/nope")]);
    let err = thps
        .set_ssl_certificates()
        .set_project(P)
        .set_target_https_proxy("thps1")
        .set_body(missing)
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(err.http_status_code(), Some(400) | Some(404)),
        "{err:?}"
    );
    let again = thps
        .get()
        .set_project(P)
        .set_target_https_proxy("thps1")
        .send()
        .await
        .unwrap();
    assert_eq!(again.ssl_certificates, got.ssl_certificates);

    // The `/global/` form of these verbs does not exist in the real API, nor here.
    let (code, body) = emu
        .post(
            &format!("{G}/targetHttpsProxies/thps1/setSslCertificates"),
            &json!({"sslCertificates": [format!("{G}/sslCertificates/c1")]}),
        )
        .await;
    assert_eq!(code, 404, "{body}");
    // Unaffected custom verbs keep their `/global/` path (setSslPolicy is one).
    let calls = emu.admin_get("calls").await;
    for id in [
        "compute.targetHttpProxies.setUrlMap",
        "compute.targetHttpsProxies.setUrlMap",
        "compute.targetHttpsProxies.setSslCertificates",
    ] {
        assert!(
            calls["methods"][id].as_u64().unwrap_or(0) >= 1,
            "{id} counted: {calls}"
        );
    }
}
