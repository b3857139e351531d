//! Cloud Armor rate limiting: the `throttle` and `rate_based_ban` actions with
//! `rateLimitOptions` (Compute API v1 `SecurityPolicyRuleRateLimitOptions`; Cloud Armor docs,
//! "Rate limiting overview").
//!
//! - Requests are counted per key (`enforceOnKey` ALL, IP, HTTP_HEADER, XFF_IP, HTTP_COOKIE,
//!   HTTP_PATH, SNI, REGION_CODE, USER_IP, or up to three `enforceOnKeyConfigs` combined) in
//!   windows of `rateLimitThreshold.intervalSec` that start with the key's first request.
//! - `throttle`: within `rateLimitThreshold.count` the request gets `conformAction` (allow);
//!   beyond it, `exceedAction` (`deny(429)` and friends, or `redirect`) until the window ends.
//! - `rate_based_ban`: the same, and once a key exceeds `banThreshold` (or, without one,
//!   `rateLimitThreshold`) it is banned for `banDurationSec`: every request gets
//!   `exceedAction`, whatever its rate.
//!
//! Counters live in [`Counters`], shared by every compile of the policy (keyed by policy and
//! rule priority), so a configuration change does not reset them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Which part of the request names the client (`enforceOnKeyType`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPart {
    /// `ALL`: one key for every client.
    All,
    /// `IP` / `USER_IP`: the client address.
    Ip,
    /// `XFF_IP`: the first address of `X-Forwarded-For`, else the client address.
    XffIp,
    /// `HTTP_HEADER` with its name.
    Header(http::HeaderName),
    /// `HTTP_COOKIE` with its name.
    Cookie(String),
    /// `HTTP_PATH`.
    Path,
    /// `SNI`.
    Sni,
    /// `REGION_CODE`.
    RegionCode,
}

/// The request facts a key is made of.
#[derive(Debug)]
pub struct KeyFacts<'a> {
    /// Client address.
    pub ip: std::net::IpAddr,
    /// Request headers.
    pub headers: &'a http::HeaderMap,
    /// Path.
    pub path: &'a str,
    /// SNI, if any.
    pub sni: &'a str,
    /// `origin.region_code`.
    pub region_code: &'a str,
}

/// A rule's `rateLimitOptions`, compiled.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    /// `rateLimitThreshold.count`.
    pub count: u64,
    /// `rateLimitThreshold.intervalSec`.
    pub interval: Duration,
    /// `banThreshold` (count, interval), for `rate_based_ban`.
    pub ban_threshold: Option<(u64, Duration)>,
    /// `banDurationSec` for `rate_based_ban`; `None` for `throttle`.
    pub ban: Option<Duration>,
    /// The key parts.
    pub key: Vec<KeyPart>,
    /// `exceedAction`: `deny(STATUS)` status, or `None` for `redirect`.
    pub exceed_status: Option<u16>,
    /// `exceedRedirectOptions.target` when `exceedAction` is `redirect`.
    pub exceed_redirect: Option<String>,
}

/// What the counters say about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateOutcome {
    /// Within the threshold: `conformAction`.
    Conform,
    /// Over `rateLimitThreshold`: `exceedAction`.
    Exceed,
    /// Banned (`rate_based_ban`): `exceedAction`.
    Banned,
}

impl RateOutcome {
    /// The `rateLimitAction.outcome` of Cloud Logging's request log entry.
    pub fn log_name(self) -> &'static str {
        match self {
            RateOutcome::Conform => "RATE_LIMIT_THRESHOLD_CONFORM",
            RateOutcome::Exceed => "RATE_LIMIT_THRESHOLD_EXCEED",
            RateOutcome::Banned => "BAN_THRESHOLD_EXCEED",
        }
    }
}

fn key_part(kind: &str, name: Option<&str>) -> Result<KeyPart, String> {
    Ok(match kind {
        "ALL" => KeyPart::All,
        "IP" | "USER_IP" => KeyPart::Ip,
        "XFF_IP" => KeyPart::XffIp,
        "HTTP_PATH" => KeyPart::Path,
        "SNI" => KeyPart::Sni,
        "REGION_CODE" => KeyPart::RegionCode,
        "HTTP_HEADER" => KeyPart::Header(
            http::HeaderName::from_bytes(name.unwrap_or_default().as_bytes())
                .map_err(|_| "enforceOnKeyName must name a header for HTTP_HEADER".to_string())?,
        ),
        "HTTP_COOKIE" => KeyPart::Cookie(
            name.filter(|n| !n.is_empty())
                .ok_or("enforceOnKeyName must name a cookie for HTTP_COOKIE")?
                .to_string(),
        ),
        other => return Err(format!("enforceOnKey {other:?} is not emulated")),
    })
}

