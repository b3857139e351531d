//! The IAM permission report's fixed parts (tests/iam_permission_report_e2e.rs): why the
//! permissions no scenario reaches are in the role, which ones a scenario checks only depending
//! on timing, and how two reports are compared.

use std::collections::{BTreeMap, BTreeSet};

use crate::iam_scenarios::Scenario;
use crate::support::iam::role_permissions;

const REFETCH: &str = "read only to refetch a resource changed behind the operator's back (412 conditionNotMet, drift, a delete racing garbage collection: seen in some runs of static-ip/delete); the state cache is filled by list";
const BY_IP: &str = "Google checks it when a forwarding rule takes a reserved address; the operator names the address by its IP (IPAddress) and the emulator checks use only of what a request names by path (iam_permissions.rs), so no test here can show it";
const SET_TARGET: &str = "re-pointing an existing forwarding rule at another proxy: a rule's target proxy is named after the rule's Ingress and port and never changes, so only drift (someone re-pointing the rule behind the operator's back) takes this path; the update phases change what the proxies hold, not which proxy a rule uses";
const SET_URL_MAP: &str = "an HTTPS proxy's URL map is named after its Ingress and never changes (the update phases change the map's content: urlMaps.update), so only drift takes this path";

const NEG_ENDPOINTS: &str = "checked by networkEndpointGroups.listNetworkEndpoints (its Compute API reference page lists compute.networkEndpointGroups.get; deploy/iam/method-permissions.yaml), which the operator calls only for a NEG whose endpoints its state cache does not hold or holds stale: one it did not create, or after an operator restart (the clean-up after a leak restarts it), so here it depends on timing; takeover, which reads GKE's NEGs so, checks it every time and is refused without it with a PermissionDenied Event naming it (tests/iam_role_exact_e2e.rs, takeover_without_a_permission_it_needs_is_refused_with_an_event)";

/// Permissions of the role no scenario exercises, and why (the report's last column).
pub const UNREACHED: &[(&str, &str)] = &[
    ("compute.addresses.use", BY_IP),
    ("compute.globalAddresses.use", BY_IP),
    ("compute.firewalls.update", "the shared L7 rule changes only when the set of ports the Ingresses' backends listen on changes (or drift); every scenario's Pods listen on 8080, so the rule the first scenario creates is already right for every update"),
    ("compute.forwardingRules.setTarget", SET_TARGET),
    ("compute.globalForwardingRules.setTarget", SET_TARGET),
    ("compute.targetHttpsProxies.setUrlMap", SET_URL_MAP),
    ("compute.regionTargetHttpsProxies.setUrlMap", SET_URL_MAP),
    ("compute.regionTargetHttpProxies.setUrlMap", "a regional HTTP proxy moves to another URL map only when FrontendConfig redirectToHttps is turned on or off on class gce-regional-external (the redirect map), which no scenario does (the global twin, targetHttpProxies.setUrlMap, is proven in features/update)"),
    ("compute.targetTcpProxies.update", "setBackendService of a TLS Passthrough port's proxy, whose `service` is a fixed placeholder without backends (routing is by the Network Services tlsRoute: src/gateway/ports.rs); moving the TLSRoute to another Service (gateway/update) changes the tlsRoute, so only drift takes this path"),
    ("compute.subnetworks.use", "needed when a request names a subnetwork by path (a Shared VPC's NEGs, tests/resync_and_xpn_e2e.rs); the scenarios' requests name none"),
];

/// Permissions a scenario phase checks in some runs and not in others, and why: the report
/// gives the reason, whatever this run saw, and no removal is tried.
pub const TIMING: &[(&str, &str)] = &[
    ("compute.healthChecks.get", REFETCH),
    ("compute.targetHttpProxies.get", REFETCH),
    ("compute.targetHttpsProxies.get", REFETCH),
    ("compute.networkEndpointGroups.get", NEG_ENDPOINTS),
    ("compute.targetSslProxies.setBackendService", "a TLS Terminate port's proxy is re-pointed only when a later pass of the Gateway loop finds its TLSRoute's backend after an earlier pass built the proxy without it (seen in some runs of gateway/update), which depends on timing; moving the route to another Service made the loop rebuild the proxy in some runs"),
    ("compute.targetSslProxies.setSslCertificates", "gateway/update switches the TLS Terminate listener's certificate: the Gateway loop sets the target SSL proxy's certificates in some runs and rebuilds the proxy (delete, insert with the new certificate) in others, depending on which objects a pass has seen (a full run saw gateway/update check it with the whole role, then complete without it, the proxy rebuilt)"),
    ("compute.urlMaps.get", "the Gateway loop reads a URL map only when a later pass changes what an earlier pass of the same apply built (routes seen after their Gateway), which depends on timing"),
    ("networkservices.tlsRoutes.update", "gateway/update moves the TLS Passthrough route to another Service: the Gateway loop patches the tlsRoute in some runs (a full run: refused without it in gateway/update) and deletes and creates it in others (a make test run: tlsRoutes.create and .delete in gateway/update, no patch), depending on which objects a pass has seen"),
];

/// permission -> verdict of each row of a report: `refused` (proven), `exercised` (checked,
/// no removal tried), or the `timing-dependent`/`not reached` text with its reason.
pub fn verdicts(report: &str) -> BTreeMap<&str, &str> {
    report
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l
                .strip_prefix("| ")
                .filter(|r| r.starts_with("compute.") || r.starts_with("networkservices."))
                .map(|_| l.split(" | ").collect())?;
            let p = cols.first()?.trim_start_matches("| ");
            let proof = cols.get(2)?.trim_end_matches(" |");
            let v = if proof.starts_with("refused") {
                "refused"
            } else if proof.is_empty() {
                "exercised"
            } else {
                proof
            };
            Some((p, v))
        })
        .collect()
}

