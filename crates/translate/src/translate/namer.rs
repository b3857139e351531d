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

use md5::Md5;
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

/// Which of GKE's frontend naming schemes an Ingress's resources use (ingress-gce
/// `pkg/utils/namer/frontendnamer.go`). GKE's controller records it in the Ingress's finalizer
/// (`pkg/utils/namer/utils.go` `FrontendNamingScheme`): [`GKE_FINALIZER_V1`] means v1,
/// [`GKE_FINALIZER_V2`] (or both) means v2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrontendVersion {
    /// `k8s-<kind>-<ns>-<name>--<clusterUID>` (cut to 62 characters + `0`): Ingresses GKE's
    /// controller built before v2 names (GKE < 1.17, or glbc without
    /// `--enable-v2-frontend-namer`).
    V1,
    /// `k8s2-<kind>-<uid8>-<ns'>-<name'>-<hash>`: GKE's names since 1.17, and this operator's.
    #[default]
    V2,
}

/// The finalizer GKE's controller puts on Ingresses whose resources have v1 names.
pub const GKE_FINALIZER_V1: &str = "networking.gke.io/ingress-finalizer";
/// The finalizer GKE's controller puts on Ingresses whose resources have v2 names.
pub const GKE_FINALIZER_V2: &str = "networking.gke.io/ingress-finalizer-V2";

impl FrontendVersion {
    /// The scheme of an Ingress with these finalizers in takeover mode: v1 when it carries only
    /// GKE's v1 finalizer, else v2. An Ingress without either is new to GKE's names and gets v2
    /// (what GKE's controller does with `--enable-v2-frontend-namer`, as on GKE, for an
    /// Ingress without an IP; one with an IP and a v1 URL map but no finalizer predates GKE
    /// 1.15 and is not recognised).
    pub fn of_finalizers<'a>(finalizers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut v1 = false;
        for f in finalizers {
            if f == GKE_FINALIZER_V2 {
                return Self::V2;
            }
            v1 |= f == GKE_FINALIZER_V1;
        }
        if v1 {
            Self::V1
        } else {
            Self::V2
        }
    }

    /// The finalizer GKE's controller uses for this scheme.
    pub fn finalizer(self) -> &'static str {
        match self {
            Self::V1 => GKE_FINALIZER_V1,
            Self::V2 => GKE_FINALIZER_V2,
        }
    }
}

/// Names for one Ingress's frontend resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontendNamer {
    scheme: Scheme,
    version: FrontendVersion,
    /// v2: the 8-character cluster UID; v1: the full cluster UID (`ingress-uid` ConfigMap).
    cluster_uid8: String,
    lb: String,
}

