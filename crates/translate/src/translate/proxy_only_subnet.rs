//! PURE: the preconditions of an internal load balancer, and the gcloud commands that fix them
//! (docs/internal-load-balancers.md; "Proxy-only subnets for Envoy-based load balancers").
//!
//! 1. The region must have an ACTIVE proxy-only subnet (`purpose: REGIONAL_MANAGED_PROXY`) in
//!    the cluster's network: the Envoy proxies take their addresses from it, and the API refuses
//!    an INTERNAL_MANAGED forwarding rule without one. Missing: nothing is created, and a
//!    Warning carries `gcloud compute networks subnets create ... --purpose=REGIONAL_MANAGED_PROXY
//!    --role=ACTIVE`.
//! 2. A firewall rule must admit that subnet's range to the Pods: proxied connections come from
//!    it. Missing: the load balancer is built (the rule may be on its way, or admitted by a rule
//!    this check cannot read, e.g. by service account), and a Warning carries
//!    `gcloud compute firewall-rules create ... --source-ranges=<range>`.
//!
//! On a Shared VPC cluster the network, its subnets and firewall rules are the host project's:
//! the commands carry `--project=<host>` (run by the host project's admin), as the firewall hint.

use google_cloud_compute_v1::model;

use super::{cidr, TranslateConfig};

/// `purpose` of a proxy-only subnet of the regional Envoy-based load balancers.
pub const REGIONAL_MANAGED_PROXY: &str = "REGIONAL_MANAGED_PROXY";
/// Range the fix suggests for a new proxy-only subnet (Google's documentation example; any free
/// /23 or larger range of the network works).
pub const SUGGESTED_RANGE: &str = "10.129.0.0/23";

/// The ACTIVE proxy-only subnet of `network` (name, not URL) among `subnets` (one region's).
pub fn active_proxy_only<'a>(
    subnets: &'a [model::Subnetwork],
    network: &str,
) -> Option<&'a model::Subnetwork> {
    subnets.iter().find(|s| {
        s.purpose.as_ref().and_then(|p| p.name()) == Some(REGIONAL_MANAGED_PROXY)
            && s.role.as_ref().and_then(|r| r.name()) == Some("ACTIVE")
            && s.network.as_deref().map(last_segment) == Some(network)
    })
}

/// Whether enabled INGRESS allow rules of `network` admit TCP from all of `range` on each of
/// `ports` to instances with `target_tags` (a rule without target tags applies to every
/// instance); each port may be admitted by a different rule.
pub fn firewall_admits(
    firewalls: &[model::Firewall],
    network: &str,
    range: &str,
    target_tags: &[String],
    ports: &[u16],
) -> bool {
    let admitting: Vec<&model::Firewall> = firewalls
        .iter()
        .filter(|f| rule_admits_range(f, network, range, target_tags))
        .collect();
    let on = |f: &model::Firewall, port: u16| {
        f.allowed.iter().any(|a| {
            let tcp = a
                .ip_protocol
                .as_deref()
                .is_some_and(|p| p == "tcp" || p == "all" || p == "6");
            tcp && (a.ports.is_empty()
                || a.ports.iter().any(|r| {
                    let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                    match (lo.parse::<u16>(), hi.parse::<u16>()) {
                        (Ok(lo), Ok(hi)) => (lo..=hi).contains(&port),
                        _ => false,
                    }
                }))
        })
    };
    !admitting.is_empty() && ports.iter().all(|p| admitting.iter().any(|f| on(f, *p)))
}

fn rule_admits_range(
    f: &model::Firewall,
    network: &str,
    range: &str,
    target_tags: &[String],
) -> bool {
    let Some(range) = cidr::parse_v4(range) else {
        return false;
    };
    {
        let ingress = f
            .direction
            .as_ref()
            .and_then(|d| d.name())
            .is_none_or(|d| d == "INGRESS");
        let tcp = f.allowed.iter().any(|a| {
            a.ip_protocol
                .as_deref()
                .is_some_and(|p| p == "tcp" || p == "all" || p == "6")
        });
        let targets = f.target_tags.is_empty()
            || f.target_tags.iter().any(|t| target_tags.contains(t))
            || target_tags.is_empty();
        ingress
            && tcp
            && targets
            && f.disabled != Some(true)
            && f.network.as_deref().map(last_segment) == Some(network)
            && f.source_ranges
                .iter()
                .filter_map(|r| cidr::parse_v4(r))
                .any(|outer| cidr::covers(&outer, &range))
    }
}

/// The command that creates the missing proxy-only subnet.
pub fn subnet_command(config: &TranslateConfig, region: &str) -> String {
    format!(
        "gcloud compute networks subnets create proxy-only-{region} --purpose={REGIONAL_MANAGED_PROXY} --role=ACTIVE --region={region} --network={} --range={SUGGESTED_RANGE}{}",
        config.network,
        project_flag(config)
    )
}

