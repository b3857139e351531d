//! The optional record of how [`super::UrlMapTable::route_traced`] routed one request: which
//! host rule chose which path matcher, every rule tried before the one that matched and why it
//! did not match, and, when the request fell to a default, the rule that came closest.
//!
//! The real router fills it in as it goes (`trace: Option<&mut RouteTrace>`), so `explain`
//! (dataplane/explain.rs) cannot drift from what requests get; without a trace nothing is
//! recorded and nothing is allocated.

use serde::Serialize;

/// How one request was routed through a URL map.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RouteTrace {
    /// The host rule that matched (e.g. `hostRules[0] host "shop.example" (exact)`), or why
    /// none did.
    pub host_rule: String,
    /// The path matcher the host rule named, if any.
    pub path_matcher: Option<String>,
    /// Rules tried, in evaluation order, that did not match, with why not.
    pub tried: Vec<TriedRule>,
    /// The rule that decided, e.g. `pathMatchers[web].pathRules[1]` or `defaultService`.
    pub matched: String,
    /// When a default decided (the usual source of a 404): the rule that came closest to
    /// matching, and why it did not.
    pub closest: Option<TriedRule>,
}

/// A rule that was tried and did not match.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TriedRule {
    /// The rule, with its pattern, e.g. `pathMatchers[web].pathRules[0] "/cart/*"`.
    pub rule: String,
    /// Why it did not match.
    pub why_not: String,
    /// How close it came (higher is closer): the length of the request's part it agreed with,
    /// plus a bonus when its path matched and a header or query parameter did not.
    #[serde(skip)]
    pub score: usize,
}

impl RouteTrace {
    /// Records a rule that did not match.
    pub(super) fn tried(&mut self, rule: String, why_not: String, score: usize) {
        self.tried.push(TriedRule {
            rule,
            why_not,
            score,
        });
    }

    /// Notes the deciding rule; for a default, also the closest of the rules tried.
    pub(super) fn decide(&mut self, matched: &str, is_default: bool) {
        self.matched = matched.to_string();
        if is_default {
            // The first of the closest: rules are tried in evaluation order.
            self.closest = self.tried.iter().rev().max_by_key(|t| t.score).cloned();
        }
    }
}

/// How close `pattern` came to the request's `part` when they agree on `common` bytes: more
/// agreement first, then less of the pattern left over (`/cart/*` is closer to `/cart` than
/// `/cart/checkout/*` is).
fn closeness(pattern: &str, common: usize) -> usize {
    const MAX: usize = 4095;
    common * (MAX + 1) + MAX - (pattern.len() - common).min(MAX)
}

/// [`closeness`] by common prefix (paths).
pub(super) fn common_prefix(pattern: &str, part: &str) -> usize {
    let n = pattern
        .bytes()
        .zip(part.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    closeness(pattern, n)
}

/// [`closeness`] by common suffix (hosts).
pub(super) fn common_suffix(pattern: &str, part: &str) -> usize {
    let n = pattern
        .bytes()
        .rev()
        .zip(part.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    closeness(pattern, n)
}
