//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`exists) and field selectors
//! (`field=value`, `field==value`, `field!=value`) as list and watch filters, per the Kubernetes
//! "Labels and Selectors" and "Field Selectors" concepts pages. Field selectors accept any dotted
//! path into the object (`metadata.name`, `spec.nodeName`, `status.phase`,
//! `involvedObject.name`...), which covers every field the real server indexes for these kinds.

use serde_json::Value;

/// A selector that could not be parsed; `selector` is the offending text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    /// Malformed label selector.
    #[error("unable to parse requirement: invalid label selector {selector:?}: {reason}")]
    Label {
        /// The selector text.
        selector: String,
        /// What is wrong.
        reason: String,
    },
    /// Malformed field selector.
    #[error(
        "invalid field selector {selector:?}: expected field=value, field==value or field!=value"
    )]
    Field {
        /// The selector text.
        selector: String,
    },
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum Requirement {
    /// `key=value` / `key==value` / `key in (values)`.
    In(String, Vec<String>),
    /// `key!=value` / `key notin (values)` (also true when the label is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(pub Vec<Requirement>);

/// Splits at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_label_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    ///
    /// Errors: [`SelectorError::Label`] naming the selector and the problem.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let err = |reason: &str| SelectorError::Label {
            selector: selector.to_string(),
            reason: reason.to_string(),
        };
        let mut reqs = Vec::new();
        if selector.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top_level(selector) {
            let part = part.trim();
            if part.is_empty() {
                return Err(err("empty requirement"));
            }
            let set_op = |op: &str| -> Option<(String, Vec<String>)> {
                let idx = part.find(op)?;
                let key = part[..idx].trim();
                let rest = part[idx + op.len()..].trim();
                let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
                let values = inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                Some((key.to_string(), values))
            };
            let req = if let Some((k, vs)) = set_op(" notin ") {
                Requirement::NotIn(k, vs)
            } else if let Some((k, vs)) = set_op(" in ") {
                Requirement::In(k, vs)
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotIn(k.trim().to_string(), vec![v.trim().to_string()])
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::In(k.trim().to_string(), vec![v.trim().to_string()])
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::In(k.trim().to_string(), vec![v.trim().to_string()])
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::DoesNotExist(k.trim().to_string())
            } else {
                Requirement::Exists(part.to_string())
            };
            let key = match &req {
                Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k,
            };
            if !valid_label_key(key) {
                return Err(err(&format!("invalid label key {key:?}")));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: every term must hold. Empty matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

/// Reads a dotted path (`involvedObject.name`) as the string a field selector compares with;
/// missing fields read as `""`.
pub fn field_value(object: &Value, path: &str) -> String {
    let mut cur = object;
    for seg in path.split('.') {
        cur = match cur.get(seg) {
            Some(v) => v,
            None => return String::new(),
        };
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    ///
    /// Errors: [`SelectorError::Field`] when a term has no operator.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError::Field {
                    selector: selector.to_string(),
                });
            };
            terms.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, eq, v)| (field_value(object, k) == *v) == *eq)
    }

    /// The value of a `metadata.name=X` term, if any (lets watches of one object skip others).
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, eq, _)| k == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_equality_and_inequality() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        assert!(LabelSelector::parse("app=web").unwrap().matches(&o));
        assert!(LabelSelector::parse("app==web,tier=front")
            .unwrap()
            .matches(&o));
        assert!(!LabelSelector::parse("app=db").unwrap().matches(&o));
        assert!(LabelSelector::parse("app!=db").unwrap().matches(&o));
        assert!(LabelSelector::parse("missing!=x").unwrap().matches(&o));
        assert!(!LabelSelector::parse("app!=web").unwrap().matches(&o));
    }

    #[test]
    fn label_sets_and_existence() {
        let o = obj(json!({"app": "web", "env": "prod"}));
        assert!(LabelSelector::parse("env in (prod, staging)")
            .unwrap()
            .matches(&o));
        assert!(!LabelSelector::parse("env notin (prod,staging)")
            .unwrap()
            .matches(&o));
        assert!(LabelSelector::parse("env in (prod,staging),app")
            .unwrap()
            .matches(&o));
        assert!(LabelSelector::parse("!tier").unwrap().matches(&o));
        assert!(!LabelSelector::parse("tier").unwrap().matches(&o));
        assert!(LabelSelector::parse("").unwrap().matches(&o));
        assert!(LabelSelector::parse("a=b,,c").is_err());
    }

    #[test]
    fn field_selectors_on_any_path() {
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace==ns")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("status.phase!=Pending")
            .unwrap()
            .matches(&o));
        assert!(!FieldSelector::parse("metadata.name=b").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(&o));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert_eq!(
            FieldSelector::parse("metadata.name=a").unwrap().name(),
            Some("a")
        );
    }
}
