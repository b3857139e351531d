//! Python google-cloud-compute 1.57.0 (installed by `make deps`) against the emulator with
//! `api_endpoint` and anonymous credentials (reference/gce-clients.md, section 3): inserts
//! through slow Operations (both ways to wait: `.result()` with the operations-client
//! workaround, and `insert_unary` + `GlobalOperationsClient.wait`), reads, errors, deletes.

mod control_support;

use std::process::Command;

use control_support::Emulator;

const SCRIPT: &str = r#"
import sys
from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

endpoint = sys.argv[1]
kw = dict(credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=endpoint))
P, Z = "p1", "us-central1-a"

def fix(client):
    # The built-in pollers ignore client_options (reference/gce-clients.md): aim them here.
    ops = client._transport._extended_operations_services
    ops["global_operations"] = compute_v1.GlobalOperationsClient(**kw)
    ops["zone_operations"] = compute_v1.ZoneOperationsClient(**kw)
    return client

hc = fix(compute_v1.HealthChecksClient(**kw))
negs = fix(compute_v1.NetworkEndpointGroupsClient(**kw))
bss = fix(compute_v1.BackendServicesClient(**kw))
ums = fix(compute_v1.UrlMapsClient(**kw))
gops = compute_v1.GlobalOperationsClient(**kw)

hc.insert(project=P, health_check_resource=compute_v1.HealthCheck(
    name="hc1", type_="HTTP", http_health_check=compute_v1.HTTPHealthCheck(port=8080, request_path="/healthz"))).result(timeout=60)
negs.insert(project=P, zone=Z, network_endpoint_group_resource=compute_v1.NetworkEndpointGroup(
    name="neg1", network_endpoint_type="GCE_VM_IP_PORT", default_port=8080)).result(timeout=60)
negs.attach_network_endpoints(project=P, zone=Z, network_endpoint_group="neg1",
    network_endpoint_groups_attach_endpoints_request_resource=compute_v1.NetworkEndpointGroupsAttachEndpointsRequest(
        network_endpoints=[compute_v1.NetworkEndpoint(ip_address="127.0.0.30", port=8080)])).result(timeout=60)
bss.insert(project=P, backend_service_resource=compute_v1.BackendService(
    name="bs1", health_checks=[f"projects/{P}/global/healthChecks/hc1"],
    backends=[compute_v1.Backend(group=f"projects/{P}/zones/{Z}/networkEndpointGroups/neg1", balancing_mode="RATE", max_rate_per_endpoint=10)])).result(timeout=60)

# insert_unary + operations.wait, the other documented way.
op = ums.insert_unary(project=P, url_map_resource=compute_v1.UrlMap(name="um1", default_service=f"projects/{P}/global/backendServices/bs1"))
assert op.status != compute_v1.Operation.Status.DONE, op
while op.status != compute_v1.Operation.Status.DONE:
    op = gops.wait(project=P, operation=op.name)
assert op.operation_type == "insert" and op.target_link.endswith("/global/urlMaps/um1"), op

um = ums.get(project=P, url_map="um1")
assert um.default_service.endswith("/global/backendServices/bs1"), um
assert [u.name for u in ums.list(project=P)] == ["um1"]
agg = dict(negs.aggregated_list(project=P))
assert agg[f"zones/{Z}"].network_endpoint_groups[0].size == 1, agg[f"zones/{Z}"]
health = bss.get_health(project=P, backend_service="bs1",
    resource_group_reference_resource=compute_v1.ResourceGroupReference(group=f"projects/{P}/zones/{Z}/networkEndpointGroups/neg1"))
assert health.health_status[0].ip_address == "127.0.0.30", health
eps = list(negs.list_network_endpoints(project=P, zone=Z, network_endpoint_group="neg1",
    network_endpoint_groups_list_endpoints_request_resource=compute_v1.NetworkEndpointGroupsListEndpointsRequest(health_status="SHOW")))
assert eps[0].healths[0].health_state in ("HEALTHY", "UNHEALTHY", "UNKNOWN"), eps

try:
    hc.delete(project=P, health_check="hc1")
    raise SystemExit("deleting an in-use health check must fail")
except exceptions.BadRequest as e:
    assert "already being used" in str(e), e
try:
    ums.get(project=P, url_map="nope")
    raise SystemExit("expected NotFound")
except exceptions.NotFound:
    pass

ums.delete(project=P, url_map="um1").result(timeout=60)
bss.delete(project=P, backend_service="bs1").result(timeout=60)
negs.delete(project=P, zone=Z, network_endpoint_group="neg1").result(timeout=60)
hc.delete(project=P, health_check="hc1").result(timeout=60)
assert list(hc.list(project=P)) == []
print("PYTHON-OK")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_builds_reads_and_deletes() {
    let emu = Emulator::start(&["--operation-latency-ms", "400"]);
    emu.instance("p1", "us-central1-a", "vm1", "127.0.0.30")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("lb.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let endpoint = emu.root.trim_end_matches('/').to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(&script)
            .arg(endpoint)
            .output()
            .expect("run python3")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("PYTHON-OK"), "python client failed (is google-cloud-compute==1.57.0 installed? `make deps`)\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let calls = emu.admin_get("calls").await;
    assert!(
        calls["methods"]["compute.globalOperations.wait"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{calls}"
    );
    emu.send(
        reqwest::Method::DELETE,
        "projects/p1/zones/us-central1-a/instances/vm1",
        "",
    )
    .await;
    assert_eq!(emu.keys("p1").await, Emulator::initial_keys("p1"));
}
