//! Bad Kubernetes input to Ingresses that already serve: a malformed Service annotation, a
//! missing Service, a missing port, a missing TLS Secret, an out-of-range BackendConfig (a probe
//! timeout longer than its interval: the CRD refuses it today, so it is stored under an older
//! CRD without that rule, as objects outlive CRD upgrades), and a FrontendConfig naming an SSL
//! policy that does not exist. Each broken Ingress gets exactly one
//! Warning Event (repeated failures fold into its series) naming the object, the field and the
//! fix; its existing load balancer keeps serving; and an Ingress applied afterwards converges.
//! (ingress_e2e.rs covers Ingresses broken from the start; features_e2e.rs values the CRD
//! schemas refuse at admission.)

mod support;

use anyhow::{anyhow, Result};
use base64::Engine as _;
use support::*;

fn pod_and_service(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  type: NodePort\n  selector: {{app: {name}}}\n  ports:\n  - {{name: http, port: 80, targetPort: 8080}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-1\n  labels: {{app: {name}}}\n  annotations: {{local.gclb-operator.dev/run: echo}}\nspec:\n  containers:\n  - {{name: echo, image: echo, ports: [{{containerPort: 8080}}]}}\n---\n"
    )
}

/// Ingress `name` routing everything to `service:port`, with annotations and TLS entries.
fn ingress(name: &str, service: &str, port: u16, annotations: &str, tls: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  ingressClassName: gce\n{tls}  defaultBackend:\n    service: {{name: {service}, port: {{number: {port}}}}}\n---\n"
    )
}

/// Warning Events about Ingress `name`: (reason, message, times reported).
fn warnings(sys: &System, name: &str) -> Result<Vec<(String, String, u64)>> {
    let list = sys.get_json(&["events", "-n", "default"])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            let obj = if e["involvedObject"].is_object() {
                &e["involvedObject"]
            } else {
                &e["regarding"]
            };
            obj["kind"] == "Ingress" && obj["name"] == name && e["type"] == "Warning"
        })
        .map(|e| {
            let times = e["count"]
                .as_u64()
                .or(e["series"]["count"].as_u64())
                .unwrap_or(1);
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"]
                    .as_str()
                    .or(e["note"].as_str())
                    .unwrap_or_default()
                    .to_string(),
                times,
            )
        })
        .collect())
}

/// Removes every `x-kubernetes-validations` rule from a CRD.
fn strip_rules(v: &mut serde_yaml::Value) {
    match v {
        serde_yaml::Value::Mapping(m) => {
            m.remove("x-kubernetes-validations");
            for (_, x) in m.iter_mut() {
                strip_rules(x);
            }
        }
        serde_yaml::Value::Sequence(items) => items.iter_mut().for_each(strip_rules),
        _ => {}
    }
}

