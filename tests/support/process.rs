//! The harness's child processes: one binary started, its first stdout line read (the address
//! it serves), its output logged to a file, killed when dropped; the operator's metrics read
//! from its log.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use anyhow::{anyhow, Context, Result};

use super::{wait_for, DEADLINE};

/// A child process that is killed when dropped; its stderr goes to a log file.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `cmd`, waits (up to [`DEADLINE`]) for its first stdout line and returns it.
    /// The rest of stdout and all of stderr are appended to `log`.
    pub fn start(name: &str, mut cmd: Command, log: PathBuf) -> Result<(Proc, String)> {
        let stderr = std::fs::File::create(&log)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().with_context(|| format!("spawning {name}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        let log_copy = log.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let _ = tx.send(first.trim().to_string());
            // Keep draining stdout so the child never blocks on a full pipe.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
            if !rest.is_empty() {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log_copy) {
                    let _ = f.write_all(&rest);
                }
            }
        });
        let proc = Proc {
            name: name.to_string(),
            child,
            log,
        };
        match rx.recv_timeout(DEADLINE) {
            Ok(line) if !line.is_empty() => Ok((proc, line)),
            _ => Err(anyhow!(
                "{name} printed no first line; its log:\n{}",
                proc.log_text()
            )),
        }
    }

    /// The process's stderr log so far (for failure messages).
    pub fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(80).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Proc {
    /// The operator's `/metrics` URL, from the `metrics listening on http://ADDR` line it
    /// prints once it serves (polled up to [`DEADLINE`]).
    pub fn metrics_url(&self) -> Result<String> {
        wait_for(
            &format!("{}'s metrics address", self.name),
            DEADLINE,
            || {
                // The whole log: the line comes early and log_text() keeps only the tail.
                Ok(std::fs::read_to_string(&self.log)?
                    .lines()
                    .find_map(|l| l.strip_prefix("metrics listening on "))
                    .map(|u| format!("{}/metrics", u.trim())))
            },
        )
    }

    /// `gclb_ingress_syncs_total{result="ok"}` on this operator's `/metrics`: how many
    /// reconciles it completed.
    pub fn ok_syncs(&self) -> Result<u64> {
        let body = reqwest::blocking::get(self.metrics_url()?)?.text()?;
        Ok(body
            .lines()
            .filter(|l| l.starts_with("gclb_ingress_syncs_total") && l.contains("result=\"ok\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
