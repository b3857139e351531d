//! Cases ported from ingress-gce v1.23 `pkg/utils/namer/{frontendnamer,namer,utils}_test.go`
//! (expected strings copied from there; prefix `k8s`), and names glbc v1.23 built for the demo
//! Ingress on the local stack (docs/gke-controller.md).

use super::*;

const LONG: &str = "01234567890123456789012345678901234567890123456789";

/// `TestV2IngressFrontendNamer`: kube-system UID `kubesystem-uid1`, secret hash of `test123`.
#[test]
fn gke_v2_frontend_namer_cases() {
    let cases: [(&str, &str, &str, &str); 8] = [
        (
            "namespace",
            "name",
            "7kpbhpki-namespace-name-uhmwf5xi",
            "fvix6gj3ge1emsdj",
        ),
        (
            &LONG[..23],
            &LONG[..24],
            "7kpbhpki-012345678901234567-012345678901234567-hg17g9tx",
            "ktiggo5yie4uh72b",
        ),
        (
            &LONG[..24],
            &LONG[..24],
            "7kpbhpki-012345678901234567-012345678901234567-o0dahbae",
            "kk38dnbt6k8zrg76",
        ),
        (
            &LONG[..24],
            &LONG[..25],
            "7kpbhpki-012345678901234567-012345678901234567-sxo4pxda",
            "n2b7ixc007o1ddma",
        ),
        (
            LONG,
            "0",
            "7kpbhpki-012345678901234567890123456789012345--v8ajgbg3",
            "m6a592dazogk94ra",
        ),
        (
            "0",
            LONG,
            "7kpbhpki-0-01234567890123456789012345678901234-fyhus2f6",
            "a33x986k79kbu0me",
        ),
        (
            LONG,
            LONG,
            "7kpbhpki-012345678901234567-012345678901234567-69z4wrm0",
            "5pu4c55s4c47rr9e",
        ),
        (
            "namespace",
            "test.name",
            "7kpbhpki-namespace-test.name-j4wkfxzl",
            "2w95dxzgz98fxgw5",
        ),
    ];
    let secret_hash = sha256_hex(b"test123", 16);
    for (ns, name, lb, lb_hash) in cases {
        let uid8 = cluster_uid8("kubesystem-uid1");
        let n = FrontendNamer::new(Scheme::Gke, &uid8, "kubesystem-uid1", ns, name);
        assert_eq!(n.version(), FrontendVersion::V2);
        assert_eq!(n.lb_name(), lb);
        assert_eq!(n.target_http_proxy(), format!("k8s2-tp-{lb}"));
        assert_eq!(n.target_https_proxy(), format!("k8s2-ts-{lb}"));
        assert_eq!(n.http_forwarding_rule(), format!("k8s2-fr-{lb}"));
        assert_eq!(n.https_forwarding_rule(), format!("k8s2-fs-{lb}"));
        assert_eq!(n.url_map(), format!("k8s2-um-{lb}"));
        assert_eq!(n.redirect_url_map(), format!("k8s2-rm-{lb}"));
        assert_eq!(
            n.ssl_certificate(b"test123"),
            format!("k8s2-cr-7kpbhpki-{lb_hash}-{secret_hash}")
        );
    }
}

