//! Exact RBAC, derived from what the operator does (issue 15, "Exact RBAC, derived, not
//! guessed").
//!
//! One run drives every path that talks to the Kubernetes API: the demo Ingress
//! (docs/examples), a BackendConfig (with IAP, its OAuth client in an Opaque Secret read by
//! name), a FrontendConfig (HTTPS redirect), a TLS Secret, a
//! ManagedCertificate to Active, readiness gates to True, Events, the leader Lease, the
//! readiness-gate webhook's own caches and an Ingress deletion (finalizer removed). The local
//! API runs with `--audit-log` and the operator as deploy/'s ServiceAccount, so every request it
//! made is one audit line. The test then fails
//! - on any request RBAC refused (audit `forbid`, or 403 in the operator's log), and on any
//!   request the ClusterRole/Role in deploy/rbac.yaml would not allow (evaluated here, from the
//!   YAML, independently of the server's decision);
//! - on any grant (API group x resource x verb [x resourceName]) that no request used;
//! - on any request without the operator's `User-Agent` (`gclb-operator/<version>`).

mod support;

use std::collections::BTreeSet;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use support::*;

/// The operator's user in the audit log.
const USER: &str = "system:serviceaccount:gclb-operator:gclb-operator";

/// One request's authorization attributes, as the audit log records them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`.
    resource: String,
    namespace: String,
    name: String,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}/{} ns={:?} name={:?}",
            self.verb, self.group, self.resource, self.namespace, self.name
        )
    }
}

/// One grant: a rule of a ClusterRole (`namespace` empty) or of a Role, for one
/// (group, resource, verb), with its resourceNames.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    role: String,
    namespace: Option<String>,
    group: String,
    resource: String,
    verb: String,
    names: Vec<String>,
}

impl Grant {
    fn allows(&self, r: &Request) -> bool {
        self.namespace.as_ref().is_none_or(|ns| *ns == r.namespace)
            && self.group == r.group
            && self.resource == r.resource
            && self.verb == r.verb
            && (self.names.is_empty() || self.names.contains(&r.name))
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {} {}/{}",
            self.role,
            self.namespace.as_deref().unwrap_or("cluster"),
            self.verb,
            self.group,
            self.resource
        )?;
        if !self.names.is_empty() {
            write!(f, " names={:?}", self.names)?;
        }
        Ok(())
    }
}

