//! The GKE documentation's fanout Ingress (`docs/examples`' my-ingress over the Services
//! `my-products` and `my-discounted-products`), as the end-to-end tests vary it.

/// YAML of an Ingress `name` over the fanout's two Services: of class `class` (the
/// `kubernetes.io/ingress.class` annotation; `None` sets none, so the operator's default
/// class), with `my-discounted-products:80` as its default backend when `default_backend`, and
/// one rule: host `your-store.example`, path `/products` (`ImplementationSpecific`) to
/// `my-products:60000`.
///
/// The YAML ends with that path, so a test may append more paths of the rule (list items
/// indented by 6 spaces) and after them more rules (indented by 2).
pub fn ingress(name: &str, class: Option<&str>, default_backend: bool) -> String {
    let annotations = class
        .map(|c| format!("  annotations:\n    kubernetes.io/ingress.class: {c}\n"))
        .unwrap_or_default();
    let default_backend = if default_backend {
        "  defaultBackend:\n    service: {name: my-discounted-products, port: {number: 80}}\n"
    } else {
        ""
    };
    format!(
        r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
{annotations}spec:
{default_backend}  rules:
  - host: your-store.example
    http:
      paths:
      - path: /products
        pathType: ImplementationSpecific
        backend: {{service: {{name: my-products, port: {{number: 60000}}}}}}
"#
    )
}
