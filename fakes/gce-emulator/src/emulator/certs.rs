//! MANAGED sslCertificates: `PROVISIONING` until served by a forwarding rule through a target
//! HTTPS proxy, then `ACTIVE` after `--managed-cert-provisioning-ms` with a certificate from the
//! local CA (docs/emulator.md, resource coverage).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::emulator::Emulator;
use crate::store::State;

impl Emulator {
    /// Whether a MANAGED certificate is served: attached to a target HTTPS proxy that a
    /// forwarding rule uses.
    fn cert_served(state: &State, key: &str) -> bool {
        state
            .referrers(key)
            .filter(|p| p.contains("/targetHttpsProxies/"))
            .any(|p| {
                state
                    .referrers(p)
                    .any(|fr| fr.contains("/forwardingRules/"))
            })
    }

    pub(crate) fn schedule_certs(self: &Arc<Self>, state: &State) {
        let mut pending = self.pending_certs.lock().expect("poisoned");
        pending.retain(|k| {
            state
                .resources
                .get(k)
                .is_some_and(|v| v["managed"]["status"] == "PROVISIONING")
        });
        let mut scheduled = self.scheduled_certs.lock().expect("poisoned");
        for key in pending.iter() {
            if scheduled.contains(key) || !Self::cert_served(state, key) {
                continue;
            }
            scheduled.insert(key.clone());
            let emu = Arc::clone(self);
            let key = key.clone();
            let delay = self.config.managed_cert_provisioning;
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    tokio::time::sleep(delay).await;
                    emu.activate_cert(&key).await;
                });
            }
        }
    }

    /// Issues the certificate of a served MANAGED sslCertificate and marks it ACTIVE.
    async fn activate_cert(self: &Arc<Self>, key: &str) {
        let version = {
            let mut state = self.state.lock().expect("state poisoned");
            self.scheduled_certs.lock().expect("poisoned").remove(key);
            let Some(cert) = state.resources.get(key).cloned() else {
                return;
            };
            if cert["managed"]["status"] != "PROVISIONING" || !Self::cert_served(&state, key) {
                return;
            }
            let domains: Vec<String> = cert["managed"]["domains"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect();
            let issued = match self.ca.as_ref().map(|ca| ca.issue(&domains)) {
                Some(Ok(i)) => i,
                Some(Err(e)) => {
                    tracing::warn!(certificate = %key, error = %e, "the local CA could not issue the managed certificate; it stays PROVISIONING");
                    return;
                }
                None => {
                    tracing::warn!(certificate = %key, "no local CA; the managed certificate stays PROVISIONING");
                    return;
                }
            };
            let mut v = cert.as_ref().clone();
            v["managed"]["status"] = json!("ACTIVE");
            let ds: serde_json::Map<String, Value> = domains
                .iter()
                .map(|d| (d.clone(), json!("ACTIVE")))
                .collect();
            v["managed"]["domainStatus"] = Value::Object(ds);
            v["certificate"] = json!(issued.cert_pem);
            v["expireTime"] = json!(issued.expire_time);
            v["subjectAlternativeNames"] = json!(domains);
            state.put(key.to_string(), v);
            state.private_keys.insert(key.to_string(), issued.key_pem);
            state.version += 1;
            self.pending_certs.lock().expect("poisoned").remove(key);
            self.publish(&state);
            tracing::info!(certificate = %key, "managed certificate ACTIVE");
            state.version
        };
        self.wait_persisted(version).await;
    }
}
