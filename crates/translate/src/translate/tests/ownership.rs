//! Which Ingresses the operator owns: the class annotation, `ingressClassName`, the default
//! IngressClass, and coexisting with GKE's controller.

use super::*;

fn owns(objects: &str) -> bool {
    let snapshot = snapshot_from_yaml(objects);
    let ing = snapshot.ingresses.values().next().unwrap();
    owns_ingress(&snapshot, ing, &config())
}

const GCE_CLASS: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gce}\nspec: {controller: k8s.io/ingress-gce}\n";
const NGINX_DEFAULT: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}\nspec: {controller: k8s.io/ingress-nginx}\n";

#[test]
fn ownership_follows_annotation_class_name_and_default_class() {
    let with = |meta: &str, spec: &str| {
        format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{meta}}}\nspec: {{{spec}}}\n")
    };
    // Annotation.
    assert!(owns(&with(
        ", annotations: {kubernetes.io/ingress.class: gce}",
        ""
    )));
    assert!(!owns(&with(
        ", annotations: {kubernetes.io/ingress.class: nginx}",
        ""
    )));
    // The annotation wins over ingressClassName.
    assert!(!owns(&format!(
        "{GCE_CLASS}---\n{}",
        with(
            ", annotations: {kubernetes.io/ingress.class: nginx}",
            "ingressClassName: gce"
        )
    )));
    // ingressClassName naming an IngressClass with our controller, or our class name when the
    // IngressClass object is missing.
    assert!(owns(&format!(
        "{GCE_CLASS}---\n{}",
        with("", "ingressClassName: gce")
    )));
    assert!(owns(&with("", "ingressClassName: gce")));
    assert!(!owns(&with("", "ingressClassName: nginx")));
    let nginx_named_gce = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gce}\nspec: {controller: k8s.io/ingress-nginx}\n";
    assert!(!owns(&format!(
        "{nginx_named_gce}---\n{}",
        with("", "ingressClassName: gce")
    )));
    // Neither: ours when no default class exists or the default is ours.
    assert!(owns(&with("", "")));
    assert!(!owns(&format!("{NGINX_DEFAULT}---\n{}", with("", ""))));
    // Another controller's class that is not the default (no annotation, or `"false"`) does not
    // take class-less Ingresses.
    let nginx = NGINX_DEFAULT.replace("\"true\"", "\"false\"");
    assert!(owns(&format!("{nginx}---\n{}", with("", ""))));
    assert!(owns(&format!("{nginx_named_gce}---\n{}", with("", ""))));
    let gce_default = GCE_CLASS.replace(
        "{name: gce}",
        "{name: gce, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    assert!(owns(&format!("{gce_default}---\n{}", with("", ""))));
}

/// Beside GKE's controller (the default mode) only class `gclb` and IngressClasses with
/// controller `gclb-operator.dev/gclb` are ours: GKE's `gce` Ingresses, by annotation, by class
/// or by default, never are, and "no default IngressClass" does not mean ours.
#[test]
fn coexisting_ownership_leaves_gke_ingresses_alone() {
    let owns_coexisting = |objects: &str| {
        let snapshot = snapshot_from_yaml(objects);
        let ing = snapshot.ingresses.values().next().unwrap();
        owns_ingress(&snapshot, ing, &config().with_mode(Mode::Coexist))
    };
    let with = |meta: &str, spec: &str| {
        format!("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{meta}}}\nspec: {{{spec}}}\n")
    };
    let gclb_class = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: gclb}\nspec: {controller: gclb-operator.dev/gclb}\n";
    let gce_default = GCE_CLASS.replace(
        "{name: gce}",
        "{name: gce, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    // GKE's: annotation gce, class gce (object or not), no class with gce the default, and no
    // class with no default at all.
    for gke in [
        with(", annotations: {kubernetes.io/ingress.class: gce}", ""),
        format!("{GCE_CLASS}---\n{}", with("", "ingressClassName: gce")),
        with("", "ingressClassName: gce"),
        format!("{gce_default}---\n{}", with("", "")),
        with("", ""),
        // An IngressClass named gclb that another controller serves is not ours either.
        format!(
            "{}---\n{}",
            GCE_CLASS.replace("{name: gce}", "{name: gclb}"),
            with("", "ingressClassName: gclb")
        ),
    ] {
        assert!(!owns_coexisting(&gke), "claimed GKE's Ingress:\n{gke}");
    }
    // Ours: annotation gclb, class gclb (object or not), no class with gclb the default.
    let gclb_default = gclb_class.replace(
        "{name: gclb}",
        "{name: gclb, annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}}",
    );
    for ours in [
        with(", annotations: {kubernetes.io/ingress.class: gclb}", ""),
        format!("{gclb_class}---\n{}", with("", "ingressClassName: gclb")),
        with("", "ingressClassName: gclb"),
        format!("{gclb_default}---\n{}", with("", "")),
    ] {
        assert!(owns_coexisting(&ours), "did not claim:\n{ours}");
    }
    // In takeover mode the same gclb Ingresses are not served.
    assert!(!owns(&format!(
        "{gclb_class}---\n{}",
        with("", "ingressClassName: gclb")
    )));
}

/// The default mode's names start with `gclb-`, never with GKE's `k8s`, for every resource of a
/// translated Ingress.
#[test]
fn coexisting_translation_names_every_resource_gclb() {
    let snapshot = snapshot_from_yaml(&format!(
        "{BASE}\n---\n{}",
        ingress("  defaultBackend:\n    service: {name: web, port: {number: 80}}\n  rules:\n  - http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 8081}}}}\n")
    ));
    let ing = snapshot.ingresses.values().next().unwrap();
    let config = config().with_mode(Mode::Coexist);
    let desired = translate_ingress(&snapshot, ing, &config).unwrap();
    let mut names = vec![desired
        .frontend
        .url_map
        .as_ref()
        .unwrap()
        .name
        .clone()
        .unwrap()];
    for (name, b) in &desired.backends {
        names.push(name.clone());
        names.push(b.health_check.name.clone().unwrap());
        names.extend(b.negs.iter().map(|n| n.neg.name.clone().unwrap()));
        for backend in &b.backend_service.backends {
            names.push(backend.group.clone().unwrap());
        }
    }
    for name in &names {
        let last = name.rsplit('/').next().unwrap();
        assert!(last.starts_with("gclb-"), "{name}");
    }
    assert_eq!(
        config.l7_firewall_name(),
        format!("gclb-fw-l7--{}", config.cluster_uid)
    );
}
