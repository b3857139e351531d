//! Process figures from `/proc`: CPU seconds (user + system), resident memory now and at its
//! peak, the machine's load average.

use std::time::Duration;

/// Clock ticks a second for `/proc/PID/stat` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const TICKS: f64 = 100.0;

/// User + system CPU seconds of `pid` so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) closed by ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the ')'.
    (num(11) + num(12)) / TICKS
}

/// `(VmRSS, VmHWM)` of `pid` in MiB: resident now and the peak.
pub fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// CPU seconds and load over one phase.
pub struct Meter {
    pids: Vec<(String, u32, f64)>,
    load_start: f64,
    started: std::time::Instant,
}

impl Meter {
    /// Starts metering the named processes.
    pub fn start(pids: &[(&str, u32)]) -> Meter {
        Meter {
            pids: pids
                .iter()
                .map(|(n, p)| (n.to_string(), *p, cpu_seconds(*p)))
                .collect(),
            load_start: load_average(),
            started: std::time::Instant::now(),
        }
    }

    /// `(wall, [(name, cpu seconds)], (load at start, load now))`.
    pub fn stop(&self) -> (Duration, Vec<(String, f64)>, (f64, f64)) {
        let cpu = self
            .pids
            .iter()
            .map(|(n, p, c0)| (n.clone(), cpu_seconds(*p) - c0))
            .collect();
        (
            self.started.elapsed(),
            cpu,
            (self.load_start, load_average()),
        )
    }
}

/// Resets `pid`'s peak resident set (`VmHWM`) to its current RSS (`echo 5 >
/// /proc/PID/clear_refs`, Linux 4.0+, proc(5)), so the next [`rss_mib`] peak is of the time since.
/// Best effort: without permission the peak stays the process's lifetime peak.
pub fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}
