//! A user's own program standing in for an image (`--image-command IMAGE=COMMAND`): a container
//! whose image is mapped runs `sh -c COMMAND` on the machine, with the container's `env`
//! (literal values), `HOSTNAME` (the Pod's name, as a container's hostname is), and `PORT`, a
//! free loopback port the program must listen on (`127.0.0.1:$PORT`). The container's first
//! declared port (or 8080) on the Pod IP then forwards each HTTP request to the program, so
//! readiness probes, EndpointSlices and the load balancer reach the user's application. The
//! program is killed when the Pod stops.
//!
//! `IMAGE` matches the container's image exactly, or its repository whatever the tag
//! (`registry.example/shop/web` matches `registry.example/shop/web:1.4`).
//!
//! The same mapping may live in the cluster instead of on the command line: each value of the
//! ConfigMap `kube-system/local-image-commands` is one `IMAGE=COMMAND` (the keys are free
//! names), read live by [`super::image_commands_config`]; its entries win over the flag's for
//! the same image, and apply to containers started after the change.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use k8s_openapi::api::core::v1::Container;

/// Largest request body forwarded (as the echo server's limit).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Errors of the image-to-command mapping.
#[derive(Debug, thiserror::Error)]
pub enum UserCommandError {
    /// A `--image-command` value without `=`.
    #[error("--image-command {0:?}: expected IMAGE=COMMAND, e.g. registry.example/shop/web=./target/debug/web")]
    Malformed(String),
    /// The program could not be started.
    #[error(
        "Pod {pod} container {container}: cannot start `{command}` for image {image}: {source}"
    )]
    Spawn {
        /// `namespace/name`.
        pod: String,
        /// The container.
        container: String,
        /// The image.
        image: String,
        /// The command.
        command: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// The mapping from images to commands: the `--image-command` flags, overlaid by the live
/// entries of the ConfigMap `kube-system/local-image-commands`.
#[derive(Clone, Debug, Default)]
pub struct ImageCommands {
    flags: BTreeMap<String, String>,
    config_map: Arc<RwLock<BTreeMap<String, String>>>,
}

/// One `IMAGE=COMMAND` value as (image, command), both trimmed and non-empty.
fn parse_one(value: &str) -> Option<(String, String)> {
    value
        .split_once('=')
        .filter(|(i, c)| !i.trim().is_empty() && !c.trim().is_empty())
        .map(|(i, c)| (i.trim().to_string(), c.trim().to_string()))
}

/// The entry of `map` for `image`: by exact image, else by repository (tag and digest dropped).
fn lookup<'a>(map: &'a BTreeMap<String, String>, image: &str) -> Option<&'a str> {
    if let Some(c) = map.get(image) {
        return Some(c);
    }
    let without_digest = image.split('@').next().unwrap_or(image);
    let repository = match without_digest.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => without_digest,
    };
    map.get(repository).map(String::as_str)
}

impl ImageCommands {
    /// Parses `IMAGE=COMMAND` values. Errors: [`UserCommandError::Malformed`].
    pub fn parse(values: &[String]) -> Result<ImageCommands, UserCommandError> {
        let mut flags = BTreeMap::new();
        for v in values {
            let (image, command) =
                parse_one(v).ok_or_else(|| UserCommandError::Malformed(v.clone()))?;
            flags.insert(image, command);
        }
        Ok(ImageCommands {
            flags,
            config_map: Arc::default(),
        })
    }

    /// The command for `image`: the ConfigMap's entry, else the flag's; each by exact image,
    /// else by repository (tag and digest dropped).
    pub fn command_for(&self, image: &str) -> Option<String> {
        let live = self.config_map.read().unwrap_or_else(|e| e.into_inner());
        lookup(&live, image)
            .or_else(|| lookup(&self.flags, image))
            .map(str::to_string)
    }

    /// Replaces the ConfigMap's entries with `data`'s values (`None`: the ConfigMap is gone).
    /// Returns the keys whose value is not `IMAGE=COMMAND`, which are left out.
    pub fn set_config_map(&self, data: Option<&BTreeMap<String, String>>) -> Vec<String> {
        let mut entries = BTreeMap::new();
        let mut malformed = Vec::new();
        for (key, value) in data.into_iter().flatten() {
            match parse_one(value) {
                Some((image, command)) => {
                    entries.insert(image, command);
                }
                None => malformed.push(key.clone()),
            }
        }
        *self.config_map.write().unwrap_or_else(|e| e.into_inner()) = entries;
        malformed
    }
}

/// A running user program; killed when dropped.
#[derive(Debug)]
pub struct UserProcess {
    _child: tokio::process::Child,
    /// The loopback port it was told to listen on (`PORT`).
    pub port: u16,
}