/// `TestV1IngressFrontendNamer`: cluster UID `uid1`; names over 62 characters are cut to 62
/// and end in `0`.
#[test]
fn gke_v1_frontend_namer_cases() {
    #[rustfmt::skip]
    let cases: [(&str, &str, &str, [&str; 6]); 7] = [
        ("namespace", "name", "namespace-name--uid1", [
            "k8s-tp-namespace-name--uid1", "k8s-tps-namespace-name--uid1",
            "k8s-ssl-9a60a5272f6eee97-{}--uid1", "k8s-fw-namespace-name--uid1",
            "k8s-fws-namespace-name--uid1", "k8s-um-namespace-name--uid1"]),
        (&LONG[..23], &LONG[..24], "01234567890123456789012-012345678901234567890123--uid1", [
            "k8s-tp-01234567890123456789012-012345678901234567890123--uid1",
            "k8s-tps-01234567890123456789012-012345678901234567890123--uid1",
            "k8s-ssl-4169c63684f5e4cd-{}--uid1",
            "k8s-fw-01234567890123456789012-012345678901234567890123--uid1",
            "k8s-fws-01234567890123456789012-012345678901234567890123--uid1",
            "k8s-um-01234567890123456789012-012345678901234567890123--uid1"]),
        (&LONG[..24], &LONG[..24], "012345678901234567890123-012345678901234567890123--uid1", [
            "k8s-tp-012345678901234567890123-012345678901234567890123--uid1",
            "k8s-tps-012345678901234567890123-012345678901234567890123--uid0",
            "k8s-ssl-c7616cb0f76c2df2-{}--uid1",
            "k8s-fw-012345678901234567890123-012345678901234567890123--uid1",
            "k8s-fws-012345678901234567890123-012345678901234567890123--uid0",
            "k8s-um-012345678901234567890123-012345678901234567890123--uid1"]),
        (&LONG[..24], &LONG[..25], "012345678901234567890123-0123456789012345678901234--uid1", [
            "k8s-tp-012345678901234567890123-0123456789012345678901234--uid0",
            "k8s-tps-012345678901234567890123-0123456789012345678901234--ui0",
            "k8s-ssl-537beba3a874a029-{}--uid1",
            "k8s-fw-012345678901234567890123-0123456789012345678901234--uid0",
            "k8s-fws-012345678901234567890123-0123456789012345678901234--ui0",
            "k8s-um-012345678901234567890123-0123456789012345678901234--uid0"]),
        (LONG, "0", "01234567890123456789012345678901234567890123456789-0--uid1", [
            "k8s-tp-01234567890123456789012345678901234567890123456789-0--u0",
            "k8s-tps-01234567890123456789012345678901234567890123456789-0--0",
            "k8s-ssl-92bdb5e4d378b3ce-{}--uid1",
            "k8s-fw-01234567890123456789012345678901234567890123456789-0--u0",
            "k8s-fws-01234567890123456789012345678901234567890123456789-0--0",
            "k8s-um-01234567890123456789012345678901234567890123456789-0--u0"]),
        ("0", LONG, "0-01234567890123456789012345678901234567890123456789--uid1", [
            "k8s-tp-0-01234567890123456789012345678901234567890123456789--u0",
            "k8s-tps-0-01234567890123456789012345678901234567890123456789--0",
            "k8s-ssl-8f3d42933afb5d1c-{}--uid1",
            "k8s-fw-0-01234567890123456789012345678901234567890123456789--u0",
            "k8s-fws-0-01234567890123456789012345678901234567890123456789--0",
            "k8s-um-0-01234567890123456789012345678901234567890123456789--u0"]),
        (LONG, LONG, "01234567890123456789012345678901234567890123456789-012345678900", [
            "k8s-tp-01234567890123456789012345678901234567890123456789-01230",
            "k8s-tps-01234567890123456789012345678901234567890123456789-0120",
            "k8s-ssl-a04f7492b36aeb20-{}--uid1",
            "k8s-fw-01234567890123456789012345678901234567890123456789-01230",
            "k8s-fws-01234567890123456789012345678901234567890123456789-0120",
            "k8s-um-01234567890123456789012345678901234567890123456789-01230"]),
    ];
    let secret_hash = sha256_hex(b"test123", 16);
    for (ns, name, lb, [tp, tps, ssl, fw, fws, um]) in cases {
        let n = FrontendNamer::v1("uid1", ns, name);
        assert_eq!(n.version(), FrontendVersion::V1);
        assert_eq!(n.lb_name(), lb);
        assert_eq!(n.target_http_proxy(), tp);
        assert_eq!(n.target_https_proxy(), tps);
        assert_eq!(
            n.ssl_certificate(b"test123"),
            ssl.replace("{}", &secret_hash)
        );
        assert_eq!(n.http_forwarding_rule(), fw);
        assert_eq!(n.https_forwarding_rule(), fws);
        assert_eq!(n.url_map(), um);
    }
    // `TestNamerLoadBalancer` and `TestNamerSSLCertName`: a key, and an empty cluster UID.
    let n = FrontendNamer::v1_key("uid1", "key1");
    assert_eq!(n.lb_name(), "key1--uid1");
    assert_eq!(n.url_map(), "k8s-um-key1--uid1");
    let n = FrontendNamer::v1_key("", "key1");
    assert_eq!(n.lb_name(), "key1");
    assert!(!n.ssl_certificate(b"test123").ends_with("--"));
}

