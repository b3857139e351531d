//! Cloud Armor: the security policy attached to a backend service (`backendService.
//! securityPolicy`), enforced on every request routed to it (Compute API v1 `securityPolicies`;
//! Cloud Armor docs, "Security policy overview", "Custom rules language reference", "Rate
//! limiting overview", "Tune preconfigured WAF rules").
//!
//! Rules are evaluated in ascending `priority`; the first rule that matches decides:
//! - matches: `versionedExpr: SRC_IPS_V1` with `config.srcIpRanges`, or `expr.expression` in
//!   Cloud Armor's CEL dialect ([`expr`]), including the preconfigured WAF rules ([`waf`]);
//! - actions: `allow`, `deny(403|404|502)` (also any `deny(STATUS)`), `redirect`
//!   (`redirectOptions.type: EXTERNAL_302` to `target`; `GOOGLE_RECAPTCHA` is answered 403, there
//!   is no reCAPTCHA locally), `throttle` and `rate_based_ban` ([`rate_limit`]);
//! - `preview: true`: the rule is evaluated and what it would have done is logged
//!   (`previewSecurityPolicy`), but it is not enforced and evaluation goes on;
//! - `headerAction.requestHeadersToAdds`: headers added to the request sent to the backend when
//!   the rule allows it.
//!
//! A rule that cannot be compiled (bad CEL, an unknown WAF rule set) is logged and skipped.
//! Each decision becomes the `enforcedSecurityPolicy` of the request's log entry ([`PolicyLog`]).

pub mod enforce;
pub mod expr;
pub mod rate_limit;
pub mod waf;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use ipnet::IpNet;
use serde_json::Value;

pub use crate::dataplane::access_log::{PolicyLog, RateLimitLog};

use self::expr::{Attributes, Expr};
use self::rate_limit::{Counters, KeyFacts, RateLimit, RateOutcome};

/// What a rule does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `allow`.
    Allow,
    /// `deny(STATUS)`.
    Deny(u16),
    /// `redirect` to `redirectOptions.target` (`None`: GOOGLE_RECAPTCHA, answered 403).
    Redirect(Option<String>),
    /// `throttle` or `rate_based_ban`.
    RateLimited(Box<RateLimit>),
}

impl Action {
    fn configured(&self, ban: bool) -> &'static str {
        match self {
            Action::Allow => "ALLOW",
            Action::Deny(_) => "DENY",
            Action::Redirect(_) => "REDIRECT",
            Action::RateLimited(_) if ban => "RATE_BASED_BAN",
            Action::RateLimited(_) => "THROTTLE",
        }
    }
}

#[derive(Debug)]
enum Matcher {
    SrcIps { any: bool, ranges: Vec<IpNet> },
    Expr(Expr),
}

#[derive(Debug)]
struct Rule {
    priority: i64,
    action: Action,
    ban: bool,
    preview: bool,
    matcher: Matcher,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

/// A compiled security policy.
#[derive(Debug)]
pub struct SecurityPolicy {
    name: String,
    key: String,
    rules: Vec<Rule>,
}

/// The request facts a policy decides on.
#[derive(Debug)]
pub struct Request<'a> {
    /// Client address and port.
    pub client: (IpAddr, u16),
    /// Method.
    pub method: &'a str,
    /// Path (normalized).
    pub path: &'a str,
    /// Query without `?`.
    pub query: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// Headers.
    pub headers: &'a http::HeaderMap,
    /// SNI the client sent.
    pub sni: &'a str,
}

/// What the proxy does with the request.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Forward it, with these headers added (`headerAction`).
    Allow(Vec<(http::HeaderName, http::HeaderValue)>),
    /// Answer with this status (and `Location` for a redirect).
    Respond {
        /// Status code.
        status: u16,
        /// `Location` of a redirect.
        location: Option<String>,
    },
}

/// The outcome of a policy for one request.
#[derive(Debug)]
pub struct Decision {
    /// What to do.
    pub verdict: Verdict,
    /// The enforced rule, as logged.
    pub enforced: PolicyLog,
    /// The first preview rule that matched, as logged.
    pub preview: Option<PolicyLog>,
}

