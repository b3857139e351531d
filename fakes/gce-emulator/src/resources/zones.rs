//! `zones`: the fixed list of zones the emulator serves (read-only, as in the real API).

use serde_json::{json, Value};

/// Zone names served (`us-central1-a` ...). Zonal resources may live only in these.
pub const ZONES: &[&str] = &[
    "us-central1-a",
    "us-central1-b",
    "us-central1-c",
    "us-central1-f",
    "us-east1-b",
    "us-east1-c",
    "us-east1-d",
    "europe-west1-b",
    "europe-west1-c",
    "europe-west1-d",
];

/// Whether `zone` is served.
pub fn exists(zone: &str) -> bool {
    ZONES.contains(&zone)
}

/// The region of a zone (`us-central1-a` -> `us-central1`).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map(|(r, _)| r).unwrap_or(zone)
}

/// Regions of the served zones, sorted and unique.
pub fn regions() -> Vec<&'static str> {
    let mut r: Vec<&str> = ZONES.iter().map(|z| region_of(z)).collect();
    r.dedup();
    r
}

/// The wire JSON of one zone (`compute#zone`); `base` is the API base URL.
pub fn zone_json(base: &str, project: &str, zone: &str) -> Value {
    let index = ZONES.iter().position(|z| *z == zone).unwrap_or(0) as u64;
    json!({
        "kind": "compute#zone",
        "id": (2000 + index).to_string(),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": zone,
        "description": zone,
        "status": "UP",
        "region": format!("{base}projects/{project}/regions/{}", region_of(zone)),
        "selfLink": format!("{base}projects/{project}/zones/{zone}"),
        "availableCpuPlatforms": ["Intel Cascade Lake", "AMD Milan"],
        "supportsPzs": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_of_zones() {
        assert_eq!(region_of("europe-west1-b"), "europe-west1");
        assert_eq!(regions(), vec!["us-central1", "us-east1", "europe-west1"]);
    }
}
