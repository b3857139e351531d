//! Every Compute resource name the operator uses comes from here.
//!
//! Two schemes ([`Scheme`]), chosen by the operator's mode:
//! - [`Scheme::Gke`] (takeover mode) is GKE's, so the resources of an Ingress GKE's controller
//!   built are found and adopted by name (`reference/ingress-gce-inventory.md` section 4;
//!   ingress-gce `pkg/utils/namer`):
//!   - per-Ingress frontend resources use the v2 scheme `k8s2-<kind>-<lb>` where
//!     `lb = <clusterUID8>-<ns'>-<name'>-<ContentHash("<kubeSystemUID>;<ns>;<name>", 8)>`;
//!   - per-Service-port backends (backend service, health check, NEG) use
//!     `k8s1-<uid8>-<ns'>-<svc'>-<port'>-<sha256hex("<uid8>;<ns>;<svc>;<port>")[:8]>`;
//!   - the shared L7 firewall rule is `k8s-fw-l7--<uid>`.
//! - [`Scheme::Own`] (the default, beside GKE's controller) has the same shapes and lengths
//!   with the operator's own prefix `gclb-` in place of `k8s2-`, `k8s1-` and `k8s-`:
//!   `gclb-<kind>-<lb>`, `gclb-<uid8>-<ns'>-<svc'>-<port'>-<hash>`, `gclb-fw-l7--<uid>`. GKE's
//!   controller only ever builds, adopts or garbage-collects names starting with `k8s`, and
//!   this operator in that scheme only names starting with `gclb-`, so the two can share a
//!   project and a cluster without touching each other's resources.
//!
//! `ns'`, `name'` ... are cut by [`trim_fields_evenly`]; the hash suffix of the full values keeps
//! names unique across namespaces and clusters even when the readable part is cut. Every name
//! is at most 63 characters and matches `[a-z]([-a-z0-9]*[a-z0-9])?` for valid Kubernetes
//! namespace and object names (DNS-1123 labels; Service names are DNS-1035 labels).

use sha2::{Digest, Sha256};

/// Longest Compute resource name.
pub const MAX_NAME_LENGTH: usize = 63;
/// Combined length budget of namespace + name in a v2 frontend `lb` name.
const FRONTEND_FIELDS_BUDGET: usize = 36;
/// Combined length budget of namespace + service + port in a NEG / backend name.
const NEG_FIELDS_BUDGET: usize = 38;
const CONTENT_HASH_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// GKE's `ContentHash(s, n)`: SHA-256 of `s`, then each of the first `n` bytes modulo 36 indexes
/// `0-9a-z` (ingress-gce `pkg/utils/common/common.go`). `n` is at most 32.
pub fn content_hash(s: &str, n: usize) -> String {
    let digest = Sha256::digest(s.as_bytes());
    digest
        .iter()
        .take(n)
        .map(|b| CONTENT_HASH_ALPHABET[usize::from(*b) % 36] as char)
        .collect()
}

/// Lower-case hex SHA-256 of `s`, cut to `n` characters (GKE's `GetCertHash` and NEG suffix).
pub fn sha256_hex(s: &[u8], n: usize) -> String {
    let mut hex = hex::encode(Sha256::digest(s));
    hex.truncate(n);
    hex
}

/// The 8-character cluster UID: `ContentHash(kube-system Namespace UID, 8)` (inventory §4,
/// ingress-gce `cmd/glbc/main.go`).
pub fn cluster_uid8(kube_system_uid: &str) -> String {
    content_hash(kube_system_uid, 8)
}

