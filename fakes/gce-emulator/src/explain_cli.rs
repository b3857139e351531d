//! `gce-emulator explain URL ...`: asks a running emulator's `POST /_emulator/explain` how its
//! data plane would serve a request, and prints the trace (docs/dashboard.md).

use std::net::IpAddr;

use anyhow::{bail, Context};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::dataplane::explain::ExplainRequest;

/// Explain how the emulated load balancer routes one request.
#[derive(Debug, Parser)]
#[command(name = "gce-emulator explain")]
pub struct ExplainArgs {
    /// The request URL, e.g. `http://shop.example/cart?x=1` (`https://` for SNI).
    pub url: String,
    /// The emulator's API root, as it printed it (e.g. `http://127.0.0.1:8080/`).
    #[arg(long, env = "GCE_EMULATOR_URL")]
    pub emulator: String,
    /// The forwarding rule (name or key); default: the one on `--ip` or the URL's host.
    #[arg(long)]
    pub forwarding_rule: Option<String>,
    /// The load balancer IP, when the URL's host is a name.
    #[arg(long)]
    pub ip: Option<IpAddr>,
    /// HTTP method.
    #[arg(short = 'X', long, default_value = "GET")]
    pub method: String,
    /// A request header `NAME: VALUE` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// The client's IP address (security policies, CLIENT_IP affinity).
    #[arg(long)]
    pub client_ip: Option<IpAddr>,
    /// Print the JSON answer instead of the text trace.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand; `args` start with `explain`.
pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let a = ExplainArgs::parse_from(args);
    let mut headers = std::collections::BTreeMap::new();
    for h in &a.headers {
        let Some((k, v)) = h.split_once(':') else {
            bail!("--header {h:?}: expected NAME: VALUE");
        };
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let req = ExplainRequest {
        url: a.url.clone(),
        method: Some(a.method.clone()),
        headers,
        client_ip: a.client_ip,
        forwarding_rule: a.forwarding_rule.clone(),
        ip_address: a.ip,
    };
    let target = format!("{}/_emulator/explain", a.emulator.trim_end_matches('/'));
    let http = Client::builder(TokioExecutor::new()).build_http::<Full<bytes::Bytes>>();
    let request = http::Request::post(&target)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(serde_json::to_vec(&req)?.into()))?;
    let resp = http
        .request(request)
        .await
        .with_context(|| format!("cannot reach {target}; is the emulator running (--emulator)?"))?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    let v: Value = serde_json::from_slice(&body)
        .with_context(|| format!("{target}: not JSON: {}", String::from_utf8_lossy(&body)))?;
    if !status.is_success() {
        bail!("{}", v["error"].as_str().unwrap_or(&v.to_string()));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&v));
    }
    Ok(())
}

/// The text form of an explanation (one step per line).
pub fn render(v: &Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
    let r = &v["routing"];
    let mut out = format!(
        "forwarding rule  {} ({})\ntarget proxy     {}\n",
        s("forwardingRule"),
        s("address"),
        s("targetProxy")
    );
    if let Some(c) = v["certificate"].as_object() {
        out += &format!(
            "certificate      {} for SNI {}\n",
            c["certificate"].as_str().unwrap_or(""),
            c["sni"].as_str().unwrap_or("")
        );
    }
    out += &format!("url map          {}\n", s("urlMap"));
    out += &format!(
        "host rule        {}\n",
        r["hostRule"].as_str().unwrap_or("")
    );
    if let Some(pm) = r["pathMatcher"].as_str() {
        out += &format!("path matcher     {pm}\n");
    }
    for t in r["tried"].as_array().into_iter().flatten() {
        out += &format!(
            "  tried          {}: {}\n",
            t["rule"].as_str().unwrap_or(""),
            t["whyNot"].as_str().unwrap_or("")
        );
    }
    out += &format!("matched          {}\n", r["matched"].as_str().unwrap_or(""));
    if let Some(c) = r["closest"].as_object() {
        out += &format!(
            "closest rule     {}: {}\n",
            c["rule"].as_str().unwrap_or(""),
            c["whyNot"].as_str().unwrap_or("")
        );
    }
    for (k, label) in [
        ("redirectLocation", "redirect to"),
        ("rewrittenPath", "path rewrite"),
        ("rewrittenHost", "host rewrite"),
        ("backendService", "backend service"),
    ] {
        if let Some(x) = v[k].as_str() {
            out += &format!("{label:<17}{x}\n");
        }
    }
    if let Some(p) = v["securityPolicy"].as_array() {
        out += &format!(
            "security policy  {}: {}\n",
            p[0].as_str().unwrap_or(""),
            p[1].as_str().unwrap_or("")
        );
    }
    if let Some(e) = v["endpoint"].as_object() {
        out += &format!(
            "endpoint         {} ({})\n",
            e["address"].as_str().unwrap_or(""),
            e["healthState"].as_str().unwrap_or("")
        );
    }
    out += &format!("outcome          {}\n", s("outcome"));
    out
}
