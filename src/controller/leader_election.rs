//! Leader election on a `coordination.k8s.io/v1` Lease, so that several replicas of the operator
//! can run and exactly one of them reconciles (GKE's own controller does the same with its
//! `ingress-gce-lock`).
//!
//! The algorithm is client-go's `leaderelection` package over a `LeaseLock`:
//! - a candidate reads the Lease; if it does not exist it creates it holding it;
//! - a Lease held by someone else counts as expired when its record (holder, renewTime,
//!   transitions) has not changed for `leaseDurationSeconds` *as observed on this machine's
//!   monotonic clock*, so clock skew between nodes does not matter;
//! - taking or renewing is a PUT carrying the observed `resourceVersion`: of two candidates
//!   racing, the API server accepts one and answers the other 409 Conflict (optimistic
//!   concurrency, Kubernetes API conventions);
//! - the leader renews every `retry_period`; if it cannot renew for `renew_deadline` it has lost
//!   the lease and must stop acting (the caller exits, and Kubernetes restarts the container).
//!
//! [`decide`] is the pure part (what to do with an observed Lease); [`LeaderElector`] does the
//! API calls. Errors are `kube::Error`s from the API server.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tracing::{info, warn};

/// Timings, client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
#[derive(Clone, Debug)]
pub struct Timings {
    /// How long a non-renewed Lease keeps other candidates out (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timings {
    /// Timings from a lease duration in seconds, keeping client-go's ratios (renew deadline
    /// 2/3 of it, retry period 2/15 of it, at least 100 ms). `lease_seconds` below 1 counts as 1.
    pub fn from_lease_seconds(lease_seconds: u64) -> Timings {
        let lease = Duration::from_secs(lease_seconds.max(1));
        Timings {
            lease_duration: lease,
            renew_deadline: lease * 2 / 3,
            retry_period: (lease * 2 / 15).max(Duration::from_millis(100)),
        }
    }
}

/// What a candidate does with the Lease it observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, held by us.
    Create,
    /// We hold it: write a new renewTime.
    Renew,
    /// Free or expired: take it (acquireTime now, transitions + 1).
    Take,
    /// Someone else holds a live Lease: wait.
    Wait {
        /// The current holder.
        holder: String,
    },
}

/// Decides from the observed Lease (`None`: there is none), our `identity`, and how long ago
/// this process first saw the Lease's current record unchanged (`unchanged_for`). A Lease
/// without a spec counts as free.
pub fn decide(lease: Option<&Lease>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(lease) = lease else {
        return Decision::Create;
    };
    let Some(spec) = lease.spec.as_ref() else {
        return Decision::Take;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
    if holder.is_empty() || unchanged_for >= duration {
        return Decision::Take;
    }
    Decision::Wait {
        holder: holder.to_string(),
    }
}

/// How one attempt to acquire or renew ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease now.
    Holding,
    /// Another candidate holds a live Lease.
    HeldBy(String),
    /// Our write lost a race (409 Conflict); the next attempt reads the Lease again.
    Conflict,
}

/// The part of a Lease whose change proves its holder alive: holder, renewTime, transitions.
type Record = Option<(Option<String>, Option<MicroTime>, Option<i32>)>;

fn record(spec: Option<&LeaseSpec>) -> Record {
    spec.map(|s| {
        (
            s.holder_identity.clone(),
            s.renew_time.clone(),
            s.lease_transitions,
        )
    })
}

/// A candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    /// The last record seen and when (monotonic) it was first seen.
    observed: Option<(Record, Instant)>,
}

