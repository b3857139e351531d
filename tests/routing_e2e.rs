//! End to end, issue 17: Ingress v1 routing as Kubernetes defines it, through real HTTP requests
//! to the emulated load balancers of real Ingresses (local Kubernetes API, Compute emulator,
//! operator).
//!
//! Tables: every row of reference 001's "Path types" examples and "Hostname wildcards" table;
//! expected outcomes of GKE's own translator tests (kubernetes/ingress-gce
//! `pkg/controller/translator` and `pkg/utils` URL map tests: multiple paths, empty paths,
//! several empty paths on one host, GCE wildcards, from reference 000 `/foo/bar/bat` ->
//! `/foo/bar/*`); and adversarial rows (upper-case and punycode IDN hosts, ports in Host, query
//! strings, `%2F`, dot segments, percent-encoded unreserved characters, two Ingresses for one
//! host). Each table is served again after its Ingress is re-applied with rules and paths in
//! reverse order; answers and URL maps must not change. Where this project differs from GKE
//! (docs/routing.md), the row says so.

mod support;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::*;

const NS: &str = "default";
/// Services; each has one echo Pod `<service>-0`. `dflt` is every Ingress's `defaultBackend`.
const SERVICES: [&str; 4] = ["a", "b", "c", "dflt"];

fn services() -> String {
    let mut yaml = String::new();
    for s in SERVICES {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {s}}}\nspec:\n  selector: {{app: {s}}}\n  ports:\n  - {{name: http, port: 80, targetPort: 8080}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: {s}-0\n  labels: {{app: {s}}}\n  annotations: {{local.gclb-operator.dev/run: echo}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {{name: http, containerPort: 8080}}\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n---\n"
        ));
    }
    yaml
}

/// One Ingress rule: host (`""` for none) and paths as (pathType, path, service).
type Rule = (
    &'static str,
    &'static [(&'static str, &'static str, &'static str)],
);

/// Ingress `name` with `rules` (in reverse order, paths too, when `reverse`), default backend
/// `dflt`.
fn ingress(name: &str, rules: &[Rule], reverse: bool) -> String {
    let mut rules: Vec<Rule> = rules.to_vec();
    if reverse {
        rules.reverse();
    }
    let mut yaml = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations: {{kubernetes.io/ingress.class: gce}}\nspec:\n  defaultBackend: {{service: {{name: dflt, port: {{number: 80}}}}}}\n  rules:\n"
    );
    for (host, paths) in rules {
        if host.is_empty() {
            yaml.push_str("  - http:\n");
        } else {
            yaml.push_str(&format!("  - host: \"{host}\"\n    http:\n"));
        }
        yaml.push_str("      paths:\n");
        let mut paths: Vec<_> = paths.to_vec();
        if reverse {
            paths.reverse();
        }
        for (path_type, path, service) in paths {
            yaml.push_str(&format!(
                "      - {{pathType: {path_type}, path: \"{path}\", backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}\n"
            ));
        }
    }
    yaml
}

/// A request and the service that must answer it; `note` says which table row it is.
struct Row {
    host: &'static str,
    path: &'static str,
    want: &'static str,
    note: &'static str,
}

const fn row(
    host: &'static str,
    path: &'static str,
    want: &'static str,
    note: &'static str,
) -> Row {
    Row {
        host,
        path,
        want,
        note,
    }
}

// ---- Reference 001, "Path types" examples: one host per row. ----