/// Cloud Armor state shared by every compile: rate-limit counters and the region map.
#[derive(Debug, Default)]
pub struct State {
    /// Rate-limit counters.
    pub counters: Counters,
    regions: ArcSwap<Vec<(IpNet, String)>>,
}

impl State {
    /// Sets the local mapping from client address ranges to `origin.region_code` (ISO 3166-1
    /// alpha-2 codes); the most specific range wins; unmapped clients have `""`.
    pub fn set_regions(&self, mut map: Vec<(IpNet, String)>) {
        map.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix_len()));
        self.regions.store(Arc::new(map));
    }

    /// The current region map.
    pub fn regions(&self) -> Vec<(IpNet, String)> {
        self.regions.load().as_ref().clone()
    }

    /// `origin.region_code` of `ip`.
    pub fn region_of(&self, ip: IpAddr) -> String {
        self.regions
            .load()
            .iter()
            .find(|(n, _)| n.contains(&ip))
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    }
}

fn parse_action(action: &str, rule: &Value) -> Result<(Action, bool), String> {
    Ok(match action {
        "allow" => (Action::Allow, false),
        "deny" => (Action::Deny(403), false),
        "redirect" => {
            let ty = rule
                .pointer("/redirectOptions/type")
                .and_then(Value::as_str)
                .unwrap_or("EXTERNAL_302");
            let target = rule
                .pointer("/redirectOptions/target")
                .and_then(Value::as_str)
                .map(str::to_string);
            match ty {
                "EXTERNAL_302" if target.is_some() => (Action::Redirect(target), false),
                "GOOGLE_RECAPTCHA" => (Action::Redirect(None), false),
                _ => return Err("redirect needs redirectOptions.target (EXTERNAL_302)".into()),
            }
        }
        "throttle" | "rate_based_ban" => {
            let ban = action == "rate_based_ban";
            let o = rule
                .get("rateLimitOptions")
                .ok_or("throttle and rate_based_ban need rateLimitOptions")?;
            (
                Action::RateLimited(Box::new(RateLimit::compile(o, ban)?)),
                ban,
            )
        }
        a => {
            let status = a
                .strip_prefix("deny(")
                .and_then(|s| s.strip_suffix(')'))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("action {a:?} is not emulated"))?;
            (Action::Deny(status), false)
        }
    })
}