/// The command that admits the proxy-only `range` to the Pods' `ports`.
pub fn firewall_command(
    config: &TranslateConfig,
    region: &str,
    range: &str,
    ports: &[u16],
) -> String {
    let allow = if ports.is_empty() {
        "tcp".to_string()
    } else {
        ports
            .iter()
            .map(|p| format!("tcp:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let tags = if config.firewall_target_tags.is_empty() {
        String::new()
    } else {
        format!(" --target-tags={}", config.firewall_target_tags.join(","))
    };
    format!(
        "gcloud compute firewall-rules create allow-proxy-only-{region} --network={} --direction=INGRESS --allow={allow} --source-ranges={range}{tags}{}",
        config.network,
        project_flag(config)
    )
}

fn project_flag(config: &TranslateConfig) -> String {
    if config.network_project != config.project {
        format!(" --project={}", config.network_project)
    } else {
        String::new()
    }
}

fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(purpose: &str, role: Option<&str>) -> model::Subnetwork {
        let mut s = model::Subnetwork::new()
            .set_name("s")
            .set_network("projects/p/global/networks/default")
            .set_ip_cidr_range("10.2.0.0/23")
            .set_purpose(model::subnetwork::Purpose::from(purpose));
        if let Some(role) = role {
            s = s.set_role(model::subnetwork::Role::from(role));
        }
        s
    }

    fn rule(range: &str, tags: &[&str]) -> model::Firewall {
        model::Firewall::new()
            .set_network("global/networks/default")
            .set_source_ranges([range])
            .set_target_tags(tags.iter().map(|t| t.to_string()))
            .set_allowed([model::firewall::Allowed::new()
                .set_ip_protocol("tcp")
                .set_ports(["8080"])])
    }

    #[test]
    fn only_an_active_proxy_only_subnet_of_the_network_counts() {
        let ok = [subnet(REGIONAL_MANAGED_PROXY, Some("ACTIVE"))];
        assert!(active_proxy_only(&ok, "default").is_some());
        assert!(active_proxy_only(&ok, "other").is_none());
        assert!(
            active_proxy_only(&[subnet(REGIONAL_MANAGED_PROXY, Some("BACKUP"))], "default")
                .is_none()
        );
        assert!(active_proxy_only(&[subnet("PRIVATE", None)], "default").is_none());
    }

    #[test]
    fn a_rule_must_cover_the_whole_range_for_the_nodes() {
        let tags = ["node".to_string()];
        let admits =
            |r: model::Firewall| firewall_admits(&[r], "default", "10.2.0.0/23", &tags, &[8080]);
        assert!(admits(rule("10.2.0.0/23", &["node"])));
        assert!(admits(rule("10.0.0.0/8", &[])));
        assert!(!admits(rule("10.2.0.0/24", &["node"])));
        assert!(!admits(rule("10.128.0.0/9", &["node"])));
        assert!(!admits(rule("10.2.0.0/23", &["other"])));
        assert!(!admits(rule("10.2.0.0/23", &["node"]).set_disabled(true)));
        // An EGRESS rule says nothing about what reaches the nodes; INGRESS said or left out
        // (the API's default) does.
        use model::firewall::Direction;
        assert!(!admits(
            rule("10.2.0.0/23", &["node"]).set_direction(Direction::Egress)
        ));
        assert!(admits(
            rule("10.2.0.0/23", &["node"]).set_direction(Direction::Ingress)
        ));
        // Any protocol ("all", or TCP by number) admits TCP; UDP does not.
        for (protocol, admitted) in [("all", true), ("6", true), ("udp", false)] {
            let any = rule("10.2.0.0/23", &["node"])
                .set_allowed([model::firewall::Allowed::new().set_ip_protocol(protocol)]);
            assert_eq!(admits(any), admitted, "ipProtocol {protocol}");
        }
        // A rule for other ports (default-allow-ssh: 0.0.0.0/0 on tcp:22) does not count.
        let ssh = rule("0.0.0.0/0", &[]).set_allowed([model::firewall::Allowed::new()
            .set_ip_protocol("tcp")
            .set_ports(["22"])]);
        assert!(!admits(ssh.clone()));
        let both = [ssh, rule("10.0.0.0/8", &[])];
        assert!(firewall_admits(
            &both,
            "default",
            "10.2.0.0/23",
            &tags,
            &[8080]
        ));
        assert!(!firewall_admits(
            &both,
            "default",
            "10.2.0.0/23",
            &tags,
            &[8080, 9090]
        ));
    }

    #[test]
    fn commands_carry_the_host_project_on_shared_vpc() {
        let mut c = TranslateConfig::new("svc", "shared", &["us-central1-a"], "c", "uid");
        c.firewall_target_tags = vec!["node".into()];
        assert_eq!(
            subnet_command(&c, "us-central1"),
            "gcloud compute networks subnets create proxy-only-us-central1 --purpose=REGIONAL_MANAGED_PROXY --role=ACTIVE --region=us-central1 --network=shared --range=10.129.0.0/23"
        );
        c.network_project = "host".into();
        assert!(subnet_command(&c, "us-central1").ends_with(" --project=host"));
        assert_eq!(
            firewall_command(&c, "us-central1", "10.2.0.0/23", &[8080, 9090]),
            "gcloud compute firewall-rules create allow-proxy-only-us-central1 --network=shared --direction=INGRESS --allow=tcp:8080,tcp:9090 --source-ranges=10.2.0.0/23 --target-tags=node --project=host"
        );
    }
}
