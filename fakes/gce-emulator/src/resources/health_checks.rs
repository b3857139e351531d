//! `healthChecks` and `regionHealthChecks`: health checks of types HTTP, HTTPS, HTTP2, TCP, SSL,
//! GRPC and GRPC_WITH_TLS (`grpcServiceName` ASCII only, as the reference says), with the
//! defaults the Compute reference documents (5 s interval and timeout, thresholds 2, port 80 or
//! 443, request path `/`, proxy header NONE). Both scopes are the same resource, validated the
//! same way (Compute API v1 reference, `healthChecks` and `regionHealthChecks`); regional
//! backend services of INTERNAL_MANAGED and EXTERNAL_MANAGED load balancers must use a regional
//! one in their own region (`resources::reference_scopes`).

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// `type` values and the sub-object each uses.
const TYPES: &[(&str, &str)] = &[
    ("HTTP", "httpHealthCheck"),
    ("HTTPS", "httpsHealthCheck"),
    ("HTTP2", "http2HealthCheck"),
    ("TCP", "tcpHealthCheck"),
    ("SSL", "sslHealthCheck"),
    ("GRPC", "grpcHealthCheck"),
    ("GRPC_WITH_TLS", "grpcTlsHealthCheck"),
];

/// Validates a health check of either scope; `timeoutSec` must not exceed `checkIntervalSec`.
pub fn prepare(_cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    let names: Vec<&str> = TYPES.iter().map(|(t, _)| *t).collect();
    // A client may omit `type` and send one sub-object: infer it, as the API does for legacy callers.
    if validate::opt_str(r, "resource", "type")?.is_none() {
        if let Some((t, _)) = TYPES.iter().find(|(_, sub)| r.contains_key(*sub)) {
            r.insert("type".into(), (*t).into());
        }
    }
    validate::enum_field(r, "resource", "type", &names, None)?;
    let ty = validate::req_str(r, "resource", "type")?.to_string();
    let interval =
        validate::int_field(r, "resource", "checkIntervalSec", 1, 300, Some(5))?.unwrap_or(5);
    let timeout = validate::int_field(r, "resource", "timeoutSec", 1, 300, Some(5))?.unwrap_or(5);
    if timeout > interval {
        return Err(ApiError::invalid_value(
            "resource.timeoutSec",
            &timeout.to_string(),
            "TimeoutSec should be less than or equal to checkIntervalSec.",
        ));
    }
    validate::int_field(r, "resource", "healthyThreshold", 1, 10, Some(2))?;
    validate::int_field(r, "resource", "unhealthyThreshold", 1, 10, Some(2))?;
    for (t, sub) in TYPES {
        if *t != ty && r.contains_key(*sub) {
            return Err(ApiError::invalid_value(
                &format!("resource.{sub}"),
                "",
                &format!("A health check of type {ty} cannot carry {sub}."),
            ));
        }
    }
    let sub = TYPES
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, s)| *s)
        .unwrap_or("httpHealthCheck");
    let prefix = format!("resource.{sub}");
    let o = validate::object_mut(r, "resource", sub, true)?.expect("created");
    validate::enum_field(
        o,
        &prefix,
        "portSpecification",
        &["USE_FIXED_PORT", "USE_NAMED_PORT", "USE_SERVING_PORT"],
        None,
    )?;
    let serving = validate::opt_str(o, &prefix, "portSpecification")? == Some("USE_SERVING_PORT");
    let default_port = match ty.as_str() {
        "HTTPS" | "HTTP2" | "SSL" | "GRPC_WITH_TLS" => 443,
        _ => 80,
    };
    validate::int_field(
        o,
        &prefix,
        "port",
        1,
        65535,
        (!serving).then_some(default_port),
    )?;
    validate::opt_str(o, &prefix, "portName")?;
    if matches!(ty.as_str(), "HTTP" | "HTTPS" | "HTTP2" | "TCP" | "SSL") {
        validate::enum_field(
            o,
            &prefix,
            "proxyHeader",
            &["NONE", "PROXY_V1"],
            Some("NONE"),
        )?;
    }
    if matches!(ty.as_str(), "HTTP" | "HTTPS" | "HTTP2") {
        let path = validate::opt_str(o, &prefix, "requestPath")?
            .unwrap_or("/")
            .to_string();
        if !path.starts_with('/') {
            return Err(ApiError::invalid_value(
                &format!("{prefix}.requestPath"),
                &path,
                "The request path must start with '/'.",
            ));
        }
        o.insert("requestPath".into(), path.into());
        validate::opt_str(o, &prefix, "host")?;
        validate::opt_str(o, &prefix, "response")?;
    }
    if matches!(ty.as_str(), "GRPC" | "GRPC_WITH_TLS") {
        if let Some(name) = validate::opt_str(o, &prefix, "grpcServiceName")? {
            if !name.is_ascii() {
                return Err(ApiError::invalid_value(
                    &format!("{prefix}.grpcServiceName"),
                    name,
                    "The gRPC service name can only be ASCII.",
                ));
            }
        }
    }
    validate::opt_str(r, "resource", "description")?;
    if let Some(lc) = validate::object_mut(r, "resource", "logConfig", false)? {
        validate::bool_field(lc, "resource.logConfig", "enable", None)?;
    }
    Ok(())
}
