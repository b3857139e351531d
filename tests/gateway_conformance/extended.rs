//! Cases of tests/gateway_conformance_e2e.rs for extended features: TLSRoute Terminate,
//! RequestMirror, request and backend request timeouts, backendRef request header filters and
//! ReferenceGrant (kubernetes-sigs/gateway-api `conformance/tests/{tlsroute-terminate-simple-
//! same-namespace, tlsroute-listener-terminate-supported-kinds, httproute-request-mirror,
//! httproute-timeout-request, httproute-timeout-backend-request,
//! httproute-request-header-modifier-backend, httproute-reference-grant,
//! httproute-invalid-reference-grant}`, manifests and expected answers ported).
//!
//! Deviations: the echo backends delay with `?sleep_ms=1000` where upstream's take `?delay=1s`;
//! upstream's HTTPRouteTimeoutBackendRequest requests `/disable-backend-timeout`, a path no rule
//! of its manifest matches (the rule is `/disabled-backend-timeout`), so the port requests the
//! rule's path;
//! a mirrored request is observed through the echo body's `pathRequests` (how many requests
//! for the path the Pod answered, read through the route `mirror-check`) where upstream reads
//! the mirror Pod's log.

use std::cell::Cell;

use anyhow::{ensure, Result};

use super::tls::tls_answer;
use super::{Answer, Case, Cx, NS};

/// The request header `name` the echo backend received (case-insensitive), its values joined
/// with `,` as upstream's expected requests write them (the echo body joins them with `, `).
fn received(a: &Answer, name: &str) -> Option<String> {
    let (_, v) = a.body["headers"]
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))?;
    Some(match v {
        serde_json::Value::Array(vs) => vs
            .iter()
            .map(|x| x.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(","),
        other => other
            .as_str()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(","),
    })
}

/// `HTTPRouteBackendRequestHeaderModifier`'s requests (upstream reuses
/// HTTPRouteRequestHeaderModifier's test table): (path, headers sent, headers expected with
/// their values, headers expected absent).
type HeaderCase = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

const BACKEND_HEADER_CASES: &[HeaderCase] = &[
    (
        "/set",
        &[("Some-Other-Header", "val")],
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &[],
    ),
    (
        "/set",
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Set", "some-other-value"),
        ],
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &[],
    ),
    (
        "/add",
        &[("Some-Other-Header", "val")],
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Add", "add-appends-values"),
        ],
        &[],
    ),
    (
        "/add",
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Add", "some-other-value"),
        ],
        &[
            ("Some-Other-Header", "val"),
            ("X-Header-Add", "some-other-value,add-appends-values"),
        ],
        &[],
    ),
    (
        "/remove",
        &[("X-Header-Remove", "val")],
        &[],
        &["X-Header-Remove"],
    ),
    (
        "/multiple",
        &[
            ("X-Header-Set-2", "set-val-2"),
            ("X-Header-Add-2", "add-val-2"),
            ("X-Header-Remove-2", "remove-val-2"),
            ("Another-Header", "another-header-val"),
        ],
        &[
            ("X-Header-Set-1", "header-set-1"),
            ("X-Header-Set-2", "header-set-2"),
            ("X-Header-Add-1", "header-add-1"),
            ("X-Header-Add-2", "add-val-2,header-add-2"),
            ("X-Header-Add-3", "header-add-3"),
            ("Another-Header", "another-header-val"),
        ],
        &["X-Header-Remove-1", "X-Header-Remove-2"],
    ),
    (
        "/case-insensitivity",
        &[
            ("x-header-set", "original-val-set"),
            ("x-header-add", "original-val-add"),
            ("x-header-remove", "original-val-remove"),
            ("Another-Header", "another-header-val"),
        ],
        &[
            ("X-Header-Set", "header-set"),
            ("X-Header-Add", "original-val-add,header-add"),
            ("Another-Header", "another-header-val"),
        ],
        &["X-Header-Remove"],
    ),
];

