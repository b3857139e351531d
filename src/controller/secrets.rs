//! Secrets the Secret store does not hold, read by name when an Ingress is reconciled.
//!
//! The store watches `kubernetes.io/tls` Secrets only ([`super::stores::TLS_SECRETS`], so the
//! thousands of other Secrets of a cluster are never sent to the operator or cached). Two kinds
//! of Secret translation reads are of another type: a `spec.tls` Secret of type `Opaque` (or
//! unset) holding PEM `tls.crt`/`tls.key`, and the BackendConfig
//! `iap.oauthclientCredentials.secretName` Secret (`Opaque`, `client_id`/`client_secret`). Like
//! GKE's controller (kubernetes/ingress-gce), which reads Secrets with a GET by namespace and
//! name while translating, each such Secret an Ingress references is fetched with one GET per
//! reconcile and added to that reconcile's snapshot only. Changes to them are not watched: the
//! periodic resync (`--resync-period`) and any change to the Ingress pick them up.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use super::{prune, Error};
use crate::translate::secret_refs::referenced_secrets;
use crate::translate::{ClusterSnapshot, ObjectKey, TranslateConfig};

/// Adds to `snapshot` every Secret `ingress` references ([`referenced_secrets`]) that the
/// snapshot does not hold, read with a GET (namespaced, by name) and pruned like the store's
/// Secrets ([`prune::secret`]). Returns how many were added.
///
/// A Secret that does not exist (404) is left out, so translation reports it as it reports any
/// missing Secret (naming the field and the fix).
///
/// # Errors
/// [`Error::SecretRead`] for any other API error (403, 5xx, a transport error): the reconcile
/// fails before translating and is retried after [`super::ERROR_REQUEUE`].
pub async fn add_uncached_secrets(
    client: &Client,
    snapshot: &mut ClusterSnapshot,
    ingress: &k8s_openapi::api::networking::v1::Ingress,
    config: &TranslateConfig,
) -> Result<usize, Error> {
    let mut added = 0;
    for key in referenced_secrets(snapshot, ingress, config) {
        if snapshot.secrets.contains_key(&key) {
            continue;
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
        match api.get_opt(&key.name).await {
            Ok(Some(mut secret)) => {
                prune::secret(&mut secret);
                snapshot.insert(secret);
                added += 1;
            }
            Ok(None) => {}
            Err(source) => {
                return Err(Error::SecretRead {
                    ingress: ObjectKey::of(ingress).to_string(),
                    secret: key.to_string(),
                    source,
                })
            }
        }
    }
    Ok(added)
}
