//! PURE: the reserved regional address of `kubernetes.io/ingress.regional-static-ip-name`
//! (inventory §1: a regional Address; GKE's documentation reserves an internal one with
//! `--purpose=SHARED_LOADBALANCER_VIP`, since the HTTP and HTTPS forwarding rules share it).
//!
//! [`check`] takes what the sync read (the regional address of that name, whether a global
//! address of that name exists) and gives the IP and network tier the forwarding rules use, or
//! the problem with the gcloud command that fixes it:
//! - no regional address of that name (a global one or none): reserve it in the region;
//! - an INTERNAL address for the regional external class, or an EXTERNAL one for the internal
//!   class: reserve one of the right type (under another name, or after deleting this one).

use google_cloud_compute_v1::model;

use super::annotations::REGIONAL_STATIC_IP_NAME;
use super::regional::RegionalClass;
use super::TranslateConfig;

/// The address the forwarding rules of a regional load balancer use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedAddress {
    /// The IPv4 address.
    pub ip: String,
    /// `networkTier` of an EXTERNAL address (`PREMIUM` / `STANDARD`), which a regional
    /// external forwarding rule must share; `None` for INTERNAL addresses.
    pub network_tier: Option<String>,
}

/// What is wrong with the named address: a sentence, and the command that fixes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressProblem {
    /// What was found, naming the annotation, the address and the region.
    pub problem: String,
    /// A gcloud command that makes the next sync succeed.
    pub command: String,
}

/// Checks the address `name` of `region` for a `kind` load balancer: `regional` is the
/// regional address of that name (`None`: there is none), `global_exists` whether a global
/// address of that name exists; `subnet`: the subnetwork an internal address is reserved in
/// (`--subnetwork`, else the network's subnet of the region; `None` if unknown).
///
/// # Errors
/// [`AddressProblem`] for a missing, global-only or wrong-type address, or one without an IP.
pub fn check(
    config: &TranslateConfig,
    kind: RegionalClass,
    region: &str,
    name: &str,
    regional: Option<&model::Address>,
    global_exists: bool,
    subnet: Option<&str>,
) -> Result<ResolvedAddress, AddressProblem> {
    let wanted = kind.address_type();
    let create = create_command(config, kind, region, name, subnet);
    let Some(address) = regional else {
        let problem = if global_exists {
            format!("annotation {REGIONAL_STATIC_IP_NAME}: {name:?} is a global address, but the {} needs a regional {wanted} address of region {region} (kubernetes.io/ingress.global-static-ip-name is for the global external class)", kind.load_balancer())
        } else {
            format!("annotation {REGIONAL_STATIC_IP_NAME}: no address {name:?} in region {region}; the {} needs a reserved regional {wanted} address", kind.load_balancer())
        };
        return Err(AddressProblem {
            problem,
            command: create,
        });
    };
    let actual = address
        .address_type
        .as_ref()
        .and_then(|t| t.name())
        .unwrap_or("EXTERNAL");
    if actual != wanted {
        return Err(AddressProblem {
            problem: format!("annotation {REGIONAL_STATIC_IP_NAME}: address {name:?} of region {region} is {actual}, but the {} needs an {wanted} address; delete it and reserve an {wanted} one (or name another address)", kind.load_balancer()),
            command: format!(
                "gcloud compute addresses delete {name} --region={region} --quiet && {create}"
            ),
        });
    }
    let ip = address.address.clone().filter(|a| !a.is_empty()).ok_or_else(|| AddressProblem {
        problem: format!("annotation {REGIONAL_STATIC_IP_NAME}: address {name:?} of region {region} has no IP yet"),
        command: format!("gcloud compute addresses describe {name} --region={region}"),
    })?;
    let network_tier = (kind == RegionalClass::External).then(|| {
        address
            .network_tier
            .as_ref()
            .and_then(|t| t.name())
            .unwrap_or(super::regional::DEFAULT_NETWORK_TIER)
            .to_string()
    });
    Ok(ResolvedAddress { ip, network_tier })
}

/// The gcloud command that reserves the address `name` for a `kind` load balancer.
fn create_command(
    config: &TranslateConfig,
    kind: RegionalClass,
    region: &str,
    name: &str,
    subnet: Option<&str>,
) -> String {
    match kind {
        RegionalClass::External => format!(
            "gcloud compute addresses create {name} --region={region} --network-tier={}",
            super::regional::DEFAULT_NETWORK_TIER
        ),
        RegionalClass::Internal => {
            let subnet = subnet.unwrap_or("SUBNET");
            let subnet = if config.network_project == config.project {
                subnet.to_string()
            } else {
                format!(
                    "projects/{}/regions/{region}/subnetworks/{subnet}",
                    config.network_project
                )
            };
            format!("gcloud compute addresses create {name} --region={region} --subnet={subnet} --purpose=SHARED_LOADBALANCER_VIP")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TranslateConfig {
        TranslateConfig::new("p", "default", &["us-central1-a"], "c", "uid")
    }

    fn address(kind: &str, ip: &str) -> model::Address {
        model::Address::new()
            .set_name("ip1")
            .set_address(ip)
            .set_address_type(model::address::AddressType::from(kind))
    }

    #[test]
    fn the_right_type_gives_its_ip_and_tier() {
        let ext = address("EXTERNAL", "127.130.0.9")
            .set_network_tier(model::address::NetworkTier::from("STANDARD"));
        let got = check(
            &config(),
            RegionalClass::External,
            "r",
            "ip1",
            Some(&ext),
            false,
            None,
        );
        assert_eq!(
            got,
            Ok(ResolvedAddress {
                ip: "127.130.0.9".into(),
                network_tier: Some("STANDARD".into())
            })
        );
        let int = address("INTERNAL", "10.1.2.9");
        let got = check(
            &config(),
            RegionalClass::Internal,
            "r",
            "ip1",
            Some(&int),
            false,
            None,
        );
        assert_eq!(got.unwrap().ip, "10.1.2.9");
    }

    #[test]
    fn missing_global_and_wrong_type_addresses_say_how_to_fix_them() {
        let c = config();
        let missing = check(
            &c,
            RegionalClass::Internal,
            "r",
            "ip1",
            None,
            false,
            Some("nodes"),
        )
        .unwrap_err();
        assert!(
            missing.problem.contains("no address \"ip1\" in region r"),
            "{missing:?}"
        );
        assert_eq!(missing.command, "gcloud compute addresses create ip1 --region=r --subnet=nodes --purpose=SHARED_LOADBALANCER_VIP");
        let global = check(&c, RegionalClass::External, "r", "ip1", None, true, None).unwrap_err();
        assert!(global.problem.contains("is a global address"), "{global:?}");
        assert_eq!(
            global.command,
            "gcloud compute addresses create ip1 --region=r --network-tier=PREMIUM"
        );
        let int = address("INTERNAL", "10.1.2.9");
        let wrong = check(
            &c,
            RegionalClass::External,
            "r",
            "ip1",
            Some(&int),
            false,
            None,
        )
        .unwrap_err();
        assert!(wrong.problem.contains("is INTERNAL, but the regional external Application Load Balancer needs an EXTERNAL address"), "{wrong:?}");
        assert!(wrong.command.starts_with("gcloud compute addresses delete ip1 --region=r --quiet && gcloud compute addresses create ip1"), "{wrong:?}");
        assert!(wrong.problem.contains(REGIONAL_STATIC_IP_NAME));
    }
}
