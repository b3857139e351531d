//! The list `filter` expression of the Compute API: `field op value` comparisons, with `op` one
//! of `=`, `!=`, `:` (has / substring), `eq` and `ne` (RE2 full match; gcloud translates
//! `--filter=name=x` into `name eq ".*\bx\b.*"` and does not re-filter on the client),
//! combined with parentheses, `AND` (also implicit) and `OR`. Fields are dotted paths into the
//! resource (`labels.env`, `httpHealthCheck.port`); lists match when any element matches.

use regex::Regex;
use serde_json::Value;

use crate::errors::ApiError;

/// A parsed filter.
#[derive(Debug, Clone)]
pub enum Filter {
    /// Matches everything (empty filter).
    All,
    /// Both sides must match.
    And(Box<Filter>, Box<Filter>),
    /// Either side must match.
    Or(Box<Filter>, Box<Filter>),
    /// The negation.
    Not(Box<Filter>),
    /// One comparison.
    Cmp {
        field: String,
        op: Op,
        value: String,
        regex: Option<Regex>,
    },
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=` (exact, `*` as a wildcard).
    Eq,
    /// `!=`.
    Ne,
    /// `:` (substring; `:*` tests presence).
    Has,
    /// `eq` (RE2 full match).
    ReEq,
    /// `ne`.
    ReNe,
    /// `>` and `<`, compared numerically when both sides are numbers, else as strings.
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Word(String),
    Quoted(String),
    Op(&'static str),
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
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
            '"' | '\'' => {
                let q = c;
                let mut v = String::new();
                i += 1;
                loop {
                    match cs.get(i) {
                        None => return Err("unterminated quoted string".into()),
                        Some('\\') if matches!(cs.get(i + 1), Some(x) if *x == q || *x == '\\') => {
                            v.push(cs[i + 1]);
                            i += 2;
                        }
                        Some(x) if *x == q => {
                            i += 1;
                            break;
                        }
                        Some(x) => {
                            v.push(*x);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Quoted(v));
            }
            '!' if cs.get(i + 1) == Some(&'=') => {
                out.push(Tok::Op("!="));
                i += 2
            }
            '=' | ':' | '<' | '>' => {
                out.push(Tok::Op(match c {
                    '=' => "=",
                    ':' => ":",
                    '<' => "<",
                    _ => ">",
                }));
                i += 1
            }
            _ => {
                let start = i;
                let stop = |i: usize| {
                    cs[i].is_whitespace()
                        || "()\"'=:<>".contains(cs[i])
                        || (cs[i] == '!' && cs.get(i + 1) == Some(&'='))
                };
                while i < cs.len() && !stop(i) {
                    i += 1;
                }
                out.push(Tok::Word(cs[start..i].iter().collect()));
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
        let mut left = self.and()?;
        while matches!(self.peek(), Some(Tok::Word(w)) if w == "OR") {
            self.pos += 1;
            left = Filter::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }
    fn and(&mut self) -> Result<Filter, String> {
        let mut left = self.unary()?;
        loop {
            match self.peek() {
                None | Some(Tok::Close) => break,
                Some(Tok::Word(w)) if w == "OR" => break,
                Some(Tok::Word(w)) if w == "AND" => self.pos += 1,
                _ => {}
            }
            left = Filter::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }
    fn unary(&mut self) -> Result<Filter, String> {
        match self.next() {
            Some(Tok::Open) => {
                let f = self.or()?;
                match self.next() {
                    Some(Tok::Close) => Ok(f),
                    _ => Err("missing ')'".into()),
                }
            }
            Some(Tok::Word(w)) if w == "NOT" => Ok(Filter::Not(Box::new(self.unary()?))),
            Some(Tok::Word(field)) => {
                let op = match self.next() {
                    Some(Tok::Op("=")) => Op::Eq,
                    Some(Tok::Op("!=")) => Op::Ne,
                    Some(Tok::Op(":")) => Op::Has,
                    Some(Tok::Op(">")) => Op::Gt,
                    Some(Tok::Op("<")) => Op::Lt,
                    Some(Tok::Word(w)) if w == "eq" => Op::ReEq,
                    Some(Tok::Word(w)) if w == "ne" => Op::ReNe,
                    other => {
                        return Err(format!(
                            "expected an operator after '{field}', found {other:?}"
                        ))
                    }
                };
                let value = match self.next() {
                    Some(Tok::Word(v)) | Some(Tok::Quoted(v)) => v,
                    Some(Tok::Op("*")) => "*".into(),
                    other => {
                        return Err(format!("expected a value after '{field}', found {other:?}"))
                    }
                };
                let regex = match op {
                    Op::ReEq | Op::ReNe => Some(
                        Regex::new(&format!("^(?:{value})$"))
                            .map_err(|e| format!("bad regular expression '{value}': {e}"))?,
                    ),
                    Op::Eq | Op::Ne if value.contains('*') => {
                        let pat = value
                            .split('*')
                            .map(regex::escape)
                            .collect::<Vec<_>>()
                            .join(".*");
                        Some(Regex::new(&format!("^(?:{pat})$")).map_err(|e| e.to_string())?)
                    }
                    _ => None,
                };
                Ok(Filter::Cmp {
                    field,
                    op,
                    value,
                    regex,
                })
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

impl Filter {
    /// Parses a filter. Errors: 400 `invalid` naming the `filter` parameter.
    pub fn parse(s: &str) -> Result<Filter, ApiError> {
        let bad = |why: String| {
            ApiError::invalid_value(
                "filter",
                s,
                &format!("Invalid list filter expression: {why}."),
            )
        };
        if s.trim().is_empty() {
            return Ok(Filter::All);
        }
        let mut p = Parser {
            toks: tokenize(s).map_err(bad)?,
            pos: 0,
        };
        let f = p.or().map_err(bad)?;
        if p.pos < p.toks.len() {
            return Err(bad("unexpected ')'".into()));
        }
        Ok(f)
    }

    /// Whether `v` matches.
    pub fn matches(&self, v: &Value) -> bool {
        match self {
            Filter::All => true,
            Filter::And(a, b) => a.matches(v) && b.matches(v),
            Filter::Or(a, b) => a.matches(v) || b.matches(v),
            Filter::Not(a) => !a.matches(v),
            Filter::Cmp {
                field,
                op,
                value,
                regex,
            } => {
                let mut leaves = Vec::new();
                collect(v, &field.split('.').collect::<Vec<_>>(), &mut leaves);
                let any = |f: &dyn Fn(&str) -> bool| leaves.iter().any(|l| f(l));
                match op {
                    Op::Eq => any(&|l| regex.as_ref().map_or(l == value, |r| r.is_match(l))),
                    Op::Ne => !any(&|l| regex.as_ref().map_or(l == value, |r| r.is_match(l))),
                    Op::ReEq => any(&|l| regex.as_ref().is_some_and(|r| r.is_match(l))),
                    Op::ReNe => !any(&|l| regex.as_ref().is_some_and(|r| r.is_match(l))),
                    Op::Has => {
                        value == "*" && !leaves.is_empty() || any(&|l| l.contains(value.as_str()))
                    }
                    Op::Gt | Op::Lt => any(&|l| {
                        let ord = match (l.parse::<f64>(), value.parse::<f64>()) {
                            (Ok(a), Ok(b)) => a.partial_cmp(&b),
                            _ => Some(l.cmp(value.as_str())),
                        };
                        ord == Some(if *op == Op::Gt {
                            std::cmp::Ordering::Greater
                        } else {
                            std::cmp::Ordering::Less
                        })
                    }),
                }
            }
        }
    }
}

/// The scalar values at `path` (lists fan out), rendered as strings.
fn collect(v: &Value, path: &[&str], out: &mut Vec<String>) {
    match (v, path.split_first()) {
        (Value::Array(a), _) => a.iter().for_each(|x| collect(x, path, out)),
        (Value::Object(m), Some((head, rest))) => {
            if let Some(x) = m.get(*head) {
                collect(x, rest, out)
            }
        }
        (Value::String(s), None) => out.push(s.clone()),
        (Value::Null, _) | (Value::Object(_), None) => {}
        (other, None) => out.push(other.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(f: &str, v: &Value) -> bool {
        Filter::parse(f).unwrap().matches(v)
    }

    #[test]
    fn comparisons_the_clients_send() {
        let fw1 = json!({"name": "fw1", "labels": {"env": "prod"}, "priority": 1000});
        let fw12 = json!({"name": "fw12", "labels": {"env": "dev"}});
        assert!(m(r#"name eq ".*\bfw1\b.*""#, &fw1));
        assert!(!m(r#"name eq ".*\bfw1\b.*""#, &fw12));
        assert!(m(r#"name = "fw1""#, &fw1));
        assert!(!m("name = fw1", &fw12));
        assert!(m("name eq fw.*", &fw12));
        assert!(m("name ne fw1", &fw12));
        assert!(m("labels.env = prod", &fw1));
        assert!(m("(labels.env = prod) (name = fw1)", &fw1));
        assert!(!m("(labels.env = prod) AND (name = fw12)", &fw1));
        assert!(m("(labels.env = dev) OR (name = fw1)", &fw1));
        assert!(m("name = fw*", &fw12));
        assert!(m("priority > 999", &fw1));
        assert!(m("labels.env:*", &fw1));
        assert!(m("NOT name = fw12", &fw1));
    }

    #[test]
    fn malformed_filters_are_refused() {
        for bad in ["name", "name =", "(name = a", "name eq (", "name eq \"a"] {
            let e = Filter::parse(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("filter"), "{bad}");
        }
    }
}
