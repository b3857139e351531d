//! Who a local container is (Pod, namespace, IP, container, image, Node, zone, service
//! account): what the built-in servers ([`super::echo`], its gRPC services
//! [`super::echo::grpc`]) and the known images answer with. Below both, so the HTTP echo and
//! the gRPC services read it without importing each other.

use std::net::Ipv4Addr;

use super::images::App;

/// Who is answering: fixed for a container's lifetime.
#[derive(Clone, Debug)]
pub struct PodIdentity {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// The Pod IP the servers bind.
    pub pod_ip: Ipv4Addr,
    /// What the container answers.
    pub app: App,
    /// The container's name.
    pub container: String,
    /// The container's image.
    pub image: String,
    /// The Node the Pod runs on.
    pub node: String,
    /// The Node's zone.
    pub zone: String,
    /// `spec.serviceAccountName`.
    pub service_account: String,
}

impl PodIdentity {
    /// An identity with no container, image, Node or zone (tests).
    pub fn bare(name: &str, namespace: &str, pod_ip: Ipv4Addr, app: App) -> PodIdentity {
        PodIdentity {
            name: name.to_string(),
            namespace: namespace.to_string(),
            pod_ip,
            app,
            container: String::new(),
            image: String::new(),
            node: String::new(),
            zone: String::new(),
            service_account: String::new(),
        }
    }
}

impl PodIdentity {
    /// `namespace/name`, as errors and logs name the Pod.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
