//! A user's own program standing in for an image, behind the emulated load balancer (issue 41):
//! mapped with `fake-kube-apiserver --image-command`, or with the ConfigMap
//! `kube-system/local-image-commands`.

use anyhow::{Context, Result};

use super::support::*;
use super::{answers_from_every_pod, live_pods};

/// The user's program of [`users_program_answers`]: a Python HTTP server that answers
/// `GREETING from HOSTNAME at PATH` on `127.0.0.1:$PORT`.
const SHOP_PY: &str = r#"import http.server, os
class Shop(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("%s from %s at %s\n" % (os.environ["GREETING"], os.environ["HOSTNAME"], self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Shop).serve_forever()
"#;

/// How the test maps the shop's image to the program.
enum Mapping {
    /// `fake-kube-apiserver --image-command IMAGE=COMMAND`.
    Flag,
    /// The ConfigMap `kube-system/local-image-commands`, applied with kubectl.
    ConfigMap,
}

/// Deploys `registry.example/team/shop:1.4` (two replicas, Service, Ingress) with the image
/// mapped to [`SHOP_PY`] as `mapping` says, and asserts every replica answers through the load
/// balancer with the program's own answer.
fn users_program_answers(mapping: Mapping) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let program = dir.path().join("shop.py");
    std::fs::write(&program, SHOP_PY)?;
    let entry = format!("registry.example/team/shop=python3 {}", program.display());
    let flag_args = ["--image-command", entry.as_str()];
    let mut sys = System::start_with(Options {
        emulator_args: &["--port-map", "80=0,443=0"],
        apiserver_args: match mapping {
            Mapping::Flag => &flag_args,
            Mapping::ConfigMap => &[],
        },
        ..Options::default()
    })?;
    if let Mapping::ConfigMap = mapping {
        // One good entry and one that is not IMAGE=COMMAND: the latter is named in a Warning
        // Event on the ConfigMap, published once the ConfigMap has been read.
        sys.apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: local-image-commands, namespace: kube-system}}\n\
             data:\n  shop: {entry:?}\n  typo: \"registry.example/team/cart\"\n"
        ))?;
        let note = wait_for("the MalformedImageCommand Event", DEADLINE, || {
            let events = sys.kubectl_ok(&[
                "get",
                "events",
                "-n",
                "kube-system",
                "--field-selector",
                "reason=MalformedImageCommand",
                "-o",
                "jsonpath={.items[*].message}",
            ])?;
            Ok((!events.is_empty()).then_some(events))
        })
        .with_context(|| sys.logs())?;
        assert!(
            note.contains("typo") && note.contains("IMAGE=COMMAND"),
            "{note}"
        );
    }
    sys.apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
    spec:
      containers:
      - name: shop
        image: registry.example/team/shop:1.4
        env:
        - {name: GREETING, value: "hello from the real shop"}
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: shop
spec:
  type: NodePort
  selector: {app: shop}
  ports:
  - {port: 80, targetPort: 8080}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
spec:
  defaultBackend:
    service:
      name: shop
      port: {number: 80}
"#,
    )?;
    sys.kubectl_ok(&["rollout", "status", "deployment/shop", "--timeout=90s"])
        .with_context(|| sys.logs())?;
    sys.start_operator(&["--takeover"])?;
    let socket = sys.wait_for_ingress_socket("default", "shop")?;
    let pods = live_pods(&sys, "app=shop")?;
    let answers = answers_from_every_pod(&sys, &socket, "shop.example", &pods)?;
    for (pod, body) in &answers {
        assert_eq!(body, &format!("hello from the real shop from {pod} at /\n"));
    }
    let (_, deep) = sys.http_get(&socket, "shop.example", "/cart?items=2")?;
    assert!(deep.ends_with(" at /cart?items=2\n"), "{deep}");
    Ok(())
}

/// A user's own program answers behind the load balancer: the image of the Deployment is
/// mapped to a local command (`--image-command`), which gets `PORT`, `HOSTNAME` and the
/// container's `env`.
#[test]
fn a_users_own_program_mapped_to_an_image_answers_behind_the_load_balancer() -> Result<()> {
    users_program_answers(Mapping::Flag)
}

/// The same through the ConfigMap `kube-system/local-image-commands`, and a malformed entry is
/// named in a Warning Event on it.
#[test]
fn the_image_commands_configmap_maps_an_image_to_the_users_program() -> Result<()> {
    users_program_answers(Mapping::ConfigMap)
}