impl FrontendNamer {
    /// The v2 names. `cluster_uid8` from [`cluster_uid8`], `kube_system_uid` the raw Namespace
    /// UID.
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
            version: FrontendVersion::V2,
            cluster_uid8: cluster_uid8.to_owned(),
            lb,
        }
    }

    /// GKE's v1 names (always GKE's `k8s` prefix): load balancer `<ns>-<name>--<uid>` cut by
    /// [`truncate_legacy`], `uid` the `ingress-uid` ConfigMap's `uid` (empty on legacy
    /// clusters: no `--<uid>` suffix). ingress-gce `Namer.LoadBalancer`.
    pub fn v1(uid: &str, namespace: &str, name: &str) -> Self {
        Self::v1_key(uid, &format!("{namespace}/{name}"))
    }

    /// [`FrontendNamer::v1`] for a load-balancer key (`namespace/name`).
    pub fn v1_key(uid: &str, key: &str) -> Self {
        let scrubbed = key.replace('/', "-");
        let lb = if uid.is_empty() || key.rsplit("--").next() == Some(uid) {
            scrubbed
        } else {
            truncate_legacy(&format!("{scrubbed}--{uid}"))
        };
        Self {
            scheme: Scheme::Gke,
            version: FrontendVersion::V1,
            cluster_uid8: uid.to_owned(),
            lb,
        }
    }

    /// Whose names these are.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Which of GKE's frontend schemes these names follow.
    pub fn version(&self) -> FrontendVersion {
        self.version
    }

    /// The load-balancer name shared by all of this Ingress's resources (at most 55 chars in
    /// v2, 63 in v1).
    pub fn lb_name(&self) -> &str {
        &self.lb
    }

    fn named(&self, kind: &str) -> String {
        match self.version {
            FrontendVersion::V2 => format!("{}-{kind}-{}", self.scheme.frontend(), self.lb),
            FrontendVersion::V1 => {
                let kind = match kind {
                    "ts" => "tps",
                    "fr" => "fw",
                    "fs" => "fws",
                    other => other,
                };
                truncate_legacy(&format!("k8s-{kind}-{}", self.lb))
            }
        }
    }

    /// URL map `k8s2-um-<lb>` (v1 `k8s-um-<lb>`).
    pub fn url_map(&self) -> String {
        self.named("um")
    }
    /// HTTP-to-HTTPS redirect URL map `k8s2-rm-<lb>` (v1 `k8s-rm-<lb>`, which GKE's v1 namer
    /// defines but its controller never builds: it redirects only v2 Ingresses).
    pub fn redirect_url_map(&self) -> String {
        self.named("rm")
    }
    /// Target HTTP proxy `k8s2-tp-<lb>` (v1 `k8s-tp-<lb>`).
    pub fn target_http_proxy(&self) -> String {
        self.named("tp")
    }
    /// Target HTTPS proxy `k8s2-ts-<lb>` (v1 `k8s-tps-<lb>`).
    pub fn target_https_proxy(&self) -> String {
        self.named("ts")
    }
    /// HTTP global forwarding rule `k8s2-fr-<lb>` (v1 `k8s-fw-<lb>`); also the name of a
    /// managed static address.
    pub fn http_forwarding_rule(&self) -> String {
        self.named("fr")
    }
    /// HTTPS global forwarding rule `k8s2-fs-<lb>` (v1 `k8s-fws-<lb>`).
    pub fn https_forwarding_rule(&self) -> String {
        self.named("fs")
    }
    /// Self-managed certificate `k8s2-cr-<uid8>-<ContentHash(lb,16)>-<sha256hex(certPEM)[:16]>`
    /// for a certificate chain in PEM form (`tls.crt`); v1
    /// `k8s-ssl-<sha256hex(lb)[:16]>-<sha256hex(certPEM)[:16]>--<uid>` (cut to 62 + `0`).
    pub fn ssl_certificate(&self, cert_pem: &[u8]) -> String {
        match self.version {
            FrontendVersion::V2 => format!(
                "{}{}",
                self.ssl_certificate_prefix(),
                sha256_hex(cert_pem, 16)
            ),
            FrontendVersion::V1 => {
                let name = format!(
                    "{}{}",
                    self.ssl_certificate_prefix(),
                    sha256_hex(cert_pem, 16)
                );
                if self.cluster_uid8.is_empty() {
                    name
                } else {
                    truncate_legacy(&format!("{name}--{}", self.cluster_uid8))
                }
            }
        }
    }
    /// Every per-Ingress resource name but the certificates': URL map, redirect URL map,
    /// target HTTP and HTTPS proxies, HTTP and HTTPS forwarding rules.
    pub fn resource_names(&self) -> [String; 6] {
        [
            self.url_map(),
            self.redirect_url_map(),
            self.target_http_proxy(),
            self.target_https_proxy(),
            self.http_forwarding_rule(),
            self.https_forwarding_rule(),
        ]
    }

    /// Prefix shared by every self-managed certificate of this Ingress (to find stale ones).
    pub fn ssl_certificate_prefix(&self) -> String {
        match self.version {
            FrontendVersion::V2 => format!(
                "{}-cr-{}-{}-",
                self.scheme.frontend(),
                self.cluster_uid8,
                content_hash(&self.lb, 16)
            ),
            FrontendVersion::V1 => format!("k8s-ssl-{}-", sha256_hex(self.lb.as_bytes(), 16)),
        }
    }
}

