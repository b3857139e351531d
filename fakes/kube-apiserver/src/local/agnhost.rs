//! PURE: what the Kubernetes e2e image agnhost answers in the modes GKE's and Kubernetes'
//! documentation use (kubernetes/test/images/agnhost `netexec` and `serve-hostname`):
//! - `netexec`: `/hostname` the Pod name, `/echo?msg=M` the message, `/healthz` `200`, `/`
//!   `NOW: <time>`; other paths `404`.
//! - `serve-hostname`: the Pod name (no newline) on every path.

use http::StatusCode;

/// Status and body of a `netexec` answer to `path` with the `msg` query parameter.
pub fn netexec(path: &str, msg: Option<&str>, hostname: &str, now: &str) -> (StatusCode, String) {
    match path {
        "/hostname" => (StatusCode::OK, hostname.to_string()),
        "/echo" => (StatusCode::OK, msg.unwrap_or_default().to_string()),
        "/healthz" => (StatusCode::OK, String::new()),
        "/" => (StatusCode::OK, format!("NOW: {now}")),
        _ => (StatusCode::NOT_FOUND, "404 page not found\n".to_string()),
    }
}

/// The body of a `serve-hostname` answer.
pub fn serve_hostname(hostname: &str) -> String {
    hostname.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netexec_endpoints() {
        assert_eq!(
            netexec("/hostname", None, "p", "t"),
            (StatusCode::OK, "p".into())
        );
        assert_eq!(
            netexec("/echo", Some("hi"), "p", "t"),
            (StatusCode::OK, "hi".into())
        );
        assert_eq!(netexec("/", None, "p", "t").1, "NOW: t");
        assert_eq!(netexec("/nope", None, "p", "t").0, StatusCode::NOT_FOUND);
        assert_eq!(serve_hostname("p"), "p");
    }
}
