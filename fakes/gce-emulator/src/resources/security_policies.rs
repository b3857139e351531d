//! `securityPolicies`: Cloud Armor policies with `srcIpRanges` allow/deny rules (the data plane
//! enforces them), plus the rule verbs `addRule`, `getRule`, `patchRule`, `removeRule`.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Priority of the default rule every policy has.
pub const DEFAULT_PRIORITY: i64 = 2_147_483_647;

/// Validates a policy: `type` CLOUD_ARMOR, rules with distinct priorities, actions
/// (`allow`, `deny(403|404|502)`, `redirect`, `throttle`, `rate_based_ban`), matches of
/// `versionedExpr: SRC_IPS_V1` with 1-10 `config.srcIpRanges` (CIDR or `*`) or an `expr`.
/// A default rule (priority 2147483647, allow `*`) is added when missing.
pub fn prepare(_cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    validate::enum_field(
        r,
        "resource",
        "type",
        &["CLOUD_ARMOR", "CLOUD_ARMOR_EDGE", "CLOUD_ARMOR_NETWORK"],
        Some("CLOUD_ARMOR"),
    )?;
    if !r.contains_key("rules") || r["rules"].is_null() {
        r.insert("rules".into(), json!([]));
    }
    let rules = validate::array_mut(r, "resource", "rules")?.expect("set above");
    let mut seen = HashSet::new();
    for (i, rule) in rules.iter_mut().enumerate() {
        let prefix = format!("resource.rules[{i}]");
        let shown = validate::show(rule);
        let o = rule
            .as_object_mut()
            .ok_or_else(|| ApiError::invalid_value(&prefix, &shown, "Expected an object."))?;
        let p = check_rule(o, &prefix)?;
        if !seen.insert(p) {
            return Err(ApiError::invalid_value(
                &format!("{prefix}.priority"),
                &p.to_string(),
                "Duplicate rule priority.",
            ));
        }
    }
    if !seen.contains(&DEFAULT_PRIORITY) {
        rules.push(default_rule());
    }
    rules.sort_by_key(|r| r["priority"].as_i64().unwrap_or(DEFAULT_PRIORITY));
    Ok(())
}

/// The default rule a new policy gets.
pub fn default_rule() -> Value {
    json!({
        "kind": "compute#securityPolicyRule",
        "description": "default rule",
        "priority": DEFAULT_PRIORITY,
        "action": "allow",
        "preview": false,
        "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}},
    })
}

/// Validates one rule and returns its priority. Errors name `prefix.field`.
pub fn check_rule(o: &mut Obj, prefix: &str) -> Result<i64, ApiError> {
    let p = validate::int_field(o, prefix, "priority", 0, DEFAULT_PRIORITY, Some(1000))?
        .unwrap_or(1000);
    let action = validate::req_str(o, prefix, "action")?;
    let ok = matches!(
        action,
        "allow"
            | "deny(403)"
            | "deny(404)"
            | "deny(502)"
            | "redirect"
            | "throttle"
            | "rate_based_ban"
    );
    if !ok {
        return Err(ApiError::invalid_value(
            &validate::path(prefix, "action"),
            action,
            "Must be allow, deny(403), deny(404), deny(502), redirect, throttle or rate_based_ban.",
        ));
    }
    validate::bool_field(o, prefix, "preview", Some(false))?;
    o.insert("kind".into(), json!("compute#securityPolicyRule"));
    let mp = validate::path(prefix, "match");
    let m =
        validate::object_mut(o, prefix, "match", false)?.ok_or_else(|| ApiError::required(&mp))?;
    if let Some(expr) = validate::object_mut(m, &mp, "expr", false)? {
        validate::req_str(expr, &format!("{mp}.expr"), "expression")?;
        return Ok(p);
    }
    validate::enum_field(m, &mp, "versionedExpr", &["SRC_IPS_V1"], None)?;
    if validate::opt_str(m, &mp, "versionedExpr")?.is_none() {
        return Err(ApiError::required(&format!("{mp}.versionedExpr")));
    }
    let cp = format!("{mp}.config");
    let config =
        validate::object_mut(m, &mp, "config", false)?.ok_or_else(|| ApiError::required(&cp))?;
    let ranges = validate::cidr_list(config, &cp, "srcIpRanges", true)?;
    if ranges.is_empty() || ranges.len() > 10 {
        return Err(ApiError::invalid_value(
            &format!("{cp}.srcIpRanges"),
            &ranges.join(","),
            "Between 1 and 10 source IP ranges are required.",
        ));
    }
    Ok(p)
}
