//! The big cluster of the memory figures (issue 15, "Memory"; issue 18, "with 10k Pods and 2k
//! Secrets in the cluster"), shared by the memory and convergence benchmarks: realistic Pods and
//! Secrets in namespace `bench` that no benchmark Service selects, created concurrently with a
//! kube client ([`create_all`]).

use std::fmt::Write as _;

use anyhow::{Context as _, Result};

use super::support::System;

/// One Pod as a Deployment's ReplicaSet would create it (about 3 KiB of JSON).
pub fn pod(i: usize) -> String {
    let mut env = String::new();
    for e in 0..10 {
        let _ = writeln!(
            env,
            "      - {{name: SETTING_{e}, value: \"value-{e}-for-pod-{i}-with-some-length\"}}"
        );
    }
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-{i}\n  namespace: bench\n  labels: {{app: app-{}, tier: web, pod-template-hash: 5d8f7c9b{i}}}\n  annotations:\n    prometheus.io/scrape: \"true\"\n    example.com/config-checksum: \"{:064x}\"\nspec:\n  initContainers:\n  - name: init\n    image: registry.example.com/init:1.0\n    command: [sh, -c, \"echo init && sleep 1\"]\n  containers:\n  - name: app\n    image: registry.example.com/app:2.3.4\n    args: [--port=8080, --log-level=info, --config=/etc/app/config.yaml]\n    ports:\n    - {{name: http, containerPort: 8080}}\n    - {{name: metrics, containerPort: 9090}}\n    env:\n{env}    resources:\n      requests: {{cpu: 100m, memory: 128Mi}}\n      limits: {{memory: 256Mi}}\n    readinessProbe:\n      httpGet: {{path: /healthz, port: http}}\n      periodSeconds: 5\n    livenessProbe:\n      httpGet: {{path: /livez, port: http}}\n    volumeMounts:\n    - {{name: config, mountPath: /etc/app}}\n    - {{name: data, mountPath: /var/lib/app}}\n  - name: sidecar\n    image: registry.example.com/proxy:1.27\n    args: [--upstream=127.0.0.1:8080]\n    ports:\n    - {{containerPort: 15001}}\n    resources:\n      requests: {{cpu: 10m, memory: 32Mi}}\n  volumes:\n  - name: config\n    configMap: {{name: app-config}}\n  - name: data\n    emptyDir: {{}}\n  tolerations:\n  - {{key: dedicated, operator: Equal, value: web, effect: NoSchedule}}\n---\n",
        i % 50,
        i * 7919
    )
}

/// Half `kubernetes.io/tls` (certificate and key), half Opaque 4 KiB blobs.
pub fn secret(i: usize, crt: &str, key: &str) -> String {
    use base64::Engine as _;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    if i.is_multiple_of(2) {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: tls-{i}, namespace: bench}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
            b64(crt.as_bytes()),
            b64(key.as_bytes())
        )
    } else {
        let blob: Vec<u8> = (0..4096).map(|b| (b * 31 + i) as u8).collect();
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: opaque-{i}, namespace: bench}}\ntype: Opaque\ndata:\n  config.bin: {}\n---\n",
            b64(&blob)
        )
    }
}

/// Objects created at once by [`create_all`]. The local API handles one request in a few
/// milliseconds of CPU; more in flight only queues on its two cores.
const CONCURRENCY: usize = 16;

/// Creates every object of `docs` (YAML documents, each one object with `apiVersion`, `kind`
/// and `metadata.namespace`, default `default`) with a kube client, [`CONCURRENCY`] requests
/// in flight, and returns how many were created.
///
/// Why not `kubectl create -f`: kubectl sends one request at a time and costs ~25 ms of its
/// own CPU per object (decoding, client-side schema checks, printing), so 10k Pods and 2k
/// Secrets took 730-1141 s on the loaded 2-core machine (issue 18), while the local API spends
/// about 5 ms of CPU on each (measured: 500 Pods, kubectl 13.2 CPU s, the API 2.7 CPU s).
/// Errors: the first refused create, naming the object and the API's answer.
pub fn create_all(sys: &System, docs: &[String]) -> Result<usize> {
    use futures::TryStreamExt as _;
    use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
    use kube::discovery::ApiResource;

    let objects: Vec<DynamicObject> = docs
        .iter()
        .flat_map(|d| d.split("\n---\n"))
        .filter(|d| !d.trim().is_empty() && d.trim() != "---")
        .map(|d| serde_yaml::from_str(d).with_context(|| format!("bench object: {d}")))
        .collect::<Result<_>>()?;
    // kube's client uses rustls; more than one crypto provider is compiled in, so pick ring as
    // the operator does (src/main.rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&sys.kubeconfig)?,
            &Default::default(),
        )
        .await?;
        let client = kube::Client::try_from(config)?;
        futures::stream::iter(objects.iter().map(Ok))
            .try_for_each_concurrent(CONCURRENCY, |obj| {
                let client = client.clone();
                async move {
                    let types = obj.types.as_ref().context("an object without apiVersion")?;
                    let (group, version) = types
                        .api_version
                        .rsplit_once('/')
                        .unwrap_or(("", types.api_version.as_str()));
                    let gvk = GroupVersionKind::gvk(group, version, &types.kind);
                    let ns = obj.metadata.namespace.as_deref().unwrap_or("default");
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client, ns, &ApiResource::from_gvk(&gvk));
                    api.create(&PostParams::default(), obj)
                        .await
                        .with_context(|| {
                            format!(
                                "creating {} {ns}/{}",
                                types.kind,
                                obj.metadata.name.as_deref().unwrap_or("")
                            )
                        })
                        .map(|_| ())
                }
            })
            .await
    })?;
    Ok(objects.len())
}

/// Creates namespace `bench` with `pods` Pods and `secrets` Secrets (half of them TLS, one
/// self-signed certificate shared by all).
pub fn populate(sys: &System, pods: usize, secrets: usize) -> Result<()> {
    sys.kubectl_ok(&["create", "namespace", "bench"])?;
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec!["bench.example".to_string()])?.self_signed(&key)?;
    let (crt, key) = (cert.pem(), key.serialize_pem());
    let mut docs: Vec<String> = (0..pods).map(pod).collect();
    docs.extend((0..secrets).map(|i| secret(i, &crt, &key)));
    create_all(sys, &docs).map(|_| ())
}
