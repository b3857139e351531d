//! The IAM permission report's fixed parts (tests/iam_permission_report_e2e.rs): why the
//! permissions no scenario reaches are in the role, which ones a scenario checks only depending
//! on timing, and how two reports are compared.

use std::collections::{BTreeMap, BTreeSet};

const UPDATE: &str = "an update of an existing resource, taken only when it differs from the desired one (a changed Ingress, Service, BackendConfig or FrontendConfig, or drift); the scenarios create and delete";
const PROXY: &str = "changing an existing proxy (another URL map, certificates, SSL policy or backend service); a new proxy gets them on insert, and the scenarios create and delete";
const REFETCH: &str = "read only to refetch a resource changed behind the operator's back (412 conditionNotMet, drift, a delete racing garbage collection: seen in some runs of static-ip/delete); the state cache is filled by list";
const OPERATION: &str = "polling an Operation; the emulator answers each mutation with a finished one, so the operator never polls";
const BY_IP: &str = "Google checks it when a forwarding rule takes a reserved address; the operator names the address by its IP (IPAddress) and the emulator checks use only of what a request names by path (iam_permissions.rs), so no test here can show it";

/// Permissions of the role no scenario exercises, and why (the report's last column).
pub const UNREACHED: &[(&str, &str)] = &[
    ("compute.addresses.use", BY_IP),
    ("compute.globalAddresses.use", BY_IP),
    ("compute.backendServices.setSecurityPolicy", "attaching or removing a Cloud Armor policy on an existing backend service (a BackendConfig's securityPolicy changed); a new one gets its policy on insert"),
    ("compute.backendServices.update", UPDATE),
    ("compute.firewalls.update", UPDATE),
    ("compute.healthChecks.update", UPDATE),
    ("compute.regionBackendServices.update", UPDATE),
    ("compute.regionHealthChecks.update", UPDATE),
    ("compute.regionUrlMaps.update", UPDATE),
    ("compute.forwardingRules.setTarget", "re-pointing an existing forwarding rule at another proxy (HTTP <-> HTTPS changes, drift); the scenarios create and delete"),
    ("compute.globalForwardingRules.setTarget", "re-pointing an existing forwarding rule at another proxy (HTTP <-> HTTPS changes, drift); the scenarios create and delete"),
    ("compute.targetHttpProxies.setUrlMap", PROXY),
    ("compute.targetHttpsProxies.setUrlMap", PROXY),
    ("compute.targetHttpsProxies.setSslCertificates", PROXY),
    ("compute.targetHttpsProxies.setSslPolicy", PROXY),
    ("compute.regionTargetHttpProxies.setUrlMap", PROXY),
    ("compute.regionTargetHttpsProxies.setSslCertificates", PROXY),
    ("compute.regionTargetHttpsProxies.setUrlMap", PROXY),
    ("compute.targetSslProxies.setSslCertificates", PROXY),
    ("compute.targetTcpProxies.update", PROXY),
    ("compute.globalOperations.get", OPERATION),
    ("compute.regionOperations.get", OPERATION),
    ("compute.zoneOperations.get", OPERATION),
    ("compute.networkEndpointGroups.detachNetworkEndpoints", "an endpoint leaving a NEG that stays (a Pod deleted or unready while its Ingress lives); the scenarios delete the whole Ingress"),
    ("compute.subnetworks.use", "needed when a request names a subnetwork by path (a Shared VPC's NEGs, tests/resync_and_xpn_e2e.rs); the scenarios' requests name none"),
];

/// Permissions a scenario phase checks in some runs and not in others, and why: the report
/// gives the reason, whatever this run saw, and no removal is tried.
pub const TIMING: &[(&str, &str)] = &[
    ("compute.healthChecks.get", REFETCH),
    ("compute.targetHttpProxies.get", REFETCH),
    ("compute.targetHttpsProxies.get", REFETCH),
    ("compute.networkEndpointGroups.get", REFETCH),
    ("compute.urlMaps.get", "the Gateway loop reads a URL map only when a later pass changes what an earlier pass of the same apply built (routes seen after their Gateway), which depends on timing"),
    ("compute.urlMaps.update", "the Gateway loop updates a URL map only when a later pass changes what an earlier pass of the same apply built (routes seen after their Gateway), which depends on timing"),
    ("compute.targetSslProxies.setBackendService", "a TLS Terminate port's proxy is re-pointed only when a later pass of the Gateway loop finds its TLSRoute's backend after an earlier pass built the proxy without it, which depends on timing"),
];

/// permission -> verdict of each row of a report: `refused` (proven), `exercised` (checked,
/// no removal tried), or the `timing-dependent`/`not reached` text with its reason.
pub fn verdicts(report: &str) -> BTreeMap<&str, &str> {
    report
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l
                .strip_prefix("| compute.")
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
