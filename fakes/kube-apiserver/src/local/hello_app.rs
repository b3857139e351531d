//! PURE: what GKE's `hello-app` sample image answers (kubernetes-engine-samples
//! `quickstarts/hello-app/main.go`, used by GKE's Ingress and load-balancing tutorials):
//! every path, `200`, `text/plain; charset=utf-8`, the body
//! `Hello, world!\nVersion: 1.0.0\nHostname: <pod name>\n` (the container's hostname is its
//! Pod's name). Image tag `1.0` prints `1.0.0`, `2.0` prints `2.0.0`.

/// The `Version:` value the image of tag `tag` prints: `X.Y` becomes `X.Y.0`, `X.Y.Z` stays,
/// anything else (no tag, `latest`, a digest) is `1.0.0`.
pub fn version(tag: Option<&str>) -> String {
    let tag = tag.unwrap_or_default().trim_start_matches('v');
    let parts: Vec<&str> = tag.split('.').collect();
    let numeric = !tag.is_empty() && parts.iter().all(|p| p.parse::<u32>().is_ok());
    match parts.len() {
        2 if numeric => format!("{tag}.0"),
        3 if numeric => tag.to_string(),
        1 if numeric => format!("{tag}.0.0"),
        _ => "1.0.0".to_string(),
    }
}

/// The response body for a Pod named `hostname`.
pub fn body(version: &str, hostname: &str) -> String {
    format!("Hello, world!\nVersion: {version}\nHostname: {hostname}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_the_published_image() {
        assert_eq!(
            body(&version(Some("1.0")), "web-7d4b9c-x2x9z"),
            "Hello, world!\nVersion: 1.0.0\nHostname: web-7d4b9c-x2x9z\n"
        );
        assert_eq!(version(Some("2.0")), "2.0.0");
        assert_eq!(version(Some("1.2.3")), "1.2.3");
        assert_eq!(version(Some("latest")), "1.0.0");
        assert_eq!(version(None), "1.0.0");
    }
}
