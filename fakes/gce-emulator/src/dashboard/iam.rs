//! The dashboard's "who may do what" page, `GET /_emulator/dashboard/iam[?principal=MEMBER]`
//! (docs/dashboard.md, docs/emulator.md "Credentials and IAM"):
//! - per project, each binding (role -> members), from the same policy the admin API's
//!   `GET /_emulator/iam/projects/P/bindings` answers ([`crate::iam_policy::Policy::policy_json`]);
//! - for the chosen principal (`serviceAccount:EMAIL`, `user:EMAIL`, `allUsers`; a form lists
//!   every member bound anywhere), per project the roles it holds (directly, or through
//!   `allUsers` / `allAuthenticatedUsers`) and the permissions those give, predefined and
//!   custom roles expanded against every permission the emulator checks
//!   ([`known_permissions`]);
//! - the recent refusals, newest first: 403s with their method, permission, resource and
//!   principal, and 401s (no valid token) ([`crate::identity::Identity::refusals`]).
//!
//! Server-rendered, no script: a grant or revoke shows on the next load.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse};

use super::page::esc;
use crate::emulator::Emulator;
use crate::iam_policy::Policy;

/// The page's query: `principal`, the member whose permissions are listed.
#[derive(Debug, Default, serde::Deserialize)]
pub struct IamQuery {
    /// `serviceAccount:EMAIL`, `user:EMAIL`, `group:EMAIL`, `allUsers`; none: no expansion.
    #[serde(default)]
    pub principal: Option<String>,
}

/// Every permission the emulator checks or a role names: the method table's
/// (deploy/iam/method-permissions.yaml), the custom roles' and the predefined roles' exact
/// names. Role patterns (`compute.*`) expand against this set.
pub fn known_permissions(policy: &Policy) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = crate::iam_permissions::table()
        .values()
        .flatten()
        .cloned()
        .collect();
    known.extend(policy.custom_permissions());
    for (_, _, perms) in crate::iam_roles::PREDEFINED {
        known.extend(
            perms
                .iter()
                .filter(|p| !p.contains('*'))
                .map(|p| p.to_string()),
        );
    }
    known
}

/// `GET /_emulator/dashboard/iam`.
pub async fn page(
    State(emu): State<Arc<Emulator>>,
    Query(q): Query<IamQuery>,
) -> impl IntoResponse {
    let policy = emu.identity.policy().clone();
    let (refusals, unauthenticated) = emu.identity.refusals();
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>gce-emulator IAM</title><style>\
body{font:14px system-ui,sans-serif;margin:1em 2em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
td,th{border:1px solid #ddd;padding:.2em .6em;text-align:left;vertical-align:top}th{background:#f4f4f4}\
code{font-size:13px}.perm{columns:3 22em}.denied{color:#b00}</style></head><body>\
<h1>gce-emulator: who may do what</h1><p><a href=\"/_emulator/dashboard\">load balancers</a> \
<a href=\"/_emulator/iam\">IAM JSON</a></p>",
    );
    let _ = write!(
        out,
        "<p>IAM is <b>{}</b> (<code>--iam</code>).</p>",
        if emu.identity.enforce {
            "enforced"
        } else {
            "not enforced"
        }
    );
    let projects = policy.projects();
    let mut members: BTreeSet<String> = BTreeSet::new();
    out.push_str("<h2>Bindings</h2>");
    if projects.is_empty() {
        out.push_str("<p>No project has bindings.</p>");
    }
    for project in &projects {
        let json = policy.policy_json(project);
        let _ = write!(
            out,
            "<h3 id=\"project-{0}\">{0}</h3><table class=bindings><tr><th>role</th><th>members</th></tr>",
            esc(project)
        );
        for b in json["bindings"].as_array().into_iter().flatten() {
            let role = b["role"].as_str().unwrap_or_default();
            let list: Vec<String> = b["members"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect();
            let cells: Vec<String> = list
                .iter()
                .map(|m| {
                    format!(
                        "<a class=member href=\"?principal={}\">{}</a>",
                        esc(&urlencode(m)),
                        esc(m)
                    )
                })
                .collect();
            let _ = write!(
                out,
                "<tr data-role=\"{0}\"><td><code>{0}</code></td><td>{1}</td></tr>",
                esc(role),
                cells.join(", ")
            );
            members.extend(list);
        }
        out.push_str("</table>");
    }

    out.push_str("<h2>Permissions of a principal</h2><form method=get><select name=principal>");
    let chosen = q.principal.as_deref().unwrap_or_default();
    for m in &members {
        let sel = if m == chosen { " selected" } else { "" };
        let _ = write!(out, "<option{sel}>{}</option>", esc(m));
    }
    out.push_str("</select> <button>show</button></form>");
    if !chosen.is_empty() {
        principal_html(&mut out, &policy, &projects, chosen);
    }

    let _ = write!(
        out,
        "<h2>Recent refusals</h2><p>{unauthenticated} calls refused 401 (no valid token) since start.</p>\
<table class=refusals><tr><th>when (Unix s)</th><th>code</th><th>method</th><th>permission</th><th>resource</th><th>principal</th></tr>"
    );
    for r in refusals.iter().rev() {
        let _ = write!(
            out,
            "<tr class=denied><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>",
            r.at,
            r.code,
            esc(&r.method),
            esc(&r.permission),
            esc(&r.resource),
            esc(&r.principal)
        );
    }
    out.push_str("</table></body></html>");
    Html(out)
}

/// The roles and expanded permissions of `principal` in each project.
fn principal_html(out: &mut String, policy: &Policy, projects: &[String], principal: &str) {
    let known = known_permissions(policy);
    let _ = write!(out, "<h3 id=principal>{}</h3>", esc(principal));
    let mut any = false;
    for project in projects {
        let roles = policy.roles_of(project, principal);
        if roles.is_empty() {
            continue;
        }
        any = true;
        let by_role: BTreeMap<String, String> = roles.into_iter().collect();
        let _ = write!(out, "<h4>in {}</h4><p>roles: ", esc(project));
        let list: Vec<String> = by_role
            .iter()
            .map(|(role, via)| match via == principal {
                true => format!("<code>{}</code>", esc(role)),
                false => format!("<code>{}</code> (through {})", esc(role), esc(via)),
            })
            .collect();
        out.push_str(&list.join(", "));
        out.push_str("</p><ul class=perm>");
        for p in policy.permissions_of(project, principal, &known) {
            let _ = write!(out, "<li class=permission><code>{}</code></li>", esc(&p));
        }
        out.push_str("</ul>");
    }
    if !any {
        out.push_str("<p>No role in any project.</p>");
    }
}

/// Percent-encodes a query value (`serviceAccount:a@b` -> `serviceAccount%3Aa%40b`).
fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
