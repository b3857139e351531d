//! One Ingress: ownership, the finalizer, translate, sync, status and annotations, cleanup.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, ResourceExt};
use tracing::{info, instrument, warn};

use super::context::key_string;
use super::{
    finalizer_for_ingress, problems, status, Context, Error, ERROR_REQUEUE, HEALTH_REFRESH,
};
use crate::sync::ingress::{delete_frontend, sync_backends, sync_frontend, FrontendStatus};
use crate::sync::{backend_services, security_policies};
use crate::sync::{Changes, SyncError};
use crate::translate::namer::FrontendNamer;
use crate::translate::{
    owns_ingress, translate_ingress, ClusterSnapshot, DesiredIngress, ObjectKey,
};

/// Reconciles one Ingress (see the module docs for the steps).
#[instrument(skip_all, fields(ingress = %ObjectKey::of(&*ingress)))]
pub async fn reconcile(ingress: Arc<Ingress>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.wait_until_ready().await;
    tracing::debug!("reconcile started");
    ctx.metrics.in_flight.inc();
    let key = ObjectKey::of(&*ingress).to_string();
    let result = super::catch_panic(&key, &ctx.metrics, reconcile_inner(ingress, &ctx)).await;
    ctx.metrics.in_flight.dec();
    result
}

async fn reconcile_inner(ingress: Arc<Ingress>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let key = ObjectKey::of(&*ingress);
    let snapshot = ctx.stores.snapshot_for(
        &translation_namespaces(&ingress, &ctx.config.translate),
        crate::translate::source_ranges::reads_other_ingresses(&ingress),
    );
    let owned = owns_ingress(&snapshot, &ingress, &ctx.config.translate);
    let own_finalizer = finalizer_for_ingress(ctx.config.translate.mode, &ingress);
    let has_finalizer = ingress.finalizers().iter().any(|f| f == own_finalizer);
    let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &key.namespace);
    if !owned {
        if has_finalizer && ingress.metadata.deletion_timestamp.is_none() {
            // The class moved away from us: tear our load balancer down, then let go.
            info!("Ingress is no longer ours; removing its load balancer");
            cleanup_or_warn(&ingress, ctx).await?;
            let rest: Vec<String> = ingress
                .finalizers()
                .iter()
                .filter(|f| *f != own_finalizer)
                .cloned()
                .collect();
            let patch = serde_json::json!({"metadata": {"finalizers": rest}});
            api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|source| Error::Kube {
                    ingress: key_string(&key),
                    source,
                })?;
            ctx.forget(&key);
            return Ok(Action::await_change());
        } else if !has_finalizer {
            ctx.forget(&key);
            return Ok(Action::await_change());
        }
    }
    if owned && !has_finalizer && ingress.metadata.deletion_timestamp.is_none() {
        // A new Ingress: the finalizer goes on, then the load balancer is built in this same
        // reconcile, from the object the patch returned. kube-runtime's `finalizer` would end
        // here and wait for the patch's watch event to come back through the debounced queue
        // (issue 26: ~0.1-0.2 s before a new Ingress's first Compute call).
        let ingress = add_finalizer(&api, own_finalizer, &ingress)
            .await
            .map_err(|e| Error::Finalizer(Box::new(finalizer::Error::AddFinalizer(e))))?;
        return apply(Arc::new(ingress), ctx, snapshot).await;
    }
    let ctx2 = ctx.clone();
    finalizer(&api, own_finalizer, ingress, |event| async move {
        match event {
            finalizer::Event::Apply(ingress) => apply(ingress, &ctx2, snapshot).await,
            finalizer::Event::Cleanup(ingress) => {
                cleanup_or_warn(&ingress, &ctx2).await?;
                ctx2.forget(&ObjectKey::of(&*ingress));
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Adds `name` to the Ingress's finalizers with the JSON patch kube-runtime's `finalizer` sends
/// (a `test` of the finalizers seen, so a concurrent writer's change fails the patch instead of
/// being overwritten) and returns the Ingress as patched.
async fn add_finalizer(
    api: &Api<Ingress>,
    name: &str,
    ingress: &Ingress,
) -> Result<Ingress, kube::Error> {
    let seen = ingress.finalizers();
    let patch = if seen.is_empty() {
        serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]},
        ])
    } else {
        serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": seen},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ])
    };
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a well-formed JSON patch");
    api.patch(
        &ingress.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
}

/// The namespaces translating `ingress` reads Pods and Secrets from: its own, the default
/// backend's, and those whose Secrets its `spec.tls` names through Contour's delegation forms
/// ([`crate::translate::secret_refs::foreign_secret_namespaces`]; whether they are delegated is
/// translation's decision) ([`super::Stores::snapshot_for`]).
pub(crate) fn translation_namespaces(
    ingress: &Ingress,
    config: &crate::translate::TranslateConfig,
) -> Vec<String> {
    let mut namespaces = vec![ingress.namespace().unwrap_or_default()];
    if let Some((ns, _, _)) = &config.default_backend {
        namespaces.push(ns.clone());
    }
    namespaces.extend(crate::translate::secret_refs::foreign_secret_namespaces(
        ingress,
    ));
    namespaces
}

async fn apply(
    ingress: Arc<Ingress>,
    ctx: &Arc<Context>,
    mut snapshot: ClusterSnapshot,
) -> Result<Action, Error> {
    let key = ObjectKey::of(&*ingress);
    ctx.observe_change(&key, &ingress);
    let t = &ctx.config.translate;
    let api: Api<Ingress> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let kube_err = |source| Error::Kube {
        ingress: key_string(&key),
        source,
    };
    // Secrets of a type the store does not watch (Opaque TLS, IAP OAuth client): one GET each.
    super::secrets::add_uncached_secrets(&ctx.client, &mut snapshot, &ingress, t).await?;
    let desired = match translate_ingress(&snapshot, &ingress, t) {
        Ok(d) => {
            ctx.last_desired.record(&key, &d);
            d
        }
        // Nothing is touched; the last good translation keeps its firewall ports and backends.
        Err(e) => {
            warn!(error = %e, "translation failed; leaving the load balancer as it is");
            ctx.event(
                &ingress,
                true,
                "Translate",
                format!("Translation failed: invalid ingress spec: {e}"),
            )
            .await;
            let value = problems::error_value(&e);
            if let Some(patch) = problems::patch(&ingress, problems::ERROR, Some(&value)) {
                api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map_err(kube_err)?;
            }
            ctx.metrics.sync("translate");
            return Ok(Action::requeue(ctx.config.resync_period));
        }
    };
    let warning = problems::warning_value(&desired.findings);
    let fixed = [
        problems::patch(&ingress, problems::ERROR, None),
        problems::patch(&ingress, problems::WARNING, warning.as_deref()),
    ];
    for patch in fixed.into_iter().flatten() {
        api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_err)?;
    }
    for finding in &desired.findings {
        ctx.event(
            &ingress,
            finding.warning,
            &finding.reason,
            finding.message.clone(),
        )
        .await;
    }

    let namer = ctx.namer(&ingress);
    let mut changes = Changes::new();
    // The firewall rule references nothing the sync creates, and health checks reach the
    // endpoints only through it: when it lacks this Ingress's ports (a new cluster's first
    // Ingress, a new target port) or is due, it is synced beside the load balancer instead of
    // after it, so the first probes pass. After it, the first Ingress of a cluster waited one
    // failed probe and a whole check interval (15 s) for its first 200 (issue 26).
    let firewall_first = ctx.due(&ctx.firewall_runs) || ctx.firewall_lacks_ports(&desired).await;
    // Both boxed: side by side inline they made the reconcile's future big enough to overflow a
    // debug build's worker stack (seen on a URL map update).
    let early_firewall = Box::pin(async {
        match firewall_first {
            true => Some(ctx.sync_firewall().await),
            false => None,
        }
    });
    let load_balancer = Box::pin(async {
        if desired.region.is_some() {
            Box::pin(super::internal::sync_internal_lb(
                ctx,
                &ingress,
                &desired,
                &mut changes,
            ))
            .await
        } else {
            sync_load_balancer(ctx, &key, &namer, &desired, &mut changes).await
        }
    });
    let (synced, early_firewall) = tokio::join!(load_balancer, early_firewall);
    for change in &changes {
        ctx.event(&ingress, false, "Sync", change.to_string()).await;
    }
    let status = match synced {
        Ok(status) => status,
        Err(e) => {
            if let Some(denied) = super::permission::denied(&e) {
                let note = super::permission::note(
                    &denied,
                    ctx.config.principal.as_deref(),
                    &ctx.config.translate.project,
                );
                ctx.event(&ingress, true, super::permission::REASON, note)
                    .await;
                ctx.metrics.sync("compute");
                return Err(e);
            }
            let note = match &e {
                Error::Sync {
                    source: SyncError::SslPolicyNotFound { policy, .. },
                    ..
                } => ssl_policy_note(&ingress, policy),
                Error::Sync { source, .. } => format!("Error syncing to GCP: {source}"),
                other => other.to_string(),
            };
            ctx.event(&ingress, true, "Sync", note).await;
            ctx.metrics.sync("compute");
            return Err(e);
        }
    };
    ctx.denials
        .lock()
        .expect("denials poisoned")
        .remove(&key_string(&key));
    // The firewall's ports change with a change to some Ingress's backends, or with the target
    // ports of their EndpointSlices (which may come in a reconcile of their own).
    let firewall = match early_firewall {
        Some(result) => result,
        None if !changes.is_empty() => ctx.sync_firewall().await,
        None => Ok(()),
    };
    if let Err(source) = firewall {
        let (reason, note) = match super::permission::denied(&source) {
            Some(d) => (
                super::permission::REASON,
                super::permission::note(
                    &d,
                    ctx.config.principal.as_deref(),
                    &ctx.config.translate.project,
                ),
            ),
            None => ("Sync", format!("Error syncing to GCP: {source}")),
        };
        ctx.event(&ingress, true, reason, note).await;
        ctx.metrics.sync("compute");
        return Err(Error::Sync {
            ingress: key_string(&key),
            source,
        });
    }

    if let Some(ip) = &status.ip {
        let published = ctx.config.status_address.as_deref().unwrap_or(ip);
        if let Some(patch) = status::published_patch(&ingress, published) {
            api.patch_status(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(kube_err)?;
            ctx.event(
                &ingress,
                false,
                "IPChanged",
                format!("IP is now {published}"),
            )
            .await;
        }
    }
    // Read together, each shared with the other reconciles while fresh; read afresh after a
    // change of this sync's own (controller/health.rs).
    let region = desired.region.as_deref();
    let refresh = !changes.is_empty();
    let health: BTreeMap<String, String> =
        futures::future::join_all(desired.backends.keys().map(|name| async move {
            let state = ctx
                .backend_health
                .state(region, name, refresh, || async {
                    match region {
                        Some(region) => {
                            crate::sync::backend_services::health_regional(
                                &ctx.compute,
                                region,
                                name,
                            )
                            .await
                        }
                        None => backend_services::health(&ctx.compute, name).await,
                    }
                })
                .await;
            (name.clone(), state)
        }))
        .await
        .into_iter()
        .collect();
    if desired.region.is_none() {
        ctx.warn_if_firewall_blocks(&ingress, &desired, &health)
            .await;
    }
    let static_ip = desired
        .frontend
        .static_ip_name
        .as_deref()
        .or(status.managed_address.as_deref());
    let wanted = status::wanted_annotations(&desired.frontend, static_ip, &health);
    if let Some(patch) = status::annotation_patch(&ingress, &wanted) {
        api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_err)?;
    }
    // Only a change makes garbage (a backend or certificate no longer used); otherwise GC runs
    // when due. It runs in the background; the Ingress itself is fine either way.
    if !changes.is_empty() || ctx.due(&ctx.gc_runs) {
        ctx.schedule_gc(ingress.clone());
    }

    ctx.programmed(&key);
    ctx.metrics.sync("ok");
    let all_healthy = health.values().all(|h| h == "HEALTHY");
    Ok(Action::requeue(if all_healthy {
        ctx.config.resync_period
    } else {
        HEALTH_REFRESH.min(ctx.config.resync_period)
    }))
}