const PATH_RULES: &[Rule] = &[
    ("p01.test", &[("Prefix", "/", "a")]),
    ("p02.test", &[("Exact", "/foo", "a")]),
    ("p03.test", &[("Exact", "/foo/", "a")]),
    ("p04.test", &[("Prefix", "/foo", "a")]),
    ("p05.test", &[("Prefix", "/foo/", "a")]),
    ("p06.test", &[("Prefix", "/aaa/bb", "a")]),
    ("p07.test", &[("Prefix", "/aaa/bbb", "a")]),
    ("p08.test", &[("Prefix", "/aaa/bbb/", "a")]),
    ("p09.test", &[("Prefix", "/", "a"), ("Prefix", "/aaa", "b")]),
    (
        "p10.test",
        &[
            ("Prefix", "/", "a"),
            ("Prefix", "/aaa", "b"),
            ("Prefix", "/aaa/bbb", "c"),
        ],
    ),
    ("p11.test", &[("Prefix", "/aaa", "a")]),
    (
        "p12.test",
        &[("Prefix", "/foo", "a"), ("Exact", "/foo", "b")],
    ),
    // Not in the table: Exact /foo/ is longer than Prefix /foo, so it wins /foo/ (route rules).
    (
        "p13.test",
        &[("Prefix", "/foo", "a"), ("Exact", "/foo/", "b")],
    ),
];

const PATH_ROWS: &[Row] = &[
    row("p01.test", "/", "a", "Prefix / matches all paths"),
    row("p01.test", "/x/y", "a", "Prefix / matches all paths"),
    row("p02.test", "/foo", "a", "Exact /foo matches /foo"),
    row("p02.test", "/bar", "dflt", "Exact /foo does not match /bar"),
    row(
        "p02.test",
        "/foo/",
        "dflt",
        "Exact /foo does not match /foo/",
    ),
    row(
        "p03.test",
        "/foo",
        "dflt",
        "Exact /foo/ does not match /foo",
    ),
    row("p04.test", "/foo", "a", "Prefix /foo matches /foo"),
    row("p04.test", "/foo/", "a", "Prefix /foo matches /foo/"),
    row("p05.test", "/foo", "a", "Prefix /foo/ matches /foo"),
    row("p05.test", "/foo/", "a", "Prefix /foo/ matches /foo/"),
    row(
        "p06.test",
        "/aaa/bbb",
        "dflt",
        "Prefix /aaa/bb does not match /aaa/bbb",
    ),
    row(
        "p07.test",
        "/aaa/bbb",
        "a",
        "Prefix /aaa/bbb matches /aaa/bbb",
    ),
    row(
        "p08.test",
        "/aaa/bbb",
        "a",
        "Prefix /aaa/bbb/ ignores the trailing slash",
    ),
    row(
        "p07.test",
        "/aaa/bbb/",
        "a",
        "Prefix /aaa/bbb matches the trailing slash",
    ),
    row(
        "p07.test",
        "/aaa/bbb/cc",
        "a",
        "Prefix /aaa/bbb matches a subpath",
    ),
    row("p07.test", "/aaa/bbbxyz", "dflt", "no string prefix match"),
    row(
        "p09.test",
        "/aaa/cc",
        "b",
        "/ and /aaa: /aaa/cc matches the /aaa prefix",
    ),
    row(
        "p10.test",
        "/aaa/bbb",
        "c",
        "/, /aaa, /aaa/bbb: /aaa/bbb wins",
    ),
    row("p10.test", "/cc", "a", "/, /aaa, /aaa/bbb: /cc matches /"),
    row(
        "p11.test",
        "/cc",
        "dflt",
        "Prefix /aaa: /cc goes to the default backend",
    ),
    row(
        "p12.test",
        "/foo",
        "b",
        "Mixed /foo (Prefix) and /foo (Exact): Exact wins",
    ),
    row(
        "p12.test",
        "/foo/x",
        "a",
        "Mixed: the Prefix path still serves below /foo",
    ),
    row(
        "p13.test",
        "/foo/",
        "b",
        "Exact /foo/ is longer than Prefix /foo",
    ),
    row("p13.test", "/foo", "a", "Prefix /foo matches /foo"),
    row("p13.test", "/foo/x", "a", "Prefix /foo matches a subpath"),
];

// ---- Reference 001, "Hostname wildcards" (and its example Ingress), plus hosts. ----