/// `TestNamerNEG` (cluster UID `0123456789abcdef`) and `TestNamerFirewallRule`.
#[test]
fn gke_neg_and_firewall_cases() {
    let uid = "0123456789abcdef";
    for (ns, name, port, want) in [
        (
            "namespace",
            "name",
            80,
            "k8s1-01234567-namespace-name-80-5104b449",
        ),
        (
            &LONG[..10],
            &LONG[..10],
            1234567890,
            "k8s1-01234567-0123456789-0123456789-1234567890-ed141b14",
        ),
        (
            LONG,
            "0",
            0,
            "k8s1-01234567-0123456789012345678901234567890123456-0--72142e04",
        ),
        (
            LONG,
            LONG,
            0,
            "k8s1-01234567-0123456789012345678-0123456789012345678--9129e3d2",
        ),
        (
            LONG,
            &LONG[..40],
            2147483647,
            "k8s1-01234567-0123456789012345678-0123456789012345-214-ed1f2a2f",
        ),
    ] {
        assert_eq!(backend(Scheme::Gke, uid, ns, name, port), want);
    }
    assert_eq!(l7_firewall(Scheme::Gke, "fw1"), "k8s-fw-l7--fw1");
}

/// `TestNamerRXLBBackendName` (cluster UID `0123456789abcdef`): the regional external class's
/// backend services and health checks, `-e-` after the UID, fields cut to 36 characters, the
/// NEG's hash; in the operator's own scheme the same shape with `gclb-`.
#[test]
fn gke_regional_external_backend_cases() {
    let uid = "0123456789abcdef";
    for (ns, name, port, want) in [
        (
            "namespace",
            "name",
            80,
            "k8s1-01234567-e-namespace-name-80-5104b449",
        ),
        (
            &LONG[..10],
            &LONG[..10],
            1234567890,
            "k8s1-01234567-e-0123456789-0123456789-1234567890-ed141b14",
        ),
        (
            LONG,
            "0",
            0,
            "k8s1-01234567-e-01234567890123456789012345678901234-0--72142e04",
        ),
        (
            LONG,
            LONG,
            0,
            "k8s1-01234567-e-012345678901234567-012345678901234567--9129e3d2",
        ),
        (
            LONG,
            &LONG[..40],
            2147483647,
            "k8s1-01234567-e-012345678901234567-012345678901234-214-ed1f2a2f",
        ),
    ] {
        let got = regional_external_backend(Scheme::Gke, uid, ns, name, port);
        assert_eq!(got, want);
        assert!(got.len() <= MAX_NAME_LENGTH && is_valid_name(&got), "{got}");
        assert!(got.starts_with(&backend_prefix(Scheme::Gke, uid)), "{got}");
        assert_ne!(got, backend(Scheme::Gke, uid, ns, name, port));
    }
    assert_eq!(
        regional_external_backend(Scheme::Own, uid, "namespace", "name", 80),
        "gclb-01234567-e-namespace-name-80-5104b449"
    );
}

