//! Cloud Armor's custom rules language (`match.expr.expression`), evaluated with the `cel` crate
//! (Common Expression Language). Attributes and functions are the ones Cloud Armor documents
//! ("Custom rules language reference"):
//!
//! - `request.headers` (a map keyed by lower-case header name; repeated headers joined with
//!   `,`), `request.method`, `request.path`, `request.query` (without `?`), `request.scheme`
//!   (`http`/`https`);
//! - `origin.ip`, `origin.user_ip` (the client address), `origin.region_code` (from the
//!   emulator's region map, see [`super::State::set_regions`]; `""` when unmapped),
//!   `origin.asn` (always 0 locally);
//! - `inIpRange(origin.ip, '9.9.9.0/24')`; string methods `lower()`, `upper()`,
//!   `base64Decode()`, `urlDecode()`, `urlDecodeUni()` besides CEL's `contains`, `startsWith`,
//!   `endsWith`, `matches` (RE2 syntax), `size`;
//! - `evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1, 'opt_out_rule_ids': [...],
//!   'opt_in_rule_ids': [...]})` and `evaluatePreconfiguredExpr('xss-v33-stable', [opt-out ids])`
//!   ([`super::waf`]).
//!
//! The two WAF functions take literal arguments only (as Cloud Armor requires); each call is
//! replaced by a variable `__waf_N` at compile time and computed, only when the rule is
//! reached, before the expression runs. An expression that fails at run time (a missing header
//! in `request.headers['x']`, a type error) does not match, as in Cloud Armor.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use cel::objects::Value;
use cel::{Context, Program};
use ipnet::IpNet;

use super::waf::{self, WafRequest, WafRule};

/// A compiled expression.
#[derive(Debug)]
pub struct Expr {
    program: Program,
    wafs: Vec<WafRule>,
}

/// The request attributes an expression sees.
#[derive(Debug)]
pub struct Attributes<'a> {
    /// Client address and port.
    pub client: (IpAddr, u16),
    /// Method.
    pub method: &'a str,
    /// Path (normalized as routed).
    pub path: &'a str,
    /// Query without `?` (empty when none).
    pub query: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// Request headers.
    pub headers: &'a http::HeaderMap,
    /// `origin.region_code`.
    pub region_code: &'a str,
}

/// What evaluating a rule's expression found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether it matched.
    pub matched: bool,
    /// Preconfigured WAF signature ids that matched (for `preconfiguredExprIds`).
    pub waf_ids: Vec<String>,
}

fn ctx_functions(ctx: &mut Context<'static, 'static>) {
    let add = |ctx: &mut Context<'static, 'static>, r: Result<(), cel::DeclarationError>| {
        if let Err(e) = r {
            tracing::error!(error = ?e, "cannot declare a Cloud Armor function");
        }
        let _ = ctx;
    };
    let r = ctx.add_function("inIpRange", |ip: Arc<String>, range: Arc<String>| {
        in_ip_range(&ip, &range)
    });
    add(ctx, r);
    let r = ctx.add_function(
        "lower",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| s.to_lowercase(),
    );
    add(ctx, r);
    let r = ctx.add_function(
        "upper",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| s.to_uppercase(),
    );
    add(ctx, r);
    let r = ctx.add_function(
        "base64Decode",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| {
            base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(s.trim()))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        },
    );
    add(ctx, r);
    let r = ctx.add_function(
        "urlDecode",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| url_decode(&s),
    );
    add(ctx, r);
    let r = ctx.add_function(
        "urlDecodeUni",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| url_decode_uni(&s),
    );
    add(ctx, r);
}

/// The root context with Cloud Armor's functions, shared by every evaluation.
fn root() -> &'static Context<'static, 'static> {
    static ROOT: OnceLock<Context<'static, 'static>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mut ctx = Context::default();
        ctx_functions(&mut ctx);
        ctx
    })
}

/// `inIpRange(ip, range)`: whether `ip` lies in the CIDR `range` (a bare address is a /32 or /128).
pub fn in_ip_range(ip: &str, range: &str) -> bool {
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    range
        .parse::<IpNet>()
        .ok()
        .or_else(|| range.parse::<IpAddr>().ok().map(IpNet::from))
        .is_some_and(|n| n.contains(&ip))
}

/// `urlDecode()`: `%XX` escapes and `+` as space.
pub fn url_decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

/// `urlDecodeUni()`: like [`url_decode`], plus IIS-style `%uXXXX` escapes.
pub fn url_decode_uni(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("%u") {
        out.push_str(&rest[..i]);
        let hex = rest.get(i + 2..i + 6).unwrap_or("");
        match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
            Some(c) if hex.len() == 4 => {
                out.push(c);
                rest = &rest[i + 6..];
            }
            _ => {
                out.push_str("%u");
                rest = &rest[i + 2..];
            }
        }
    }
    out.push_str(rest);
    url_decode(&out)
}