const HOST_RULES: &[Rule] = &[
    ("foo.bar.com", &[("Prefix", "/bar", "a")]),
    ("*.foo.com", &[("Prefix", "/foo", "b")]),
    ("api.foo.com", &[("Prefix", "/", "c")]),
    ("xn--bcher-kva.example", &[("Prefix", "/", "c")]),
];

const HOST_ROWS: &[Row] = &[
    row("bar.foo.com", "/foo", "b", "*.foo.com matches bar.foo.com"),
    // Kubernetes: no match (one DNS label). The classic load balancer cannot tell (no
    // regexMatch for scheme EXTERNAL): routed by the wildcard, with a Warning Event (GKE: the
    // same routing, no Warning). See docs/routing.md.
    row(
        "baz.bar.foo.com",
        "/foo",
        "b",
        "DEVIATION: *.foo.com and baz.bar.foo.com",
    ),
    row(
        "foo.com",
        "/foo",
        "dflt",
        "*.foo.com does not match foo.com",
    ),
    row("foo.bar.com", "/bar", "a", "exact host"),
    row("foo.bar.com", "/foo", "dflt", "exact host, no such path"),
    row(
        "api.foo.com",
        "/foo",
        "c",
        "an exact host beats a wildcard of the same domain",
    ),
    row("API.Foo.COM", "/foo", "c", "hosts are case-insensitive"),
    row(
        "foo.bar.com:8080",
        "/bar",
        "a",
        "the port in Host is not part of the match",
    ),
    row("xn--bcher-kva.example", "/", "c", "IDN host in punycode"),
    row("XN--BCHER-KVA.example", "/", "c", "IDN host, upper-case"),
    row("unknown.test", "/bar", "dflt", "no rule for the host"),
];

// ---- Adversarial rows and GKE's translator test cases. ----

const EDGE_RULES: &[Rule] = &[
    (
        "edge.test",
        &[
            ("Exact", "/foo", "a"),
            ("Prefix", "/a/b", "b"),
            ("Prefix", "/admin", "c"),
        ],
    ),
    // GKE pkg/controller/translator testdata ingress-multi-paths (ImplementationSpecific).
    (
        "gke.test",
        &[
            ("ImplementationSpecific", "/testpath", "a"),
            ("ImplementationSpecific", "/otherpath", "b"),
        ],
    ),
    // ingress-multi-empty: two empty paths on one host. GKE: the last wins; here the lower
    // backend service name (a), whatever the order, with a Warning.
    (
        "empty.test",
        &[
            ("ImplementationSpecific", "", "b"),
            ("ImplementationSpecific", "", "a"),
        ],
    ),
    // Reference 000: /foo/* and /foo/bar/*: /foo/bar/bat matches /foo/bar/*.
    (
        "gcewild.test",
        &[
            ("ImplementationSpecific", "/foo/*", "a"),
            ("ImplementationSpecific", "/foo/bar/*", "b"),
        ],
    ),
    // ingress-no-host: a rule without host serves every other host.
    ("", &[("ImplementationSpecific", "/testpath", "c")]),
];

