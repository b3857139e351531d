//! gRPC through an HTTPS load balancer whose backend service has `protocol: HTTP2`, in process:
//! tonic's generated client (through hyper's HTTP/2) calls the local gRPC echo workload of
//! fake-kube-apiserver (tonic server, TLS with ALPN h2), which GRPC_WITH_TLS health checks
//! probe with `grpc.health.v1.Health/Check`.

mod dataplane_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use dataplane_support::*;
use fake_kube_apiserver::local::annotations::PodControls;
use fake_kube_apiserver::local::echo::grpc::pb::echo_client::EchoClient;
use fake_kube_apiserver::local::echo::grpc::{EchoReply, EchoRequest, ECHO_SERVICE};
use fake_kube_apiserver::local::echo::grpc_client::{dial, GrpcChannel};
use fake_kube_apiserver::local::echo::{self, EchoServer, PodIdentity};
use fake_kube_apiserver::local::images::App;
use gce_emulator::dataplane::upstream::insecure_client_config;
use gce_emulator::dataplane::ListenerInfo;
use gce_emulator::health_state::HealthState;
use serde_json::json;
use tokio::sync::watch;
use tonic::Code;

const HOST: &str = "grpc.example";

/// A local gRPC echo Pod on 127.0.0.1 (TLS, ALPN h2) and the sender of its controls.
fn pod(name: &str) -> (EchoServer, watch::Sender<PodControls>) {
    let identity = Arc::new(PodIdentity {
        name: name.to_string(),
        namespace: "grpc".to_string(),
        pod_ip: Ipv4Addr::LOCALHOST,
        app: App::Echo,
        container: "echo".to_string(),
        image: "echo".to_string(),
        node: "local-node-1".to_string(),
        zone: "us-central1-a".to_string(),
        service_account: "default".to_string(),
    });
    let tls = echo::tls_config(&identity).unwrap();
    let (tx, rx) = watch::channel(PodControls::default());
    (EchoServer::start(identity, 0, Some(tls), rx).unwrap(), tx)
}