fn compile_rule(r: &Value) -> Result<Rule, String> {
    let action = r.get("action").and_then(Value::as_str).unwrap_or("");
    let (action, ban) = parse_action(action, r)?;
    let m = r.get("match");
    let matcher = if let Some(src) = m
        .and_then(|m| m.pointer("/expr/expression"))
        .and_then(Value::as_str)
    {
        Matcher::Expr(Expr::compile(src)?)
    } else {
        let srcs: Vec<&str> = m
            .and_then(|m| m.pointer("/config/srcIpRanges"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        Matcher::SrcIps {
            any: srcs.contains(&"*"),
            ranges: srcs
                .iter()
                .filter_map(|s| {
                    s.parse::<IpNet>()
                        .ok()
                        .or_else(|| s.parse::<IpAddr>().ok().map(IpNet::from))
                })
                .collect(),
        }
    };
    let headers = r
        .pointer("/headerAction/requestHeadersToAdds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| {
            let name =
                http::HeaderName::from_bytes(h.get("headerName")?.as_str()?.as_bytes()).ok()?;
            let value = http::HeaderValue::from_str(
                h.get("headerValue").and_then(Value::as_str).unwrap_or(""),
            )
            .ok()?;
            Some((name, value))
        })
        .collect();
    Ok(Rule {
        priority: r
            .get("priority")
            .and_then(|p| p.as_i64().or_else(|| p.as_str()?.parse().ok()))
            .unwrap_or(i64::MAX),
        action,
        ban,
        preview: r.get("preview").and_then(Value::as_bool).unwrap_or(false),
        matcher,
        headers,
    })
}

impl SecurityPolicy {
    /// Compiles the wire JSON of a `compute#securityPolicy` stored under `key`.
    pub fn compile(key: &str, v: &Value) -> SecurityPolicy {
        let mut rules = Vec::new();
        for r in v
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match compile_rule(r) {
                Ok(rule) => rules.push(rule),
                Err(e) => {
                    let priority = r.get("priority").cloned().unwrap_or_default();
                    tracing::warn!(security_policy = key, %priority, error = %e, "security policy rule not enforced")
                }
            }
        }
        rules.sort_by_key(|r| r.priority);
        SecurityPolicy {
            name: v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(key.rsplit('/').next().unwrap_or(key))
                .to_string(),
            key: key.to_string(),
            rules,
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Decides on one request at `now`. The default rule (priority 2147483647) always exists in
    /// stored policies; without any matching rule the request is allowed.
    pub fn evaluate(&self, req: &Request<'_>, state: &State, now: Instant) -> Decision {
        let region = if self
            .rules
            .iter()
            .any(|r| matches!(r.matcher, Matcher::Expr(_)))
            || !state.regions.load().is_empty()
        {
            state.region_of(req.client.0)
        } else {
            String::new()
        };
        let mut preview = None;
        for rule in &self.rules {
            let (matched, waf_ids) = match &rule.matcher {
                Matcher::SrcIps { any, ranges } => (
                    *any || ranges.iter().any(|n| n.contains(&req.client.0)),
                    Vec::new(),
                ),
                Matcher::Expr(e) => {
                    let o = e.evaluate(&Attributes {
                        client: req.client,
                        method: req.method,
                        path: req.path,
                        query: req.query,
                        scheme: req.scheme,
                        headers: req.headers,
                        region_code: &region,
                    });
                    (o.matched, o.waf_ids)
                }
            };
            if !matched {
                continue;
            }
            let (verdict, rate) = self.apply(rule, req, &region, state, now);
            let log = PolicyLog {
                name: self.name.clone(),
                priority: rule.priority,
                configured_action: rule.action.configured(rule.ban),
                outcome: if matches!(verdict, Verdict::Allow(_)) {
                    "ACCEPT"
                } else {
                    "DENY"
                },
                preconfigured_expr_ids: waf_ids,
                rate_limit_action: rate,
            };
            if rule.preview {
                preview.get_or_insert(log);
                continue;
            }
            return Decision {
                verdict,
                enforced: log,
                preview,
            };
        }
        Decision {
            verdict: Verdict::Allow(Vec::new()),
            enforced: PolicyLog {
                name: self.name.clone(),
                priority: i64::from(i32::MAX),
                configured_action: "ALLOW",
                outcome: "ACCEPT",
                preconfigured_expr_ids: Vec::new(),
                rate_limit_action: None,
            },
            preview,
        }
    }

    fn apply(
        &self,
        rule: &Rule,
        req: &Request<'_>,
        region: &str,
        state: &State,
        now: Instant,
    ) -> (Verdict, Option<RateLimitLog>) {
        let respond = |status: u16, location: Option<String>| Verdict::Respond { status, location };
        match &rule.action {
            Action::Allow => (Verdict::Allow(rule.headers.clone()), None),
            Action::Deny(s) => (respond(*s, None), None),
            Action::Redirect(Some(t)) => (respond(302, Some(t.clone())), None),
            Action::Redirect(None) => (respond(403, None), None),
            Action::RateLimited(rl) => {
                let key = rl.key_of(&KeyFacts {
                    ip: req.client.0,
                    headers: req.headers,
                    path: req.path,
                    sni: req.sni,
                    region_code: region,
                });
                let outcome = state
                    .counters
                    .check(&self.key, rule.priority, &key, rl, now);
                let verdict = match outcome {
                    RateOutcome::Conform => Verdict::Allow(rule.headers.clone()),
                    _ => match (&rl.exceed_redirect, rl.exceed_status) {
                        (Some(t), _) => respond(302, Some(t.clone())),
                        (None, s) => respond(s.unwrap_or(429), None),
                    },
                };
                (
                    verdict,
                    Some(RateLimitLog {
                        key,
                        outcome: outcome.log_name(),
                    }),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests;
