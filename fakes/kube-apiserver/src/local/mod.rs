//! Local controllers that make the local API behave like a cluster: the EndpointSlice
//! controller and a local kubelet that runs opted-in Pods as built-in HTTP echo servers on
//! loopback Pod IPs. They are ordinary API clients (kube-rs) of the local server.

pub mod annotations;
pub mod echo;
pub mod endpoint_slice;
pub mod endpoint_slice_controller;
pub mod kubelet;
pub mod pod_ip;
pub mod pod_status;
pub mod probe;

/// Options of the local controllers.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// CIDR within 127.0.0.0/8 from which Pod IPs are allocated at random (`--pod-ip-range`).
    pub pod_ip_range: String,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            pod_ip_range: "127.64.0.0/10".to_string(),
        }
    }
}

/// Runs the EndpointSlice controller and the local kubelet until the future is dropped.
///
/// Errors: an invalid `pod_ip_range` (returned at once, before anything runs).
pub async fn run(client: kube::Client, options: LocalOptions) -> anyhow::Result<()> {
    let ips = pod_ip::PodIpAllocator::new(&options.pod_ip_range)?;
    let node = kubelet::Node {
        name: kubelet::NODE_NAME.to_string(),
        host_ip: kubelet::HOST_IP.to_string(),
    };
    tokio::join!(
        endpoint_slice_controller::run(client.clone()),
        kubelet::run(client, ips, node)
    );
    Ok(())
}
