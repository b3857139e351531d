//! Unit tests of the internal class (`regional`): which Ingresses are internal, the regional
//! shape, NEGs shared with the external translation, and refused features.

use super::regional::{
    class_of, is_internal, is_regional, RegionalClass, EXTERNAL_MANAGED, INTERNAL_MANAGED,
};
use super::test_support::{config, snapshot_from_yaml};
use super::*;

const OBJECTS: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    cloud.google.com/backend-config: '{"default": "bc"}'
spec:
  type: ClusterIP
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {name: bc}
spec:
  timeoutSec: 7
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ing
  annotations: {kubernetes.io/ingress.class: CLASS}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
"#;

fn translate_with(yaml: &str) -> (ClusterSnapshot, Result<DesiredIngress, TranslateError>) {
    let snapshot = snapshot_from_yaml(yaml);
    let ingress = snapshot.ingresses[&ObjectKey::new("default", "ing")].clone();
    let result = translate_ingress(&snapshot, &ingress, &config());
    (snapshot, result)
}

fn translate_class(class: &str) -> DesiredIngress {
    translate_with(&OBJECTS.replace("CLASS", class)).1.unwrap()
}

#[test]
fn the_internal_class_gives_regional_internal_managed_resources() {
    let d = translate_class("gce-internal");
    assert_eq!(d.region.as_deref(), Some("us-central1"));
    let regional = "projects/my-project/regions/us-central1/";
    let backend = d.backends.values().next().unwrap();
    let bs = &backend.backend_service;
    assert_eq!(
        bs.load_balancing_scheme.as_ref().and_then(|s| s.name()),
        Some(INTERNAL_MANAGED)
    );
    assert_eq!(bs.timeout_sec, Some(7), "BackendConfig features carry over");
    assert!(bs.health_checks[0].starts_with(&format!("{regional}healthChecks/")));
    let um = d.frontend.url_map.as_ref().unwrap();
    assert!(um
        .default_service
        .as_deref()
        .unwrap()
        .starts_with(&format!("{regional}backendServices/")));
    let tp = d.frontend.target_http_proxy.as_ref().unwrap();
    assert!(tp
        .url_map
        .as_deref()
        .unwrap()
        .starts_with(&format!("{regional}urlMaps/")));
    let fr = d.frontend.http_forwarding_rule.as_ref().unwrap();
    assert_eq!(
        fr.load_balancing_scheme.as_ref().and_then(|s| s.name()),
        Some(INTERNAL_MANAGED)
    );
    assert!(fr
        .target
        .as_deref()
        .unwrap()
        .starts_with(&format!("{regional}targetHttpProxies/")));
    assert_eq!(
        fr.network.as_deref(),
        Some("projects/my-project/global/networks/default")
    );
    assert!(!d.to_json().to_string().contains("/global/backendServices/"));

    // The external class: global, and the very same NEGs (one per Service port and zone).
    let e = translate_class("gce");
    assert_eq!(e.region, None);
    let negs = |d: &DesiredIngress| -> Vec<(String, Option<String>)> {
        d.backends
            .values()
            .flat_map(|b| b.negs.iter().map(|n| (n.zone.clone(), n.neg.name.clone())))
            .collect()
    };
    assert_eq!(negs(&d), negs(&e));
    assert_eq!(
        d.backends.keys().collect::<Vec<_>>(),
        e.backends.keys().collect::<Vec<_>>()
    );
}

