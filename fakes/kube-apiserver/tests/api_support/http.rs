//! Raw HTTPS requests to the API server as its admin, answers as (status, JSON).

use std::time::Instant;

use serde_json::Value;

use super::{ApiServer, DEADLINE};

/// A client of one server with its admin bearer token.
pub struct Http<'a> {
    /// The server requests go to.
    pub server: &'a ApiServer,
    client: reqwest::Client,
    token: String,
}

impl<'a> Http<'a> {
    /// A client of `server` with its admin token.
    pub fn new(server: &'a ApiServer) -> Self {
        Http {
            server,
            client: server.http(),
            token: server.token(),
        }
    }

    /// Sends `body` (as `content_type`) and returns the status and the JSON (or text) answer.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        content_type: &str,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.server.url))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.header("content-type", content_type).body(b.to_string());
        }
        let resp = req.send().await.expect("request");
        let code = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None, "").await
    }
    /// POST `path`.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body), "application/json")
            .await
    }
    /// PUT `path`.
    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, Some(body), "application/json")
            .await
    }
    /// PATCH `path`.
    pub async fn patch(&self, path: &str, body: Value, ct: &str) -> (u16, Value) {
        self.send(reqwest::Method::PATCH, path, Some(body), ct)
            .await
    }
    /// DELETE `path`.
    pub async fn delete(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, body, "application/json")
            .await
    }

    /// Reads watch events from `path` until `done` holds for the collected events.
    pub async fn watch_until(&self, path: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut resp = self
            .client
            .get(format!("{}{path}", self.server.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("watch");
        assert_eq!(resp.status().as_u16(), 200);
        let start = Instant::now();
        let (mut buf, mut events) = (Vec::new(), Vec::new());
        while !done(&events) {
            let left = DEADLINE
                .checked_sub(start.elapsed())
                .expect("timed out reading the watch");
            let chunk = tokio::time::timeout(left, resp.chunk())
                .await
                .expect("timed out reading the watch")
                .expect("chunk");
            let Some(chunk) = chunk else { break };
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                events.push(serde_json::from_slice(&line).expect("event JSON"));
            }
        }
        events
    }
}
