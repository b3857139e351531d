//! Worked examples (expected values computed independently from ingress-gce's Go algorithm
//! with a small Python re-implementation) and property tests for the namer.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};

use super::*;

const KUBE_SYSTEM_UID: &str = "5a6b7c8d-0000-4000-8000-123456789abc";

fn frontend(ns: &str, name: &str) -> FrontendNamer {
    FrontendNamer::new(
        Scheme::Gke,
        &cluster_uid8(KUBE_SYSTEM_UID),
        KUBE_SYSTEM_UID,
        ns,
        name,
    )
}

fn is_valid_gce_name(name: &str) -> bool {
    is_valid_name(name)
}

#[test]
fn name_validation_follows_the_compute_rule() {
    for ok in ["a", "k8s-fw-l7--abc", &format!("a{}", "b".repeat(62))] {
        assert!(is_valid_name(ok), "{ok}");
    }
    for bad in [
        "",
        "A",
        "1a",
        "a-",
        "a_b",
        "a.b",
        &format!("a{}", "b".repeat(63)),
    ] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}

#[test]
fn cluster_uid_is_content_hash_of_kube_system_uid() {
    assert_eq!(cluster_uid8(KUBE_SYSTEM_UID), "b9cddxmo");
    assert_eq!(content_hash(KUBE_SYSTEM_UID, 8), "b9cddxmo");
}

#[test]
fn trim_fields_evenly_matches_gke() {
    assert_eq!(
        trim_fields_evenly(36, &["namespace", "name"]),
        ["namespace", "name"]
    );
    assert_eq!(
        trim_fields_evenly(10, &["abcdefgh", "ijklmnop"]),
        ["abcde", "ijklm"]
    );
    let a = "a".repeat(30);
    let b = "b".repeat(5);
    let c = "c".repeat(15);
    assert_eq!(
        trim_fields_evenly(20, &[&a, &b, &c]),
        ["a".repeat(12), "b".repeat(2), "c".repeat(6)]
    );
}

#[test]
fn frontend_names_follow_the_v2_scheme() {
    let n = frontend("default", "my-ingress");
    assert_eq!(n.lb_name(), "b9cddxmo-default-my-ingress-i1vq1kma");
    assert_eq!(n.url_map(), "k8s2-um-b9cddxmo-default-my-ingress-i1vq1kma");
    assert_eq!(
        n.target_http_proxy(),
        "k8s2-tp-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        n.http_forwarding_rule(),
        "k8s2-fr-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        n.https_forwarding_rule(),
        "k8s2-fs-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        n.target_https_proxy(),
        "k8s2-ts-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        n.redirect_url_map(),
        "k8s2-rm-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        n.ssl_certificate(b"CERT"),
        "k8s2-cr-b9cddxmo-f7vaxqebzmsa063y-fc3c8e63b513125a"
    );
    assert!(n
        .ssl_certificate(b"CERT")
        .starts_with(&n.ssl_certificate_prefix()));
}

#[test]
fn long_frontend_names_are_trimmed_to_63() {
    let n = frontend(
        "a-very-long-namespace-name-for-testing",
        "an-even-longer-ingress-name-that-goes-on",
    );
    assert_eq!(
        n.url_map(),
        "k8s2-um-b9cddxmo-a-very-long-namesp-an-even-longer-ing-le7rla28"
    );
    assert_eq!(n.url_map().len(), 63);
}

#[test]
fn backend_names_follow_the_neg_scheme() {
    let uid = cluster_uid8(KUBE_SYSTEM_UID);
    assert_eq!(
        backend(Scheme::Gke, &uid, "default", "my-products", 60000),
        "k8s1-b9cddxmo-default-my-products-60000-beaa5af3"
    );
    let long = backend(
        Scheme::Gke,
        &uid,
        "a-very-long-namespace-name-for-testing",
        "a-service-with-a-really-long-name-too",
        65535,
    );
    assert_eq!(
        long,
        "k8s1-b9cddxmo-a-very-long-namespa-a-service-with-a--65-af71d950"
    );
    assert!(long.starts_with(&backend_prefix(Scheme::Gke, &uid)));
    // The GC prefix: the scheme's backend prefix and the first 8 characters of the UID.
    assert_eq!(backend_prefix(Scheme::Gke, &uid), "k8s1-b9cddxmo-");
    assert_eq!(backend_prefix(Scheme::Own, "0123456789"), "gclb-01234567-");
}

#[test]
fn firewall_and_legacy_names() {
    assert_eq!(l7_firewall(Scheme::Gke, "b9cddxmo"), "k8s-fw-l7--b9cddxmo");
    assert_eq!(l7_firewall(Scheme::Gke, ""), "k8s-fw-l7");
    let long = "x".repeat(70);
    assert_eq!(truncate_legacy(&long), format!("{}0", "x".repeat(62)));
    assert_eq!(truncate_legacy("short"), "short");
}

fn random_label(rng: &mut impl Rng, max: usize) -> String {
    const INNER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
    let len = rng.random_range(1..=max);
    (0..len)
        .map(|i| {
            let pool = if i == 0 || i == len - 1 {
                &INNER[..36]
            } else {
                INNER
            };
            pool[rng.random_range(0..pool.len())] as char
        })
        .collect()
}