#[test]
fn an_ingress_class_named_for_the_internal_class_selects_it() {
    let yaml = OBJECTS.replace(
        "  annotations: {kubernetes.io/ingress.class: CLASS}\nspec:\n",
        "spec:\n  ingressClassName: gce-internal\n",
    ) + r#"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: gce-internal}
spec: {controller: k8s.io/ingress-gce}
"#;
    let (snapshot, d) = translate_with(&yaml);
    let ingress = &snapshot.ingresses[&ObjectKey::new("default", "ing")];
    assert!(owns_ingress(&snapshot, ingress, &config()));
    assert!(is_internal(&snapshot, ingress, &config()));
    assert_eq!(d.unwrap().region.as_deref(), Some("us-central1"));
    // Beside GKE's controller the operator's internal class is `gclb-internal`; GKE keeps
    // `gce-internal`.
    let coexist = config().with_mode(Mode::Coexist);
    let theirs = snapshot_from_yaml(&OBJECTS.replace("CLASS", "gce-internal"));
    let ingress = &theirs.ingresses[&ObjectKey::new("default", "ing")];
    assert!(!owns_ingress(&theirs, ingress, &coexist));
    let ours = snapshot_from_yaml(&OBJECTS.replace("CLASS", "gclb-internal"));
    let ingress = &ours.ingresses[&ObjectKey::new("default", "ing")];
    assert!(owns_ingress(&ours, ingress, &coexist) && is_internal(&ours, ingress, &coexist));
}

#[test]
fn beside_gkes_controller_the_regional_external_class_is_gclb_regional_external() {
    let coexist = config().with_mode(Mode::Coexist);
    let theirs = snapshot_from_yaml(&OBJECTS.replace("CLASS", "gce-regional-external"));
    let ingress = &theirs.ingresses[&ObjectKey::new("default", "ing")];
    assert!(!owns_ingress(&theirs, ingress, &coexist));
    let ours = snapshot_from_yaml(&OBJECTS.replace("CLASS", "gclb-regional-external"));
    let ingress = &ours.ingresses[&ObjectKey::new("default", "ing")];
    assert!(owns_ingress(&ours, ingress, &coexist));
    let d = translate_ingress(&ours, ingress, &coexist).unwrap();
    assert_eq!(class_of(&d), Some(RegionalClass::External));
}

#[test]
fn features_the_internal_load_balancer_lacks_are_refused_by_name() {
    let cases = [
        ("timeoutSec: 7", "timeoutSec: 7\n  cdn: {enabled: true}", "Cloud CDN"),
        (
            "timeoutSec: 7",
            "timeoutSec: 7\n  securityPolicy: {name: armor}",
            "Cloud Armor security policy",
        ),
        (
            "annotations: {kubernetes.io/ingress.class: CLASS}",
            "annotations: {kubernetes.io/ingress.class: CLASS, kubernetes.io/ingress.global-static-ip-name: ip}",
            "a global static IP",
        ),
    ];
    for (from, to, feature) in cases {
        let yaml = OBJECTS.replace(from, to);
        for class in ["gce-internal", "gce-regional-external"] {
            let err = translate_with(&yaml.replace("CLASS", class)).1.unwrap_err();
            assert!(
                matches!(&err, TranslateError::UnsupportedOnRegional { feature: f, class: c, .. } if f.contains(feature) && c == class),
                "{class} {feature}: {err}"
            );
        }
        // The external class builds the same objects.
        assert!(
            translate_with(&yaml.replace("CLASS", "gce")).1.is_ok(),
            "{feature}"
        );
    }
}

#[test]
fn without_a_region_the_internal_class_says_how_to_give_one() {
    let snapshot = snapshot_from_yaml(&OBJECTS.replace("CLASS", "gce-internal"));
    let ingress = &snapshot.ingresses[&ObjectKey::new("default", "ing")];
    let mut c = config();
    c.zones.clear();
    let err = translate_ingress(&snapshot, ingress, &c).unwrap_err();
    assert!(err.to_string().contains("--region"), "{err}");
    c.region = Some("europe-west1".into());
    let d = translate_ingress(&snapshot, ingress, &c).unwrap();
    assert_eq!(d.region.as_deref(), Some("europe-west1"));
}