const EDGE_ROWS: &[Row] = &[
    row(
        "edge.test",
        "/foo?x=1",
        "a",
        "the query string is not part of the path",
    ),
    row(
        "edge.test",
        "/foo/?x=1",
        "dflt",
        "Exact /foo, query after /foo/",
    ),
    row(
        "edge.test",
        "/a%2Fb",
        "dflt",
        "%2F is data, not a separator",
    ),
    row(
        "edge.test",
        "/a/b%2Fc",
        "dflt",
        "the segment b%2Fc is not b",
    ),
    row(
        "edge.test",
        "/x/../a/b",
        "b",
        "dot segments are resolved before matching",
    ),
    row(
        "edge.test",
        "/admin/../foo",
        "a",
        "a dot segment cannot keep /admin's rule",
    ),
    row(
        "edge.test",
        "/a/./b/c",
        "b",
        "single-dot segments are removed",
    ),
    row(
        "edge.test",
        "/%61/b",
        "b",
        "percent-encoded unreserved characters are decoded",
    ),
    row("gke.test", "/testpath", "a", "GKE multi-paths"),
    row("gke.test", "/otherpath", "b", "GKE multi-paths"),
    row(
        "gke.test",
        "/testpath/x",
        "dflt",
        "ImplementationSpecific /testpath is exact in GCE",
    ),
    row(
        "empty.test",
        "/anything",
        "a",
        "GKE multi-empty: DIFFERS (GKE: b, the last)",
    ),
    row(
        "gcewild.test",
        "/foo/bar/bat",
        "b",
        "reference 000: the more specific pattern",
    ),
    row("gcewild.test", "/foo/x", "a", "/foo/* serves below /foo/"),
    row("gcewild.test", "/foo", "dflt", "/foo/* does not serve /foo"),
    row(
        "nohost.test",
        "/testpath",
        "c",
        "GKE no-host: a rule without host",
    ),
    row(
        "edge.test",
        "/testpath",
        "dflt",
        "a host with rules of its own does not fall back",
    ),
];

/// The echo JSON of `GET path` with `Host: host` through `socket`. The request is written by
/// hand: HTTP clients resolve dot segments before sending, and these rows are about what the
/// load balancer does with them.
fn echo(socket: &str, host: &str, path: &str) -> Result<Value> {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(socket)?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    // The echo JSON is the body (one chunk when chunked).
    let (start, end) = (text.find('{'), text.rfind('}'));
    let json = match (start, end) {
        (Some(a), Some(b)) if a < b => &text[a..=b],
        _ => return Err(anyhow!("no echo JSON from {host}{path}: {text}")),
    };
    serde_json::from_str(json).map_err(|e| anyhow!("{host}{path}: not echo JSON ({e}): {text}"))
}

/// The service that answered `GET path` with `Host: host` through `socket`.
fn answered_by(socket: &str, host: &str, path: &str) -> Result<String> {
    let v = echo(socket, host, path)?;
    let pod = v["pod"].as_str().unwrap_or_default();
    Ok(pod.strip_suffix("-0").unwrap_or(pod).to_string())
}

/// Checks every row through `socket`; returns the failures. Each row is also explained
/// (`POST /_emulator/explain`): the endpoint explain names must be the one that answered, and
/// a row served by a URL map default must name the rule that came closest.
fn check(sys: &System, socket: &str, rows: &[Row], label: &str) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    let ip = socket.rsplit_once(':').map_or(socket, |(ip, _)| ip);
    for r in rows {
        let v = echo(socket, r.host, r.path)?;
        let pod = v["pod"].as_str().unwrap_or_default();
        let got = pod.strip_suffix("-0").unwrap_or(pod);
        if got != r.want {
            failures.push(format!(
                "[{label}] {}{}: got {got}, want {} ({})",
                r.host, r.path, r.want, r.note
            ));
        }
        let ex = sys.compute_post(
            "_emulator/explain",
            &serde_json::json!({"url": format!("http://{}{}", r.host, r.path), "ipAddress": ip}),
        )?;
        let answered = format!("{}:{}", v["podIP"].as_str().unwrap_or("?"), v["port"]);
        if ex["endpoint"]["address"].as_str() != Some(answered.as_str()) {
            failures.push(format!(
                "[{label} explain] {}{}: explain says {}, answered by {answered}: {ex}",
                r.host, r.path, ex["endpoint"]["address"]
            ));
        }
        let by_default = ex["routing"]["matched"]
            .as_str()
            .is_some_and(|m| m.ends_with("defaultService"));
        if by_default && !ex["routing"]["closest"]["rule"].is_string() {
            failures.push(format!(
                "[{label} explain] {}{}: a default served it and no closest rule is named: {ex}",
                r.host, r.path
            ));
        }
    }
    Ok(failures)
}

