//! Ingress backends -> Service ports: the checks that give users errors naming the field.

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::networking::v1::IngressBackend;

use super::{ClusterSnapshot, ObjectKey, ServicePortKey, TranslateError};

/// A backend reference resolved against the snapshot.
#[derive(Clone, Debug)]
pub struct ResolvedBackend<'a> {
    /// Which Service port.
    pub key: ServicePortKey,
    /// The Service.
    pub service: &'a Service,
    /// Its port entry.
    pub port: &'a ServicePort,
    /// How the Ingress (or the operator's default backend) named the port.
    pub by: PortRef,
}

/// How an Ingress (or the operator config) names a Service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRef {
    /// `port.number`: matches `spec.ports[].port`.
    Number(i32),
    /// `port.name`: matches `spec.ports[].name`.
    Name(String),
}

impl PortRef {
    /// A number if `s` parses as one, else a name.
    pub fn parse(s: &str) -> Self {
        s.parse()
            .map_or_else(|_| Self::Name(s.to_owned()), Self::Number)
    }
}

/// Resolves an Ingress backend at `field` (e.g. `spec.rules[0].http.paths[1].backend`).
///
/// # Errors
/// Resource backends, a missing Service, a missing port, an ExternalName Service.
pub fn resolve_ingress_backend<'a>(
    snapshot: &'a ClusterSnapshot,
    ingress: &ObjectKey,
    backend: &IngressBackend,
    field: &str,
) -> Result<ResolvedBackend<'a>, TranslateError> {
    let Some(service) = backend.service.as_ref() else {
        let reason = if backend.resource.is_some() {
            "resource backends are not supported by Google Cloud load balancers"
        } else {
            "it names no Service"
        };
        return Err(TranslateError::UnsupportedBackend {
            ingress: ingress.to_string(),
            field: field.to_owned(),
            reason: reason.to_owned(),
        });
    };
    let port = service.port.as_ref();
    let (port_ref, port_field) = match (
        port.and_then(|p| p.number),
        port.and_then(|p| p.name.clone()),
    ) {
        (Some(n), _) => (PortRef::Number(n), format!("{field}.service.port.number")),
        (None, Some(name)) if !name.is_empty() => {
            (PortRef::Name(name), format!("{field}.service.port.name"))
        }
        _ => {
            return Err(TranslateError::UnsupportedBackend {
                ingress: ingress.to_string(),
                field: format!("{field}.service.port"),
                reason: "it sets neither port.number nor port.name".to_owned(),
            })
        }
    };
    let key = ObjectKey::new(ingress.namespace.clone(), service.name.clone());
    resolve(
        snapshot,
        ingress,
        &key,
        &port_ref,
        &format!("{field}.service.name"),
        &port_field,
    )
}

/// Resolves a Service port by key; `name_field` / `port_field` are used in errors.
///
/// # Errors
/// A missing Service or port, an ExternalName Service.
pub fn resolve<'a>(
    snapshot: &'a ClusterSnapshot,
    ingress: &ObjectKey,
    service_key: &ObjectKey,
    port_ref: &PortRef,
    name_field: &str,
    port_field: &str,
) -> Result<ResolvedBackend<'a>, TranslateError> {
    let Some(service) = snapshot.services.get(service_key) else {
        return Err(TranslateError::ServiceNotFound {
            ingress: ingress.to_string(),
            field: name_field.to_owned(),
            service: service_key.to_string(),
        });
    };
    let spec = service.spec.as_ref();
    let service_type = spec.and_then(|s| s.type_.as_deref()).unwrap_or("ClusterIP");
    if service_type == "ExternalName" {
        return Err(TranslateError::BadServiceType {
            ingress: ingress.to_string(),
            field: name_field.to_owned(),
            service: service_key.to_string(),
            service_type: service_type.to_owned(),
        });
    }
    let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    let found = ports.iter().find(|p| match port_ref {
        PortRef::Number(n) => p.port == *n,
        PortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
    });
    let Some(port) = found else {
        let available = ports
            .iter()
            .map(|p| match &p.name {
                Some(name) if !name.is_empty() => format!("{} ({name})", p.port),
                _ => p.port.to_string(),
            })
            .collect::<Vec<_>>();
        return Err(TranslateError::ServicePortNotFound {
            ingress: ingress.to_string(),
            field: port_field.to_owned(),
            service: service_key.to_string(),
            port: match port_ref {
                PortRef::Number(n) => n.to_string(),
                PortRef::Name(name) => format!("{name:?}"),
            },
            available: if available.is_empty() {
                "no ports".to_owned()
            } else {
                available.join(", ")
            },
        });
    };
    Ok(ResolvedBackend {
        key: ServicePortKey {
            namespace: service_key.namespace.clone(),
            service: service_key.name.clone(),
            port: port.port,
        },
        service,
        port,
        by: port_ref.clone(),
    })
}