/// Sends `GET <path>` through the mirroring route on `host` until infra-backend-v1 answers
/// (`headers` sent, `check` on v1's answer), then reads through `mirror-check.example` how many
/// requests for `path` infra-backend-v2 answered: more than the reads themselves means the
/// mirror sent v2 the requests v1 answered.
fn expect_mirrored(
    cx: &Cx,
    path: &str,
    headers: &[(&str, &str)],
    check: impl Fn(&super::Answer) -> Result<()>,
) -> Result<()> {
    let a = cx.expect_backend("GET", "mirror.example", path, headers, "infra-backend-v1")?;
    check(&a)?;
    let reads = Cell::new(0u64);
    cx.expect("GET", "mirror-check.example", path, &[], |a| {
        ensure!(a.pod().starts_with("infra-backend-v2-"), "got {} from {:?}", a.status, a.pod());
        reads.set(reads.get() + 1);
        let answered = a.body["pathRequests"].as_u64().unwrap_or_default();
        ensure!(answered > reads.get(), "infra-backend-v2 answered {answered} requests for {path}, all of them this check's {}: nothing mirrored", reads.get());
        Ok(())
    })
    .map(drop)
}

/// The extended cases, run after the core ones.
pub const CASES: &[Case] = &[
    (
        "TLSRouteListenerTerminateSupportedKinds",
        &["Gateway", "TLSRoute", "TLSRouteModeTerminate"],
        |cx| {
            super::wait_for(
                "listener tls-terminate: supportedKinds TLSRoute, Accepted",
                super::DEADLINE,
                || {
                    let gw = cx.sys.get_json(&["gateway", "-n", NS, "same-namespace"])?;
                    let l = gw["status"]["listeners"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|l| l["name"] == "tls-terminate")
                        .cloned()
                        .unwrap_or_default();
                    let kinds_ok = l["supportedKinds"].as_array().is_some_and(|k| {
                        k.len() == 1
                            && k[0]["kind"] == "TLSRoute"
                            && k[0]["group"] == "gateway.networking.k8s.io"
                    });
                    let accepted = super::condition(&l["conditions"], "Accepted")
                        .is_some_and(|c| c == ("True".into(), "Accepted".into()));
                    Ok((kinds_ok && accepted).then_some(()))
                },
            )
        },
    ),
    (
        "TLSRouteTerminateSimpleSameNamespace",
        &["Gateway", "TLSRoute", "TLSRouteModeTerminate"],
        |cx| {
            cx.expect_route_condition(
                "tlsroute",
                "tlsroute-terminated-test",
                "Accepted",
                "True",
                "Accepted",
            )?;
            // openssl verifies the listener's certificate (chain and name); the backend serves
            // plain HTTP on port 3000, so its answer proves it received the decrypted bytes.
            let (session, pod) = tls_answer(&cx.terminate, "tls.example.com", Some(cx.ca.path()))?;
            ensure!(
                session.verified,
                "the listener's certificate did not verify: {}",
                session.out
            );
            let san = session.san.unwrap_or_default();
            ensure!(
                san.contains("DNS:tls.example.com"),
                "the client saw {san}, not the listener's certificate"
            );
            ensure!(pod == "tcp-backend-1", "tls.example.com reached {pod}");
            Ok(())
        },
    ),
    (
        "HTTPRouteRequestMirror",
        &["Gateway", "HTTPRoute", "HTTPRouteRequestMirror"],
        |cx| {
            cx.expect_route_condition(
                "httproute",
                "request-mirror",
                "Accepted",
                "True",
                "Accepted",
            )?;
            expect_mirrored(cx, "/mirror", &[], |_| Ok(()))?;
            expect_mirrored(
                cx,
                "/mirror-and-modify-headers",
                &[
                    ("X-Header-Remove", "remove-val"),
                    ("X-Header-Add-Append", "append-val-1"),
                ],
                |a| {
                    let h = &a.body["headers"];
                    let get = |n: &str| {
                        h.as_object().and_then(|m| {
                            m.iter()
                                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                                .map(|(_, v)| v.to_string())
                        })
                    };
                    ensure!(
                        get("x-header-set").is_some_and(|v| v.contains("set-overwrites-values")),
                        "set: {h}"
                    );
                    ensure!(
                        get("x-header-add").is_some_and(|v| v.contains("header-val-1")),
                        "add: {h}"
                    );
                    ensure!(
                        get("x-header-add-append").is_some_and(
                            |v| v.contains("append-val-1") && v.contains("header-val-2")
                        ),
                        "append: {h}"
                    );
                    ensure!(get("x-header-remove").is_none(), "remove: {h}");
                    Ok(())
                },
            )
        },
    ),
    (
        "HTTPRouteTimeoutRequest",
        &["Gateway", "HTTPRoute", "HTTPRouteRequestTimeout"],
        |cx| {
            let h = "timeout.example";
            cx.expect_backend("GET", h, "/request-timeout", &[], "infra-backend-v1")?;
            cx.expect_status(h, "/request-timeout?sleep_ms=1000", 504)?;
            cx.expect_backend(
                "GET",
                h,
                "/disable-request-timeout?sleep_ms=1000",
                &[],
                "infra-backend-v1",
            )
            .map(drop)
        },
    ),
    (
        "HTTPRouteBackendRequestHeaderModifier",
        &[
            "Gateway",
            "HTTPRoute",
            "HTTPRouteBackendRequestHeaderModification",
        ],
        |cx| {
            let h = "backend-header-mod.example";
            for (path, sent, want, absent) in BACKEND_HEADER_CASES {
                cx.expect("GET", h, path, sent, |a| {
                    ensure!(
                        a.pod().starts_with("infra-backend-v1-"),
                        "{path}: got {} from {:?}",
                        a.status,
                        a.pod()
                    );
                    for (name, value) in *want {
                        let got = received(a, name);
                        ensure!(
                            got.as_deref() == Some(*value),
                            "{path}: {name} is {got:?}, want {value:?}: {}",
                            a.body["headers"]
                        );
                    }
                    for name in *absent {
                        ensure!(
                            received(a, name).is_none(),
                            "{path}: {name} still sent: {}",
                            a.body["headers"]
                        );
                    }
                    Ok(())
                })?;
            }
            Ok(())
        },
    ),
    (
        "HTTPRouteTimeoutBackendRequest",
        &["Gateway", "HTTPRoute", "HTTPRouteBackendTimeout"],
        |cx| {
            let h = "backend-timeout.example";
            cx.expect_backend("GET", h, "/backend-timeout", &[], "infra-backend-v1")?;
            cx.expect_status(h, "/backend-timeout?sleep_ms=1000", 504)?;
            cx.expect_backend(
                "GET",
                h,
                "/disabled-backend-timeout?sleep_ms=1000",
                &[],
                "infra-backend-v1",
            )
            .map(drop)
        },
    ),
    (
        "HTTPRouteReferenceGrant",
        &["Gateway", "HTTPRoute", "ReferenceGrant"],
        |cx| {
            cx.expect_route_condition(
                "httproute",
                "reference-grant",
                "ResolvedRefs",
                "True",
                "ResolvedRefs",
            )?;
            cx.expect_backend("GET", "reference-grant.example", "/", &[], "web-backend")?;
            cx.sys.kubectl_ok(&[
                "delete",
                "referencegrant",
                "-n",
                super::WEB_NS,
                "reference-grant",
            ])?;
            cx.expect_status("reference-grant.example", "/", 500)
                .map(drop)
        },
    ),
    (
        "HTTPRouteInvalidReferenceGrant",
        &["Gateway", "HTTPRoute", "ReferenceGrant"],
        |cx| {
            // Seven grants that each miss by one field remain; none permits the reference.
            cx.expect_route_condition(
                "httproute",
                "reference-grant",
                "ResolvedRefs",
                "False",
                "RefNotPermitted",
            )?;
            cx.expect_status("reference-grant.example", "/", 500)
                .map(drop)
        },
    ),
];
