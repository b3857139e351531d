//! URL map routing, compiled from a `compute#urlMap` resource into lookup structures and kept
//! free of I/O so it can be unit tested.
//!
//! Semantics follow the Compute API v1 reference for `urlMaps` (fields `hostRules`,
//! `pathMatchers`, `pathRules`, `routeRules`, `matchRules`, `urlRewrite`, `urlRedirect`):
//! - host rules: an exact host beats a `*.suffix` wildcard, a longer wildcard suffix beats a
//!   shorter one, and `*` matches any host; the port of the `Host` header is ignored;
//! - path rules: `/p` matches exactly, `/p/*` matches every path starting with `/p/`; the longest
//!   match wins (an exact match of the whole path is always the longest);
//! - route rules: evaluated in ascending `priority`; a rule matches when any of its match rules
//!   does; a match rule needs its path match and all header and query parameter matches
//!   (`headerName` may be the pseudo-headers `:method` and `:authority`, as the reference
//!   allows); route actions may carry `headerAction`, `timeout` and `requestMirrorPolicy`;

mod actions;
mod compiler;
pub mod header_action;
mod hosts;
mod matches;
mod paths;
mod route_rules;
#[cfg(test)]
mod tests;
mod trace;

use std::collections::HashMap;

use serde_json::Value;

use self::actions::Target;
pub use self::actions::{
    redirect_location, redirect_status, rewrite_path, Forward, Redirect, RouteAction, UrlRewrite,
};
use self::compiler::{arr, s, Compiler};
pub use self::compiler::{RequestView, ServiceResolver, UrlMapError};
use self::hosts::*;
use self::matches::*;
pub use self::paths::normalize_path;
use self::paths::*;
use self::route_rules::*;
pub use self::trace::{RouteTrace, TriedRule};

/// The result of routing one request.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// What to do.
    pub action: &'a RouteAction,
    /// Which rule matched, e.g. `pathMatchers[web].pathRules[1]` or `defaultService`.
    pub rule: &'a str,
    /// The path prefix the rule matched (for `pathPrefixRewrite` and `prefixRedirect`).
    pub matched_prefix: &'a str,
}

/// A compiled URL map. Cheap to query: hash lookups and short scans, no allocation.
#[derive(Debug)]
pub struct UrlMapTable {
    hosts: HostTable,
    matchers: Vec<PathMatcher>,
    default: Target,
}

impl UrlMapTable {
    /// Compiles the wire JSON of a `compute#urlMap`. `resolve` maps each service URL to a
    /// backend service index (or a reason it cannot be served).
    pub fn compile(
        url_map: &Value,
        resolve: &mut ServiceResolver<'_>,
    ) -> Result<UrlMapTable, UrlMapError> {
        let name = s(url_map, "name").unwrap_or("?").to_string();
        let mut c = Compiler {
            url_map: name.clone(),
            resolve,
        };
        let default = Target {
            action: c.action(
                url_map,
                "defaultService",
                "defaultRouteAction",
                "defaultUrlRedirect",
            ),
            rule: "defaultService".to_string(),
            matched_prefix: String::new(),
        };
        let mut matchers = Vec::new();
        let mut by_name = HashMap::new();
        for pm in arr(url_map, "pathMatchers") {
            let pm_name = s(pm, "name").unwrap_or("");
            by_name.insert(pm_name.to_string(), matchers.len());
            matchers.push(c.path_matcher(pm, pm_name)?);
        }
        let hosts = HostTable::compile(url_map, &name, |pm| by_name.get(pm).copied())?;
        Ok(UrlMapTable {
            hosts,
            matchers,
            default,
        })
    }

    /// Routes one request. Never fails: without a matching rule the URL map's default applies.
    pub fn route<'t>(&'t self, req: &RequestView<'t>) -> Route<'t> {
        self.route_traced(req, None)
    }

    /// [`UrlMapTable::route`], recording in `trace` (when given) the host rule, path matcher,
    /// the rules tried and why they did not match, and for a default the closest rule. The
    /// data plane routes every request through here, so a trace is what requests get.
    pub fn route_traced<'t>(
        &'t self,
        req: &RequestView<'t>,
        mut trace: Option<&mut RouteTrace>,
    ) -> Route<'t> {
        let (target, matched_prefix, default) =
            match self.hosts.matcher(req.host, trace.as_deref_mut()) {
                None => (&self.default, "", true),
                Some(i) => {
                    let pm = &self.matchers[i];
                    if let Some(t) = trace.as_deref_mut() {
                        t.path_matcher = Some(pm.name.clone());
                    }
                    let (target, prefix) = pm.route(req, trace.as_deref_mut());
                    (target, prefix, std::ptr::eq(target, &pm.default))
                }
            };
        if let Some(t) = trace {
            t.decide(&target.rule, default);
        }
        Route {
            action: &target.action,
            rule: &target.rule,
            matched_prefix,
        }
    }
}
