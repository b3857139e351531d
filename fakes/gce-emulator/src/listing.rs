//! List parameters shared by every `list`, `aggregatedList` and `listNetworkEndpoints`:
//! `filter`, `orderBy` (`name`, `creationTimestamp`, each `asc` or `desc`), `maxResults`
//! (0-500, default 500) and `pageToken` (opaque; an empty one means the first page, as the
//! Rust client sends). `returnPartialSuccess`, `includeAllScopes`, `alt`, `$alt` and
//! `$apiVersion` are accepted and ignored.

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::filter::Filter;

/// Parsed list parameters.
#[derive(Debug, Clone)]
pub struct ListParams {
    /// The `filter`.
    pub filter: Filter,
    /// Sort field and whether descending.
    pub order_by: Option<(String, bool)>,
    /// Page size.
    pub max_results: usize,
    /// Offset of the first item of the page.
    pub offset: usize,
}

impl ListParams {
    /// Reads the list parameters from a query. Errors: 400 `invalid` naming the parameter.
    pub fn from_query(query: &[(String, String)]) -> Result<ListParams, ApiError> {
        let get = |k: &str| {
            query
                .iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let filter = Filter::parse(get("filter").unwrap_or(""))?;
        let max_results = match get("maxResults") {
            None => 500,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if n <= 500 => {
                    if n == 0 {
                        500
                    } else {
                        n
                    }
                }
                _ => {
                    return Err(ApiError::invalid_value(
                        "maxResults",
                        s,
                        "Must be between 0 and 500.",
                    ))
                }
            },
        };
        let offset = match get("pageToken") {
            None => 0,
            Some(t) => decode_token(t).ok_or_else(|| {
                ApiError::invalid_value("pageToken", t, "The page token is invalid or expired.")
            })?,
        };
        let order_by = match get("orderBy") {
            None => None,
            Some(o) => {
                let mut parts = o.split_whitespace();
                let field = parts.next().unwrap_or_default().to_string();
                let desc = match parts.next() {
                    None | Some("asc") => false,
                    Some("desc") => true,
                    Some(_) => {
                        return Err(ApiError::invalid_value(
                            "orderBy",
                            o,
                            "Sort order must be asc or desc.",
                        ))
                    }
                };
                if !matches!(field.as_str(), "name" | "creationTimestamp") {
                    return Err(ApiError::invalid_value(
                        "orderBy",
                        o,
                        "Only name and creationTimestamp can be sorted on.",
                    ));
                }
                Some((field, desc))
            }
        };
        Ok(ListParams {
            filter,
            order_by,
            max_results,
            offset,
        })
    }

    /// Filters and sorts `items`, then cuts the page; returns (page, nextPageToken). Only the
    /// page is cloned, so a small page of a large collection is cheap.
    pub fn page<'a>(
        &self,
        items: impl IntoIterator<Item = &'a Value>,
    ) -> (Vec<Value>, Option<String>) {
        let mut all: Vec<&Value> = items
            .into_iter()
            .filter(|v| self.filter.matches(v))
            .collect();
        if let Some((field, desc)) = &self.order_by {
            all.sort_by(|a, b| {
                let o = a[field.as_str()]
                    .as_str()
                    .unwrap_or_default()
                    .cmp(b[field.as_str()].as_str().unwrap_or_default());
                if *desc {
                    o.reverse()
                } else {
                    o
                }
            });
        }
        let end = self.offset.saturating_add(self.max_results).min(all.len());
        let next = (end < all.len()).then(|| encode_token(end));
        let page = all
            .get(self.offset..end)
            .unwrap_or_default()
            .iter()
            .map(|v| (*v).clone())
            .collect();
        (page, next)
    }

    /// A list response: `{"kind", "id", "items", "nextPageToken"?, "selfLink"}`.
    pub fn response<'a>(
        &self,
        kind: &str,
        self_link: &str,
        items: impl IntoIterator<Item = &'a Value>,
    ) -> Value {
        let (page, next) = self.page(items);
        let mut v = json!({"kind": kind, "id": self_link.rsplit("/compute/v1/").next().unwrap_or(self_link), "items": page, "selfLink": self_link});
        if let Some(t) = next {
            v["nextPageToken"] = json!(t);
        }
        v
    }
}

fn encode_token(offset: usize) -> String {
    format!("CgVvZmZzZX{offset:x}")
}

fn decode_token(t: &str) -> Option<usize> {
    usize::from_str_radix(t.strip_prefix("CgVvZmZzZX")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn pages_follow_tokens_to_the_end() {
        let items: Vec<Value> = (0..5).map(|i| json!({"name": format!("n{i}")})).collect();
        let p = ListParams::from_query(&q(&[("maxResults", "2"), ("pageToken", "")])).unwrap();
        let (page, next) = p.page(&items);
        assert_eq!(page.len(), 2);
        let p2 = ListParams::from_query(&q(&[("maxResults", "2"), ("pageToken", &next.unwrap())]))
            .unwrap();
        let (page2, _) = p2.page(&items);
        assert_eq!(page2[0]["name"], "n2");
        let p3 = ListParams::from_query(&q(&[("orderBy", "name desc"), ("filter", "name ne n4")]))
            .unwrap();
        let (page3, next3) = p3.page(&items);
        assert_eq!(page3[0]["name"], "n3");
        assert!(next3.is_none());
        assert!(ListParams::from_query(&q(&[("maxResults", "501")])).is_err());
        assert!(ListParams::from_query(&q(&[("orderBy", "id")])).is_err());
    }
}
