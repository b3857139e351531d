//! Unit tests of backends, health checks, endpoints (and, in backends_tests/, certificates and
//! the firewall rule), on the
//! `testdata/features.yaml` snapshot edited one thing at a time.

use super::test_support::{config, snapshot_from_yaml};
use super::*;
use crate::crd::BackendConfig;
use std::sync::Arc;

mod certificates;
mod firewall;

fn features() -> ClusterSnapshot {
    snapshot_from_yaml(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/translate/testdata/features.yaml"
        ))
        .unwrap(),
    )
}

fn translate(snapshot: &ClusterSnapshot, name: &str) -> Result<DesiredIngress, TranslateError> {
    translate_ingress(
        snapshot,
        &snapshot.ingresses[&ObjectKey::new("default", name)],
        &config(),
    )
}

fn shop_backend(d: &DesiredIngress) -> &DesiredBackend {
    d.backends
        .values()
        .find(|b| b.key.service == "shop")
        .expect("shop backend")
}

fn http_check(b: &DesiredBackend) -> &google_cloud_compute_v1::model::HTTPHealthCheck {
    b.health_check
        .http_health_check
        .as_ref()
        .expect("HTTP health check")
}

#[test]
fn removing_the_backend_config_returns_every_field_to_the_default() {
    let mut snapshot = features();
    let with = translate(&snapshot, "shop").unwrap();
    let bs = &shop_backend(&with).backend_service;
    assert_eq!(bs.timeout_sec, Some(5));
    assert!(bs.security_policy.is_some());

    let shop = snapshot
        .services
        .get_mut(&ObjectKey::new("default", "shop"))
        .map(Arc::make_mut)
        .unwrap();
    shop.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove("cloud.google.com/backend-config");
    let without = translate(&snapshot, "shop").unwrap();
    let b = shop_backend(&without);
    let bs = &b.backend_service;
    assert_eq!(bs.timeout_sec, Some(30));
    assert_eq!(
        bs.connection_draining
            .as_ref()
            .unwrap()
            .draining_timeout_sec,
        Some(0)
    );
    assert_eq!(bs.session_affinity.as_ref().unwrap().name(), Some("NONE"));
    assert_eq!(bs.affinity_cookie_ttl_sec, Some(0));
    assert!(bs.custom_request_headers.is_empty() && bs.custom_response_headers.is_empty());
    assert_eq!(bs.security_policy, None);
    assert_eq!(bs.log_config.as_ref().unwrap().sample_rate, Some(1.0));
    // The health check falls back to the readiness probe of the oldest Pod (shop-b).
    assert_eq!(b.health_check.check_interval_sec, Some(7));
    assert_eq!(b.health_check.timeout_sec, Some(3));
    let http = http_check(b);
    assert_eq!(http.request_path.as_deref(), Some("/healthz"));
    assert_eq!(http.host.as_deref(), Some("shop.internal"));
    assert_eq!(
        http.port_specification.as_ref().unwrap().name(),
        Some("USE_SERVING_PORT")
    );
    assert_eq!(http.port, None);
    assert_eq!(
        b.firewall_ports.iter().copied().collect::<Vec<_>>(),
        [8080],
        "9090 was only for the BackendConfig check"
    );
}

#[test]
fn security_policy_empty_name_means_no_policy() {
    let mut snapshot = features();
    let bc: &mut BackendConfig = snapshot
        .backend_configs
        .get_mut(&ObjectKey::new("default", "shop-bc"))
        .map(Arc::make_mut)
        .unwrap();
    bc.spec.security_policy.as_mut().unwrap().name = String::new();
    assert_eq!(
        shop_backend(&translate(&snapshot, "shop").unwrap())
            .backend_service
            .security_policy,
        None
    );
}