/// The lines of `a` and `b` that differ, `-`/`+` marked (the table's rows are sorted).
pub fn diff(a: &str, b: &str) -> String {
    let (la, lb): (BTreeSet<&str>, BTreeSet<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out: Vec<String> = la.difference(&lb).map(|l| format!("- {l}")).collect();
    out.extend(lb.difference(&la).map(|l| format!("+ {l}")));
    out.join("\n")
}

/// A phase of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Applied until it serves.
    Create,
    /// Changed until the change is served (tests/support/iam_updates.rs).
    Update,
    /// Deleted until collected.
    Delete,
}

impl Phase {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Update => "update",
            Phase::Delete => "delete",
        }
    }
}

/// One row of the report.
pub struct Row {
    /// `scenario/phase` that checked it.
    pub exercised: Vec<String>,
    /// The last column.
    pub proof: String,
}

/// The report's text.
pub fn render(rows: &BTreeMap<String, Row>) -> String {
    let role = role_permissions().unwrap_or_default();
    let proven = rows
        .values()
        .filter(|r| r.proof.starts_with("refused"))
        .count();
    let unreached = rows.values().filter(|r| r.exercised.is_empty()).count();
    let timing = rows
        .values()
        .filter(|r| r.proof.starts_with("timing"))
        .count();
    let mut s = format!(
        "# deploy/iam/gclb-operator-role.yaml, permission by permission\n\n\
         GENERATED by `make iam-report` (tests/iam_permission_report_e2e.rs with IAM_REPORT=full\n\
         IAM_REPORT_WRITE=1); do not edit by hand. The operator ran against the emulator with\n\
         `--iam`, authenticated through its metadata server as a service account bound to exactly\n\
         the role. \"Exercised in\": the scenario phases (tests/support/iam_scenarios.rs) whose\n\
         checks, with the whole role, included the permission. \"Without it\": that phase run\n\
         again, fresh names, with the role minus the permission: the emulator refused it and no\n\
         other; then how the object said so (a Warning PermissionDenied Event naming it on the\n\
         Ingress, the XPN Event for the firewall rule, the Programmed condition of a Gateway)\n\
         or that only the operator's log does.\n\n\
         {} permissions: {} exercised, {proven} refused when removed, {timing} exercised or not\n\
         depending on timing, {unreached} not reached (reason given).\n\n\
         | permission | exercised in | without it |\n|---|---|---|\n",
        role.len(),
        role.len() - unreached,
    );
    for (p, r) in rows {
        let ex = if r.exercised.is_empty() {
            "-".to_string()
        } else {
            r.exercised.join(", ")
        };
        s += &format!("| {p} | {ex} | {} |\n", r.proof);
    }
    s
}

/// A proven row's last column.
pub fn proof(sc: Scenario, phase: Phase, told: &str) -> String {
    format!("refused in {}/{}; {told}", sc.name(), phase.name())
}

/// `IAM_REPORT_SHARD=I/N` (0 <= I < N): this process removes only the permissions whose
/// position in the role is I modulo N, so N processes (each its own stack) share a full run;
/// the scenarios all run with the whole role in each. `None` without it.
pub fn shard() -> Option<(usize, usize)> {
    let v = std::env::var("IAM_REPORT_SHARD").ok()?;
    let (i, n) = v.split_once('/')?;
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

/// The rows of a rendered report: permission -> its exercised phases and last column.
pub fn rows_of(report: &str) -> BTreeMap<String, Row> {
    report
        .lines()
        .filter_map(|l| {
            // A permission's row: `| service.resource.verb | ...` (compute.*, networkservices.*).
            let rest = l.strip_prefix("| ")?;
            let mut cols = rest.splitn(3, " | ");
            let p = cols.next()?.to_string();
            if !(p.starts_with("compute.") || p.starts_with("networkservices.")) {
                return None;
            }
            let ex = cols.next()?;
            let proof = cols.next()?.trim_end_matches('|').trim_end().to_string();
            let exercised = match ex {
                "-" => vec![],
                ex => ex.split(", ").map(str::to_string).collect(),
            };
            Some((p, Row { exercised, proof }))
        })
        .collect()
}

/// Writes shard `i` of `n`'s rendered report beside the others (in `IAM_REPORT_SHARD_DIR`,
/// default `$TMPDIR/iam-report-shards`, which each sharded run must give fresh); when every shard's is there, the merged rows:
/// each permission's row from the shard that owned its removal.
///
/// Errors: the directory cannot be written or read.
pub fn merge_shards(
    i: usize,
    n: usize,
    text: &str,
    role: &[String],
) -> anyhow::Result<Option<BTreeMap<String, Row>>> {
    let dir = std::env::var("IAM_REPORT_SHARD_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join("iam-report-shards"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("shard-{i}-of-{n}.md")), text)?;
    let mut shards = Vec::new();
    for k in 0..n {
        match std::fs::read_to_string(dir.join(format!("shard-{k}-of-{n}.md"))) {
            Ok(t) => shards.push(rows_of(&t)),
            Err(_) => return Ok(None),
        }
    }
    let mut merged = BTreeMap::new();
    for (pos, p) in role.iter().enumerate() {
        if let Some(row) = shards[pos % n].remove(p) {
            merged.insert(p.clone(), row);
        }
    }
    Ok(Some(merged))
}
