//! TLS certificates from Secrets: their order, renaming on rotation, the limit per target
//! proxy, and Secrets of another type.

use super::*;

#[test]
fn certificates_are_ordered_and_rotation_renames_them() {
    let mut snapshot = features();
    let d = translate(&snapshot, "shop").unwrap();
    let proxy = d.frontend.target_https_proxy.as_ref().unwrap();
    let short: Vec<&str> = proxy
        .ssl_certificates
        .iter()
        .map(|c| c.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        &short[..4],
        [
            "legacy-cert",
            "other-cert",
            "mcrt-1a1a1a1a",
            "mcrt-2b2b2b2b"
        ]
    );
    let before = d.frontend.ssl_certificates[0].name.clone().unwrap();
    let secret = snapshot
        .secrets
        .get_mut(&ObjectKey::new("default", "shop-tls"))
        .map(Arc::make_mut)
        .unwrap();
    secret.data.as_mut().unwrap().insert(
        "tls.crt".into(),
        k8s_openapi::ByteString(
            b"-----BEGIN CERTIFICATE-----\nROTATED\n-----END CERTIFICATE-----\n".to_vec(),
        ),
    );
    let after = translate(&snapshot, "shop").unwrap();
    let renamed = after.frontend.ssl_certificates[0].name.clone().unwrap();
    assert_ne!(before, renamed);
    assert!(
        renamed.starts_with(&before[..before.len() - 16]),
        "same Ingress prefix, new cert hash"
    );
}

/// A target HTTPS proxy holds at most 15 certificates: 15 translate, 16 or more are an error.
#[test]
fn too_many_certificates_is_an_error() {
    let with_pre_shared = |count: usize| {
        let mut snapshot = features();
        let ing = snapshot
            .ingresses
            .get_mut(&ObjectKey::new("default", "shop"))
            .map(Arc::make_mut)
            .unwrap();
        let names: Vec<String> = (0..count).map(|i| format!("c{i}")).collect();
        ing.metadata.annotations.as_mut().unwrap().insert(
            "ingress.gcp.kubernetes.io/pre-shared-cert".into(),
            names.join(","),
        );
        translate(&snapshot, "shop")
    };
    // The Ingress's own four certificates and 11 pre-shared ones: exactly the limit.
    let at_limit = with_pre_shared(11).unwrap();
    let proxy = at_limit.frontend.target_https_proxy.unwrap();
    assert_eq!(proxy.ssl_certificates.len(), 15);
    let err = with_pre_shared(14).unwrap_err();
    assert!(
        matches!(
            err,
            TranslateError::TooManyCertificates {
                count: 18,
                max: 15,
                ..
            }
        ),
        "{err}"
    );
}

/// A `spec.tls` Secret is used when its type is `kubernetes.io/tls`, `Opaque` or unset (PEM
/// `tls.crt` and `tls.key` are what matter); any other type is skipped with a Warning naming
/// the Secret, and HTTPS goes on with the other certificates.
#[test]
fn tls_secrets_of_another_type_are_skipped_with_a_warning() {
    let with_type = |type_: Option<&str>| {
        let mut snapshot = features();
        let secret = snapshot
            .secrets
            .get_mut(&ObjectKey::new("default", "shop-tls"))
            .map(Arc::make_mut)
            .unwrap();
        secret.type_ = type_.map(str::to_owned);
        translate(&snapshot, "shop").unwrap()
    };
    let self_managed = |d: &DesiredIngress| -> Vec<String> {
        d.frontend
            .ssl_certificates
            .iter()
            .map(|c| c.certificate.clone().unwrap())
            .collect()
    };
    // shop-tls holds the certificate `MIIBshop`; the Ingress's other Secret stays as it is.
    let from_shop_tls = |pem: &String| pem.contains("MIIBshop");
    let tls = with_type(Some("kubernetes.io/tls"));
    assert_eq!(
        self_managed(&tls)
            .iter()
            .filter(|c| from_shop_tls(c))
            .count(),
        1
    );
    for accepted in [Some("Opaque"), None] {
        let d = with_type(accepted);
        assert_eq!(self_managed(&d), self_managed(&tls), "type {accepted:?}");
        assert_eq!(d.findings, tls.findings, "type {accepted:?}");
    }
    let d = with_type(Some("kubernetes.io/basic-auth"));
    let others: Vec<String> = self_managed(&tls)
        .into_iter()
        .filter(|c| !from_shop_tls(c))
        .collect();
    assert_eq!(self_managed(&d), others);
    let warned: Vec<&str> = d
        .findings
        .iter()
        .filter(|f| f.warning && f.message.contains("default/shop-tls"))
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        warned.len() == 1 && warned[0].contains("is not of type kubernetes.io/tls"),
        "{:#?}",
        d.findings
    );
}
