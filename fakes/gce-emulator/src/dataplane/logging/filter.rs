//! The part of Cloud Logging's query language (Cloud Logging docs, "Logging query language")
//! that `entries.list` filters need locally: comparisons `FIELD OP VALUE` with `=`, `!=`, `:`
//! (has / substring), `>`, `>=`, `<`, `<=`; `AND` (also implicit, between terms), `OR`, `NOT`
//! and `-`; parentheses; quoted or bare values; a bare value alone matches anywhere in the
//! entry. Fields are dotted paths into the `LogEntry` JSON (`resource.type`,
//! `jsonPayload.enforcedSecurityPolicy.outcome`, `httpRequest.status`). `timestamp` compares as
//! RFC 3339 times, `severity` by level (DEFAULT < DEBUG < INFO < NOTICE < WARNING < ERROR <
//! CRITICAL < ALERT < EMERGENCY), numbers numerically; other values as strings. Functions,
//! regular expressions (`=~`) and `SEARCH` are refused with an error naming the token.

use serde_json::Value;

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Matches everything (the empty filter).
    All,
    /// `a AND b`.
    And(Box<Filter>, Box<Filter>),
    /// `a OR b`.
    Or(Box<Filter>, Box<Filter>),
    /// `NOT a`.
    Not(Box<Filter>),
    /// `field OP value`.
    Cmp(String, String, String),
    /// A bare value.
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Op(String),
    Open,
    Close,
    Minus,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            '"' => {
                let mut v = String::new();
                i += 1;
                while i < b.len() && b[i] != '"' {
                    if b[i] == '\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    v.push(b[i]);
                    i += 1;
                }
                if i >= b.len() {
                    return Err("unterminated string in the filter".into());
                }
                i += 1;
                out.push(Tok::Quoted(v));
            }
            '=' | '!' | '<' | '>' | ':' => {
                let two: String = b[i..(i + 2).min(b.len())].iter().collect();
                let op = if ["!=", ">=", "<=", "=~", "!~"].contains(&two.as_str()) {
                    two
                } else {
                    c.to_string()
                };
                if op == "!" {
                    return Err("unexpected '!' in the filter".into());
                }
                i += op.len();
                out.push(Tok::Op(op));
            }
            '-' if out.last().is_none_or(|t| !matches!(t, Tok::Op(_))) => {
                out.push(Tok::Minus);
                i += 1
            }
            _ => {
                let start = i;
                while i < b.len() && !b[i].is_whitespace() && !"()=!<>:\"".contains(b[i]) {
                    i += 1;
                }
                out.push(Tok::Word(b[start..i].iter().collect()));
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn or(&mut self) -> Result<Filter, String> {
        let mut f = self.and()?;
        while self.peek() == Some(&Tok::Word("OR".into())) {
            self.next();
            f = Filter::Or(Box::new(f), Box::new(self.and()?));
        }
        Ok(f)
    }
    fn and(&mut self) -> Result<Filter, String> {
        let mut f = self.unary()?;
        loop {
            match self.peek() {
                None | Some(Tok::Close) => break,
                Some(Tok::Word(w)) if w == "OR" => break,
                Some(Tok::Word(w)) if w == "AND" => {
                    self.next();
                }
                _ => {}
            }
            f = Filter::And(Box::new(f), Box::new(self.unary()?));
        }
        Ok(f)
    }
    fn unary(&mut self) -> Result<Filter, String> {
        match self.peek() {
            Some(Tok::Minus) => {
                self.next();
                Ok(Filter::Not(Box::new(self.unary()?)))
            }
            Some(Tok::Word(w)) if w == "NOT" => {
                self.next();
                Ok(Filter::Not(Box::new(self.unary()?)))
            }
            _ => self.primary(),
        }
    }
    fn primary(&mut self) -> Result<Filter, String> {
        match self.next() {
            Some(Tok::Open) => {
                let f = self.or()?;
                if self.next() != Some(Tok::Close) {
                    return Err("missing ')' in the filter".into());
                }
                Ok(f)
            }
            Some(Tok::Word(field)) => {
                if let Some(Tok::Op(op)) = self.peek().cloned() {
                    self.next();
                    if op == "=~" || op == "!~" {
                        return Err(format!(
                            "the emulator's Cloud Logging filter does not support regular expressions ({field}{op})"
                        ));
                    }
                    let value = match self.next() {
                        Some(Tok::Word(v)) | Some(Tok::Quoted(v)) => v,
                        other => {
                            return Err(format!(
                                "expected a value after {field}{op}, found {other:?}"
                            ))
                        }
                    };
                    Ok(Filter::Cmp(field, op, value))
                } else if field.contains('(') {
                    Err(format!("filter functions are not supported ({field})"))
                } else {
                    Ok(Filter::Text(field))
                }
            }
            Some(Tok::Quoted(v)) => Ok(Filter::Text(v)),
            other => Err(format!("unexpected {other:?} in the filter")),
        }
    }
}