/// Every grant of the ClusterRoles and Roles in a YAML stream (deploy/rbac.yaml), expanded to
/// one entry per (group, resource, verb). Wildcards are refused: least privilege names things.
fn grants(yaml: &str) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let doc: Value = serde_yaml::from_value(serde::Deserialize::deserialize(doc)?)?;
        let kind = doc["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let role = doc["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = (kind == "Role").then(|| {
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        });
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        for rule in doc["rules"].as_array().into_iter().flatten() {
            let names = strings(&rule["resourceNames"]);
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        if [&group, &resource, &verb].iter().any(|s| s.contains('*')) {
                            return Err(anyhow!("{role}: wildcard in {group}/{resource} {verb}"));
                        }
                        out.push(Grant {
                            role: format!("{kind}/{role}"),
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                            names: names.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The operator's requests in an audit log, with the lines RBAC refused and the user agents.
struct Audit {
    requests: Vec<Request>,
    /// Verb and `requestURI` of every Secret request.
    secret_reads: Vec<(String, String)>,
    forbidden: Vec<String>,
    user_agents: BTreeSet<String>,
}

fn read_audit(path: &std::path::Path) -> Result<Audit> {
    let text = std::fs::read_to_string(path).context("reading the audit log")?;
    let mut audit = Audit {
        requests: Vec::new(),
        secret_reads: Vec::new(),
        forbidden: Vec::new(),
        user_agents: BTreeSet::new(),
    };
    for line in text.lines() {
        let event: Value = serde_json::from_str(line)?;
        if event["user"]["username"] != USER {
            continue;
        }
        audit
            .user_agents
            .insert(event["userAgent"].as_str().unwrap_or("(none)").to_string());
        let decision = &event["annotations"]["authorization.k8s.io/decision"];
        if decision == "forbid" || event["responseStatus"]["code"] == 403 {
            audit.forbidden.push(line.to_string());
        }
        let o = &event["objectRef"];
        if o.is_null() {
            // Non-resource URLs (discovery): granted to every authenticated user by
            // system:discovery, not by deploy/.
            continue;
        }
        if o["resource"] == "secrets" {
            let uri = event["requestURI"].as_str().unwrap_or_default();
            let verb = event["verb"].as_str().unwrap_or_default();
            audit.secret_reads.push((verb.to_string(), uri.to_string()));
        }
        let mut resource = o["resource"].as_str().unwrap_or_default().to_string();
        if let Some(sub) = o["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        audit.requests.push(Request {
            verb: event["verb"].as_str().unwrap_or_default().to_string(),
            group: o["apiGroup"].as_str().unwrap_or_default().to_string(),
            resource,
            namespace: o["namespace"].as_str().unwrap_or_default().to_string(),
            name: o["name"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(audit)
}

/// Requests no grant allows, and grants no request used.
fn compare(requests: &[Request], grants: &[Grant]) -> (Vec<Request>, Vec<Grant>) {
    let denied: BTreeSet<Request> = requests
        .iter()
        .filter(|r| !grants.iter().any(|g| g.allows(r)))
        .cloned()
        .collect();
    let unused = grants
        .iter()
        .filter(|g| !requests.iter().any(|r| g.allows(r)))
        .cloned()
        .collect();
    (denied.into_iter().collect(), unused)
}

/// The comparison is not vacuous: a missing grant and a spare grant are both reported.
#[test]
fn the_comparison_reports_missing_and_spare_grants() -> Result<()> {
    let yaml = "kind: ClusterRole\nmetadata: {name: r}\nrules:\n- apiGroups: ['']\n  resources: [pods]\n  verbs: [get, list]\n---\nkind: Role\nmetadata: {name: l, namespace: ns}\nrules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  resourceNames: [x]\n  verbs: [get]\n";
    let g = grants(yaml)?;
    let req = |verb: &str, group: &str, resource: &str, ns: &str, name: &str| Request {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        namespace: ns.into(),
        name: name.into(),
    };
    let requests = vec![
        req("get", "", "pods", "default", "p"),
        req("get", "", "pods/status", "default", "p"),
        req("get", "coordination.k8s.io", "leases", "ns", "y"),
        req("get", "coordination.k8s.io", "leases", "other", "x"),
    ];
    let (denied, unused) = compare(&requests, &g);
    assert_eq!(denied, requests[1..].to_vec());
    let unused: Vec<String> = unused.iter().map(ToString::to_string).collect();
    assert_eq!(
        unused,
        [
            "ClusterRole/r (cluster): list /pods",
            "Role/l (ns): get coordination.k8s.io/leases names=[\"x\"]"
        ]
    );
    Ok(())
}

fn self_signed_webhook_cert(dir: &std::path::Path) -> Result<(String, String)> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])?.self_signed(&key)?;
    let cert_path = dir.join("webhook.crt");
    let key_path = dir.join("webhook.key");
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    Ok((
        cert_path.to_string_lossy().into_owned(),
        key_path.to_string_lossy().into_owned(),
    ))
}

/// The demo's my-ingress with TLS, a FrontendConfig (HTTPS redirect) and a ManagedCertificate;
/// my-products with a BackendConfig; a third products Pod with the readiness gate.
const EXTRA: &str = r#"
apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {name: products}
spec:
  timeoutSec: 45
  iap: {enabled: true, oauthclientCredentials: {secretName: products-oauth}}
---
# Opaque: not in the operator's type=kubernetes.io/tls Secret store, so read by name (get).
apiVersion: v1
kind: Secret
metadata: {name: products-oauth}
type: Opaque
stringData: {client_id: rbac-client, client_secret: rbac-oauth-secret}
---
apiVersion: networking.gke.io/v1beta1
kind: FrontendConfig
metadata: {name: redirect}
spec:
  redirectToHttps: {enabled: true}
---
apiVersion: networking.gke.io/v1
kind: ManagedCertificate
metadata: {name: store-cert}
spec:
  domains: [shop.your-store.example]
---
apiVersion: v1
kind: Pod
metadata:
  name: products-gated
  labels: {app: products, department: sales}
  annotations: {local.gclb-operator.dev/run: echo}
spec:
  readinessGates:
  - conditionType: cloud.google.com/load-balancer-neg-ready
  containers:
  - name: echo
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    ports:
    - containerPort: 50000
    readinessProbe:
      httpGet: {path: /, port: 50000}
      periodSeconds: 1
"#;

/// An Ingress whose backend Service does not exist.
const BROKEN: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: broken}\nspec:\n  defaultBackend:\n    service: {name: missing, port: {number: 80}}\n";

fn tls_secret(dir: &std::path::Path) -> Result<String> {
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec!["your-store.example".to_string()])?.self_signed(&key)?;
    let (crt_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&crt_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    Ok(format!(
        "--cert={}\0--key={}",
        crt_path.to_string_lossy(),
        key_path.to_string_lossy()
    ))
}

#[test]
fn deploy_rbac_is_exactly_what_the_operator_uses() -> Result<()> {
    let work = tempfile::tempdir()?;
    let audit_log = work.path().join("audit.log");
    let mut sys = System::start_with(support::Options {
        emulator_args: &[
            "--port-map",
            "80=0,443=0",
            "--managed-cert-provisioning-ms",
            "500",
        ],
        apiserver_args: &["--audit-log", audit_log.to_str().unwrap()],
        ..Default::default()
    })?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    let (cert, key) = self_signed_webhook_cert(work.path())?;
    sys.start_operator(&[
        "--leader-elect",
        "--leader-election-lease-duration",
        "4",
        "--webhook-listen",
        "127.0.0.1:0",
        "--webhook-tls-cert",
        &cert,
        "--webhook-tls-key",
        &key,
    ])?;
    let examples = repo_root().join("docs/examples");
    sys.apply_path(&examples.join("20-services-and-deployments.yaml"))?;
    sys.apply(EXTRA)?;
    let secret = tls_secret(work.path())?;
    let mut args = vec!["create", "secret", "tls", "store-tls"];
    args.extend(secret.split('\0'));
    sys.kubectl_ok(&args)?;
    sys.kubectl_ok(&[
        "annotate",
        "service",
        "my-products",
        "cloud.google.com/backend-config={\"default\":\"products\"}",
    ])?;
    // The demo Ingress, plus TLS and the two CRD annotations.
    let mut ingress: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(
        examples.join("30-my-ingress.yaml"),
    )?)?;
    ingress["metadata"]["annotations"] = serde_yaml::from_str(
        "{networking.gke.io/v1beta1.FrontendConfig: redirect, networking.gke.io/managed-certificates: store-cert}",
    )?;
    ingress["spec"]["tls"] =
        serde_yaml::from_str("[{hosts: [your-store.example], secretName: store-tls}]")?;
    sys.apply(&serde_yaml::to_string(&ingress)?)?;
    // An Ingress that cannot be translated gets a Warning; reconciled again (an annotation
    // changes), the same Warning is a series: the Event is patched.
    sys.apply(BROKEN)?;
    let warning = "Warning Translate";
    wait_for("the Translate Warning on broken", DEADLINE, || {
        let events = sys.events_for("default", "Ingress", "broken")?;
        Ok(events.iter().any(|e| e.starts_with(warning)).then_some(()))
    })
    .with_context(|| sys.logs())?;
    sys.kubectl_ok(&["annotate", "ingress", "broken", "touched=1"])?;
    wait_for("the Translate Warning on broken, twice", DEADLINE, || {
        let e = sys.get_json(&["events.events.k8s.io", "-n", "default"])?;
        Ok(e["items"]
            .as_array()
            .into_iter()
            .flatten()
            // At least 2: other changes (the ManagedCertificate's status) may reconcile
            // `broken` again before the poll sees the count at exactly 2.
            .any(|e| e["regarding"]["name"] == "broken" && e["series"]["count"].as_u64() >= Some(2))
            .then_some(()))
    })
    .with_context(|| sys.logs())?;

    // A TLSCertificateDelegation gets its status (a patch of tlscertificatedelegations/status).
    sys.apply("apiVersion: gclb-operator.dev/v1alpha1\nkind: TLSCertificateDelegation\nmetadata: {name: share-store-tls}\nspec:\n  delegations:\n  - {secretName: store-tls, targetNamespaces: [\"*\"]}\n")?;
    wait_for(
        "TLSCertificateDelegation share-store-tls Valid",
        DEADLINE,
        || {
            let d = sys.get_json(&["tlscertificatedelegation", "share-store-tls"])?;
            Ok(d["status"]["conditions"][0]["status"]
                .as_str()
                .filter(|s| *s == "True")
                .map(drop))
        },
    )
    .with_context(|| sys.logs())?;

    // Everything converges: HTTPS redirect through the load balancer, the BackendConfig on
    // the backend service, the ManagedCertificate Active, the gated Pod's condition True.
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 301, "")?;
    wait_for("the BackendConfig's timeoutSec", DEADLINE, || {
        let services = sys.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/backendServices"
        ))?;
        Ok(services["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["timeoutSec"] == 45)
            .then_some(()))
    })
    .with_context(|| sys.logs())?;
    wait_for("ManagedCertificate store-cert Active", DEADLINE, || {
        let m = sys.get_json(&["managedcertificate", "store-cert"])?;
        Ok((m["status"]["certificateStatus"] == "Active").then_some(()))
    })
    .with_context(|| sys.logs())?;
    wait_for(
        "the readiness gate of products-gated True",
        DEADLINE,
        || {
            let pod = sys.get_json(&["pod", "products-gated"])?;
            Ok(pod["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == "cloud.google.com/load-balancer-neg-ready" && c["status"] == "True"
                })
                .then_some(()))
        },
    )
    .with_context(|| sys.logs())?;
    // Deleting the Ingress: cleanup, then the finalizer goes.
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--wait=false"])?;
    wait_for("my-ingress to be gone", DEADLINE, || {
        let out = sys.kubectl(&["get", "ingress", "my-ingress"])?;
        Ok((!out.status.success()).then_some(()))
    })
    .with_context(|| sys.logs())?;
    wait_for("the URL maps to be garbage collected", DEADLINE, || {
        Ok(sys.compute_names("urlMaps")?.is_empty().then_some(()))
    })
    .with_context(|| sys.logs())?;

    let operator_log = std::fs::read_to_string(&sys.operator.as_ref().unwrap().log)?;
    sys.stop_operator();
    let forbidden_in_log: Vec<&str> = operator_log
        .lines()
        .filter(|l| l.to_lowercase().contains("forbidden") || l.contains("code: 403"))
        .collect();
    assert!(
        forbidden_in_log.is_empty(),
        "the operator was refused:\n{}",
        forbidden_in_log.join("\n")
    );

    let audit = read_audit(&audit_log)?;
    assert!(
        audit.requests.len() > 50,
        "too few operator requests in the audit log: {}",
        audit.requests.len()
    );
    assert!(
        audit.forbidden.is_empty(),
        "RBAC refused the operator:\n{}",
        audit.forbidden.join("\n")
    );
    assert_eq!(
        audit.user_agents,
        BTreeSet::from([format!("gclb-operator/{}", env!("CARGO_PKG_VERSION"))]),
        "every Kubernetes request names the operator"
    );
    // Lists and watches ask for TLS Secrets only; any other Secret is read by name, and only
    // one an Ingress references (the BackendConfig's IAP OAuth client).
    assert!(!audit.secret_reads.is_empty());
    let mut gets = BTreeSet::new();
    for (verb, uri) in &audit.secret_reads {
        if verb == "get" {
            gets.insert(uri.as_str());
        } else {
            assert!(
                uri.contains("fieldSelector=type%3Dkubernetes.io%2Ftls"),
                "a Secret {verb} without the TLS field selector: {uri}"
            );
        }
    }
    assert_eq!(
        gets,
        BTreeSet::from(["/api/v1/namespaces/default/secrets/products-oauth"]),
        "Secrets read by name"
    );
    let rbac = std::fs::read_to_string(repo_root().join("deploy/rbac.yaml"))?;
    let grants = grants(&rbac)?;
    let (denied, unused) = compare(&audit.requests, &grants);
    let used: BTreeSet<String> = audit
        .requests
        .iter()
        .map(|r| format!("{} {}/{}", r.verb, r.group, r.resource))
        .collect();
    assert!(
        denied.is_empty() && unused.is_empty(),
        "deploy/rbac.yaml is not what the operator uses.\nRequests it does not allow:\n{}\nGrants never used:\n{}\nEvery (verb, group/resource) used:\n{}",
        denied.iter().map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n"),
        unused.iter().map(|g| format!("  {g}")).collect::<Vec<_>>().join("\n"),
        used.into_iter().map(|u| format!("  {u}")).collect::<Vec<_>>().join("\n"),
    );
    Ok(())
}
