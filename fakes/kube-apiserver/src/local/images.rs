//! PURE: what a local container serves, chosen from its image and arguments as the real image
//! would behave: GKE's documented sample images answer as those images do ([`super::hello_app`],
//! [`super::whereami`], agnhost's `netexec` and `serve-hostname` in [`super::agnhost`]); any
//! other image runs the echo server ([`super::echo`]), which names the Pod, the container and
//! the image. The Pod annotation `local.gclb-operator.dev/run` overrides the choice (`echo`,
//! `default-backend`) or opts the Pod out (`none`).

use k8s_openapi::api::core::v1::Container;

use super::annotations::RunMode;

/// What one container answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum App {
    /// The JSON echo server.
    Echo,
    /// GKE's default backend: 404 `default backend - 404`, 200 `ok` on `/healthz`.
    DefaultBackend,
    /// `hello-app` (gcr.io/google-samples/hello-app,
    /// us-docker.pkg.dev/google-samples/containers/gke/hello-app): "Hello, world!", the
    /// version (`1.0.0` for tag `1.0`) and the hostname.
    HelloApp {
        /// The `Version:` line's value.
        version: String,
    },
    /// `whereami` (us-docker.pkg.dev/google-samples/containers/gke/whereami): its JSON.
    Whereami {
        /// The `METADATA` environment variable (the JSON's `metadata`), empty when unset.
        metadata: String,
    },
    /// agnhost `netexec`: `/hostname`, `/echo?msg=`, `/healthz`, `/` the time.
    NetExec,
    /// agnhost `serve-hostname`: the hostname on every path.
    ServeHostname,
    /// A user's program mapped to the image ([`super::user_command`]), listening on
    /// `127.0.0.1:port`; requests are forwarded to it.
    Command {
        /// The program's loopback port (its `PORT`).
        port: u16,
    },
}

impl App {
    /// The port the image listens on when the container declares none (`PORT` when set).
    pub fn default_port(&self, container: &Container) -> Option<u16> {
        let env_port = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "PORT")
            .and_then(|e| e.value.as_deref())
            .and_then(|v| v.parse().ok());
        match self {
            App::HelloApp { .. } | App::Whereami { .. } => Some(env_port.unwrap_or(8080)),
            App::NetExec => Some(flag(container, "--http-port").unwrap_or(8080)),
            App::ServeHostname => Some(flag(container, "--port").unwrap_or(9376)),
            App::Command { .. } => Some(8080),
            App::Echo | App::DefaultBackend => None,
        }
    }
}

/// A `--name=N` or `--name N` argument of the container, as a port.
fn flag(container: &Container, name: &str) -> Option<u16> {
    let args: Vec<&str> = container
        .args
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    args.iter().enumerate().find_map(|(i, a)| {
        let value = a
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
            .or_else(|| (*a == name).then(|| args.get(i + 1).copied()).flatten())?;
        value.parse().ok()
    })
}

/// The image's repository path without registry-independent details: the part before the tag
/// or digest, e.g. `us-docker.pkg.dev/google-samples/containers/gke/hello-app`.
fn repository(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => without_digest,
    }
}

/// The image's tag (`1.0` of `hello-app:1.0`), if any.
fn tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    without_digest
        .rsplit_once(':')
        .map(|(_, t)| t)
        .filter(|t| !t.contains('/'))
}

/// What `container` serves under the Pod's run mode.
pub fn app_for(mode: RunMode, container: &Container) -> App {
    match mode {
        RunMode::Echo => return App::Echo,
        RunMode::DefaultBackend => return App::DefaultBackend,
        RunMode::Image => {}
    }
    let image = container.image.as_deref().unwrap_or_default();
    let name = repository(image).rsplit('/').next().unwrap_or_default();
    match name {
        "hello-app" => App::HelloApp {
            version: super::hello_app::version(tag(image)),
        },
        "whereami" => App::Whereami {
            metadata: container
                .env
                .iter()
                .flatten()
                .find(|e| e.name == "METADATA")
                .and_then(|e| e.value.clone())
                .unwrap_or_default(),
        },
        "agnhost" => {
            let first = container
                .args
                .iter()
                .flatten()
                .chain(container.command.iter().flatten())
                .find(|a| !a.starts_with('-') && !a.ends_with("agnhost"));
            match first.map(String::as_str) {
                Some("netexec") => App::NetExec,
                Some("serve-hostname") => App::ServeHostname,
                _ => App::Echo,
            }
        }
        "defaultbackend" | "defaultbackend-amd64" | "ingress-gce-404-server-with-metrics" => {
            App::DefaultBackend
        }
        _ => App::Echo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, args: &[&str]) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            args: (!args.is_empty()).then(|| args.iter().map(|s| s.to_string()).collect()),
            ..Container::default()
        }
    }

    #[test]
    fn gke_sample_images_are_recognised_by_repository_and_tag() {
        for image in [
            "us-docker.pkg.dev/google-samples/containers/gke/hello-app:1.0",
            "gcr.io/google-samples/hello-app:1.0",
        ] {
            assert_eq!(
                app_for(RunMode::Image, &container(image, &[])),
                App::HelloApp {
                    version: "1.0.0".into()
                },
                "{image}"
            );
        }
        assert_eq!(
            app_for(
                RunMode::Image,
                &container("gcr.io/google-samples/hello-app:2.0", &[])
            ),
            App::HelloApp {
                version: "2.0.0".into()
            }
        );
        assert!(matches!(
            app_for(
                RunMode::Image,
                &container(
                    "us-docker.pkg.dev/google-samples/containers/gke/whereami:v1.2.20",
                    &[]
                )
            ),
            App::Whereami { .. }
        ));
        let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.39";
        assert_eq!(
            app_for(
                RunMode::Image,
                &container(agnhost, &["netexec", "--http-port=8081"])
            ),
            App::NetExec
        );
        assert_eq!(
            app_for(RunMode::Image, &container(agnhost, &["serve-hostname"])),
            App::ServeHostname
        );
        assert_eq!(
            app_for(RunMode::Image, &container("nginx:1.27", &[])),
            App::Echo
        );
        assert_eq!(
            app_for(RunMode::Image, &container("localhost:5000/team/app", &[])),
            App::Echo,
            "a registry port is not a tag"
        );
    }

    #[test]
    fn the_run_annotation_overrides_the_image() {
        let hello = container("gcr.io/google-samples/hello-app:1.0", &[]);
        assert_eq!(app_for(RunMode::Echo, &hello), App::Echo);
        assert_eq!(
            app_for(RunMode::DefaultBackend, &hello),
            App::DefaultBackend
        );
    }

    #[test]
    fn default_ports_follow_port_env_and_flags() {
        let mut hello = container("gcr.io/google-samples/hello-app:1.0", &[]);
        let app = app_for(RunMode::Image, &hello);
        assert_eq!(app.default_port(&hello), Some(8080));
        hello.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "PORT".into(),
            value: Some("9000".into()),
            ..Default::default()
        }]);
        assert_eq!(app.default_port(&hello), Some(9000));
        let net = container("agnhost:2.39", &["netexec", "--http-port", "8081"]);
        assert_eq!(App::NetExec.default_port(&net), Some(8081));
        assert_eq!(
            App::ServeHostname.default_port(&container("agnhost", &["serve-hostname"])),
            Some(9376)
        );
        assert_eq!(App::Echo.default_port(&net), None);
    }
}
