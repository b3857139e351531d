use google_cloud_compute_v1::model;
use google_cloud_compute_v1::model::ssl_certificate_managed_ssl_certificate::{
    DomainStatus as ComputeDomainStatus, Status as ComputeStatus,
};

use super::certificate::*;
use crate::crd::managed_certificate::DomainStatus;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn managed_cert(
    status: ComputeStatus,
    domains: &[(&str, ComputeDomainStatus)],
) -> model::SslCertificate {
    let managed = model::SslCertificateManagedSslCertificate::new()
        .set_domains(domains.iter().map(|(d, _)| *d))
        .set_status(status)
        .set_domain_status(domains.iter().map(|(d, st)| (*d, st.clone())));
    model::SslCertificate::new()
        .set_name("mcrt-abc")
        .set_type(model::ssl_certificate::Type::Managed)
        .set_managed(managed)
}

#[test]
fn status_maps_compute_values_one_to_one_with_domains_sorted() {
    let mut cert = managed_cert(
        ComputeStatus::Provisioning,
        &[
            ("z.example", ComputeDomainStatus::FailedNotVisible),
            ("a.example", ComputeDomainStatus::Active),
            ("m.example", ComputeDomainStatus::FailedCaaForbidden),
        ],
    );
    cert.expire_time = Some("2027-01-01T00:00:00Z".into());
    let status = status_from_certificate(&cert).unwrap();
    assert_eq!(status.certificate_status.as_deref(), Some("Provisioning"));
    assert_eq!(status.certificate_name.as_deref(), Some("mcrt-abc"));
    assert_eq!(status.expire_time.as_deref(), Some("2027-01-01T00:00:00Z"));
    assert_eq!(
        status.domain_status,
        vec![
            DomainStatus {
                domain: "a.example".into(),
                status: "Active".into()
            },
            DomainStatus {
                domain: "m.example".into(),
                status: "FailedCaaForbidden".into()
            },
            DomainStatus {
                domain: "z.example".into(),
                status: "FailedNotVisible".into()
            },
        ]
    );
    assert!(is_provisioning(&status));
}

#[test]
fn every_certificate_status_has_its_crd_spelling() {
    for (compute, crd) in [
        (ComputeStatus::Active, "Active"),
        (ComputeStatus::Provisioning, "Provisioning"),
        (ComputeStatus::ProvisioningFailed, "ProvisioningFailed"),
        (
            ComputeStatus::ProvisioningFailedPermanently,
            "ProvisioningFailedPermanently",
        ),
        (ComputeStatus::RenewalFailed, "RenewalFailed"),
        (ComputeStatus::ManagedCertificateStatusUnspecified, ""),
    ] {
        let status = status_from_certificate(&managed_cert(compute, &[])).unwrap();
        assert_eq!(status.certificate_status.as_deref(), Some(crd));
    }
}

#[test]
fn active_certificate_is_not_provisioning_and_empty_expiry_is_absent() {
    let mut cert = managed_cert(
        ComputeStatus::Active,
        &[("a.example", ComputeDomainStatus::Active)],
    );
    cert.expire_time = Some(String::new());
    let status = status_from_certificate(&cert).unwrap();
    assert!(!is_provisioning(&status));
    assert_eq!(status.expire_time, None);
}

#[test]
fn unknown_compute_value_is_an_error_naming_the_field() {
    let cert = managed_cert(
        ComputeStatus::from("SOMETHING_NEW"),
        &[("a.example", ComputeDomainStatus::Active)],
    );
    let err = status_from_certificate(&cert).unwrap_err();
    assert!(err.to_string().contains("managed.status"), "{err}");
    assert!(err.to_string().contains("SOMETHING_NEW"), "{err}");

    let cert = managed_cert(
        ComputeStatus::Active,
        &[("b.example", ComputeDomainStatus::from("WEIRD"))],
    );
    let err = status_from_certificate(&cert).unwrap_err();
    assert!(
        err.to_string().contains("managed.domainStatus[b.example]"),
        "{err}"
    );
}

#[test]
fn desired_certificate_is_managed_with_sorted_unique_domains() {
    let cert = desired_certificate(
        "mcrt-x",
        "ns",
        "cert",
        &s(&["b.example", "a.example", "b.example"]),
    );
    assert_eq!(cert.name.as_deref(), Some("mcrt-x"));
    assert_eq!(cert.r#type, Some(model::ssl_certificate::Type::Managed));
    assert_eq!(
        cert.managed.as_ref().unwrap().domains,
        s(&["a.example", "b.example"])
    );
    assert!(cert.description.as_deref().unwrap().contains("ns/cert"));
    assert!(domains_match(&cert, &s(&["a.example", "b.example"])));
    assert!(!domains_match(&cert, &s(&["a.example"])));
}

#[test]
fn certificate_prefix_drops_the_domain_hash_only() {
    let uid = "0c1a6b5e-8d7f-4c3b-9a2e-1f0d9c8b7a65";
    let one = crate::translate::namer::managed_certificate(uid, "ns", "cert", &s(&["a.example"]));
    let two = crate::translate::namer::managed_certificate(uid, "ns", "cert", &s(&["b.example"]));
    let other =
        crate::translate::namer::managed_certificate(uid, "ns", "cert2", &s(&["a.example"]));
    assert_ne!(one, two);
    assert_eq!(certificate_prefix(&one), certificate_prefix(&two));
    assert!(two.starts_with(certificate_prefix(&one)));
    assert!(!other.starts_with(certificate_prefix(&one)));
}