fn waf_call_re() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r#"evaluatePreconfigured(Waf|Expr)\(\s*['"]([^'"]+)['"]\s*(?:,\s*(\{[^{}]*\}|\[[^\[\]]*\]))?\s*\)"#,
        )
        .expect("valid regex")
    })
}

fn str_list(v: Option<&Value>, what: &str) -> Result<Vec<u32>, String> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Value::List(items) = v else {
        return Err(format!("{what} must be a list of signature ids"));
    };
    items
        .iter()
        .map(|i| match i {
            Value::String(s) => waf::crs_id(s).ok_or_else(|| {
                format!("{what}: {s:?} is not a signature id like owasp-crs-v030301-id942100-sqli")
            }),
            _ => Err(format!("{what} must be a list of strings")),
        })
        .collect()
}

/// Parses the arguments of one WAF call.
fn waf_rule(kind: &str, set: &str, args: Option<&str>) -> Result<WafRule, String> {
    if waf::category(set).is_none() {
        return Err(format!(
            "{set:?} is not a preconfigured WAF rule set the emulator knows (sqli-v33-stable, xss-v33-stable, lfi-v33-stable, rfi-v33-stable, rce-v33-stable, scannerdetection-v33-stable, protocolattack-v33-stable, sessionfixation-v33-stable, php-v33-stable, java-v33-stable, nodejs-v33-stable, methodenforcement-v33-stable)"
        ));
    }
    let mut rule = WafRule {
        set: set.to_string(),
        sensitivity: 4,
        opt_out: Vec::new(),
        opt_in: Vec::new(),
    };
    let Some(args) = args else { return Ok(rule) };
    let v = Program::compile(args)
        .map_err(|e| format!("arguments of evaluatePreconfigured{kind}: {e}"))?
        .execute(&Context::default())
        .map_err(|e| format!("arguments of evaluatePreconfigured{kind}: {e}"))?;
    match (kind, &v) {
        ("Expr", Value::List(_)) => rule.opt_out = str_list(Some(&v), "opt-out list")?,
        ("Waf", Value::Map(m)) => {
            let get = |k: &str| {
                m.map
                    .get(&cel::objects::Key::String(Arc::new(k.to_string())))
            };
            if let Some(s) = get("sensitivity") {
                match s {
                    Value::Int(n) if (0..=4).contains(n) => rule.sensitivity = *n as u8,
                    _ => return Err("sensitivity must be an integer from 0 to 4".into()),
                }
            }
            rule.opt_out = str_list(get("opt_out_rule_ids"), "opt_out_rule_ids")?;
            rule.opt_in = str_list(get("opt_in_rule_ids"), "opt_in_rule_ids")?;
        }
        _ => {
            return Err(format!(
                "evaluatePreconfigured{kind} takes a rule set name and {}",
                if kind == "Waf" {
                    "a map like {'sensitivity': 1}"
                } else {
                    "a list of signature ids to leave out"
                }
            ))
        }
    }
    Ok(rule)
}