impl LeaderElector {
    /// A candidate named `identity` for the Lease `namespace/name`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> Self {
        LeaderElector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timings,
            observed: None,
        }
    }

    /// This candidate's identity (the Lease's `holderIdentity` while it leads).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt to acquire or renew the Lease; API errors other than a 409 are returned.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = Instant::now();
        let lease = self.api.get_opt(&self.name).await?;
        let rec = record(lease.as_ref().and_then(|l| l.spec.as_ref()));
        let since = match &self.observed {
            Some((seen, at)) if *seen == rec => *at,
            _ => now,
        };
        self.observed = Some((rec, since));
        let decision = decide(lease.as_ref(), &self.identity, now.duration_since(since));
        let stamp = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        let seconds = Some(self.timings.lease_duration.as_secs().max(1) as i32);
        if let Decision::Wait { holder } = decision {
            return Ok(Attempt::HeldBy(holder));
        }
        let result = match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: seconds,
                        acquire_time: stamp.clone(),
                        renew_time: stamp,
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                // PUT with the observed resourceVersion: a concurrent writer makes this a 409.
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                if decision == Decision::Take {
                    spec.holder_identity = Some(self.identity.clone());
                    spec.acquire_time = stamp.clone();
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.renew_time = stamp;
                spec.lease_duration_seconds = seconds;
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(lease) => {
                let rec = record(lease.spec.as_ref());
                self.observed = Some((rec, Instant::now()));
                Ok(Attempt::Holding)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Waits until this candidate holds the Lease, retrying every `retry_period` (API errors
    /// are logged and retried).
    pub async fn acquire(&mut self) {
        let mut waiting_logged = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Holding) => {
                    info!(lease = %self.name, identity = %self.identity, "became the leader");
                    return;
                }
                Ok(_) if !waiting_logged => {
                    info!(lease = %self.name, identity = %self.identity, "waiting to become the leader");
                    waiting_logged = true;
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(lease = %self.name, error = %e, "leader election: cannot read or write the Lease")
                }
            }
            tokio::time::sleep(self.timings.retry_period).await;
        }
    }

    /// Renews every `retry_period` while leading; returns when the Lease could not be renewed
    /// for `renew_deadline` (API errors and lost write races are retried until then) or another
    /// candidate holds it: leadership is lost.
    pub async fn hold(&mut self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Holding) => last_renewal = Instant::now(),
                Ok(Attempt::HeldBy(holder)) => {
                    warn!(lease = %self.name, %holder, "another candidate holds the Lease now");
                    return;
                }
                // Retried until the renew deadline, like any failed renewal (client-go).
                Ok(Attempt::Conflict) => {
                    warn!(lease = %self.name, "leader election: renewal lost a write race")
                }
                Err(e) => warn!(lease = %self.name, error = %e, "leader election: renewal failed"),
            }
            if last_renewal.elapsed() >= self.timings.renew_deadline {
                return;
            }
        }
    }

    /// Gives the Lease up (empty holder) so a standby takes over at once instead of after the
    /// lease duration. Best effort: errors are logged.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        spec.acquire_time = None;
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => info!(lease = %self.name, "released the leader Lease"),
            Err(e) => warn!(lease = %self.name, error = %e, "could not release the leader Lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn no_lease_is_created_and_our_own_is_renewed() {
        assert_eq!(decide(None, "a", Duration::ZERO), Decision::Create);
        let s = spec(Some("a"), 15);
        assert_eq!(
            decide(Some(&s), "a", Duration::from_secs(60)),
            Decision::Renew
        );
    }

    #[test]
    fn a_live_lease_of_another_holder_makes_us_wait_until_it_expires() {
        let s = spec(Some("b"), 15);
        assert_eq!(
            decide(Some(&s), "a", Duration::from_secs(14)),
            Decision::Wait { holder: "b".into() }
        );
        assert_eq!(
            decide(Some(&s), "a", Duration::from_secs(15)),
            Decision::Take
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let s = spec(None, 15);
        assert_eq!(decide(Some(&s), "a", Duration::ZERO), Decision::Take);
        let s = spec(Some(""), 15);
        assert_eq!(decide(Some(&s), "a", Duration::ZERO), Decision::Take);
        let no_spec = Lease::default();
        assert_eq!(decide(Some(&no_spec), "a", Duration::ZERO), Decision::Take);
    }

    #[test]
    fn timings_keep_client_go_ratios() {
        let t = Timings::from_lease_seconds(15);
        assert_eq!(t.lease_duration, Duration::from_secs(15));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
        assert_eq!(t.retry_period, Duration::from_secs(2));
        let t = Timings::from_lease_seconds(0);
        assert_eq!(t.lease_duration, Duration::from_secs(1));
        assert!(t.retry_period >= Duration::from_millis(100));
    }
}