fn threshold(v: Option<&Value>) -> Option<(u64, Duration)> {
    let v = v?;
    let n = |f: &str| {
        v.get(f)
            .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
    };
    Some((n("count")?, Duration::from_secs(n("intervalSec")?)))
}

fn deny_status(action: &str) -> Option<u16> {
    action
        .strip_prefix("deny(")?
        .strip_suffix(')')?
        .parse()
        .ok()
}

impl RateLimit {
    /// Compiles `rateLimitOptions` of a rule whose action is `throttle` (`ban: false`) or
    /// `rate_based_ban`. Errors name the field.
    pub fn compile(o: &Value, ban: bool) -> Result<RateLimit, String> {
        let (count, interval) = threshold(o.get("rateLimitThreshold"))
            .ok_or("rateLimitOptions.rateLimitThreshold needs count and intervalSec")?;
        let mut key = Vec::new();
        match o.get("enforceOnKeyConfigs").and_then(Value::as_array) {
            Some(configs) if !configs.is_empty() => {
                for c in configs {
                    key.push(key_part(
                        c.get("enforceOnKeyType")
                            .and_then(Value::as_str)
                            .unwrap_or("ALL"),
                        c.get("enforceOnKeyName").and_then(Value::as_str),
                    )?);
                }
            }
            _ => key.push(key_part(
                o.get("enforceOnKey")
                    .and_then(Value::as_str)
                    .unwrap_or("ALL"),
                o.get("enforceOnKeyName").and_then(Value::as_str),
            )?),
        }
        let exceed = o
            .get("exceedAction")
            .and_then(Value::as_str)
            .unwrap_or("deny(429)");
        let exceed_redirect = (exceed == "redirect")
            .then(|| {
                o.pointer("/exceedRedirectOptions/target")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten();
        let exceed_status = deny_status(exceed);
        if exceed_status.is_none() && exceed_redirect.is_none() {
            return Err(format!(
                "rateLimitOptions.exceedAction {exceed:?}: expected deny(STATUS) or redirect with exceedRedirectOptions.target"
            ));
        }
        let ban_secs = o
            .get("banDurationSec")
            .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()));
        Ok(RateLimit {
            count,
            interval: interval.max(Duration::from_secs(1)),
            ban_threshold: if ban {
                threshold(o.get("banThreshold"))
            } else {
                None
            },
            ban: ban.then(|| Duration::from_secs(ban_secs.unwrap_or(0))),
            key,
            exceed_status,
            exceed_redirect,
        })
    }

    /// The key of a request, as logged in `rateLimitAction.key`.
    pub fn key_of(&self, f: &KeyFacts<'_>) -> String {
        let parts: Vec<String> = self
            .key
            .iter()
            .map(|p| match p {
                KeyPart::All => String::new(),
                KeyPart::Ip => f.ip.to_string(),
                KeyPart::XffIp => f
                    .headers
                    .get("x-forwarded-for")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.split(',').next())
                    .map(|v| v.trim().to_string())
                    .unwrap_or_else(|| f.ip.to_string()),
                KeyPart::Header(n) => f
                    .headers
                    .get(n)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_default(),
                KeyPart::Cookie(name) => f
                    .headers
                    .get_all(http::header::COOKIE)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .flat_map(|v| v.split(';'))
                    .filter_map(|kv| kv.trim().split_once('='))
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default(),
                KeyPart::Path => f.path.to_string(),
                KeyPart::Sni => f.sni.to_string(),
                KeyPart::RegionCode => f.region_code.to_string(),
            })
            .collect();
        parts.join("|")
    }
}

#[derive(Debug)]
struct Window {
    start: Instant,
    count: u64,
    ban_start: Instant,
    ban_count: u64,
    banned_until: Option<Instant>,
}

/// Request counters of every rate-limited rule, by (policy, priority, key).
#[derive(Debug, Default)]
pub struct Counters {
    windows: Mutex<HashMap<(String, i64, String), Window>>,
}

/// Counters kept before old windows are dropped.
const MAX_KEYS: usize = 100_000;