#[test]
fn random_names_are_valid_and_collision_free() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6c62);
    let clusters = [
        "5a6b7c8d-0000-4000-8000-123456789abc",
        "0f0e0d0c-1111-4222-8333-444455556666",
    ];
    let mut seen_inputs = HashSet::new();
    let mut frontends = HashSet::new();
    let mut backends = HashSet::new();
    // Long shared prefixes make the readable part collide after trimming; the hash must not.
    let prefix = "shared-prefix-that-is-long-enough-to-be-cut";
    for i in 0..4000 {
        let cluster = clusters[i % 2];
        let uid = cluster_uid8(cluster);
        let ns = if i % 3 == 0 {
            format!("{prefix}-{}", random_label(&mut rng, 8))
        } else {
            random_label(&mut rng, 63)
        };
        let name = if i % 5 == 0 {
            format!("{prefix}{}", random_label(&mut rng, 8))
        } else {
            random_label(&mut rng, 63)
        };
        let port: i32 = rng.random_range(1..=65535);
        if !seen_inputs.insert((cluster, ns.clone(), name.clone(), port)) {
            continue;
        }
        let fe = FrontendNamer::new(Scheme::Gke, &uid, cluster, &ns, &name);
        for n in [
            fe.url_map(),
            fe.target_http_proxy(),
            fe.http_forwarding_rule(),
            fe.ssl_certificate(name.as_bytes()),
        ] {
            assert!(is_valid_gce_name(&n), "invalid name {n:?} for {ns}/{name}");
        }
        frontends.insert((cluster, ns.clone(), name.clone(), fe.url_map()));
        let be = backend(Scheme::Gke, &uid, &ns, &name, port);
        assert!(is_valid_gce_name(&be), "invalid backend name {be:?}");
        backends.insert(be);
    }
    let distinct_um: HashSet<_> = frontends.iter().map(|(_, _, _, um)| um.clone()).collect();
    let distinct_inputs: HashSet<_> = frontends
        .iter()
        .map(|(c, ns, n, _)| (*c, ns.clone(), n.clone()))
        .collect();
    assert_eq!(
        distinct_um.len(),
        distinct_inputs.len(),
        "URL map names collided"
    );
    assert_eq!(backends.len(), seen_inputs.len(), "backend names collided");
}

#[test]
fn same_names_in_other_namespaces_or_clusters_differ() {
    let a = frontend("team-a", "web");
    let b = frontend("team-b", "web");
    let other = FrontendNamer::new(
        Scheme::Gke,
        &cluster_uid8("other"),
        "other",
        "team-a",
        "web",
    );
    assert_ne!(a.url_map(), b.url_map());
    assert_ne!(a.url_map(), other.url_map());
    // "a-b"/"c" and "a"/"b-c" read alike once joined; the hash keeps them apart.
    assert_ne!(
        frontend("a-b", "c").url_map(),
        frontend("a", "b-c").url_map()
    );
    let uid = cluster_uid8(KUBE_SYSTEM_UID);
    assert_ne!(
        backend(Scheme::Gke, &uid, "a-b", "c", 80),
        backend(Scheme::Gke, &uid, "a", "b-c", 80)
    );
}

#[test]
fn managed_certificate_names_are_stable_per_domain_set() {
    let d = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let a = managed_certificate(
        KUBE_SYSTEM_UID,
        "default",
        "cert",
        &d(&["b.example", "a.example"]),
    );
    assert_eq!(
        a,
        managed_certificate(
            KUBE_SYSTEM_UID,
            "default",
            "cert",
            &d(&["a.example", "b.example"])
        )
    );
    assert_ne!(
        a,
        managed_certificate(KUBE_SYSTEM_UID, "default", "cert", &d(&["a.example"]))
    );
    assert_ne!(
        a,
        managed_certificate(
            KUBE_SYSTEM_UID,
            "other",
            "cert",
            &d(&["a.example", "b.example"])
        )
    );
    assert!(
        is_valid_gce_name(&a) && a.starts_with("mcrt-b9cddxmo-"),
        "{a}"
    );
}

/// The operator's own scheme: the same shapes and lengths as GKE's with `gclb-` in place of
/// `k8s2-`, `k8s1-` and `k8s-`, valid names for the longest inputs, and never a name GKE's
/// scheme gives for the same cluster and objects.
#[test]
fn own_scheme_names_never_start_like_gkes() {
    let uid = cluster_uid8(KUBE_SYSTEM_UID);
    let own = FrontendNamer::new(Scheme::Own, &uid, KUBE_SYSTEM_UID, "default", "my-ingress");
    assert_eq!(
        own.url_map(),
        "gclb-um-b9cddxmo-default-my-ingress-i1vq1kma"
    );
    assert_eq!(
        own.ssl_certificate(b"pem"),
        frontend("default", "my-ingress")
            .ssl_certificate(b"pem")
            .replacen("k8s2-", "gclb-", 1)
    );
    assert_eq!(
        backend(Scheme::Own, &uid, "default", "my-products", 60000),
        "gclb-b9cddxmo-default-my-products-60000-beaa5af3"
    );
    assert_eq!(l7_firewall(Scheme::Own, &uid), "gclb-fw-l7--b9cddxmo");
    let long_ns = "n".repeat(63);
    let long_name = "x".repeat(63);
    for scheme in [Scheme::Own, Scheme::Gke] {
        let fe = FrontendNamer::new(scheme, &uid, KUBE_SYSTEM_UID, &long_ns, &long_name);
        for n in [
            fe.url_map(),
            fe.https_forwarding_rule(),
            fe.ssl_certificate(b"pem"),
            backend(scheme, &uid, &long_ns, &long_name, 65535),
        ] {
            assert!(is_valid_gce_name(&n), "{scheme:?}: {n}");
        }
    }
    let gke = frontend("default", "my-ingress");
    for (o, g) in [
        (own.url_map(), gke.url_map()),
        (own.target_https_proxy(), gke.target_https_proxy()),
        (
            backend(Scheme::Own, &uid, "default", "web", 80),
            backend(Scheme::Gke, &uid, "default", "web", 80),
        ),
    ] {
        assert!(o.starts_with("gclb-") && g.starts_with("k8s"), "{o} {g}");
        assert_ne!(o, g);
    }
}