#[test]
fn health_check_follows_the_current_probe() {
    let mut snapshot = features();
    let shop = snapshot
        .services
        .get_mut(&ObjectKey::new("default", "shop"))
        .map(Arc::make_mut)
        .unwrap();
    shop.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove("cloud.google.com/backend-config");
    let pod = snapshot
        .pods
        .get_mut(&ObjectKey::new("default", "shop-b"))
        .map(Arc::make_mut)
        .unwrap();
    let probe = pod.spec.as_mut().unwrap().containers[0]
        .readiness_probe
        .as_mut()
        .unwrap();
    probe.period_seconds = Some(20);
    probe.timeout_seconds = None;
    let b = translate(&snapshot, "shop").unwrap();
    let hc = &shop_backend(&b).health_check;
    assert_eq!(hc.check_interval_sec, Some(20));
    assert_eq!(
        hc.timeout_sec,
        Some(15),
        "an unset probe timeout uses the default"
    );
    // A probe on another port than the Service's targetPort is not used.
    let pod = snapshot
        .pods
        .get_mut(&ObjectKey::new("default", "shop-b"))
        .map(Arc::make_mut)
        .unwrap();
    let http = pod.spec.as_mut().unwrap().containers[0]
        .readiness_probe
        .as_mut()
        .unwrap()
        .http_get
        .as_mut()
        .unwrap();
    http.port = k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9999);
    let b = translate(&snapshot, "shop").unwrap();
    // shop-a (next by creation time, then name) qualifies instead.
    assert_eq!(
        http_check(shop_backend(&b)).request_path.as_deref(),
        Some("/other")
    );
}

#[test]
fn https_backends_use_only_https_probes() {
    let mut snapshot = features();
    let d = translate(&snapshot, "https-only").unwrap();
    let api = d
        .backends
        .values()
        .find(|b| b.key.service == "secure-api")
        .unwrap();
    assert_eq!(
        api.backend_service.protocol.as_ref().unwrap().name(),
        Some("HTTPS")
    );
    let https = api.health_check.https_health_check.as_ref().unwrap();
    assert_eq!(https.request_path.as_deref(), Some("/healthz"));
    let pod = snapshot
        .pods
        .get_mut(&ObjectKey::new("default", "secure-api-1"))
        .map(Arc::make_mut)
        .unwrap();
    pod.spec.as_mut().unwrap().containers[0]
        .readiness_probe
        .as_mut()
        .unwrap()
        .http_get
        .as_mut()
        .unwrap()
        .scheme = Some("HTTP".into());
    let d = translate(&snapshot, "https-only").unwrap();
    let api = d
        .backends
        .values()
        .find(|b| b.key.service == "secure-api")
        .unwrap();
    assert_eq!(
        api.health_check
            .https_health_check
            .as_ref()
            .unwrap()
            .request_path
            .as_deref(),
        Some("/")
    );
}

#[test]
fn endpoints_include_gated_pods_and_exclude_terminating_ones() {
    let snapshot = features();
    let d = translate(&snapshot, "shop").unwrap();
    let b = shop_backend(&d);
    let ips: Vec<(&str, &str)> = b
        .negs
        .iter()
        .flat_map(|n| {
            n.endpoints
                .iter()
                .map(move |e| (n.zone.as_str(), e.ip_address.as_str()))
        })
        .collect();
    // 10.1.0.2 waits only for the NEG readiness gate; 10.1.0.3's containers are not ready;
    // 10.1.0.4 is terminating.
    assert_eq!(
        ips,
        [("us-central1-a", "10.1.0.1"), ("us-central1-b", "10.1.0.2")]
    );
    assert!(b
        .negs
        .iter()
        .all(|n| n.endpoints.iter().all(|e| e.port == 8080)));
}

#[test]
fn unknown_app_protocol_and_missing_backend_config_are_errors() {
    let mut snapshot = features();
    let api = snapshot
        .services
        .get_mut(&ObjectKey::new("default", "secure-api"))
        .map(Arc::make_mut)
        .unwrap();
    api.metadata.annotations.as_mut().unwrap().insert(
        "cloud.google.com/app-protocols".into(),
        r#"{"https":"GRPC"}"#.into(),
    );
    let err = translate(&snapshot, "https-only").unwrap_err();
    assert!(
        matches!(&err, TranslateError::InvalidAnnotation { annotation, .. } if annotation == "cloud.google.com/app-protocols"),
        "{err}"
    );

    let mut snapshot = features();
    snapshot.backend_configs.clear();
    let err = translate(&snapshot, "shop").unwrap_err();
    assert!(
        matches!(&err, TranslateError::BackendConfigNotFound { backend_config, .. } if backend_config == "default/shop-bc"),
        "{err}"
    );
}

