use super::*;
use std::net::Ipv4Addr;

use crate::local::probe::http_get;

fn identity(app: App) -> Arc<PodIdentity> {
    Arc::new(PodIdentity::bare("web-1", "shop", Ipv4Addr::LOCALHOST, app))
}

async fn get(
    addr: SocketAddr,
    https: bool,
    path: &str,
) -> Result<(StatusCode, serde_json::Value), String> {
    let (status, body) = http_get(
        addr,
        https,
        path,
        &[("x-test".to_string(), "1".to_string())],
    )
    .await?;
    Ok((
        status,
        serde_json::from_slice(&body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&body).into_owned())
        }),
    ))
}

async fn poll_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn echo_names_the_pod_and_the_request() {
    let (_tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(identity(App::Echo), 0, None, rx).unwrap();
    let addr = server.addr();
    let (status, body) = get(addr, false, "/shop/cart?x=1").await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["pod"], "web-1");
    assert_eq!(body["namespace"], "shop");
    assert_eq!(body["podIP"], "127.0.0.1");
    assert_eq!(body["port"], addr.port());
    assert_eq!(body["method"], "GET");
    assert_eq!(body["path"], "/shop/cart");
    assert_eq!(body["query"]["x"], "1");
    assert_eq!(body["host"], addr.to_string());
    assert_eq!(body["headers"]["x-test"], "1");
    assert_eq!(body["pathRequests"], 1);
    // pathRequests counts per path (the query aside).
    let (_, again) = get(addr, false, "/shop/cart?y=2").await.unwrap();
    assert_eq!(again["pathRequests"], 2);
    let (_, other) = get(addr, false, "/other").await.unwrap();
    assert_eq!(other["pathRequests"], 1);
    let (forced, _) = get(addr, false, "/?status=503").await.unwrap();
    assert_eq!(forced, StatusCode::SERVICE_UNAVAILABLE);
    server.stop().await;
    assert!(
        get(addr, false, "/").await.is_err(),
        "a stopped server refuses connections"
    );
}

#[tokio::test]
async fn controls_apply_live() {
    let (tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(identity(App::Echo), 0, None, rx).unwrap();
    let addr = server.addr();
    tx.send_modify(|c| {
        c.fail_paths.insert("/healthz".to_string());
    });
    assert_eq!(
        get(addr, false, "/healthz").await.unwrap().0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(get(addr, false, "/other").await.unwrap().0, StatusCode::OK);

    tx.send_modify(|c| c.stopped = true);
    poll_until("connections refused", || async {
        get(addr, false, "/").await.is_err()
    })
    .await;
    tx.send_modify(|c| {
        c.stopped = false;
        c.fail_paths.clear();
    });
    poll_until("serving again", || async {
        get(addr, false, "/healthz")
            .await
            .is_ok_and(|(s, _)| s == StatusCode::OK)
    })
    .await;
}

#[tokio::test]
async fn default_backend_answers_404_and_healthz() {
    let (_tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(identity(App::DefaultBackend), 0, None, rx).unwrap();
    let (status, body) = get(server.addr(), false, "/anything").await.unwrap();
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            serde_json::json!("default backend - 404")
        )
    );
    let (status, body) = get(server.addr(), false, "/healthz").await.unwrap();
    assert_eq!((status, body), (StatusCode::OK, serde_json::json!("ok")));
}

#[tokio::test]
async fn https_port_serves_tls() {
    let id = identity(App::Echo);
    let (_tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(id.clone(), 0, Some(tls_config(&id).unwrap()), rx).unwrap();
    let (status, body) = get(server.addr(), true, "/secure").await.unwrap();
    assert_eq!(
        (status, body["path"].as_str()),
        (StatusCode::OK, Some("/secure"))
    );
    assert!(
        get(server.addr(), false, "/").await.is_err(),
        "plain HTTP is not served on a TLS port"
    );
}

#[tokio::test]
async fn h2c_prior_knowledge_is_served() {
    let (_tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(identity(App::Echo), 0, None, rx).unwrap();
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = Request::get(format!("http://{}/h2", server.addr()))
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.headers()["x-pod-name"], "web-1");
    let body: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["path"], "/h2");
}

#[tokio::test]
async fn latency_control_and_sleep_ms_delay_the_answer() {
    let (tx, rx) = watch::channel(PodControls::default());
    let server = EchoServer::start(identity(App::Echo), 0, None, rx).unwrap();
    // Lower bounds only: a delay can never make the answer come sooner.
    let started = std::time::Instant::now();
    assert_eq!(
        get(server.addr(), false, "/?sleep_ms=150").await.unwrap().0,
        StatusCode::OK
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    tx.send_modify(|c| c.latency = Duration::from_millis(120));
    let started = std::time::Instant::now();
    assert_eq!(
        get(server.addr(), false, "/").await.unwrap().0,
        StatusCode::OK
    );
    assert!(started.elapsed() >= Duration::from_millis(120));
}