/// Syncs a global Ingress's backends and frontend under the shared side of the GC lock (the
/// reserved address, if any, is read first, without it).
pub(super) async fn sync_load_balancer(
    ctx: &Context,
    key: &ObjectKey,
    namer: &FrontendNamer,
    desired: &DesiredIngress,
    changes: &mut Changes,
) -> Result<FrontendStatus, Error> {
    let sync_err = |source| Error::Sync {
        ingress: key_string(key),
        source,
    };
    let static_ip = match &desired.frontend.static_ip_name {
        Some(name) => {
            let address = ctx
                .compute
                .get_global_address(name)
                .await
                .map_err(|e| sync_err(SyncError::compute("Address", name, e)))?;
            match address.and_then(|a| a.address) {
                Some(ip) => Some(ip),
                None => {
                    return Err(Error::StaticIpNotFound {
                        ingress: key_string(key),
                        name: name.clone(),
                    })
                }
            }
        }
        None => None,
    };
    let _shared = ctx.gc_lock.read().await;
    if let Some(policy) = &desired.security_policy {
        security_policies::ensure(&ctx.compute, policy, changes)
            .await
            .map_err(sync_err)?;
    }
    sync_backends(&ctx.compute, &ctx.locks, &desired.backends, changes)
        .await
        .map_err(sync_err)?;
    sync_frontend(
        &ctx.compute,
        namer,
        &desired.frontend,
        static_ip.as_deref(),
        changes,
    )
    .await
    .map_err(sync_err)
}

