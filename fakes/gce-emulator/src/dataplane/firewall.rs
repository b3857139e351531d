//! Firewall enforcement: after each snapshot is compiled, every endpoint's
//! [`Admission`](crate::network::Admission) is set from the [`NetworkModel`] of that snapshot,
//! so the request path and the prober read two atomics instead of evaluating rules.
//!
//! Google Cloud "Load balancing: firewall rules": the health checkers and Google Front End
//! proxies of the global external Application Load Balancer reach NEG endpoints only from
//! 35.191.0.0/16 and 130.211.0.0/22, and only when an ingress allow rule of the endpoint's
//! network admits them. Here a probe is evaluated from [`PROBE_SOURCE`] to the port it probes
//! (the health check's fixed port, else the endpoint's), and a proxied connection from
//! [`PROXY_SOURCE`](crate::network::PROXY_SOURCE) to the endpoint's port (regional load
//! balancers: from their proxy-only subnet, [`internal::proxy_source`]). What the verdicts do:
//! - health.rs: a refused probe is a dropped packet, so it fails after the check's `timeoutSec`;
//! - proxy.rs: a refused connection is 502 `failed_to_connect_to_backend`; only backend
//!   services with a refused endpoint check it per request (`BackendService::firewall_gated`,
//!   decided when the snapshot is compiled).
//!
//! With enforcement off (`gce-emulator --enforce-firewall=false`) everything is admitted.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dataplane::backend_service::{BackendService, Endpoint};
use crate::dataplane::health::ProbeTarget;
use crate::dataplane::internal;
use crate::network::{NetworkModel, PROBE_SOURCE};
use crate::snapshot::{NetworkEndpoint, Snapshot};

/// Sets the admission of every endpoint of `services` and `probes` from the firewall rules and
/// instances of `snap`; with `enforce` false, opens them all. Called by the compiler before it
/// seals the backend services, so that each knows whether any of its endpoints is refused
/// ([`BackendService::firewall_gated`]): a backend service whose endpoints are all admitted
/// does not look at the verdicts per request.
pub fn admit(snap: &Snapshot, probes: &[ProbeTarget], services: &[BackendService], enforce: bool) {
    // Every endpoint once, with the port its probes use (if it is probed).
    let mut endpoints: HashMap<*const Endpoint, (Arc<Endpoint>, Option<u16>)> = HashMap::new();
    for t in probes {
        let port = t.spec.port.unwrap_or(t.endpoint.addr.port());
        endpoints.insert(Arc::as_ptr(&t.endpoint), (t.endpoint.clone(), Some(port)));
    }
    for ep in services.iter().flat_map(|bs| bs.endpoints.iter()) {
        endpoints
            .entry(Arc::as_ptr(ep))
            .or_insert_with(|| (ep.clone(), None));
    }
    if !enforce {
        for (ep, _) in endpoints.values() {
            ep.admission.open();
        }
        return;
    }
    let model = NetworkModel::compile(snap);
    for (ep, probe_port) in endpoints.values() {
        let neg = &ep.key.neg;
        let network = NetworkModel::neg_network(snap, neg);
        let attached = NetworkEndpoint {
            ip_address: ep.key.ip_address.clone(),
            port: ep.key.port,
            instance: snap
                .neg_endpoints
                .get(neg)
                .into_iter()
                .flatten()
                .find(|e| e.ip_address == ep.key.ip_address && e.port == ep.key.port)
                .and_then(|e| e.instance.clone()),
        };
        let source = internal::proxy_source(snap, &ep.key.backend_service, &network);
        let traffic = model.admits(&network, neg, &attached, source);
        let probes = match probe_port {
            Some(port) if *port != attached.port => {
                let probed = NetworkEndpoint {
                    port: *port,
                    ..attached.clone()
                };
                model.admits(&network, neg, &probed, PROBE_SOURCE)
            }
            _ => model.admits(&network, neg, &attached, PROBE_SOURCE),
        };
        ep.admission.set(&network, &probes, &traffic);
    }
}