#[test]
fn the_regional_external_class_gives_regional_external_managed_resources() {
    let d = translate_class("gce-regional-external");
    assert_eq!(class_of(&d), Some(RegionalClass::External));
    assert_eq!(d.region.as_deref(), Some("us-central1"));
    let bs = &d.backends.values().next().unwrap().backend_service;
    assert_eq!(
        bs.load_balancing_scheme.as_ref().and_then(|s| s.name()),
        Some(EXTERNAL_MANAGED)
    );
    assert_eq!(bs.timeout_sec, Some(7), "BackendConfig features carry over");
    let fr = d.frontend.http_forwarding_rule.as_ref().unwrap();
    assert_eq!(
        fr.load_balancing_scheme.as_ref().and_then(|s| s.name()),
        Some(EXTERNAL_MANAGED)
    );
    assert_eq!(
        fr.network_tier.as_ref().and_then(|t| t.name()),
        Some("PREMIUM")
    );
    assert_eq!(
        fr.network.as_deref(),
        Some("projects/my-project/global/networks/default")
    );
    assert_eq!(fr.subnetwork, None);
    assert!(fr
        .target
        .as_deref()
        .unwrap()
        .starts_with("projects/my-project/regions/us-central1/targetHttpProxies/"));
    assert_eq!(
        class_of(&translate_class("gce-internal")),
        Some(RegionalClass::Internal)
    );
    assert_eq!(class_of(&translate_class("gce")), None);
}

#[test]
fn the_regional_static_ip_name_is_the_frontends_address_name() {
    let yaml = OBJECTS.replace(
        "annotations: {kubernetes.io/ingress.class: CLASS}",
        "annotations: {kubernetes.io/ingress.class: CLASS, kubernetes.io/ingress.regional-static-ip-name: vip}",
    );
    for class in ["gce-internal", "gce-regional-external"] {
        let d = translate_with(&yaml.replace("CLASS", class)).1.unwrap();
        assert_eq!(d.frontend.static_ip_name.as_deref(), Some("vip"), "{class}");
    }
    let bad = yaml.replace(
        "regional-static-ip-name: vip",
        "regional-static-ip-name: Not_Valid",
    );
    let err = translate_with(&bad.replace("CLASS", "gce-internal"))
        .1
        .unwrap_err();
    assert!(err.to_string().contains("regional-static-ip-name"), "{err}");
}

#[test]
fn http_and_https_on_one_ephemeral_regional_address_are_refused() {
    let tls = OBJECTS.replace(
        "spec:\n  defaultBackend",
        "spec:\n  tls: [{secretName: tls}]\n  defaultBackend",
    ) + r#"
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
stringData:
  tls.crt: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
  tls.key: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
"#;
    for class in ["gce-internal", "gce-regional-external"] {
        let err = translate_with(&tls.replace("CLASS", class)).1.unwrap_err();
        assert!(
            err.to_string()
                .contains("HTTP and HTTPS on one ephemeral address")
                && err.to_string().contains("regional-static-ip-name"),
            "{class}: {err}"
        );
        // Named address, or HTTP off: built.
        let named = tls.replace(
            "annotations: {kubernetes.io/ingress.class: CLASS}",
            "annotations: {kubernetes.io/ingress.class: CLASS, kubernetes.io/ingress.regional-static-ip-name: vip}",
        );
        let d = translate_with(&named.replace("CLASS", class)).1.unwrap();
        assert!(
            d.frontend.https_forwarding_rule.is_some() && d.frontend.http_forwarding_rule.is_some()
        );
    }
}

#[test]
fn internal_and_regional_external_ingresses_are_regional_and_gce_ones_are_not() {
    for (class, regional) in [
        ("gce-internal", true),
        ("gce-regional-external", true),
        ("gce", false),
    ] {
        let snapshot = snapshot_from_yaml(&OBJECTS.replace("CLASS", class));
        let ingress = &snapshot.ingresses[&ObjectKey::new("default", "ing")];
        assert_eq!(
            is_regional(&snapshot, ingress, &config()),
            regional,
            "class {class}"
        );
        assert_eq!(
            is_internal(&snapshot, ingress, &config()),
            class == "gce-internal",
            "class {class}"
        );
    }
}