impl Counters {
    /// Counts one request of `key` for rule (`policy`, `priority`) at `now` and says what applies.
    pub fn check(
        &self,
        policy: &str,
        priority: i64,
        key: &str,
        rl: &RateLimit,
        now: Instant,
    ) -> RateOutcome {
        let mut map = self.windows.lock().expect("poisoned");
        if map.len() >= MAX_KEYS {
            let longest = rl.interval.max(rl.ban.unwrap_or_default());
            map.retain(|_, w| {
                now.duration_since(w.start) < longest || w.banned_until.is_some_and(|u| u > now)
            });
        }
        let w = map
            .entry((policy.to_string(), priority, key.to_string()))
            .or_insert(Window {
                start: now,
                count: 0,
                ban_start: now,
                ban_count: 0,
                banned_until: None,
            });
        if let Some(until) = w.banned_until {
            if now < until {
                return RateOutcome::Banned;
            }
            w.banned_until = None;
        }
        if now.duration_since(w.start) >= rl.interval {
            w.start = now;
            w.count = 0;
        }
        w.count += 1;
        if let Some(ban) = rl.ban {
            let (ban_count, ban_interval) = rl.ban_threshold.unwrap_or((rl.count, rl.interval));
            if now.duration_since(w.ban_start) >= ban_interval {
                w.ban_start = now;
                w.ban_count = 0;
            }
            w.ban_count += 1;
            if w.ban_count > ban_count && !ban.is_zero() {
                w.banned_until = Some(now + ban);
                w.ban_count = 0;
                w.ban_start = now;
                return RateOutcome::Banned;
            }
        }
        if w.count > rl.count {
            RateOutcome::Exceed
        } else {
            RateOutcome::Conform
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn throttle_windows_and_bans() {
        let rl = RateLimit::compile(
            &json!({"rateLimitThreshold": {"count": 2, "intervalSec": 10}, "exceedAction": "deny(429)", "enforceOnKey": "IP"}),
            false,
        )
        .unwrap();
        let c = Counters::default();
        let t0 = Instant::now();
        let check = |key: &str, t: Instant| c.check("p", 10, key, &rl, t);
        assert_eq!(check("a", t0), RateOutcome::Conform);
        assert_eq!(check("a", t0), RateOutcome::Conform);
        assert_eq!(check("a", t0), RateOutcome::Exceed);
        // Another key has its own window.
        assert_eq!(check("b", t0), RateOutcome::Conform);
        // A new window after intervalSec.
        assert_eq!(
            check("a", t0 + Duration::from_secs(10)),
            RateOutcome::Conform
        );

        let ban = RateLimit::compile(
            &json!({"rateLimitThreshold": {"count": 1, "intervalSec": 10}, "banThreshold": {"count": 2, "intervalSec": 10}, "banDurationSec": 60, "exceedAction": "deny(403)"}),
            true,
        )
        .unwrap();
        assert_eq!(ban.key, [KeyPart::All]);
        let b = |t: Instant| c.check("p", 20, "", &ban, t);
        assert_eq!(b(t0), RateOutcome::Conform);
        assert_eq!(b(t0), RateOutcome::Exceed);
        assert_eq!(b(t0), RateOutcome::Banned);
        // Still banned after the rate window, until banDurationSec.
        assert_eq!(b(t0 + Duration::from_secs(30)), RateOutcome::Banned);
        assert_eq!(b(t0 + Duration::from_secs(61)), RateOutcome::Conform);
    }

    #[test]
    fn keys() {
        let rl = RateLimit::compile(
            &json!({"rateLimitThreshold": {"count": 1, "intervalSec": 60}, "enforceOnKeyConfigs": [{"enforceOnKeyType": "HTTP_HEADER", "enforceOnKeyName": "x-user"}, {"enforceOnKeyType": "HTTP_PATH"}]}),
            false,
        )
        .unwrap();
        let mut h = http::HeaderMap::new();
        h.insert("x-user", "alice".parse().unwrap());
        let f = KeyFacts {
            ip: "127.0.0.9".parse().unwrap(),
            headers: &h,
            path: "/a",
            sni: "",
            region_code: "",
        };
        assert_eq!(rl.key_of(&f), "alice|/a");
        assert!(RateLimit::compile(&json!({"rateLimitThreshold": {"count": 1}}), false).is_err());
        assert!(RateLimit::compile(
            &json!({"rateLimitThreshold": {"count": 1, "intervalSec": 60}, "exceedAction": "allow"}),
            false
        )
        .is_err());
    }
}