fn severity(s: &str) -> Option<i64> {
    Some(match s.to_ascii_uppercase().as_str() {
        "DEFAULT" => 0,
        "DEBUG" => 100,
        "INFO" => 200,
        "NOTICE" => 300,
        "WARNING" => 400,
        "ERROR" => 500,
        "CRITICAL" => 600,
        "ALERT" => 700,
        "EMERGENCY" => 800,
        _ => return s.parse().ok(),
    })
}

fn lookup<'v>(e: &'v Value, field: &str) -> Option<&'v Value> {
    field
        .split('.')
        .map(|p| p.trim_matches('"'))
        .try_fold(e, |v, p| v.get(p))
}

fn compare(field: &str, have: &Value, op: &str, want: &str) -> bool {
    let have_s = match have {
        Value::String(s) => s.clone(),
        Value::Null => return false,
        other => other.to_string(),
    };
    if op == ":" {
        return match have {
            Value::Object(_) | Value::Array(_) => {
                have_s.to_lowercase().contains(&want.to_lowercase())
            }
            _ => have_s.to_lowercase().contains(&want.to_lowercase()),
        };
    }
    let ord = if field == "severity" {
        severity(&have_s)
            .zip(severity(want))
            .map(|(a, b)| a.cmp(&b))
    } else if field == "timestamp" || field == "receiveTimestamp" {
        chrono::DateTime::parse_from_rfc3339(&have_s)
            .ok()
            .zip(chrono::DateTime::parse_from_rfc3339(want).ok())
            .map(|(a, b)| a.cmp(&b))
    } else {
        None
    }
    .or_else(|| {
        let a: f64 = have_s.parse().ok()?;
        let b: f64 = want.parse().ok()?;
        a.partial_cmp(&b)
    })
    .unwrap_or_else(|| have_s.as_str().cmp(want));
    use std::cmp::Ordering::*;
    match op {
        "=" => ord == Equal,
        "!=" => ord != Equal,
        ">" => ord == Greater,
        ">=" => ord != Less,
        "<" => ord == Less,
        "<=" => ord != Greater,
        _ => false,
    }
}

impl Filter {
    /// Parses a filter; the empty string matches everything. Errors name what was not understood.
    pub fn parse(s: &str) -> Result<Filter, String> {
        if s.trim().is_empty() {
            return Ok(Filter::All);
        }
        let mut p = Parser {
            toks: tokenize(s)?,
            pos: 0,
        };
        let f = p.or()?;
        if p.pos < p.toks.len() {
            return Err(format!("unexpected {:?} in the filter", p.toks[p.pos]));
        }
        Ok(f)
    }

    /// Whether entry `e` matches.
    pub fn matches(&self, e: &Value) -> bool {
        match self {
            Filter::All => true,
            Filter::And(a, b) => a.matches(e) && b.matches(e),
            Filter::Or(a, b) => a.matches(e) || b.matches(e),
            Filter::Not(a) => !a.matches(e),
            Filter::Cmp(field, op, want) => match lookup(e, field) {
                Some(v) => compare(field, v, op, want),
                None => op == "!=",
            },
            Filter::Text(t) => e.to_string().to_lowercase().contains(&t.to_lowercase()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_like_gcloud_sends_them() {
        let e = json!({
            "resource": {"type": "http_load_balancer", "labels": {"backend_service_name": "bs1"}},
            "httpRequest": {"status": 403},
            "severity": "WARNING",
            "timestamp": "2026-11-25T10:00:00.123456Z",
            "jsonPayload": {"enforcedSecurityPolicy": {"outcome": "DENY", "priority": 1000}},
        });
        let m = |f: &str| Filter::parse(f).unwrap().matches(&e);
        assert!(m(""));
        assert!(m(r#"resource.type="http_load_balancer""#));
        assert!(!m(r#"resource.type="gce_instance""#));
        assert!(m(
            r#"resource.type="http_load_balancer" AND timestamp>="2026-11-25T10:00:00Z""#
        ));
        assert!(!m(r#"timestamp>="2026-11-25T10:00:01Z""#));
        assert!(m(
            r#"(resource.type="http_load_balancer") AND (jsonPayload.enforcedSecurityPolicy.outcome=DENY)"#
        ));
        assert!(m("httpRequest.status>=400 httpRequest.status<500"));
        assert!(m("severity>=WARNING"));
        assert!(!m("severity>=ERROR"));
        assert!(m("NOT severity=INFO"));
        assert!(m("-httpRequest.status=200"));
        assert!(m(
            "httpRequest.status=200 OR resource.labels.backend_service_name:bs"
        ));
        assert!(m("http_load_balancer"));
        assert!(!m("jsonPayload.missing=1"));
        assert!(Filter::parse("a=~\"x\"").is_err());
        assert!(Filter::parse("(a=1").is_err());
    }
}