/// GKE's `TrimFieldsEvenly(max, fields...)`: when the fields together exceed `max`
/// characters, each keeps `len - len*excess/total - 1` characters and the spare characters go
/// back one per field from the left, so longer fields lose more (`pkg/utils/namer/utils.go`).
/// Fields are ASCII (Kubernetes names).
pub fn trim_fields_evenly(max: usize, fields: &[&str]) -> Vec<String> {
    let total: usize = fields.iter().map(|f| f.len()).sum();
    if total <= max {
        return fields.iter().map(|f| (*f).to_owned()).collect();
    }
    let excess = total - max;
    let mut lengths: Vec<usize> = fields
        .iter()
        .map(|f| (f.len() - f.len() * excess / total).saturating_sub(1))
        .collect();
    let used: usize = lengths.iter().sum();
    for length in lengths.iter_mut().take(max.saturating_sub(used)) {
        *length += 1;
    }
    fields
        .iter()
        .zip(lengths)
        .map(|(f, l)| f[..l.min(f.len())].to_owned())
        .collect()
}

/// Which names the operator uses (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// The operator's own names, `gclb-...`: never one GKE's controller builds or collects.
    #[default]
    Own,
    /// GKE's names, `k8s2-...`, `k8s1-...`, `k8s-fw-l7--...` (takeover mode).
    Gke,
}

impl Scheme {
    /// Prefix of per-Ingress frontend names (`k8s2` or `gclb`, 4 characters).
    pub fn frontend(self) -> &'static str {
        match self {
            Self::Own => "gclb",
            Self::Gke => "k8s2",
        }
    }

    /// Prefix of per-Service-port backend names (`k8s1` or `gclb`, 4 characters).
    pub fn backend(self) -> &'static str {
        match self {
            Self::Own => "gclb",
            Self::Gke => "k8s1",
        }
    }

    /// Prefix of the shared firewall rule's name, before `-fw-l7`.
    fn firewall(self) -> &'static str {
        match self {
            Self::Own => "gclb",
            Self::Gke => "k8s",
        }
    }
}

/// Names for one Ingress's frontend resources (the v2 scheme).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontendNamer {
    scheme: Scheme,
    cluster_uid8: String,
    lb: String,
}

impl FrontendNamer {
    /// `cluster_uid8` from [`cluster_uid8`], `kube_system_uid` the raw Namespace UID.
    pub fn new(
        scheme: Scheme,
        cluster_uid8: &str,
        kube_system_uid: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        let trimmed = trim_fields_evenly(FRONTEND_FIELDS_BUDGET, &[namespace, name]);
        let suffix = content_hash(&format!("{kube_system_uid};{namespace};{name}"), 8);
        let lb = format!("{cluster_uid8}-{}-{}-{suffix}", trimmed[0], trimmed[1]);
        Self {
            scheme,
            cluster_uid8: cluster_uid8.to_owned(),
            lb,
        }
    }

    /// The load-balancer name shared by all of this Ingress's resources (at most 55 chars).
    pub fn lb_name(&self) -> &str {
        &self.lb
    }

    fn named(&self, kind: &str) -> String {
        format!("{}-{kind}-{}", self.scheme.frontend(), self.lb)
    }

    /// URL map `k8s2-um-<lb>`.
    pub fn url_map(&self) -> String {
        self.named("um")
    }
    /// HTTP-to-HTTPS redirect URL map `k8s2-rm-<lb>`.
    pub fn redirect_url_map(&self) -> String {
        self.named("rm")
    }
    /// Target HTTP proxy `k8s2-tp-<lb>`.
    pub fn target_http_proxy(&self) -> String {
        self.named("tp")
    }
    /// Target HTTPS proxy `k8s2-ts-<lb>`.
    pub fn target_https_proxy(&self) -> String {
        self.named("ts")
    }
    /// HTTP global forwarding rule `k8s2-fr-<lb>`; also the name of a managed static address.
    pub fn http_forwarding_rule(&self) -> String {
        self.named("fr")
    }
    /// HTTPS global forwarding rule `k8s2-fs-<lb>`.
    pub fn https_forwarding_rule(&self) -> String {
        self.named("fs")
    }
    /// Self-managed certificate `k8s2-cr-<uid8>-<ContentHash(lb,16)>-<sha256hex(certPEM)[:16]>`
    /// for a certificate chain in PEM form (`tls.crt`).
    pub fn ssl_certificate(&self, cert_pem: &[u8]) -> String {
        format!(
            "{}-cr-{}-{}-{}",
            self.scheme.frontend(),
            self.cluster_uid8,
            content_hash(&self.lb, 16),
            sha256_hex(cert_pem, 16)
        )
    }
    /// Prefix shared by every self-managed certificate of this Ingress (to find stale ones).
    pub fn ssl_certificate_prefix(&self) -> String {
        format!(
            "{}-cr-{}-{}-",
            self.scheme.frontend(),
            self.cluster_uid8,
            content_hash(&self.lb, 16)
        )
    }
}