/// The URL map of Ingress `name` (through its `ingress.kubernetes.io/url-map` annotation).
/// The annotation is written after the IP, so it is polled.
fn url_map(sys: &System, name: &str) -> Result<Value> {
    let um = wait_for(
        &format!("the url-map annotation of {name}"),
        DEADLINE,
        || {
            let ing = sys.get_json(&["ingress", "-n", NS, name])?;
            Ok(
                ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
                    .as_str()
                    .map(str::to_string),
            )
        },
    )
    .with_context(|| sys.logs())?;
    sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/urlMaps/{um}"
    ))
}

#[test]
fn reference_tables_and_adversarial_rows_route_as_kubernetes_defines_in_any_order() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_basics()?;
    sys.apply(&services())?;
    let tables: [(&str, &[Rule], &[Row]); 3] = [
        ("paths", PATH_RULES, PATH_ROWS),
        ("hosts", HOST_RULES, HOST_ROWS),
        ("edge", EDGE_RULES, EDGE_ROWS),
    ];
    for (name, rules, _) in &tables {
        sys.apply(&ingress(name, rules, false))?;
    }
    // Two Ingresses for one host: each load balancer routes by its own rules.
    sys.apply(&ingress(
        "edge-twin",
        &[("edge.test", &[("Exact", "/foo", "b")])],
        false,
    ))?;
    sys.start_operator(&[])?;

    let mut sockets = Vec::new();
    for (name, _, rows) in &tables {
        let socket = sys.wait_for_ingress_socket(NS, name)?;
        // Wait until every backend answers (Pods ready, NEG endpoints healthy).
        wait_for(&format!("every row of {name} answered"), DEADLINE, || {
            Ok(rows
                .iter()
                .all(|r| answered_by(&socket, r.host, r.path).is_ok())
                .then_some(()))
        })
        .with_context(|| sys.logs())?;
        sockets.push(socket);
    }
    let twin = sys.wait_for_ingress_socket(NS, "edge-twin")?;
    wait_for("the twin's backend", DEADLINE, || {
        Ok((answered_by(&twin, "edge.test", "/foo").ok().as_deref() == Some("b")).then_some(()))
    })
    .with_context(|| sys.logs())?;
    assert_eq!(answered_by(&sockets[2], "edge.test", "/foo")?, "a");

    let mut failures = Vec::new();
    let mut maps = Vec::new();
    for ((name, _, rows), socket) in tables.iter().zip(&sockets) {
        failures.extend(check(&sys, socket, rows, name)?);
        maps.push(url_map(&sys, name)?);
    }

    // The same Ingresses with rules and paths in reverse order: same answers, same URL maps.
    let op = sys.operator.as_ref().context("operator")?;
    let before = op.ok_syncs()?;
    for (name, rules, _) in &tables {
        sys.apply(&ingress(name, rules, true))?;
    }
    wait_for("the reordered Ingresses reconciled", DEADLINE, || {
        Ok((op.ok_syncs()? >= before + tables.len() as u64).then_some(()))
    })
    .with_context(|| sys.logs())?;
    for (((name, _, rows), socket), map) in tables.iter().zip(&sockets).zip(&maps) {
        failures.extend(check(&sys, socket, rows, &format!("{name} reversed"))?);
        let again = url_map(&sys, name)?;
        assert_eq!(
            again["fingerprint"], map["fingerprint"],
            "reordering {name} changed its URL map"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The deviation and the GKE difference are not silent.
    let hosts_events = sys.events_for(NS, "Ingress", "hosts")?.join("\n");
    assert!(
        hosts_events.contains("Warning Translate") && hosts_events.contains("deeper names"),
        "{hosts_events}"
    );
    let edge_events = sys.events_for(NS, "Ingress", "edge")?.join("\n");
    assert!(
        edge_events.contains("is routed by both spec.rules[2].http.paths[1]"),
        "{edge_events}"
    );
    Ok(())
}
