//! Translation errors: each names the Ingress (or Service), the field at fault and the fix.
//! The controller reports them as Warning Events with reason `Translate` (inventory §9).

/// Why an Ingress could not be translated. Nothing is sent to the Compute API for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A path is not a valid GCE URL-map path (`*` only as a final `/*`, must start with `/`).
    #[error("Ingress {ingress}: {field} {path:?} is not a valid path: {reason}; fix the path (GCE accepts `/exact`, `/prefix/*` or `/*`)")]
    InvalidPath {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path, e.g. `spec.rules[0].http.paths[1].path`.
        field: String,
        /// The offending path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `pathType` is not `Exact`, `Prefix` or `ImplementationSpecific`.
    #[error("Ingress {ingress}: {field} {path_type:?} is not a supported pathType; use Exact, Prefix or ImplementationSpecific")]
    UnknownPathType {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path, e.g. `spec.rules[0].http.paths[1].pathType`.
        field: String,
        /// The value found.
        path_type: String,
    },
    /// A backend names a Service that does not exist.
    #[error("Ingress {ingress}: {field} names Service {service} which does not exist; create the Service or fix the name")]
    ServiceNotFound {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path, e.g. `spec.rules[0].http.paths[0].backend.service.name`.
        field: String,
        /// The missing Service, `namespace/name`.
        service: String,
    },
    /// A backend names a port the Service does not have.
    #[error("Ingress {ingress}: {field} {port} is not a port of Service {service} (it has {available}); use one of its spec.ports[].port numbers or names")]
    ServicePortNotFound {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path, e.g. `spec.rules[0].http.paths[1].backend.service.port.number`.
        field: String,
        /// The Service.
        service: String,
        /// The port as written in the Ingress (number or name).
        port: String,
        /// The Service's ports, for the message.
        available: String,
    },
    /// A backend has no usable `service` (a `resource` backend, or neither).
    #[error("Ingress {ingress}: {field} must be a service backend ({reason}); set backend.service.name and backend.service.port")]
    UnsupportedBackend {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path, e.g. `spec.defaultBackend`.
        field: String,
        /// What was found instead.
        reason: String,
    },
    /// The Service cannot back a load balancer (e.g. `type: ExternalName`).
    #[error("Ingress {ingress}: {field} names Service {service} of type {service_type}, which has no endpoints to load-balance; use a ClusterIP, NodePort or LoadBalancer Service")]
    BadServiceType {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// Field path of the backend.
        field: String,
        /// The Service.
        service: String,
        /// Its `spec.type`.
        service_type: String,
    },
    /// No `spec.defaultBackend` and no usable system default backend.
    #[error("Ingress {ingress}: spec.defaultBackend is not set and the default backend Service {default_backend} is missing; set spec.defaultBackend or deploy the default backend Service")]
    NoDefaultBackend {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// The configured default backend (`ns/name:port`), or `(none configured)`.
        default_backend: String,
    },
    /// An annotation on the Ingress or a Service has a value we cannot use.
    #[error("{kind} {object}: annotation {annotation} is invalid: {reason}")]
    InvalidAnnotation {
        /// `Ingress` or `Service`.
        kind: &'static str,
        /// The annotated object.
        object: String,
        /// The annotation key.
        annotation: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A Service annotation binds a BackendConfig that does not exist.
    #[error("Service {service}: annotation cloud.google.com/backend-config names BackendConfig {backend_config} (for port {port}) which does not exist; create it or fix the annotation")]
    BackendConfigNotFound {
        /// The Service.
        service: String,
        /// The missing BackendConfig.
        backend_config: String,
        /// The Service port it was bound for.
        port: i32,
    },
    /// `kubernetes.io/ingress.allow-http: "false"` and no certificate at all.
    #[error("Ingress {ingress}: both HTTP and HTTPS are disabled (annotation kubernetes.io/ingress.allow-http is \"false\" and no usable TLS certificate is configured); add spec.tls or a certificate annotation, or allow HTTP")]
    HttpAndHttpsDisabled {
        /// The Ingress, `namespace/name`.
        ingress: String,
    },
    /// More certificates than a target HTTPS proxy accepts.
    #[error("Ingress {ingress}: {count} certificates configured but a target HTTPS proxy accepts at most {max}; remove entries from spec.tls or the certificate annotations")]
    TooManyCertificates {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// How many were configured.
        count: usize,
        /// The limit (15).
        max: usize,
    },
    /// A BackendConfig value its CRD refuses (stored before the CRD had that bound or rule).
    #[error("BackendConfig {backend_config}: {field} {reason}; fix the field in the BackendConfig (the CRD refuses this value now; the object was stored before it did)")]
    InvalidBackendConfig {
        /// The BackendConfig, `namespace/name`.
        backend_config: String,
        /// Field path, e.g. `spec.healthCheck.timeoutSec`.
        field: String,
        /// What is wrong, e.g. `is 4000, outside 0..=3600`.
        reason: String,
    },
    /// A BackendConfig names a Secret that is missing or lacks a key.
    #[error("BackendConfig {backend_config}: {field} names Secret {secret}, which {reason}; create the Secret with that key or fix the field")]
    BackendConfigSecret {
        /// The BackendConfig, `namespace/name`.
        backend_config: String,
        /// Field path, e.g. `spec.iap.oauthclientCredentials.secretName`.
        field: String,
        /// The Secret, `namespace/name`.
        secret: String,
        /// What is wrong, e.g. `has no key client_id`.
        reason: String,
    },
    /// The Ingress asks for a feature its regional Application Load Balancer (internal or
    /// regional external) does not have, or that this operator does not build on it
    /// (docs/internal-load-balancers.md, "What works where").
    #[error("Ingress {ingress}: {feature} is not supported by the {load_balancer} (class {class}); {fix}")]
    UnsupportedOnRegional {
        /// The Ingress, `namespace/name`.
        ingress: String,
        /// `internal Application Load Balancer` or `regional external Application Load
        /// Balancer`.
        load_balancer: String,
        /// The class asked for, e.g. `gce-internal`.
        class: String,
        /// The feature and where it was asked for, e.g. `Cloud CDN (BackendConfig
        /// default/bc spec.cdn.enabled of Service default/web port 80)`.
        feature: String,
        /// What to do instead.
        fix: String,
    },
    /// A regional (internal or regional external) Ingress whose region cannot be told: no `--region` and no Node with a zone.
    #[error("Ingress {ingress}: the cluster's region is unknown (no Node has a topology.kubernetes.io/zone label and the operator runs without --region); start the operator with --region=REGION")]
    UnknownRegion {
        /// The Ingress, `namespace/name`.
        ingress: String,
    },
}