#[test]
fn iap_credentials_come_from_the_secret() {
    let mut snapshot = features();
    let bc = snapshot
        .backend_configs
        .get_mut(&ObjectKey::new("default", "shop-bc"))
        .map(Arc::make_mut)
        .unwrap();
    bc.spec.iap = Some(crate::crd::backend_config::IapConfig {
        enabled: true,
        oauthclient_credentials: Some(crate::crd::backend_config::OAuthClientCredentials {
            secret_name: "oauth".into(),
            ..Default::default()
        }),
    });
    let err = translate(&snapshot, "shop").unwrap_err();
    assert!(
        matches!(&err, TranslateError::BackendConfigSecret { reason, .. } if reason == "does not exist"),
        "{err}"
    );
    snapshot.insert(
        serde_json::from_value::<k8s_openapi::api::core::v1::Secret>(serde_json::json!({
            "metadata": {"name": "oauth", "namespace": "default"},
            "stringData": {"client_id": "id-1", "client_secret": "s3cr3t"}
        }))
        .unwrap(),
    );
    let d = translate(&snapshot, "shop").unwrap();
    let iap = shop_backend(&d).backend_service.iap.as_ref().unwrap();
    assert_eq!(iap.oauth_2_client_id.as_deref(), Some("id-1"));
    assert_eq!(iap.oauth_2_client_secret.as_deref(), Some("s3cr3t"));
    assert!(
        !d.to_json().to_string().contains("s3cr3t"),
        "to_json must redact the secret"
    );
}

#[test]
fn a_shared_backend_is_the_same_whichever_ingress_refers_to_it() {
    let mut snapshot = features();
    snapshot.insert(
        serde_json::from_value::<k8s_openapi::api::networking::v1::Ingress>(serde_json::json!({
            "metadata": {"name": "direct", "namespace": "kube-system"},
            "spec": {"defaultBackend": {"service": {"name": "default-http-backend", "port": {"name": "http"}}}}
        }))
        .unwrap(),
    );
    let direct = translate_ingress(
        &snapshot,
        &snapshot.ingresses[&ObjectKey::new("kube-system", "direct")],
        &config(),
    )
    .unwrap();
    let via_default = translate(&snapshot, "shop").unwrap();
    let name = namer::backend(
        namer::Scheme::Gke,
        &config().cluster_uid,
        "kube-system",
        "default-http-backend",
        80,
    );
    assert_eq!(direct.backends[&name], via_default.backends[&name]);
}

#[test]
fn invalid_certificate_and_address_names_are_never_sent() {
    for (annotation, value) in [
        (
            "ingress.gcp.kubernetes.io/pre-shared-cert",
            "good-cert,Bad_Cert",
        ),
        ("kubernetes.io/ingress.global-static-ip-name", "my ip"),
    ] {
        let mut snapshot = features();
        let ing = snapshot
            .ingresses
            .get_mut(&ObjectKey::new("default", "shop"))
            .map(Arc::make_mut)
            .unwrap();
        ing.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(annotation.into(), value.into());
        let err = translate(&snapshot, "shop").unwrap_err();
        assert!(
            matches!(&err, TranslateError::InvalidAnnotation { annotation: a, .. } if a == annotation),
            "{err}"
        );
    }
}

/// `networking.gke.io/capacity-scaler` takes 0 to 1 and `networking.gke.io/max-rate-per-endpoint`
/// any non-negative rate: a value in range reaches every backend of the backend service, a value
/// outside is an error naming the annotation (GKE refuses it the same way).
#[test]
fn capacity_scaler_and_max_rate_per_endpoint_are_range_checked() {
    const SCALER: &str = "networking.gke.io/capacity-scaler";
    const MAX_RATE: &str = "networking.gke.io/max-rate-per-endpoint";
    let with = |key: &str, value: &str| {
        let mut snapshot = features();
        let shop = snapshot
            .services
            .get_mut(&ObjectKey::new("default", "shop"))
            .map(Arc::make_mut)
            .unwrap();
        let annotations = shop.metadata.annotations.as_mut().unwrap();
        annotations.insert(key.into(), value.into());
        translate(&snapshot, "shop")
    };
    for scaler in ["0", "0.25", "1"] {
        let desired = with(SCALER, scaler).unwrap();
        let backends = &shop_backend(&desired).backend_service.backends;
        assert!(!backends.is_empty());
        for b in backends {
            assert_eq!(b.capacity_scaler, Some(scaler.parse().unwrap()), "{b:?}");
            assert_eq!(b.max_rate_per_endpoint, Some(50.0), "{b:?}");
        }
    }
    for (key, value) in [
        (SCALER, "1.5"),
        (SCALER, "-0.1"),
        (MAX_RATE, "-1"),
        (MAX_RATE, "fast"),
    ] {
        let err = with(key, value).unwrap_err();
        assert!(
            matches!(&err, TranslateError::InvalidAnnotation { annotation, .. } if annotation == key),
            "{key}: {value}: {err}"
        );
    }
}