/// An HTTPS load balancer for `HOST` on `ip` whose backend service `grpc` (HTTP2, `timeout_sec`)
/// has the endpoints `eps` and a GRPC_WITH_TLS health check asking about the echo service.
async fn grpc_lb(w: &mut World, ip: IpAddr, eps: &[SocketAddr], timeout_sec: u64) -> ListenerInfo {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![HOST.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    w.put("global/sslCertificates/grpc", json!({"kind": "compute#sslCertificate", "type": "SELF_MANAGED", "certificate": cert.pem()}));
    w.snap.private_keys.insert(
        dataplane_support::key("global/sslCertificates/grpc"),
        key.serialize_pem(),
    );
    w.put(
        "global/healthChecks/grpc",
        json!({"kind": "compute#healthCheck", "type": "GRPC_WITH_TLS", "checkIntervalSec": 1, "timeoutSec": 1,
               "healthyThreshold": 1, "unhealthyThreshold": 1,
               "grpcTlsHealthCheck": {"portSpecification": "USE_SERVING_PORT", "grpcServiceName": ECHO_SERVICE}}),
    );
    w.service(
        "grpc",
        Some("grpc"),
        eps,
        json!({"protocol": "HTTP2", "timeoutSec": timeout_sec}),
    );
    w.put(
        "global/urlMaps/grpc",
        json!({"defaultService": url("global/backendServices/grpc")}),
    );
    w.put(
        "global/targetHttpsProxies/grpc",
        json!({"urlMap": url("global/urlMaps/grpc"),
        "sslCertificates": [url("global/sslCertificates/grpc")]}),
    );
    w.put(
        "global/forwardingRules/grpc",
        json!({"IPAddress": ip.to_string(), "portRange": "443-443",
        "target": url("global/targetHttpsProxies/grpc")}),
    );
    w.publish();
    for ep in eps {
        w.wait_state("grpc", *ep, HealthState::Healthy).await;
    }
    w.listener("grpc").await
}

/// A tonic client of the echo service through the load balancer, over one HTTP/2 connection.
async fn client(l: &ListenerInfo) -> EchoClient<GrpcChannel> {
    let (channel, origin) = dial(l.local_addr, HOST, Some(insecure_client_config(&[b"h2"])))
        .await
        .unwrap();
    EchoClient::with_origin(channel, origin)
}

fn req(message: &str) -> EchoRequest {
    EchoRequest {
        message: message.to_string(),
        ..Default::default()
    }
}

/// Unary calls until one reports at least `n` cancelled calls at the backend.
async fn wait_cancelled(c: &mut EchoClient<GrpcChannel>, n: u64) -> EchoReply {
    poll(
        &format!("{n} cancelled calls at the backend"),
        30,
        async || {
            let r = c.unary(req("count")).await.ok()?.into_inner();
            (r.cancelled_calls >= n).then_some(r)
        },
    )
    .await
}

#[tokio::test]
async fn unary_streaming_and_bidi_calls_cross_the_lb_with_their_trailers() {
    let (backend, _controls) = pod("grpc-a");
    let mut w = World::start();
    let l = grpc_lb(&mut w, lb_ip(), &[backend.addr()], 30).await;
    let mut c = client(&l).await;

    let r = c.unary(req("hello")).await.unwrap().into_inner();
    assert_eq!((r.message.as_str(), r.pod.as_str()), ("hello", "grpc-a"));
    assert_eq!(
        r.te, "trailers",
        "te: trailers must reach an HTTP/2 backend"
    );

    let mut stream = c
        .server_stream(EchoRequest {
            count: 3,
            ..req("tick")
        })
        .await
        .unwrap()
        .into_inner();
    let mut indices = Vec::new();
    while let Some(r) = stream.message().await.unwrap() {
        indices.push(r.index);
    }
    assert_eq!(indices, [0, 1, 2]);
    let trailers = stream.trailers().await.unwrap().expect("response trailers");
    assert_eq!(trailers.get("x-echo-count").unwrap(), "3");

    let joined = c
        .client_stream(futures::stream::iter(["a", "b", "c"].map(req)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined.message, "a,b,c");

    // Bidirectional, one message at a time: each reply must arrive before the next message is
    // sent, which a proxy buffering either direction would never let happen.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let mut replies = c
        .bidi(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    for (i, word) in ["one", "two", "three"].into_iter().enumerate() {
        tx.send(req(word)).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(30), replies.message())
            .await
            .expect("a reply before the next message")
            .unwrap()
            .unwrap();
        assert_eq!((r.message.as_str(), r.index as usize), (word, i));
    }
    drop(tx);
    assert!(replies.message().await.unwrap().is_none());
    let trailers = replies.trailers().await.unwrap().unwrap();
    assert_eq!(trailers.get("x-echo-count").unwrap(), "3");

    // An error status with its message and custom metadata.
    let e = c
        .unary(EchoRequest {
            status_code: Code::FailedPrecondition as i32,
            ..req("not now")
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::FailedPrecondition, "not now")
    );
    assert_eq!(e.metadata().get("x-echo-pod").unwrap(), "grpc-a");
}

#[tokio::test]
async fn deadlines_and_cancellations_reach_the_backend() {
    let (backend, _controls) = pod("grpc-a");
    let mut w = World::start();
    let l = grpc_lb(&mut w, lb_ip(), &[backend.addr()], 30).await;
    let mut c = client(&l).await;
    assert_eq!(
        c.unary(req("warm"))
            .await
            .unwrap()
            .into_inner()
            .cancelled_calls,
        0
    );

    // grpc-timeout shorter than the handler's delay: DEADLINE_EXCEEDED, and the backend ended
    // the call.
    let mut slow = tonic::Request::new(EchoRequest {
        delay_ms: 20_000,
        ..req("slow")
    });
    slow.set_timeout(Duration::from_millis(300));
    let e = c.unary(slow).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    wait_cancelled(&mut c, 1).await;

    // The client gives up (its call future is dropped: RST_STREAM): the backend's call is
    // cancelled too.
    let mut other = c.clone();
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        other.unary(EchoRequest {
            delay_ms: 20_000,
            ..req("abandoned")
        }),
    )
    .await;
    assert!(gave_up.is_err(), "the call was still running");
    wait_cancelled(&mut c, 2).await;

    // The same for a server stream abandoned after its first reply.
    let mut stream = c
        .server_stream(EchoRequest {
            count: 100,
            delay_ms: 200,
            ..req("tick")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.message().await.unwrap().unwrap().index, 0);
    drop(stream);
    wait_cancelled(&mut c, 3).await;
}

#[tokio::test]
async fn timeout_sec_bounds_the_life_of_a_stream() {
    let (backend, _controls) = pod("grpc-a");
    let mut w = World::start();
    let l = grpc_lb(&mut w, lb_ip(), &[backend.addr()], 1).await;
    let mut c = client(&l).await;
    // Ten replies 300 ms apart outlive timeoutSec=1: the stream is cut after some of them.
    let mut stream = c
        .server_stream(EchoRequest {
            count: 10,
            delay_ms: 300,
            ..req("tick")
        })
        .await
        .unwrap()
        .into_inner();
    let mut received = 0;
    let end = loop {
        match stream.message().await {
            Ok(Some(_)) => received += 1,
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert!(
        end.is_some(),
        "the stream ended normally after {received} replies"
    );
    assert!(received < 10, "{received} replies");
    wait_cancelled(&mut c, 1).await;
}

#[tokio::test]
async fn a_grpc_health_check_takes_a_not_serving_backend_out() {
    let (a, a_controls) = pod("grpc-a");
    let (b, _b_controls) = pod("grpc-b");
    let mut w = World::start();
    let l = grpc_lb(&mut w, lb_ip(), &[a.addr(), b.addr()], 30).await;
    let mut c = client(&l).await;

    a_controls.send_modify(|c| c.grpc_not_serving = true);
    w.wait_state("grpc", a.addr(), HealthState::Unhealthy).await;
    assert_eq!(
        w.state("grpc", "neg-grpc", b.addr()),
        Some(HealthState::Healthy)
    );
    for _ in 0..10 {
        let r = c.unary(req("who")).await.unwrap().into_inner();
        assert_eq!(
            r.pod, "grpc-b",
            "traffic must avoid the NOT_SERVING backend"
        );
    }

    a_controls.send_modify(|c| c.grpc_not_serving = false);
    w.wait_state("grpc", a.addr(), HealthState::Healthy).await;
}