/// Name of the backend service, health check and NEGs of one Service port (the NEG scheme,
/// `k8s1-...`, 63 chars at most). `uid` is the cluster UID (only its first 8 chars are used).
pub fn backend(scheme: Scheme, uid: &str, namespace: &str, service: &str, port: i32) -> String {
    let uid8: String = uid.chars().take(8).collect();
    let port = port.to_string();
    let trimmed = trim_fields_evenly(NEG_FIELDS_BUDGET, &[namespace, service, &port]);
    let suffix = sha256_hex(format!("{uid8};{namespace};{service};{port}").as_bytes(), 8);
    format!(
        "{}-{uid8}-{}-{}-{}-{suffix}",
        scheme.backend(),
        trimmed[0],
        trimmed[1],
        trimmed[2]
    )
}

/// Prefix of every backend name of this cluster (`k8s1-<uid8>-`), for garbage collection.
pub fn backend_prefix(scheme: Scheme, uid: &str) -> String {
    let uid8: String = uid.chars().take(8).collect();
    format!("{}-{uid8}-", scheme.backend())
}

/// Prefix of every v2 frontend resource name of this cluster for `kind` (e.g. `um`):
/// `k8s2-<kind>-<uid8>-`, for garbage collection.
pub fn frontend_prefix(scheme: Scheme, kind: &str, cluster_uid8: &str) -> String {
    format!("{}-{kind}-{cluster_uid8}-", scheme.frontend())
}

/// The shared L7 firewall rule: `k8s-fw-l7--<uid>` (`k8s-fw-l7` when `uid` is empty).
pub fn l7_firewall(scheme: Scheme, uid: &str) -> String {
    let prefix = scheme.firewall();
    if uid.is_empty() {
        format!("{prefix}-fw-l7")
    } else {
        format!("{prefix}-fw-l7--{uid}")
    }
}

/// URL-map pathMatcher name for a host: `host` + 32 hex chars of SHA-256(host) (GKE uses MD5;
/// only the shape matters, the name is internal to the URL map).
pub fn path_matcher(host: &str) -> String {
    format!("host{}", sha256_hex(host.as_bytes(), 32))
}

/// sslCertificate for a ManagedCertificate: `mcrt-<uid8>-<ContentHash("<kubeSystemUID>;<ns>;<name>",
/// 16)>-<ContentHash(sorted domains joined by ",", 8)>` (48 chars). GKE uses `mcrt-<random
/// uuid>` and keeps the name in a ConfigMap; a deterministic name needs no state, and because
/// the domains are part of it, a domain change creates a new certificate that can be swapped in
/// before the old one is deleted.
pub fn managed_certificate(
    kube_system_uid: &str,
    namespace: &str,
    name: &str,
    domains: &[String],
) -> String {
    let mut sorted: Vec<&str> = domains.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    format!(
        "mcrt-{}-{}-{}",
        cluster_uid8(kube_system_uid),
        content_hash(&format!("{kube_system_uid};{namespace};{name}"), 16),
        content_hash(&sorted.join(","), 8)
    )
}

/// Whether `name` is a valid Compute resource name: `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`.
pub fn is_valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LENGTH
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// GKE's legacy `truncate()`: a name over 62 characters is cut to 62 and `0` is appended.
pub fn truncate_legacy(name: &str) -> String {
    if name.len() > 62 {
        format!("{}0", &name[..62])
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
#[path = "namer_tests.rs"]
mod tests;