/// `TestNameBelongsToCluster`, for the v1 frontend names GC looks at.
#[test]
fn gke_v1_names_belong_to_their_cluster() {
    let uid = "0123456789abcdef";
    let short = FrontendNamer::v1_key(uid, "key1");
    // 40 characters: the UID suffix is cut but more than 4 characters of it are left.
    let long = FrontendNamer::v1_key(uid, &"0123456789".repeat(4));
    for n in [&short, &long] {
        for (kind, name) in [
            ("tp", n.target_http_proxy()),
            ("ts", n.target_https_proxy()),
            ("fr", n.http_forwarding_rule()),
            ("fs", n.https_forwarding_rule()),
            ("um", n.url_map()),
            ("cr", n.ssl_certificate(b"test123")),
        ] {
            assert!(is_v1_frontend(kind, &name, uid), "{name}");
            assert!(!is_v1_frontend(kind, &name, "fedcba9876543210"), "{name}");
        }
    }
    // 60 characters: the UID is cut away entirely.
    let cut = FrontendNamer::v1_key(uid, &"0123456789".repeat(6));
    for (kind, name) in [
        ("tp", cut.target_http_proxy()),
        ("ts", cut.target_https_proxy()),
        ("fr", cut.http_forwarding_rule()),
        ("fs", cut.https_forwarding_rule()),
        ("um", cut.url_map()),
    ] {
        assert!(!is_v1_frontend(kind, &name, uid), "{name}");
    }
    for name in [
        "",
        "invalid",
        "not--the-right-uid",
        "k8s2-um-01234567-a-b-c",
    ] {
        assert!(!is_v1_frontend("um", name, uid), "{name}");
    }
    // Cut to 63 characters (the last one `0`): 5 characters of the UID still say the cluster,
    // 4 are too few.
    for (kept, belongs) in [(5, true), (4, false)] {
        let name = format!("k8s-um-{}--{}0", "a".repeat(53 - kept), &uid[..kept]);
        assert_eq!(name.len(), 63);
        assert_eq!(is_v1_frontend("um", &name, uid), belongs, "{name}");
    }
    // Only a name of 63 characters was cut: at 62 a last `0` is part of the UID component.
    let cut = format!("k8s-um-{}--{}0", "a".repeat(46), &uid[..7]);
    assert_eq!(cut.len(), 63);
    assert!(is_v1_frontend("um", &cut, uid), "{cut}");
    let uncut = format!("k8s-um-{}--{}0", "a".repeat(45), &uid[..7]);
    assert_eq!(uncut.len(), 62);
    assert!(!is_v1_frontend("um", &uncut, uid), "{uncut}");
    // A kind's letters only: a URL map is not a target proxy.
    assert!(!is_v1_frontend("tp", &short.url_map(), uid));
    // Only an SSL certificate's UID component is followed by more (`-<hash>`): any other
    // kind's must be the UID whole.
    assert!(!is_v1_frontend("um", &format!("k8s-um-key1--{uid}-x"), uid));
    // No UID (legacy cluster): nothing can be told apart, nothing is claimed.
    assert!(!is_v1_frontend(
        "um",
        &FrontendNamer::v1_key("", "key1").url_map(),
        ""
    ));
}

/// `TestFrontendNamingScheme`: the finalizer says which names an Ingress has.
#[test]
fn frontend_version_follows_the_finalizer() {
    assert_eq!(FrontendVersion::of_finalizers([]), FrontendVersion::V2);
    assert_eq!(
        FrontendVersion::of_finalizers([GKE_FINALIZER_V1]),
        FrontendVersion::V1
    );
    assert_eq!(
        FrontendVersion::of_finalizers([GKE_FINALIZER_V2]),
        FrontendVersion::V2
    );
    assert_eq!(
        FrontendVersion::of_finalizers([GKE_FINALIZER_V1, GKE_FINALIZER_V2]),
        FrontendVersion::V2
    );
    assert_eq!(FrontendVersion::V1.finalizer(), GKE_FINALIZER_V1);
}

/// What glbc v1.23 built for the demo Ingress (ConfigMap uid `adfa97d7ec938d15`).
#[test]
fn names_glbc_built_for_the_demo_ingress() {
    let uid = "adfa97d7ec938d15";
    assert_eq!(
        backend(Scheme::Gke, uid, "default", "my-products", 60000),
        "k8s1-adfa97d7-default-my-products-60000-75994091"
    );
    assert_eq!(
        backend(Scheme::Gke, uid, "default", "my-discounted-products", 80),
        "k8s1-adfa97d7-default-my-discounted-products-80-d54dcc94"
    );
    assert_eq!(
        backend(Scheme::Gke, uid, "kube-system", "default-http-backend", 80),
        "k8s1-adfa97d7-kube-system-default-http-backend-80-eeff6155"
    );
    assert_eq!(l7_firewall(Scheme::Gke, uid), "k8s-fw-l7--adfa97d7ec938d15");
    let v1 = FrontendNamer::v1(uid, "default", "my-ingress");
    assert_eq!(v1.url_map(), "k8s-um-default-my-ingress--adfa97d7ec938d15");
    assert_eq!(
        v1.target_http_proxy(),
        "k8s-tp-default-my-ingress--adfa97d7ec938d15"
    );
    assert_eq!(
        v1.http_forwarding_rule(),
        "k8s-fw-default-my-ingress--adfa97d7ec938d15"
    );
    assert_eq!(
        path_matcher(Scheme::Gke, "your-store.example"),
        "host0b1b94d5c20a958fa3a5726122622313"
    );
    assert_ne!(
        path_matcher(Scheme::Own, "your-store.example"),
        path_matcher(Scheme::Gke, "your-store.example")
    );
}

