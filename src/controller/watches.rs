//! The watches that trigger reconciles, and the controller's run loop ([`run`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tracing::info;

use super::{
    delegation_status, error_policy, mapping, prune, reconcile, stores, Config, Context,
    ControllerMetrics, Stores,
};
use crate::compute::Compute;
use crate::crd::{BackendConfig, FrontendConfig, ManagedCertificate, TLSCertificateDelegation};
use crate::translate::pod::PodRecord;
use crate::translate::secret_refs;

/// Runs the controller until SIGINT/SIGTERM. `compute`, `config` and `metrics` are built by
/// `main`; the CRD watches are skipped when the CRDs are not installed. `on_ready` runs once
/// every store has its first full list (it starts the readiness-gate controller and webhook).
pub async fn run(
    client: Client,
    compute: Arc<Compute>,
    config: Config,
    metrics: ControllerMetrics,
    on_ready: impl FnOnce(Stores) + Send + 'static,
) {
    let (ingress_index, ingress_stream) = Stores::ingress_stream(&client);
    // TLSCertificateDelegation status (Contour's `Valid` condition): recomputed for a namespace
    // when a delegation or a TLS Secret there changes, or an Ingress naming its Secrets does.
    let (delegation_status, delegation_queue) = delegation_status::DelegationStatus::new();
    let ingress_stream = {
        let status = delegation_status.clone();
        ingress_stream.inspect(move |ingress| {
            if let Ok(ingress) = ingress {
                for ns in secret_refs::foreign_secret_namespaces(ingress) {
                    status.changed(Some(ns));
                }
            }
        })
    };
    let all = watcher::Config::default;
    // Pods are stored as compact records: one watch keeps them and triggers the Ingresses
    // whose Services select a changed Pod.
    let (pod_index, pod_stream) = Stores::trigger_stream(&client, all(), PodRecord::prune);
    let (service_index, service_stream) =
        Stores::trigger_stream::<Service>(&client, all(), prune::metadata);
    let (slice_index, slice_stream) =
        Stores::trigger_stream::<EndpointSlice>(&client, all(), prune::metadata);
    let (secret_index, secret_stream) =
        Stores::trigger_stream::<Secret>(&client, stores::secrets_watch(), prune::secret);
    let (class_index, class_stream) =
        Stores::trigger_stream::<IngressClass>(&client, all(), prune::metadata);
    let (bc_store, bc_stream) = Stores::optional_trigger_stream::<BackendConfig>(&client).await;
    let (fc_store, fc_stream) = Stores::optional_trigger_stream::<FrontendConfig>(&client).await;
    let (mc_store, mc_stream) =
        Stores::optional_trigger_stream::<ManagedCertificate>(&client).await;
    let (td_store, td_stream) =
        Stores::optional_trigger_stream::<TLSCertificateDelegation>(&client).await;
    let controller = Controller::for_stream(ingress_stream, ingress_index.store()).with_config(
        controller::Config::default()
            .concurrency(config.workers)
            // Requests for an object are merged while they wait and held while its reconcile
            // runs; the debounce only merges a burst that lands before the reconcile starts,
            // and every new Ingress waits for it before its first Compute call (issue 26: it
            // was 100 ms, a sixth of the 0.6 s chain of an Ingress on an existing Service).
            .debounce(Duration::from_millis(20)),
    );
    let stores = Stores::start(
        &client,
        stores::Triggered {
            ingresses: ingress_index,
            pods: pod_index,
            services: service_index,
            endpoint_slices: slice_index,
            secrets: secret_index,
            ingress_classes: class_index.store(),
            backend_configs: bc_store,
            frontend_configs: fc_store,
            managed_certificates: mc_store,
            tls_certificate_delegations: td_store,
        },
    );
    {
        // `on_ready` starts tasks that read the stores (readiness gates, webhook); starting them
        // only after the first lists means none of them waits on a store's single-waker
        // `DelayedInit` concurrently with us (see `stores`).
        let stores = stores.clone();
        tokio::spawn(async move {
            stores.wait_until_ready().await;
            info!("stores synced");
            on_ready(stores);
        });
    }
    let default_backend = config
        .translate
        .default_backend
        .as_ref()
        .map(|(ns, name, _)| (ns.clone(), name.clone()));

    let to_refs = |ingresses: Vec<&Ingress>| -> Vec<ObjectRef<Ingress>> {
        ingresses.into_iter().map(ObjectRef::from_obj).collect()
    };
    let for_service = {
        let stores = stores.clone();
        let default_backend = default_backend.clone();
        move |namespace: &str, name: &str| -> Vec<ObjectRef<Ingress>> {
            let all = stores.ingresses.state();
            let db = default_backend
                .as_ref()
                .map(|(n, s)| (n.as_str(), s.as_str()));
            to_refs(mapping::ingresses_for_service(
                all.iter().map(|i| &**i),
                namespace,
                name,
                db,
            ))
        }
    };
    let all_in = {
        let stores = stores.clone();
        move |namespace: Option<String>| -> Vec<ObjectRef<Ingress>> {
            stores
                .ingresses
                .state()
                .iter()
                .filter(|i| namespace.is_none() || i.namespace() == namespace)
                .map(|i| ObjectRef::from_obj(&**i))
                .collect()
        }
    };

    let svc_map = for_service.clone();
    let slice_map = for_service.clone();
    let pod_map = for_service.clone();
    let pod_stores = stores.clone();
    let (secret_all, class_all, bc_all) = (all_in.clone(), all_in.clone(), all_in.clone());
    let (fc_all, mc_all) = (all_in.clone(), all_in.clone());
    // Ingresses that name a Secret of namespace `ns` through `spec.tls` from another namespace
    // (TLS certificate delegation): a Secret or a TLSCertificateDelegation changing there may
    // give them a certificate or take it away (revocation).
    let using_secrets_of = {
        let stores = stores.clone();
        move |ns: Option<String>| -> Vec<ObjectRef<Ingress>> {
            let Some(ns) = ns else { return Vec::new() };
            stores
                .ingresses
                .state()
                .iter()
                .filter(|i| secret_refs::foreign_secret_namespaces(i).contains(&ns))
                .map(|i| ObjectRef::from_obj(&**i))
                .collect()
        }
    };
    let (secret_foreign, td_foreign) = (using_secrets_of.clone(), using_secrets_of);
    delegation_status.start(
        delegation_queue,
        client.clone(),
        stores.clone(),
        config.translate.clone(),
    );
    let (td_status, secret_status) = (delegation_status.clone(), delegation_status.clone());
    // Every kind triggers from the watch that keeps its store ([`Stores::trigger_stream`]), so
    // a reconcile never reads an older store than its trigger.
    let mut controller = controller
        .watches_stream(service_stream, move |svc: Service| {
            svc_map(&svc.namespace().unwrap_or_default(), &svc.name_any())
        })
        .watches_stream(slice_stream, move |slice: EndpointSlice| {
            match slice.labels().get(mapping::SERVICE_NAME_LABEL) {
                Some(service) => slice_map(&slice.namespace().unwrap_or_default(), service),
                None => Vec::new(),
            }
        })
        .watches_stream(pod_stream, move |pod: PodRecord| {
            let services = pod_stores.services.state();
            let names = mapping::services_selecting(services.iter().map(|s| &**s), &pod);
            let ns = pod.namespace().unwrap_or_default();
            names
                .iter()
                .flat_map(|s| pod_map(&ns, s))
                .collect::<Vec<_>>()
        })
        .watches_stream(secret_stream, move |secret: Secret| {
            secret_status.changed(secret.namespace());
            let mut refs = secret_all(secret.namespace());
            refs.extend(secret_foreign(secret.namespace()));
            refs
        })
        .watches_stream(class_stream, move |_: IngressClass| class_all(None));
    // A CRD object change requeues every Ingress of its namespace (they reference them by name
    // from annotations; a ManagedCertificate's status.certificateName is what translation
    // attaches, so its Provisioning -> Active transition must reach the Ingress). No stream
    // when the CRD is not installed.
    if let Some(s) = bc_stream {
        controller = controller.watches_stream(s, move |bc: BackendConfig| bc_all(bc.namespace()));
    }
    if let Some(s) = fc_stream {
        controller = controller.watches_stream(s, move |fc: FrontendConfig| fc_all(fc.namespace()));
    }
    if let Some(s) = mc_stream {
        controller =
            controller.watches_stream(s, move |mc: ManagedCertificate| mc_all(mc.namespace()));
    }
    if let Some(s) = td_stream {
        controller = controller.watches_stream(s, move |td: TLSCertificateDelegation| {
            td_status.changed(td.namespace());
            td_foreign(td.namespace())
        });
    }

    // A zone gaining its first Node or losing its last changes every backend's NEGs (unless
    // `--zone` pins them): every Ingress is reconciled again.
    if config.translate.zones.is_empty() {
        let zones = stores.zones.clone();
        let changes = futures::stream::unfold(zones, |mut zones| async move {
            zones.changed().await.ok()?;
            Some(((), zones))
        });
        controller = controller.reconcile_all_on(changes);
    }
    let ctx = Arc::new(Context::new(client, compute, stores, config, metrics));
    controller
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(ingress = %object, "reconciled"),
                // A trigger watch failing (RBAC, the API server gone) is retried with backoff;
                // say so, since no reconcile runs for what it would have seen.
                Err(controller::Error::QueueError(e)) => {
                    tracing::warn!(error = %e, "watch error; retrying")
                }
                Err(e) => tracing::debug!(error = %e, "reconcile error"),
            }
        })
        .await;
}