/// [`cleanup`], and when IAM refuses a call of it, the same Warning `PermissionDenied` Event
/// a refused sync posts ([`super::permission::note`]), so a deletion stuck on a missing
/// permission says which one on the Ingress (issue 43); the error is returned as it is.
async fn cleanup_or_warn(ingress: &Ingress, ctx: &Context) -> Result<(), Error> {
    let result = cleanup(ingress, ctx).await;
    if let Err(e) = &result {
        if let Some(denied) = super::permission::denied(e) {
            let note = super::permission::note(
                &denied,
                ctx.config.principal.as_deref(),
                &ctx.config.translate.project,
            );
            ctx.event(ingress, true, super::permission::REASON, note)
                .await;
        }
    }
    result
}

/// Deletes the Ingress's frontend, then garbage-collects backends and the firewall rule that no
/// other Ingress uses.
///
/// The frontend is deleted without the GC lock, so deleting many Ingresses runs their
/// frontends' Operations side by side (up to `--workers`) rather than one after another
/// (issue 26): per-object ordering, not a global lock. Its names (forwarding rules, proxies,
/// URL maps, the managed address, the certificates under its prefix) are this Ingress's own,
/// hashed from its namespace and name ([`FrontendNamer`]), so no other Ingress's sync or
/// cleanup writes them. The one writer that could race is a reconcile of this same Ingress,
/// and kube-runtime never runs two of one object at once (kube-runtime 5.0.0,
/// `controller::Config::concurrency`: "a controller never schedules concurrent reconciles on
/// the same object"; its `Runner` holds an object back while an equal one is being
/// reconciled). A GC run may delete the same names meanwhile (a deleting Ingress is not live):
/// whichever comes second finds them gone (the state cache, or a 404, counts as done), and an
/// error only retries the cleanup. The shared backends stay GC's, under the exclusive lock:
/// the `gc` below runs once the frontend no longer uses them.
pub(super) async fn cleanup(ingress: &Ingress, ctx: &Context) -> Result<(), Error> {
    let key = ObjectKey::of(ingress);
    let sync_err = |source| Error::Sync {
        ingress: key_string(&key),
        source,
    };
    let namer = ctx.namer(ingress);
    let mut changes = Changes::new();
    // The class decides; IngressClasses are in every snapshot, so none of the big kinds.
    let internal = crate::translate::regional::is_regional(
        &ctx.stores.snapshot_for(&[], false),
        ingress,
        &ctx.config.translate,
    );
    if internal {
        Box::pin(super::internal::cleanup_internal(
            ctx,
            ingress,
            &mut changes,
        ))
        .await?;
    } else {
        delete_frontend(&ctx.compute, &namer, &mut changes)
            .await
            .map_err(sync_err)?;
    }
    for change in &changes {
        ctx.event(ingress, false, "Sync", change.to_string()).await;
    }
    ctx.gc(ingress).await.map_err(sync_err)?;
    ctx.sync_firewall().await.map_err(sync_err)?;
    info!("load balancer deleted");
    Ok(())
}