#[test]
fn each_broken_ingress_gets_one_warning_and_keeps_serving_while_others_converge() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    let ck = rcgen::generate_simple_self_signed(vec!["tls.example".to_string()])?;
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: tls-ok}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    let tls_ok = "  tls:\n  - {hosts: [tls.example], secretName: tls-ok}\n";
    let mut yaml = secret;
    for s in ["s-ann", "s-shared", "s-bc"] {
        yaml += &pod_and_service(s, "");
    }
    // Each victim first serves.
    let victims = [
        ("v-annotation", "s-ann", ""),
        ("v-service", "s-shared", ""),
        ("v-port", "s-shared", ""),
        ("v-secret", "s-shared", ""),
        ("v-backendconfig", "s-bc", ""),
        ("v-frontendconfig", "s-shared", tls_ok),
    ];
    for (name, svc, tls) in victims {
        yaml += &ingress(name, svc, 80, "", tls);
    }
    sys.apply(&yaml)?;
    let mut sockets = Vec::new();
    for (name, svc, _) in victims {
        let ip = sys.wait_for_ingress_ip("default", name)?;
        let socket = sys.wait_for_listener(&ip, 80)?;
        sys.wait_for_response(&socket, "any.example", "/", 200, &format!("{svc}-1"))?;
        sockets.push((name, svc, ip, socket));
    }

    // A BackendConfig the CRD's rules refuse today (a probe timeout longer than its interval)
    // but stored under an older CRD without them, as after a CRD upgrade: a real API server
    // does not re-validate stored objects.
    let crd_path = repo_root().join("crds/backendconfigs.cloud.google.com.yaml");
    let mut crd: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&crd_path)?)?;
    strip_rules(&mut crd);
    sys.apply(&serde_yaml::to_string(&crd)?)?;
    sys.apply("apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {name: bc-slow-probe}\nspec:\n  healthCheck: {checkIntervalSec: 5, timeoutSec: 10, requestPath: /}\n")?;
    sys.apply_path(&crd_path)?;

    // Then each is broken, in its own way.
    let mut broken = pod_and_service("s-ann", "cloud.google.com/backend-config: '{not json'");
    broken += &ingress("v-service", "no-such-service", 80, "", "");
    broken += &ingress("v-port", "s-shared", 12345, "", "");
    broken += &ingress(
        "v-secret",
        "s-shared",
        80,
        "",
        "  tls:\n  - {hosts: [s.example], secretName: no-such-secret}\n",
    );
    broken += &pod_and_service(
        "s-bc",
        "cloud.google.com/backend-config: '{\"default\": \"bc-slow-probe\"}'",
    );
    broken += "apiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {name: fc-unknown-policy}\nspec: {sslPolicy: no-such-policy}\n---\n";
    broken += &ingress(
        "v-frontendconfig",
        "s-shared",
        80,
        "networking.gke.io/v1beta1.FrontendConfig: fc-unknown-policy",
        tls_ok,
    );
    sys.apply(&broken)?;

    // Object, field and fix each Warning must name.
    let expected: [(&str, [&str; 3]); 6] = [
        (
            "v-annotation",
            [
                "Service default/s-ann",
                "cloud.google.com/backend-config",
                "expected",
            ],
        ),
        (
            "v-service",
            [
                "Ingress default/v-service",
                "spec.defaultBackend",
                "create the Service",
            ],
        ),
        (
            "v-port",
            [
                "Ingress default/v-port",
                "12345",
                "use one of its spec.ports",
            ],
        ),
        (
            "v-secret",
            [
                "Ingress default/v-secret",
                "spec.tls[0].secretName",
                "fix the Secret",
            ],
        ),
        (
            "v-backendconfig",
            [
                "BackendConfig default/bc-slow-probe",
                "spec.healthCheck.timeoutSec",
                "checkIntervalSec",
            ],
        ),
        (
            "v-frontendconfig",
            [
                "FrontendConfig default/fc-unknown-policy",
                "spec.sslPolicy",
                "no-such-policy",
            ],
        ),
    ];
    let mut problems = Vec::new();
    for (name, _) in expected {
        wait_for(&format!("a Warning on {name}"), DEADLINE, || {
            Ok((!warnings(&sys, name)?.is_empty()).then_some(()))
        })
        .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
        // Any change makes the operator try again (translation errors are not retried on a
        // timer; Compute errors are, too): the repeat must fold into the same Event.
        sys.kubectl_ok(&["label", "ingress", name, "touched=1"])?;
    }
    for (name, needles) in expected {
        // Once the failure has been reported twice, there must still be one Warning Event.
        let got = wait_for(&format!("a repeated Warning on {name}"), DEADLINE, || {
            let w = warnings(&sys, name)?;
            Ok(w.iter().any(|(_, _, times)| *times >= 2).then_some(w))
        });
        let got = match got {
            Ok(w) => w,
            Err(e) => {
                problems.push(format!("{name}: {e:#}: {:?}", warnings(&sys, name)?));
                continue;
            }
        };
        if got.len() != 1 {
            problems.push(format!(
                "{name}: {} Warning Events, want 1: {got:?}",
                got.len()
            ));
        }
        let message = &got[0].1;
        for n in needles {
            if !message.contains(n) {
                problems.push(format!(
                    "{name}: the Warning does not name {n:?}: {message}"
                ));
            }
        }
    }
    // Every broken Ingress's load balancer still serves what it served.
    for (name, svc, ip, socket) in &sockets {
        let (status, body) = sys.http_get(socket, "any.example", "/")?;
        if status != 200 || !body.contains(&format!("{svc}-1")) {
            problems.push(format!("{name} ({ip}) stopped serving: {status} {body}"));
        }
    }
    // And a new Ingress converges.
    sys.apply(&ingress("late", "s-shared", 80, "", ""))?;
    let ip = sys.wait_for_ingress_ip("default", "late")?;
    let socket = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&socket, "late.example", "/", 200, "s-shared-1")?;
    if !problems.is_empty() {
        return Err(anyhow!("{}\n{}", problems.join("\n"), sys.logs()));
    }
    Ok(())
}
