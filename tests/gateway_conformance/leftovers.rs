//! What the Gateway controller leaves behind: the test's last step deletes the routes and the
//! Gateway and expects none of these.

use anyhow::Result;

use super::support::compute::GLOBAL;
use super::support::*;

/// Every resource of the Gateway controller (names starting `gkegw1`) left in the emulator:
/// Compute collections, NEGs and Network Services tlsRoutes.
pub fn gateway_resources(sys: &System) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for c in GLOBAL {
        out.extend(
            sys.compute_names(c)?
                .into_iter()
                .map(|n| format!("{c}/{n}")),
        );
    }
    out.extend(
        sys.neg_names()?
            .into_iter()
            .map(|n| format!("networkEndpointGroups/{n}")),
    );
    let routes = sys.compute_get(&format!(
        "networkservices/v1/projects/{PROJECT}/locations/global/tlsRoutes"
    ))?;
    out.extend(
        routes["tlsRoutes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(|n| format!("tlsRoutes/{n}"))),
    );
    out.retain(|n| {
        n.split('/')
            .next_back()
            .is_some_and(|x| x.starts_with("gkegw1"))
    });
    Ok(out)
}
