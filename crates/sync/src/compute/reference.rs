//! Resource references: the API returns full URLs
//! (`https://compute.googleapis.com/compute/v1/projects/p/global/backendServices/b`, or the
//! emulator's own base), translation writes `projects/p/global/backendServices/b`, and gcloud may
//! write `global/backendServices/b`. Everything is compared in the `projects/...` form.

/// Normalises a reference to `projects/{project}/...`; other strings are returned unchanged.
///
/// Accepts full URLs with any host and API version, `projects/...` and scope-relative
/// (`global/...`, `zones/...`, `regions/...`) forms.
pub fn normalize(project: &str, value: &str) -> String {
    if value.starts_with("projects/") {
        return value.to_string();
    }
    if value.starts_with("http://") || value.starts_with("https://") {
        if let Some(at) = value.find("/projects/") {
            return value[at + 1..].to_string();
        }
        return value.to_string();
    }
    if value.starts_with("global/") || value.starts_with("zones/") || value.starts_with("regions/")
    {
        return format!("projects/{project}/{value}");
    }
    value.to_string()
}

/// The last path segment: the name of the referenced resource (`.../urlMaps/um` -> `um`).
pub fn last_segment(value: &str) -> &str {
    value.rsplit('/').next().unwrap_or(value)
}

/// `projects/{project}/global/{collection}/{name}`.
pub fn global(project: &str, collection: &str, name: &str) -> String {
    format!("projects/{project}/global/{collection}/{name}")
}

/// `projects/{project}/zones/{zone}/{collection}/{name}`.
pub fn zonal(project: &str, zone: &str, collection: &str, name: &str) -> String {
    format!("projects/{project}/zones/{zone}/{collection}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_every_form() {
        let want = "projects/p/global/backendServices/b";
        assert_eq!(
            normalize(
                "p",
                "https://compute.googleapis.com/compute/v1/projects/p/global/backendServices/b"
            ),
            want
        );
        assert_eq!(
            normalize(
                "p",
                "http://127.0.0.1:9/compute/v1/projects/p/global/backendServices/b"
            ),
            want
        );
        assert_eq!(normalize("p", "global/backendServices/b"), want);
        assert_eq!(normalize("p", want), want);
        assert_eq!(normalize("p", "/foo/*"), "/foo/*");
        assert_eq!(last_segment(want), "b");
    }
}