/// `spec.cdn` as GKE builds the CDN policy (ingress-gce `pkg/backends/features/cdn.go`): the
/// cache mode defaults to CACHE_ALL_STATIC; client and default TTLs (default 3600 s) only outside
/// USE_ORIGIN_HEADERS; the max TTL (default 86400 s) only under CACHE_ALL_STATIC; the rest copied
/// as given. `enabled: false` means no CDN and no policy.
#[test]
fn cdn_policy_follows_the_cache_mode_and_gke_defaults() {
    let with_cdn = |cdn: serde_json::Value| {
        let mut snapshot = features();
        let bc = snapshot
            .backend_configs
            .get_mut(&ObjectKey::new("default", "shop-bc"))
            .map(Arc::make_mut)
            .unwrap();
        bc.spec.cdn = Some(serde_json::from_value(cdn).unwrap());
        let desired = translate(&snapshot, "shop").unwrap();
        let bs = shop_backend(&desired).backend_service.clone();
        (bs.enable_cdn, bs.cdn_policy)
    };
    let ttls = |p: &google_cloud_compute_v1::model::BackendServiceCdnPolicy| {
        (
            p.cache_mode
                .as_ref()
                .and_then(|m| m.name())
                .map(str::to_owned),
            p.client_ttl,
            p.default_ttl,
            p.max_ttl,
            p.serve_while_stale,
        )
    };
    let (enabled, policy) = with_cdn(serde_json::json!({"enabled": true}));
    assert_eq!(enabled, Some(true));
    assert_eq!(
        ttls(&policy.unwrap()),
        (
            Some("CACHE_ALL_STATIC".into()),
            Some(3600),
            Some(3600),
            Some(86400),
            Some(86400)
        )
    );
    let (_, policy) = with_cdn(serde_json::json!({
        "enabled": true, "cacheMode": "USE_ORIGIN_HEADERS", "clientTtl": 60, "maxTtl": 600,
    }));
    assert_eq!(
        ttls(&policy.unwrap()),
        (
            Some("USE_ORIGIN_HEADERS".into()),
            None,
            None,
            None,
            Some(86400)
        )
    );
    let (_, policy) = with_cdn(serde_json::json!({
        "enabled": true, "cacheMode": "FORCE_CACHE_ALL", "clientTtl": 60, "defaultTtl": 120,
        "maxTtl": 600, "serveWhileStale": 0, "negativeCaching": true,
        "negativeCachingPolicy": [{"code": 404, "ttl": 30}], "requestCoalescing": false,
        "signedUrlCacheMaxAgeSec": 900, "bypassCacheOnRequestHeaders": [{"headerName": "X-Fresh"}],
        "cachePolicy": {"includeHost": true, "includeQueryString": true,
                        "queryStringWhitelist": ["page"]},
    }));
    let policy = policy.unwrap();
    assert_eq!(
        ttls(&policy),
        (
            Some("FORCE_CACHE_ALL".into()),
            Some(60),
            Some(120),
            None,
            Some(0)
        )
    );
    assert_eq!(policy.negative_caching, Some(true));
    let negative: Vec<_> = policy
        .negative_caching_policy
        .iter()
        .map(|n| (n.code, n.ttl))
        .collect();
    assert_eq!(negative, [(Some(404), Some(30))]);
    assert_eq!(policy.request_coalescing, Some(false));
    assert_eq!(policy.signed_url_cache_max_age_sec, Some(900));
    let bypass: Vec<_> = policy
        .bypass_cache_on_request_headers
        .iter()
        .map(|h| h.header_name.clone())
        .collect();
    assert_eq!(bypass, [Some("X-Fresh".to_owned())]);
    let key = policy.cache_key_policy.unwrap();
    assert_eq!(
        (
            key.include_host,
            key.include_protocol,
            key.include_query_string
        ),
        (Some(true), Some(false), Some(true))
    );
    assert_eq!(key.query_string_whitelist, ["page"]);
    assert!(key.query_string_blacklist.is_empty());

    let (enabled, policy) = with_cdn(serde_json::json!({"enabled": false, "clientTtl": 60}));
    assert_eq!((enabled, policy), (Some(false), None));
}
