//! `sslPolicies`: TLS profile and minimum version for target HTTPS proxies.

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Validates an SSL policy: `profile` (default COMPATIBLE), `minTlsVersion` (default TLS_1_0),
/// `customFeatures` only with the CUSTOM profile; `enabledFeatures` is derived.
pub fn prepare(_cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    validate::enum_field(
        r,
        "resource",
        "profile",
        &["COMPATIBLE", "MODERN", "RESTRICTED", "CUSTOM"],
        Some("COMPATIBLE"),
    )?;
    validate::enum_field(
        r,
        "resource",
        "minTlsVersion",
        &["TLS_1_0", "TLS_1_1", "TLS_1_2", "TLS_1_3"],
        Some("TLS_1_0"),
    )?;
    let custom = validate::str_list(r, "resource", "customFeatures")?;
    let profile = validate::opt_str(r, "resource", "profile")?
        .unwrap_or("COMPATIBLE")
        .to_string();
    if profile == "CUSTOM" && custom.is_empty() {
        return Err(ApiError::required("resource.customFeatures"));
    }
    if profile != "CUSTOM" && !custom.is_empty() {
        return Err(ApiError::invalid_value(
            "resource.customFeatures",
            &custom.join(","),
            "Custom features may only be set with the CUSTOM profile.",
        ));
    }
    let enabled: Vec<String> = if profile == "CUSTOM" {
        custom
    } else {
        [
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    r.insert("enabledFeatures".into(), enabled.into());
    Ok(())
}
