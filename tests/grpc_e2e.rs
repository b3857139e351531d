//! End to end, issue 25: gRPC through an Ingress-built HTTPS load balancer. The Service port is
//! marked `HTTP2` in `cloud.google.com/app-protocols` (as GKE's gRPC guide does) and its
//! BackendConfig asks for a `GRPC` health check; the local kubelet runs the gRPC echo workload
//! (tonic, TLS with ALPN h2). A tonic client makes unary, server-streaming and bidirectional
//! calls through the emulator's data plane; a deadline shorter than the handler's delay ends in
//! DEADLINE_EXCEEDED and a cancelled call at the backend; a Pod whose health service reports
//! NOT_SERVING turns UNHEALTHY in `getHealth` and gets no more calls.

mod support;

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use base64::Engine as _;
use fake_kube_apiserver::local::echo::grpc::pb::echo_client::EchoClient;
use fake_kube_apiserver::local::echo::grpc::{EchoReply, EchoRequest};
use fake_kube_apiserver::local::echo::grpc_client::{dial, GrpcChannel};
use gce_emulator::dataplane::upstream::insecure_client_config;
use support::*;
use tonic::Code;

const HOST: &str = "grpc.example";

/// TLS Secret, BackendConfig, Service (port `grpc` marked HTTP2), two echo Pods serving TLS on
/// 8443, and the Ingress.
fn manifests() -> Result<String> {
    let ck = rcgen::generate_simple_self_signed(vec![HOST.to_string()])?;
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let mut yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: grpc-tls}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    yaml.push_str(
        r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {name: grpc}
spec:
  healthCheck: {type: GRPC, grpcServiceName: gclb.echo.v1.Echo, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}
---
apiVersion: v1
kind: Service
metadata:
  name: grpc
  annotations:
    cloud.google.com/app-protocols: '{"grpc":"HTTP2"}'
    cloud.google.com/backend-config: '{"default":"grpc"}'
spec:
  type: NodePort
  selector: {app: grpc}
  ports:
  - {name: grpc, protocol: TCP, port: 443, targetPort: 8443}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: grpc}
spec:
  tls:
  - hosts: [grpc.example]
    secretName: grpc-tls
  defaultBackend:
    service: {name: grpc, port: {name: grpc}}
---
"#,
    );
    for i in 1..=2 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: grpc-{i}\n  labels: {{app: grpc}}\n  annotations: {{local.gclb-operator.dev/run: echo, local.gclb-operator.dev/tls-ports: '8443'}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {{name: grpc, containerPort: 8443}}\n---\n"
        ));
    }
    Ok(yaml)
}

fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_string(),
        ..Default::default()
    }
}

/// A tonic client through the load balancer at `socket` (one HTTP/2 connection over TLS).
async fn client(socket: &str) -> Result<EchoClient<GrpcChannel>> {
    let addr = socket.parse()?;
    let (channel, origin) = dial(addr, HOST, Some(insecure_client_config(&[b"h2"])))
        .await
        .map_err(|e| anyhow!(e))?;
    Ok(EchoClient::with_origin(channel, origin))
}

/// Unary calls until one comes back from a Pod that counted `n` cancelled calls.
async fn wait_cancelled(c: &mut EchoClient<GrpcChannel>, n: u64) -> Result<EchoReply> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Ok(r) = c.unary(req("count")).await {
            let r = r.into_inner();
            if r.cancelled_calls >= n {
                return Ok(r);
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no backend counted {n} cancelled calls"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The health state `getHealth` reports for the endpoint at `ip` of backend service `bs`.
fn endpoint_health(sys: &System, bs: &str, ip: &str) -> Result<Option<String>> {
    let neg = sys
        .compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/backendServices/{bs}"
        ))?
        .get("backends")
        .and_then(|b| b[0]["group"].as_str().map(str::to_string))
        .ok_or_else(|| anyhow!("backend service {bs} has no backend"))?;
    let health = sys.compute_post(
        &format!("compute/v1/projects/{PROJECT}/global/backendServices/{bs}/getHealth"),
        &serde_json::json!({"group": neg}),
    )?;
    Ok(health["healthStatus"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["ipAddress"] == ip)
        .and_then(|h| h["healthState"].as_str().map(str::to_string)))
}