/// Whether `name` is a v1 frontend resource of `kind` (given by its v2 letters: `um`, `rm`,
/// `tp`, `ts`, `fr`, `fs`, `cr`) of the cluster whose v1 UID is `uid`: GKE's
/// `Namer.NameBelongsToCluster` (ingress-gce `pkg/utils/namer/namer.go`). The UID after the
/// last `--` must equal `uid`, or, in a name cut to 63 characters (last character `0`), be a
/// prefix of it longer than 4 characters. Never true for an empty `uid` (legacy clusters'
/// names carry none, so they cannot be told apart).
pub fn is_v1_frontend(kind: &str, name: &str, uid: &str) -> bool {
    let kind = match kind {
        "ts" => "tps",
        "fr" => "fw",
        "fs" => "fws",
        "cr" => "ssl",
        other => other,
    };
    if uid.is_empty() || !name.starts_with(&format!("k8s-{kind}-")) {
        return false;
    }
    let Some((_, mut component)) = name.rsplit_once("--") else {
        return false;
    };
    if kind == "ssl" {
        component = component.split('-').next().unwrap_or_default();
    }
    if component == uid {
        return true;
    }
    if name.len() > 62 {
        component = component.strip_suffix('0').unwrap_or(component);
    }
    component.len() > 4 && uid.starts_with(component)
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

/// Name of the backend service and health check of one Service port behind a regional
/// external Application Load Balancer (`gce-regional-external`): GKE's
/// `k8s1-<uid8>-e-<ns'>-<svc'>-<port'>-<hash>`, the [`backend`] name with `-e` after the UID,
/// the fields cut to 36 characters and the same hash (ingress-gce `pkg/utils/namer/namer.go`
/// `RXLBBackendName`, used by `pkg/utils/serviceport.go` `BackendName` for
/// `L7XLBRegionalEnabled` ports). A regional backend service has one `loadBalancingScheme`, so
/// the internal class (INTERNAL_MANAGED, named by [`backend`]) and the regional external class
/// (EXTERNAL_MANAGED, named here) each get their own in a region; the NEGs stay [`backend`]'s
/// and are shared. 63 characters at most; starts with [`backend_prefix`].
pub fn regional_external_backend(
    scheme: Scheme,
    uid: &str,
    namespace: &str,
    service: &str,
    port: i32,
) -> String {
    let uid8: String = uid.chars().take(8).collect();
    let port = port.to_string();
    let trimmed = trim_fields_evenly(NEG_FIELDS_BUDGET - 2, &[namespace, service, &port]);
    let suffix = sha256_hex(format!("{uid8};{namespace};{service};{port}").as_bytes(), 8);
    format!(
        "{}-{uid8}-e-{}-{}-{}-{suffix}",
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

/// The shared L7 firewall rule: `k8s-fw-l7--<uid>` (`k8s-fw-l7` when `uid` is empty). In
/// GKE's scheme `uid` is the `ingress-uid` ConfigMap's `provider-uid` (else its `uid`) and
/// `l7--<uid>` is cut by [`truncate_legacy`] (ingress-gce `Namer.FirewallRule`).
pub fn l7_firewall(scheme: Scheme, uid: &str) -> String {
    let prefix = scheme.firewall();
    if uid.is_empty() {
        format!("{prefix}-fw-l7")
    } else if scheme == Scheme::Gke {
        format!("{prefix}-fw-{}", truncate_legacy(&format!("l7--{uid}")))
    } else {
        format!("{prefix}-fw-l7--{uid}")
    }
}

/// URL-map pathMatcher name for a host: `host` + a hash of the host. GKE's scheme uses GKE's
/// 32 hex characters of MD5(host) (ingress-gce `pkg/translator` `getNameForPathMatcher`), so
/// an adopted URL map is unchanged; the operator's own scheme 32 hex characters of SHA-256.
pub fn path_matcher(scheme: Scheme, host: &str) -> String {
    match scheme {
        Scheme::Gke => format!("host{}", hex::encode(Md5::digest(host.as_bytes()))),
        Scheme::Own => format!("host{}", sha256_hex(host.as_bytes(), 32)),
    }
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
#[path = "namer_gke_tests.rs"]
mod gke_tests;
#[cfg(test)]
#[path = "namer_tests.rs"]
mod tests;