/// A free loopback port (bound then released; the program binds it next).
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// Starts `command` for `container` of Pod `pod` (`namespace/name`) named `hostname`.
///
/// Errors: [`UserCommandError::Spawn`] when no port is free or the shell cannot start.
pub fn spawn(
    command: &str,
    container: &Container,
    pod: &str,
    hostname: &str,
) -> Result<UserProcess, UserCommandError> {
    let fail = |source| UserCommandError::Spawn {
        pod: pod.to_string(),
        container: container.name.clone(),
        image: container.image.clone().unwrap_or_default(),
        command: command.to_string(),
        source,
    };
    let port = free_port().map_err(fail)?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .env("PORT", port.to_string())
        .env("HOSTNAME", hostname)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for e in container.env.iter().flatten() {
        if let Some(v) = &e.value {
            cmd.env(&e.name, v);
        }
    }
    let child = cmd.spawn().map_err(fail)?;
    tracing::info!(%pod, container = %container.name, %command, port, "user program started for the container's image");
    Ok(UserProcess {
        _child: child,
        port,
    })
}

/// Forwards a request to the user's program on `127.0.0.1:port` for a container of Pod `pod`;
/// `413` above [`MAX_BODY_BYTES`], `503` naming the image and port when the program does not
/// answer. Every answer carries `x-pod-name` (as the local servers' answers do).
pub async fn forward(
    pod: &str,
    image: &str,
    port: u16,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a plain HTTP client builds")
    });
    let (parts, body) = req.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(body) = Limited::new(body, MAX_BODY_BYTES).collect().await else {
        return plain(
            pod,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large\n".into(),
        );
    };
    let mut request = client
        .request(
            parts.method.clone(),
            format!("http://127.0.0.1:{port}{target}"),
        )
        .body(body.to_bytes());
    for (name, value) in &parts.headers {
        request = request.header(name, value);
    }
    let answer = async {
        let resp = request.send().await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        Ok::<_, reqwest::Error>((status, headers, resp.bytes().await?))
    };
    match answer.await {
        Ok((status, headers, bytes)) => {
            let mut response = Response::new(Full::new(bytes));
            *response.status_mut() = status;
            for (name, value) in &headers {
                if name != header::TRANSFER_ENCODING && name != header::CONNECTION {
                    response.headers_mut().append(name, value.clone());
                }
            }
            if let Ok(v) = header::HeaderValue::from_str(pod) {
                response.headers_mut().insert("x-pod-name", v);
            }
            response
        }
        Err(error) => plain(
            pod,
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the program for image {image} (127.0.0.1:{port}) did not answer: {error}\n"),
        ),
    }
}

fn plain(pod: &str, status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    if let Ok(v) = header::HeaderValue::from_str(pod) {
        response.headers_mut().insert("x-pod-name", v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_match_exactly_or_by_repository() {
        let map = ImageCommands::parse(&[
            "registry.example/shop/web=./web --serve".to_string(),
            "nginx:1.27=python3 -m http.server $PORT".to_string(),
        ])
        .unwrap();
        assert_eq!(
            map.command_for("registry.example/shop/web:1.4").as_deref(),
            Some("./web --serve")
        );
        assert_eq!(
            map.command_for("registry.example/shop/web").as_deref(),
            Some("./web --serve")
        );
        assert_eq!(
            map.command_for("nginx:1.27").as_deref(),
            Some("python3 -m http.server $PORT")
        );
        assert_eq!(map.command_for("nginx:1.28"), None);
        let error = ImageCommands::parse(&["just-an-image".to_string()]).unwrap_err();
        assert!(error.to_string().contains("IMAGE=COMMAND"), "{error}");
    }

    #[test]
    fn the_config_maps_entries_win_over_the_flags_and_go_with_it() {
        let map = ImageCommands::parse(&["shop=./flag".to_string()]).unwrap();
        let data = BTreeMap::from([
            ("shop".to_string(), "shop=./from-config-map".to_string()),
            (
                "cart".to_string(),
                "registry.example/cart=./cart".to_string(),
            ),
            ("broken".to_string(), "no equals sign".to_string()),
        ]);
        assert_eq!(map.set_config_map(Some(&data)), vec!["broken".to_string()]);
        assert_eq!(
            map.command_for("shop:2").as_deref(),
            Some("./from-config-map")
        );
        assert_eq!(
            map.command_for("registry.example/cart:1").as_deref(),
            Some("./cart")
        );
        // A clone (the kubelet's) sees later changes: the entries are shared.
        let kubelets = map.clone();
        assert!(map.set_config_map(None).is_empty());
        assert_eq!(kubelets.command_for("shop:2").as_deref(), Some("./flag"));
        assert_eq!(kubelets.command_for("registry.example/cart:1"), None);
    }

    #[tokio::test]
    async fn the_program_gets_port_hostname_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "web", "image": "shop:1", "env": [{"name": "GREETING", "value": "hi"}]
        }))
        .unwrap();
        let command = format!("echo \"$GREETING $HOSTNAME $PORT\" > {}", out.display());
        let process = spawn(&command, &container, "default/web-1", "web-1").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let text = loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if text.ends_with('\n') || std::time::Instant::now() > deadline {
                break text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        assert_eq!(text, format!("hi web-1 {}\n", process.port));
    }
}