impl Expr {
    /// Compiles an expression. Errors: CEL syntax, or bad preconfigured WAF arguments (the
    /// message says which).
    pub fn compile(source: &str) -> Result<Expr, String> {
        let mut wafs = Vec::new();
        let mut err = None;
        let rewritten = waf_call_re().replace_all(source, |c: &regex::Captures<'_>| {
            match waf_rule(&c[1], &c[2], c.get(3).map(|m| m.as_str())) {
                Ok(r) => wafs.push(r),
                Err(e) => err = Some(e),
            }
            format!("__waf_{}", wafs.len().saturating_sub(1))
        });
        if let Some(e) = err {
            return Err(e);
        }
        let program = Program::compile(&rewritten).map_err(|e| e.to_string())?;
        Ok(Expr { program, wafs })
    }

    /// The preconfigured WAF rules the expression calls.
    pub fn waf_rules(&self) -> &[WafRule] {
        &self.wafs
    }

    /// Evaluates the expression for one request.
    pub fn evaluate(&self, a: &Attributes<'_>) -> Outcome {
        let mut ctx = root().new_inner_scope();
        let mut headers: HashMap<String, Value> = HashMap::new();
        for name in a.headers.keys() {
            let joined = a
                .headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect::<Vec<_>>()
                .join(",");
            headers.insert(name.as_str().to_string(), Value::String(Arc::new(joined)));
        }
        let s = |v: &str| Value::String(Arc::new(v.to_string()));
        let request: HashMap<String, Value> = HashMap::from([
            ("headers".to_string(), Value::from(headers)),
            ("method".to_string(), s(a.method)),
            ("path".to_string(), s(a.path)),
            ("query".to_string(), s(a.query)),
            ("scheme".to_string(), s(a.scheme)),
        ]);
        let ip = a.client.0.to_string();
        let origin: HashMap<String, Value> = HashMap::from([
            ("ip".to_string(), s(&ip)),
            ("user_ip".to_string(), s(&ip)),
            ("region_code".to_string(), s(a.region_code)),
            ("asn".to_string(), Value::Int(0)),
        ]);
        ctx.add_variable_from_value("request", Value::from(request));
        ctx.add_variable_from_value("origin", Value::from(origin));
        let mut waf_ids = Vec::new();
        if !self.wafs.is_empty() {
            let uri = if a.query.is_empty() {
                a.path.to_string()
            } else {
                format!("{}?{}", a.path, a.query)
            };
            let req = WafRequest {
                client: a.client,
                method: a.method,
                uri: &uri,
                headers: a.headers,
            };
            for (i, rule) in self.wafs.iter().enumerate() {
                let hit = match waf::evaluate(rule, &req) {
                    Ok(ids) => {
                        let hit = !ids.is_empty();
                        waf_ids.extend(ids);
                        hit
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "preconfigured WAF rule not evaluated; it does not match");
                        false
                    }
                };
                ctx.add_variable_from_value(format!("__waf_{i}"), Value::Bool(hit));
            }
        }
        let matched = matches!(self.program.execute(&ctx), Ok(Value::Bool(true)));
        if !matched {
            waf_ids.clear();
        }
        Outcome { matched, waf_ids }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str, headers: &[(&'static str, &'static str)]) -> bool {
        let h: http::HeaderMap = headers
            .iter()
            .map(|(k, v)| {
                (
                    http::HeaderName::from_static(k),
                    http::HeaderValue::from_static(v),
                )
            })
            .collect();
        let a = Attributes {
            client: ("127.9.0.1".parse().unwrap(), 5000),
            method: "GET",
            path: "/admin/x",
            query: "a=1",
            scheme: "http",
            headers: &h,
            region_code: "FR",
        };
        Expr::compile(src).unwrap().evaluate(&a).matched
    }

    #[test]
    fn attributes_and_functions() {
        assert!(eval(
            "request.headers['x-bad'] == 'yes'",
            &[("x-bad", "yes")]
        ));
        assert!(!eval(
            "request.headers['x-bad'] == 'yes'",
            &[("x-bad", "no")]
        ));
        // A missing header is an evaluation error: no match.
        assert!(!eval("request.headers['x-bad'] == 'yes'", &[]));
        assert!(eval(
            "request.path.startsWith('/admin') && request.method == 'GET'",
            &[]
        ));
        assert!(eval(
            "request.query.contains('a=1') && request.scheme == 'http'",
            &[]
        ));
        assert!(eval("inIpRange(origin.ip, '127.9.0.0/16')", &[]));
        assert!(!eval("inIpRange(origin.ip, '10.0.0.0/8')", &[]));
        assert!(eval("origin.region_code == 'FR'", &[]));
        assert!(eval(
            "request.headers['user-agent'].lower().contains('curl')",
            &[("user-agent", "CURL/8")]
        ));
        assert!(eval("request.headers['x'].upper() == 'AB'", &[("x", "ab")]));
        assert!(eval(
            "request.headers['x'].base64Decode() == 'hello'",
            &[("x", "aGVsbG8=")]
        ));
        assert!(eval(
            "request.headers['x'].urlDecode() == 'a b/c'",
            &[("x", "a+b%2Fc")]
        ));
        assert!(eval(
            "request.headers['x'].urlDecodeUni() == '<'",
            &[("x", "%u003C")]
        ));
        assert!(eval(
            "request.headers['x'].matches('^v[0-9]+$')",
            &[("x", "v12")]
        ));
    }

    #[test]
    fn waf_arguments() {
        let e = Expr::compile(
            "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1, 'opt_out_rule_ids': ['owasp-crs-v030301-id942350-sqli']}) && true",
        )
        .unwrap();
        assert_eq!(
            e.waf_rules(),
            [WafRule {
                set: "sqli-v33-stable".into(),
                sensitivity: 1,
                opt_out: vec![942350],
                opt_in: vec![]
            }]
        );
        let e = Expr::compile("evaluatePreconfiguredExpr('xss-v33-stable')").unwrap();
        assert_eq!(e.waf_rules()[0].sensitivity, 4);
        assert!(Expr::compile("evaluatePreconfiguredWaf('bogus-v33-stable')").is_err());
        assert!(
            Expr::compile("evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 9})")
                .is_err()
        );
        assert!(Expr::compile("request.path ==").is_err());
    }
}
