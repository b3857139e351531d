//! Gateway API v1.5.1 standard-channel types (`gateway.networking.k8s.io/v1`), generated with
//! kube-rs's kopium 0.24.1 from the CRDs in `crds/gateway-api/` (as the kube-rs `gateway-api`
//! crate does; its 0.22 release is built on kube 4 / k8s-openapi 0.28, this project on kube 5 /
//! k8s-openapi 0.29). Regenerate with the kopium command at the top of each file;
//! never edit by hand. (A test that regenerates and diffs is still to come: issue #19.)
#![allow(missing_docs, clippy::all)]

#[rustfmt::skip]
pub mod gatewayclasses;
#[rustfmt::skip]
pub mod gateways;
#[rustfmt::skip]
pub mod httproutes;
#[rustfmt::skip]
pub mod referencegrants;
#[rustfmt::skip]
pub mod tlsroutes;
