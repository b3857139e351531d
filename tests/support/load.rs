//! The load generator the end-to-end tests share (rollouts, address changes): a few threads,
//! each on one keep-alive connection, sending requests back to back through the load balancer
//! and tallying every answer, so a test can assert that not one request failed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the load generator saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: u64,
    pub failed: u64,
    /// 200 answers per Pod (the echo server's `x-pod-name` header).
    pub by_pod: BTreeMap<String, u64>,
    /// Failures by kind (`502`, `transport`, ...), with the first few messages.
    pub failures: BTreeMap<String, u64>,
    pub samples: Vec<String>,
}

/// Threads, each with one keep-alive connection, sending `GET /` with `Host: host` back to back
/// to the load balancer's socket until stopped, `max_requests` in total, or `max_duration`.
pub struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    tally: Arc<Mutex<Tally>>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(
        socket: &str,
        host: &str,
        connections: usize,
        max_requests: u64,
        max_duration: Duration,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let started = Instant::now();
        let threads = (0..connections)
            .map(|_| {
                let (stop, sent, tally) = (stop.clone(), sent.clone(), tally.clone());
                let host = host.to_string();
                let url = format!("http://{socket}/");
                std::thread::spawn(move || {
                    let client = reqwest::blocking::Client::builder()
                        .pool_max_idle_per_host(1)
                        .timeout(Duration::from_secs(20))
                        .build()
                        .expect("HTTP client");
                    while !stop.load(Ordering::Relaxed)
                        && started.elapsed() < max_duration
                        && sent.fetch_add(1, Ordering::Relaxed) < max_requests
                    {
                        let result = client
                            .get(&url)
                            .header(reqwest::header::HOST, host.as_str())
                            .send()
                            .and_then(|r| {
                                let status = r.status().as_u16();
                                let pod = r
                                    .headers()
                                    .get("x-pod-name")
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string);
                                Ok((status, pod, r.text()?))
                            });
                        let at = started.elapsed().as_secs_f64();
                        let mut t = tally.lock().unwrap();
                        let failure = match result {
                            Ok((200, Some(pod), _)) => {
                                t.ok += 1;
                                *t.by_pod.entry(pod).or_default() += 1;
                                None
                            }
                            Ok((status, _, body)) => Some((
                                status.to_string(),
                                format!("{status} at {at:.2}s: {}", trim(&body)),
                            )),
                            Err(e) => Some((
                                "transport".to_string(),
                                format!("transport error at {at:.2}s: {e:#}"),
                            )),
                        };
                        if let Some((kind, message)) = failure {
                            t.failed += 1;
                            *t.failures.entry(kind).or_default() += 1;
                            if t.samples.len() < 5 {
                                t.samples.push(message);
                            }
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            sent,
            tally,
            threads,
        }
    }

    /// Requests answered so far (ok + failed).
    pub fn done(&self) -> u64 {
        let t = self.tally.lock().unwrap();
        t.ok + t.failed
    }

    /// Whether every thread has stopped (request or time budget spent).
    pub fn all_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    pub fn pods_seen(&self) -> BTreeSet<String> {
        self.tally.lock().unwrap().by_pod.keys().cloned().collect()
    }

    pub fn finish(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let _ = self.sent;
        Arc::try_unwrap(self.tally)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_default()
    }
}

pub fn trim(s: &str) -> String {
    s.chars().take(160).collect()
}
