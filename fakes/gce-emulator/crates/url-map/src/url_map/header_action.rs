//! `headerAction` (Compute API v1 reference, `HttpHeaderAction`): headers to remove from and add
//! to the request before it goes to the backend, and the same for the response.
//!
//! Order, per the reference: removals first, then additions; an addition with `replace: true`
//! replaces every value of the header, with `replace: false` it is appended as another value.
//! Actions of a weighted backend service apply before those of the route rule
//! ("headerAction specified here take effect before headerAction in the enclosing
//! HttpRouteRule"). `pathMatchers[].headerAction` and the URL map's own `headerAction` are not
//! applied by the emulator.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::{arr, s};

/// One header to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAdd {
    /// `headerName`.
    pub name: HeaderName,
    /// `headerValue`.
    pub value: HeaderValue,
    /// `replace`: replace existing values (default false: append).
    pub replace: bool,
}

/// A compiled `headerAction`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderAction {
    /// `requestHeadersToRemove`.
    pub request_remove: Vec<HeaderName>,
    /// `requestHeadersToAdd`.
    pub request_add: Vec<HeaderAdd>,
    /// `responseHeadersToRemove`.
    pub response_remove: Vec<HeaderName>,
    /// `responseHeadersToAdd`.
    pub response_add: Vec<HeaderAdd>,
}

fn names(v: &Value, field: &str) -> Vec<HeaderName> {
    arr(v, field)
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
        .collect()
}

fn adds(v: &Value, field: &str) -> Vec<HeaderAdd> {
    arr(v, field)
        .iter()
        .filter_map(|a| {
            Some(HeaderAdd {
                name: HeaderName::from_bytes(s(a, "headerName")?.as_bytes()).ok()?,
                value: HeaderValue::from_str(s(a, "headerValue").unwrap_or("")).ok()?,
                replace: a.get("replace").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect()
}

impl HeaderAction {
    /// Compiles the `headerAction` of `v`, if it has one.
    pub fn compile(v: &Value) -> Option<HeaderAction> {
        let ha = v.get("headerAction")?;
        let out = HeaderAction {
            request_remove: names(ha, "requestHeadersToRemove"),
            request_add: adds(ha, "requestHeadersToAdd"),
            response_remove: names(ha, "responseHeadersToRemove"),
            response_add: adds(ha, "responseHeadersToAdd"),
        };
        (out != HeaderAction::default()).then_some(out)
    }

    fn apply(remove: &[HeaderName], add: &[HeaderAdd], h: &mut HeaderMap) {
        for n in remove {
            h.remove(n);
        }
        for a in add {
            if a.replace {
                h.insert(a.name.clone(), a.value.clone());
            } else {
                h.append(a.name.clone(), a.value.clone());
            }
        }
    }

    /// Applies the request part to the headers sent to the backend.
    pub fn apply_request(&self, h: &mut HeaderMap) {
        Self::apply(&self.request_remove, &self.request_add, h);
    }

    /// Applies the response part to the headers sent to the client.
    pub fn apply_response(&self, h: &mut HeaderMap) {
        Self::apply(&self.response_remove, &self.response_add, h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_then_adds_replacing_or_appending() {
        let ha = HeaderAction::compile(&json!({"headerAction": {
        "requestHeadersToRemove": ["x-drop"],
        "requestHeadersToAdd": [
            {"headerName": "x-set", "headerValue": "new", "replace": true},
            {"headerName": "x-add", "headerValue": "two", "replace": false},
        ]}}))
        .unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-drop", HeaderValue::from_static("1"));
        h.insert("x-set", HeaderValue::from_static("old"));
        h.insert("x-add", HeaderValue::from_static("one"));
        ha.apply_request(&mut h);
        assert!(h.get("x-drop").is_none());
        assert_eq!(h.get_all("x-set").iter().collect::<Vec<_>>(), vec!["new"]);
        assert_eq!(
            h.get_all("x-add").iter().collect::<Vec<_>>(),
            vec!["one", "two"]
        );
        assert!(HeaderAction::compile(&json!({})).is_none());
    }

    #[test]
    fn the_response_part_applies_to_the_response_only() {
        let ha = HeaderAction::compile(&json!({"headerAction": {
        "requestHeadersToRemove": ["x-req"],
        "responseHeadersToRemove": ["server"],
        "responseHeadersToAdd": [{"headerName": "x-res", "headerValue": "1", "replace": true}]}}))
        .unwrap();
        let mut h = HeaderMap::new();
        h.insert("server", HeaderValue::from_static("backend"));
        h.insert("x-req", HeaderValue::from_static("kept"));
        ha.apply_response(&mut h);
        assert!(h.get("server").is_none());
        assert_eq!(h.get("x-res").unwrap(), "1");
        assert_eq!(
            h.get("x-req").unwrap(),
            "kept",
            "the request part is not applied"
        );
    }
}