/// Requeues a failed reconcile after [`ERROR_REQUEUE`]; one IAM refused is retried after a
/// delay that doubles with each refusal in a row ([`super::permission::backoff`]), since IAM
/// does not change by itself.
pub fn error_policy(ingress: Arc<Ingress>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = key_string(&ObjectKey::of(&*ingress));
    let mut denials = ctx.denials.lock().expect("denials poisoned");
    if super::permission::denied(error).is_some() {
        let n = denials.entry(key).or_insert(0);
        *n += 1;
        let delay = super::permission::backoff(*n);
        warn!(error = %error, retry_in_s = delay.as_secs(), "reconcile refused by IAM; backing off");
        return Action::requeue(delay);
    }
    denials.remove(&key);
    warn!(error = %error, "reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
}

/// The Event for an SSL policy that does not exist, naming the FrontendConfig whose
/// `spec.sslPolicy` asks for it (the sync step only knows the policy).
fn ssl_policy_note(ingress: &Ingress, policy: &str) -> String {
    let name = crate::compute::reference::last_segment(policy);
    let fc = ingress
        .annotations()
        .get(crate::translate::annotations::FRONTEND_CONFIG)
        .map_or_else(
            || "(annotation networking.gke.io/v1beta1.FrontendConfig)".to_string(),
            |fc| format!("{}/{fc}", ingress.namespace().unwrap_or_default()),
        );
    format!(
        "FrontendConfig {fc}: spec.sslPolicy names SSL policy {name:?}, which does not exist in the project; create it (`gcloud compute ssl-policies create {name} --profile MODERN --min-tls-version 1.2`) or fix spec.sslPolicy"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A new Ingress's finalizer goes on with a JSON patch that first tests the finalizers the
    /// reconcile saw (a concurrent writer's change fails the patch rather than being
    /// overwritten), and the reconcile goes on with the object the API returned.
    #[tokio::test]
    async fn the_finalizer_patch_tests_what_it_saw_and_returns_the_patched_ingress() {
        for (seen, ops) in [
            (
                vec![],
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": null},
                    {"op": "add", "path": "/metadata/finalizers", "value": ["mine"]},
                ]),
            ),
            (
                vec!["other".to_string()],
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": "mine"},
                ]),
            ),
        ] {
            let server = MockServer::start().await;
            let mut ingress = Ingress::default();
            ingress.metadata.name = Some("web".into());
            ingress.metadata.namespace = Some("shop".into());
            ingress.metadata.finalizers = (!seen.is_empty()).then(|| seen.clone());
            let mut patched = ingress.clone();
            patched.metadata.finalizers = Some([seen.clone(), vec!["mine".into()]].concat());
            Mock::given(method("PATCH"))
                .and(path(
                    "/apis/networking.k8s.io/v1/namespaces/shop/ingresses/web",
                ))
                .and(header("content-type", "application/json-patch+json"))
                .and(body_json(&ops))
                .respond_with(ResponseTemplate::new(200).set_body_json(&patched))
                .expect(1)
                .mount(&server)
                .await;
            // kube's client needs a process-wide rustls provider, as main.rs installs.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let config = kube::Config::new(server.uri().parse().unwrap());
            let api: Api<Ingress> =
                Api::namespaced(kube::Client::try_from(config).unwrap(), "shop");
            let out = add_finalizer(&api, "mine", &ingress)
                .await
                .unwrap_or_else(|e| panic!("finalizers {seen:?}: {e}"));
            assert_eq!(out.finalizers().last().map(String::as_str), Some("mine"));
            assert_eq!(out.finalizers().len(), seen.len() + 1);
        }
    }
}
