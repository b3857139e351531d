//! Timing of Pod events, for the figures issue 7 asks for: Pod creation to readiness gate True,
//! and Pod deletion to its endpoint's detachment from the NEG.

use super::*;

/// When the test first saw things happen to a Pod (from a Pod watch, so within milliseconds).
#[derive(Clone, Debug, Default)]
pub(super) struct PodTimes {
    pub(super) created: Option<Instant>,
    pub(super) ip: Option<String>,
    pub(super) gate_true: Option<Instant>,
    pub(super) deleting: Option<Instant>,
}

/// A Pod watch (kube-rs) in a background thread, recording [`PodTimes`] per Pod name.
pub(super) struct PodClock {
    pub(super) pods: Arc<Mutex<HashMap<String, PodTimes>>>,
    pub(super) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(super) thread: Option<JoinHandle<()>>,
}

impl PodClock {
    pub(super) fn start(kubeconfig: &std::path::Path) -> Result<PodClock> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let pods: Arc<Mutex<HashMap<String, PodTimes>>> = Arc::default();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let record = pods.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                use futures::StreamExt;
                use k8s_openapi::api::core::v1::Pod;
                use kube::runtime::watcher;
                let client = match kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(anyhow::Error::from)
                .and_then(|c| kube::Client::try_from(c).map_err(anyhow::Error::from))
                {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let api: kube::Api<Pod> = kube::Api::namespaced(client, NS);
                let mut events = watcher(api, watcher::Config::default()).boxed();
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        ev = events.next() => match ev {
                            Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                                observe(&record, &p);
                            }
                            Some(_) => {}
                            None => return,
                        }
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(DEADLINE)
            .map_err(|_| anyhow!("the Pod watch did not start"))??;
        Ok(PodClock {
            pods,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(super) fn times(&self, pod: &str) -> PodTimes {
        self.pods
            .lock()
            .unwrap()
            .get(pod)
            .cloned()
            .unwrap_or_default()
    }

    /// The Pod's IP once the watch has seen it (waits up to [`DEADLINE`]).
    pub(super) fn ip(&self, pod: &str) -> Result<String> {
        wait_for(&format!("an IP for Pod {pod}"), DEADLINE, || {
            Ok(self.times(pod).ip)
        })
    }
}

impl Drop for PodClock {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn observe(
    pods: &Mutex<HashMap<String, PodTimes>>,
    pod: &k8s_openapi::api::core::v1::Pod,
) {
    let now = Instant::now();
    let Some(name) = pod.metadata.name.clone() else {
        return;
    };
    let status = pod.status.as_ref();
    let gate_true = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == GATE && c.status == "True"));
    let mut pods = pods.lock().unwrap();
    let t = pods.entry(name).or_default();
    t.created.get_or_insert(now);
    if t.ip.is_none() {
        t.ip = status.and_then(|s| s.pod_ip.clone());
    }
    if gate_true {
        t.gate_true.get_or_insert(now);
    }
    if pod.metadata.deletion_timestamp.is_some() {
        t.deleting.get_or_insert(now);
    }
}

/// Polls the NEG every 50 ms in a background thread and records when each IP left it.
pub(super) struct DetachClock {
    pub(super) detached: Arc<Mutex<HashMap<String, Instant>>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<()>>,
}

impl DetachClock {
    pub(super) fn start(compute_url: &str, neg: &str) -> DetachClock {
        let detached: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let url = format!(
            "{compute_url}compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups/{neg}/listNetworkEndpoints"
        );
        let (record, halt) = (detached.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let http = reqwest::blocking::Client::new();
            let mut attached: BTreeSet<String> = BTreeSet::new();
            while !halt.load(Ordering::Relaxed) {
                let now_attached = http
                    .post(&url)
                    .json(&json!({"healthStatus": "SHOW"}))
                    .send()
                    .and_then(|r| r.json::<Value>())
                    .map(|v| endpoint_health(&v).into_keys().collect::<BTreeSet<_>>());
                if let Ok(now_attached) = now_attached {
                    let at = Instant::now();
                    let mut record = record.lock().unwrap();
                    for gone in attached.difference(&now_attached) {
                        record.entry(gone.clone()).or_insert(at);
                    }
                    attached = now_attached;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        DetachClock {
            detached,
            stop,
            thread: Some(thread),
        }
    }

    pub(super) fn detached_at(&self, ip: &str) -> Option<Instant> {
        self.detached.lock().unwrap().get(ip).copied()
    }
}

impl Drop for DetachClock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
