//! The kubeconfig the server writes for its clients (`--kubeconfig-out`): one cluster with the
//! CA embedded, one user with a bearer token, one current context.

use std::path::Path;

use base64::Engine;

/// Errors writing the kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The file (or its temporary sibling) could not be written or renamed.
    #[error("writing kubeconfig {path}: {source}")]
    Write {
        /// The target path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Renders a kubeconfig (YAML) for `server` (`https://127.0.0.1:PORT`), trusting `ca_pem` and
/// authenticating with `token`. Cluster, user and context are all named `fake-kube-apiserver`;
/// the namespace of the context is `default`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake-kube-apiserver\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: fake-kube-apiserver\n  user:\n    token: {token}\ncontexts:\n- name: fake-kube-apiserver\n  context:\n    cluster: fake-kube-apiserver\n    user: fake-kube-apiserver\n    namespace: default\ncurrent-context: fake-kube-apiserver\npreferences: {{}}\n"
    )
}

/// Writes `contents` to `path` atomically (temporary file in the same directory, then rename),
/// with mode 0600 because it holds a credential.
pub fn write(path: &Path, contents: &str) -> Result<(), KubeconfigError> {
    crate::state_file::write_atomic(path, contents.as_bytes(), 0o600).map_err(|source| {
        KubeconfigError::Write {
            path: path.display().to_string(),
            source,
        }
    })
}