/// The prefixes garbage collection lists by: `k8s2-<kind>-<uid8>-` in GKE's scheme, and every
/// frontend name of the cluster starts with its kind's.
#[test]
fn frontend_prefixes_name_the_scheme_the_kind_and_the_cluster() {
    assert_eq!(
        frontend_prefix(Scheme::Gke, "um", "b9cddxmo"),
        "k8s2-um-b9cddxmo-"
    );
    assert_ne!(
        frontend_prefix(Scheme::Own, "um", "b9cddxmo"),
        frontend_prefix(Scheme::Gke, "um", "b9cddxmo")
    );
}

/// GKE cuts the firewall rule's name as its legacy namer does (62 characters and a `0`); the
/// operator's own scheme keeps the name whole.
#[test]
fn only_gkes_firewall_name_is_cut_like_its_legacy_names() {
    let uid = "u".repeat(60);
    let gke = l7_firewall(Scheme::Gke, &uid);
    assert_eq!(
        gke,
        format!("k8s-fw-{}", truncate_legacy(&format!("l7--{uid}")))
    );
    assert!(gke.ends_with('0'), "{gke}");
    assert_eq!(
        l7_firewall(Scheme::Own, &uid),
        format!("{}-fw-l7--{uid}", Scheme::Own.firewall())
    );
}

/// `provider-uid` names the firewall rule when set, else `uid` (ingress-gce's namer).
#[test]
fn the_provider_uid_names_the_firewall_rule_unless_it_is_empty() {
    let with = |provider: Option<&str>| {
        crate::translate::test_support::config()
            .with_gke_uid("uid1", provider)
            .l7_firewall_name()
    };
    assert!(
        with(Some("prov1")).ends_with("prov1"),
        "{}",
        with(Some("prov1"))
    );
    assert!(with(Some("")).ends_with("uid1"), "{}", with(Some("")));
    assert!(with(None).ends_with("uid1"));
}

#[test]
fn takeover_names_an_ingress_as_its_gke_finalizer_says_and_coexist_never_v1() {
    use crate::translate::test_support::config;
    use crate::translate::Mode;
    use k8s_openapi::api::networking::v1::Ingress;
    let ingress = |finalizers: &[&str]| {
        let mut i = Ingress::default();
        i.metadata.namespace = Some("default".into());
        i.metadata.name = Some("web".into());
        i.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        i
    };
    let takeover = config();
    let v1 = takeover.ingress_namer(&ingress(&[GKE_FINALIZER_V1]));
    assert_eq!(v1.version(), FrontendVersion::V1);
    assert_eq!(v1.scheme(), Scheme::Gke);
    assert!(
        v1.url_map().starts_with("k8s-um-default-web--"),
        "{}",
        v1.url_map()
    );
    for finalizers in [&[GKE_FINALIZER_V2][..], &[]] {
        let v2 = takeover.ingress_namer(&ingress(finalizers));
        assert_eq!(v2.version(), FrontendVersion::V2, "{finalizers:?}");
    }
    // Beside GKE's controller the operator's own names, whatever finalizer GKE left.
    let coexist = config().with_mode(Mode::Coexist);
    let own = coexist.ingress_namer(&ingress(&[GKE_FINALIZER_V1]));
    assert_eq!(own.scheme(), Scheme::Own);
    assert_eq!(own.version(), FrontendVersion::V2);
}