/// A class-less Ingress takes the class of the default IngressClass, when that class is this
/// operator's (its controller) and marked default with `"true"`; any other IngressClass named
/// like a regional class does not make the Ingress regional.
#[test]
fn a_default_ingress_class_of_ours_makes_class_less_ingresses_regional() {
    let class_less = OBJECTS.replace("  annotations: {kubernetes.io/ingress.class: CLASS}\n", "");
    let with_class = |default: &str, controller: &str| {
        format!(
            "{class_less}---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: gce-internal\n  annotations: {{ingressclass.kubernetes.io/is-default-class: \"{default}\"}}\nspec: {{controller: {controller}}}\n"
        )
    };
    let ours = config().mode.controller().to_owned();
    for (default, controller, internal) in [
        ("true", ours.as_str(), true),
        ("false", ours.as_str(), false),
        ("true", "k8s.io/ingress-nginx", false),
    ] {
        let snapshot = snapshot_from_yaml(&with_class(default, controller));
        let ingress = &snapshot.ingresses[&ObjectKey::new("default", "ing")];
        assert_eq!(
            is_internal(&snapshot, ingress, &config()),
            internal,
            "default {default}, controller {controller}"
        );
    }
}

/// Identity-Aware Proxy is refused on the regional external class only (the internal one
/// supports it); an SSL policy on either regional class.
#[test]
fn iap_is_refused_on_the_regional_external_class_and_ssl_policies_on_both() {
    let iap = OBJECTS.replace(
        "  timeoutSec: 7\n",
        "  timeoutSec: 7\n  iap: {enabled: true, oauthclientCredentials: {secretName: oauth}}\n",
    ) + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: oauth}\nstringData: {client_id: id, client_secret: secret}\n";
    let err = translate_with(&iap.replace("CLASS", "gce-regional-external"))
        .1
        .unwrap_err();
    assert!(err.to_string().contains("Identity-Aware Proxy"), "{err}");
    assert!(translate_with(&iap.replace("CLASS", "gce-internal"))
        .1
        .is_ok());
    let ssl_policy = OBJECTS.replace(
        "  annotations: {kubernetes.io/ingress.class: CLASS}",
        "  annotations: {kubernetes.io/ingress.class: CLASS, networking.gke.io/v1beta1.FrontendConfig: fc, ingress.gcp.kubernetes.io/pre-shared-cert: cert, kubernetes.io/ingress.allow-http: \"false\"}",
    ) + "---\napiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {name: fc}\nspec: {sslPolicy: strict}\n";
    for class in ["gce-internal", "gce-regional-external"] {
        let err = translate_with(&ssl_policy.replace("CLASS", class))
            .1
            .unwrap_err();
        assert!(err.to_string().contains("an SSL policy"), "{class}: {err}");
    }
    assert!(translate_with(&ssl_policy.replace("CLASS", "gce"))
        .1
        .is_ok());
}

/// FrontendConfig `redirectToHttps` on the regional external class: Google's regional external
/// Application Load Balancer redirects HTTP to HTTPS with a regional URL map whose
/// `defaultUrlRedirect` has `httpsRedirect`, behind the regional target HTTP proxy whose
/// forwarding rule (port 80) shares the HTTPS rule's reserved address ("Set up an HTTP-to-HTTPS
/// redirect for regional external Application Load Balancers"). The internal class still
/// refuses it.
/// Google documents the redirect for both regional load balancers ("Set up an HTTP-to-HTTPS
/// redirect for regional external Application Load Balancers"; "Set up HTTP-to-HTTPS redirect
/// for regional internal Application Load Balancers"): both classes build it.
#[test]
fn both_regional_classes_build_the_https_redirect_in_their_region() {
    let yaml = OBJECTS
        .replace(
            "annotations: {kubernetes.io/ingress.class: CLASS}",
            "annotations: {kubernetes.io/ingress.class: CLASS, kubernetes.io/ingress.regional-static-ip-name: vip, networking.gke.io/v1beta1.FrontendConfig: fc}",
        )
        .replace(
            "spec:\n  defaultBackend",
            "spec:\n  tls: [{secretName: tls}]\n  defaultBackend",
        )
        + r#"
---
apiVersion: networking.gke.io/v1beta1
kind: FrontendConfig
metadata: {name: fc}
spec:
  redirectToHttps: {enabled: true, responseCodeName: PERMANENT_REDIRECT}
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
stringData:
  tls.crt: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
  tls.key: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
"#;
    for (class, scheme) in [
        ("gce-regional-external", EXTERNAL_MANAGED),
        ("gce-internal", INTERNAL_MANAGED),
    ] {
        let d = translate_with(&yaml.replace("CLASS", class)).1.unwrap();
        assert_redirect_in_region(&d, scheme);
    }
}