#[test]
fn grpc_through_an_ingress_built_https_load_balancer() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    sys.start_operator(&[])?;
    sys.apply(&manifests()?)?;
    let ip = sys.wait_for_ingress_ip("default", "grpc")?;
    let socket = sys.wait_for_listener(&ip, 443)?;

    // As GKE builds it: an HTTP2 backend service, and the GRPC check over TLS.
    let bs = wait_for("the gRPC backend service", DEADLINE, || {
        Ok(sys
            .compute_names("backendServices")?
            .into_iter()
            .find(|n| n.contains("grpc")))
    })?;
    let service = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/backendServices/{bs}"
    ))?;
    assert_eq!(service["protocol"], "HTTP2", "{service}");
    let hc = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/healthChecks/{bs}"
    ))?;
    assert_eq!(hc["type"], "GRPC_WITH_TLS", "{hc}");
    assert_eq!(
        hc["grpcTlsHealthCheck"]["grpcServiceName"],
        "gclb.echo.v1.Echo"
    );

    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mut c = client(&socket).await?;
        // Both Pods HEALTHY by the GRPC check and answering through the load balancer.
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut pods = std::collections::BTreeSet::new();
        while pods.len() < 2 {
            if let Ok(r) = c.unary(req("hello")).await {
                let r = r.into_inner();
                assert_eq!((r.message.as_str(), r.te.as_str()), ("hello", "trailers"));
                pods.insert(r.pod);
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "answers from {pods:?} only"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let mut stream = c
            .server_stream(EchoRequest {
                count: 4,
                ..req("tick")
            })
            .await?
            .into_inner();
        let mut n = 0;
        while let Some(r) = stream.message().await? {
            assert_eq!(r.index, n);
            n += 1;
        }
        assert_eq!(n, 4);
        let trailers = stream.trailers().await?.context("trailers of the stream")?;
        assert_eq!(
            trailers.get("x-echo-count").map(|v| v.to_str().unwrap()),
            Some("4")
        );

        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut replies = c
            .bidi(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        for word in ["ping", "pong"] {
            tx.send(req(word)).await?;
            let r = replies.message().await?.context("a reply per message")?;
            assert_eq!(r.message, word);
        }
        drop(tx);
        assert!(replies.message().await?.is_none());
        assert!(replies.trailers().await?.is_some());

        let mut slow = tonic::Request::new(EchoRequest {
            delay_ms: 20_000,
            ..req("slow")
        });
        slow.set_timeout(Duration::from_millis(300));
        let e = c.unary(slow).await.unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
        wait_cancelled(&mut c, 1).await?;
        anyhow::Ok(())
    })?;

    // NOT_SERVING: the GRPC check turns grpc-1 UNHEALTHY and calls go to grpc-2 only.
    let pod_ip = |name: &str| -> Result<String> {
        sys.get_json(&["pod", name])?["status"]["podIP"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("{name} has no IP"))
    };
    let ip1 = pod_ip("grpc-1")?;
    sys.kubectl_ok(&[
        "annotate",
        "pod",
        "grpc-1",
        "local.gclb-operator.dev/grpc-health=NOT_SERVING",
    ])?;
    wait_for("grpc-1 UNHEALTHY in getHealth", DEADLINE, || {
        Ok((endpoint_health(&sys, &bs, &ip1)?.as_deref() == Some("UNHEALTHY")).then_some(()))
    })
    .with_context(|| sys.logs())?;
    rt.block_on(async {
        let mut c = client(&socket).await?;
        for _ in 0..10 {
            let r = c.unary(req("who")).await?.into_inner();
            assert_eq!(r.pod, "grpc-2", "a NOT_SERVING backend got a call");
        }
        anyhow::Ok(())
    })?;
    Ok(())
}