fn assert_redirect_in_region(d: &DesiredIngress, scheme: &str) {
    let f = &d.frontend;
    let rm = f.redirect_url_map.as_ref().expect("a redirect URL map");
    let redirect = rm.default_url_redirect.as_ref().unwrap();
    assert_eq!(redirect.https_redirect, Some(true));
    assert_eq!(
        redirect
            .redirect_response_code
            .as_ref()
            .and_then(|c| c.name()),
        Some("PERMANENT_REDIRECT")
    );
    assert!(
        rm.default_service.is_none(),
        "a redirect map has no service"
    );
    let regional = "projects/my-project/regions/us-central1/";
    assert_eq!(
        f.target_http_proxy.as_ref().unwrap().url_map.as_deref(),
        Some(format!("{regional}urlMaps/{}", rm.name.as_deref().unwrap()).as_str()),
        "the regional HTTP proxy serves the redirect"
    );
    assert!(f
        .target_https_proxy
        .as_ref()
        .unwrap()
        .url_map
        .as_deref()
        .unwrap()
        .starts_with(regional));
    let http = f.http_forwarding_rule.as_ref().unwrap();
    assert_eq!(http.port_range.as_deref(), Some("80-80"));
    assert_eq!(
        http.load_balancing_scheme.as_ref().and_then(|s| s.name()),
        Some(scheme)
    );
    assert_eq!(
        f.static_ip_name.as_deref(),
        Some("vip"),
        "one address for both rules"
    );
}

/// A backend service has one `loadBalancingScheme`: one Service port behind an internal and a
/// regional external Ingress in one region gets one backend service (and health check) per
/// scheme, named as GKE names them (`RXLBBackendName` for the regional external class), on the
/// same NEGs.
#[test]
fn one_service_port_behind_both_regional_classes_gets_a_backend_service_per_scheme() {
    let internal = translate_class("gce-internal");
    let external = translate_class("gce-regional-external");
    let c = config();
    let neg = c.backend_name("default", "web", 80);
    let rxlb = c.regional_external_backend_name("default", "web", 80);
    assert_ne!(neg, rxlb);
    assert!(rxlb.contains("-e-default-web-80-"), "{rxlb}");
    let regional = "projects/my-project/regions/us-central1/";
    for (d, name, scheme) in [
        (&internal, &neg, INTERNAL_MANAGED),
        (&external, &rxlb, EXTERNAL_MANAGED),
    ] {
        assert_eq!(d.backends.keys().collect::<Vec<_>>(), vec![name]);
        let b = &d.backends[name];
        let bs = &b.backend_service;
        assert_eq!(bs.name.as_deref(), Some(name.as_str()));
        assert_eq!(b.health_check.name.as_deref(), Some(name.as_str()));
        assert_eq!(
            bs.health_checks,
            vec![format!("{regional}healthChecks/{name}")]
        );
        assert_eq!(
            bs.load_balancing_scheme.as_ref().and_then(|s| s.name()),
            Some(scheme)
        );
        assert_eq!(
            d.frontend.url_map.as_ref().unwrap().default_service,
            Some(format!("{regional}backendServices/{name}"))
        );
        // The NEGs keep the shared name, and the backend service still points at them.
        assert!(b
            .negs
            .iter()
            .all(|n| n.neg.name.as_deref() == Some(neg.as_str())));
        assert!(bs.backends.iter().all(|x| x
            .group
            .as_deref()
            .is_some_and(|g| g.ends_with(&format!("/networkEndpointGroups/{neg}")))));
        assert!(!bs.backends.is_empty());
    }
    let json = external.to_json().to_string();
    assert!(!json.contains(&format!("backendServices/{neg}")), "{json}");
    assert!(!json.contains(&format!("healthChecks/{neg}")), "{json}");
    // Deterministic: the same snapshot gives the same names.
    assert_eq!(translate_class("gce-regional-external"), external);
}
