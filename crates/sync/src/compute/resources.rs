//! Typed calls per Compute resource, each collection with every scope the operator uses:
//! global (`urlMaps`), regional (`regionUrlMaps`, taking the region as its first argument; their
//! Operations are waited for with `regionOperations.wait`) and zonal (`networkEndpointGroups`).
//! Method ids (`compute.urlMaps.insert`) match the Compute API v1 discovery document and the
//! emulator's call counters. `get_*` gives `Ok(None)` on 404, `delete_*` `Ok(false)` when the
//! resource was already gone.

use google_cloud_compute_v1::model;
use google_cloud_gax::options::RequestOptionsBuilder as _;

use super::{Compute, Result};

/// The project a call targets: the client's own, or the `project` argument of calls made in
/// another project (`project: project` in the macros below).
macro_rules! project_of {
    ($self:ident) => {
        &$self.project
    };
    ($self:ident $project:ident) => {
        $project
    };
}

/// What a list call is recorded under: its region, or nothing for a global collection.
macro_rules! list_label {
    () => {
        ""
    };
    ($region:ident) => {
        $region
    };
}

/// What an insert tells the state cache as its Operation goes ([`super::Fate`]): nothing for a
/// collection the cache does not hold (its readers ask the API each time), or, with
/// `state`, [`Compute::note_insert`] (recorded from the moment the API accepts it).
macro_rules! insert_fate {
    ($self:ident, $name:ident, $body:ident) => {
        |_: super::Fate| {}
    };
    ($self:ident, $name:ident, $body:ident, state) => {
        |fate| $self.note_insert(&$name, $body, fate)
    };
}

/// `get` (404 -> `None`), `insert`, `delete` (404 -> `false`) and paged `list` of a global
/// resource; with `project: project`, each takes the project as its first argument (the
/// firewall rules of a Shared VPC host); with `region: region`, the region (a regional
/// collection: `regionUrlMaps`, `forwardingRules`, `addresses` ...); with `cached: state`, the
/// collection is one the state cache holds ([`super::observed::Listed`]), and its insert is
/// recorded there as soon as the API accepts it, whatever becomes of the wait on its
/// Operation (issue 43).
macro_rules! crud {
    (client: $client:ident, model: $model:ident, api: $api:literal, setter: $setter:ident,
     get: $get:ident, insert: $insert:ident, delete: $delete:ident, list: $list:ident
     $(, project: $project:ident)? $(, region: $region:ident)? $(, cached: $cached:ident)?) => {
        #[doc = concat!("`compute.", $api, ".get`: the resource, or `None` on 404.")]
        pub async fn $get(
            &self, $($project: &str,)? $($region: &str,)? name: &str,
        ) -> Result<Option<model::$model>> {
            let client = self.$client().await?;
            let found = self
                .read(concat!("compute.", $api, ".get"), name, || {
                    client
                        .get()
                        .set_project(project_of!(self $($project)?))
                        $(.set_region($region))?
                        .$setter(name)
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                })
                .await;
            match found {
                Ok(v) => Ok(Some(v)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e),
            }
        }

        #[doc = concat!("`compute.", $api, ".insert`, waiting for the Operation.")]
        pub async fn $insert(
            &self, $($project: &str,)? $($region: &str,)? body: &model::$model,
        ) -> Result<()> {
            let client = self.$client().await?;
            let name = body.name.clone().unwrap_or_default();
            let fate = insert_fate!(self, name, body $(, $cached)?);
            self.mutate_tracked(concat!("compute.", $api, ".insert"), &name, None, fate, || {
                client
                    .insert()
                    .set_project(project_of!(self $($project)?))
                    $(.set_region($region))?
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            })
            .await
            .map(drop)
        }

        #[doc = concat!("`compute.", $api, ".delete`; `Ok(false)` when it was already gone.")]
        pub async fn $delete(
            &self, $($project: &str,)? $($region: &str,)? name: &str,
        ) -> Result<bool> {
            let client = self.$client().await?;
            let done = self
                .mutate(concat!("compute.", $api, ".delete"), name, None, || {
                    client
                        .delete()
                        .set_project(project_of!(self $($project)?))
                        $(.set_region($region))?
                        .$setter(name)
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                })
                .await;
            match done {
                Ok(_) => Ok(true),
                Err(e) if e.is_not_found() => Ok(false),
                Err(e) => Err(e),
            }
        }

        #[doc = concat!("`compute.", $api, ".list`, every page.")]
        pub async fn $list(
            &self $(, $project: &str)? $(, $region: &str)?
        ) -> Result<Vec<model::$model>> {
            let client = self.$client().await?;
            self.paginate(
                concat!("compute.", $api, ".list"),
                list_label!($($region)?),
                |token| {
                    client
                        .list()
                        .set_project(project_of!(self $($project)?))
                        $(.set_region($region))?
                        .set_page_token(token)
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                },
                |page| (page.items, page.next_page_token),
            )
            .await
        }
    };
}

/// A mutation on one named resource with a request body (update, setUrlMap, ...);
/// `project: project` and `region: region` as in [`crud`].
macro_rules! verb {
    ($fn_name:ident, client: $client:ident, verb: $verb:ident, api: $api:literal,
     setter: $setter:ident, body: $body:ty
     $(, project: $project:ident)? $(, region: $region:ident)?) => {
        #[doc = concat!("`compute.", $api, "`, waiting for the Operation.")]
        pub async fn $fn_name(
            &self, $($project: &str,)? $($region: &str,)? name: &str, body: &$body,
        ) -> Result<()> {
            let client = self.$client().await?;
            self.mutate(concat!("compute.", $api), name, None, || {
                client
                    .$verb()
                    .set_project(project_of!(self $($project)?))
                    $(.set_region($region))?
                    .$setter(name)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            })
            .await
            .map(drop)
        }
    };
}

impl Compute {
    crud!(client: security_policies, model: SecurityPolicy, api: "securityPolicies",
        setter: set_security_policy, get: get_security_policy, insert: insert_security_policy,
        delete: delete_security_policy, list: list_security_policies);
    crud!(client: url_maps, model: UrlMap, api: "urlMaps", setter: set_url_map,
        get: get_url_map, insert: insert_url_map, delete: delete_url_map, list: list_url_maps, cached: state);
    verb!(update_url_map, client: url_maps, verb: update, api: "urlMaps.update",
        setter: set_url_map, body: model::UrlMap);
    crud!(client: region_url_maps, model: UrlMap, api: "regionUrlMaps",
        setter: set_url_map, get: get_region_url_map, insert: insert_region_url_map,
        delete: delete_region_url_map, list: list_region_url_maps, region: region);
    verb!(update_region_url_map, client: region_url_maps, verb: update,
        api: "regionUrlMaps.update", setter: set_url_map, body: model::UrlMap, region: region);

    crud!(client: backend_services, model: BackendService, api: "backendServices",
        setter: set_backend_service, get: get_backend_service, insert: insert_backend_service,
        delete: delete_backend_service, list: list_backend_services, cached: state);
    verb!(update_backend_service, client: backend_services, verb: update,
        api: "backendServices.update", setter: set_backend_service, body: model::BackendService);

    verb!(set_backend_service_security_policy, client: backend_services,
        verb: set_security_policy, api: "backendServices.setSecurityPolicy",
        setter: set_backend_service, body: model::SecurityPolicyReference);
    crud!(client: region_backend_services, model: BackendService,
        api: "regionBackendServices", setter: set_backend_service,
        get: get_region_backend_service, insert: insert_region_backend_service,
        delete: delete_region_backend_service, list: list_region_backend_services,
        region: region);
    verb!(update_region_backend_service, client: region_backend_services,
        verb: update, api: "regionBackendServices.update", setter: set_backend_service,
        body: model::BackendService, region: region);

    crud!(client: health_checks, model: HealthCheck, api: "healthChecks",
        setter: set_health_check, get: get_health_check, insert: insert_health_check,
        delete: delete_health_check, list: list_health_checks, cached: state);
    verb!(update_health_check, client: health_checks, verb: update,
        api: "healthChecks.update", setter: set_health_check, body: model::HealthCheck);
    crud!(client: region_health_checks, model: HealthCheck, api: "regionHealthChecks",
        setter: set_health_check, get: get_region_health_check,
        insert: insert_region_health_check, delete: delete_region_health_check,
        list: list_region_health_checks, region: region);
    verb!(update_region_health_check, client: region_health_checks, verb: update,
        api: "regionHealthChecks.update", setter: set_health_check, body: model::HealthCheck,
        region: region);

    // The cluster's network and its firewall rules belong to the network project (the Shared
    // VPC host's on a Shared VPC cluster), so these take the project.
    crud!(client: firewalls, model: Firewall, api: "firewalls", setter: set_firewall,
        get: get_firewall, insert: insert_firewall, delete: delete_firewall, list: list_firewalls,
        project: project);
    verb!(update_firewall, client: firewalls, verb: update, api: "firewalls.update",
        setter: set_firewall, body: model::Firewall, project: project);

    crud!(client: global_forwarding_rules, model: ForwardingRule,
        api: "globalForwardingRules", setter: set_forwarding_rule,
        get: get_forwarding_rule, insert: insert_forwarding_rule,
        delete: delete_forwarding_rule, list: list_forwarding_rules, cached: state);
    verb!(set_forwarding_rule_target, client: global_forwarding_rules, verb: set_target,
        api: "globalForwardingRules.setTarget", setter: set_forwarding_rule,
        body: model::TargetReference);
    crud!(client: forwarding_rules, model: ForwardingRule, api: "forwardingRules",
        setter: set_forwarding_rule, get: get_region_forwarding_rule,
        insert: insert_region_forwarding_rule, delete: delete_region_forwarding_rule,
        list: list_region_forwarding_rules, region: region);
    verb!(set_region_forwarding_rule_target, client: forwarding_rules,
        verb: set_target, api: "forwardingRules.setTarget", setter: set_forwarding_rule,
        body: model::TargetReference, region: region);

    crud!(client: target_http_proxies, model: TargetHttpProxy, api: "targetHttpProxies",
        setter: set_target_http_proxy, get: get_target_http_proxy,
        insert: insert_target_http_proxy, delete: delete_target_http_proxy,
        list: list_target_http_proxies, cached: state);
    verb!(set_target_http_proxy_url_map, client: target_http_proxies, verb: set_url_map,
        api: "targetHttpProxies.setUrlMap", setter: set_target_http_proxy,
        body: model::UrlMapReference);
    crud!(client: region_target_http_proxies, model: TargetHttpProxy,
        api: "regionTargetHttpProxies", setter: set_target_http_proxy,
        get: get_region_target_http_proxy, insert: insert_region_target_http_proxy,
        delete: delete_region_target_http_proxy, list: list_region_target_http_proxies,
        region: region);
    verb!(set_region_target_http_proxy_url_map, client: region_target_http_proxies,
        verb: set_url_map, api: "regionTargetHttpProxies.setUrlMap",
        setter: set_target_http_proxy, body: model::UrlMapReference, region: region);

    crud!(client: target_https_proxies, model: TargetHttpsProxy,
        api: "targetHttpsProxies", setter: set_target_https_proxy,
        get: get_target_https_proxy, insert: insert_target_https_proxy,
        delete: delete_target_https_proxy, list: list_target_https_proxies, cached: state);
    verb!(set_target_https_proxy_url_map, client: target_https_proxies,
        verb: set_url_map, api: "targetHttpsProxies.setUrlMap",
        setter: set_target_https_proxy, body: model::UrlMapReference);
    verb!(set_target_https_proxy_ssl_certificates, client: target_https_proxies,
        verb: set_ssl_certificates, api: "targetHttpsProxies.setSslCertificates",
        setter: set_target_https_proxy, body: model::TargetHttpsProxiesSetSslCertificatesRequest);
    verb!(set_target_https_proxy_ssl_policy, client: target_https_proxies,
        verb: set_ssl_policy, api: "targetHttpsProxies.setSslPolicy",
        setter: set_target_https_proxy, body: model::SslPolicyReference);
    crud!(client: region_target_https_proxies, model: TargetHttpsProxy,
        api: "regionTargetHttpsProxies", setter: set_target_https_proxy,
        get: get_region_target_https_proxy, insert: insert_region_target_https_proxy,
        delete: delete_region_target_https_proxy, list: list_region_target_https_proxies,
        region: region);
    verb!(set_region_target_https_proxy_url_map, client: region_target_https_proxies,
        verb: set_url_map, api: "regionTargetHttpsProxies.setUrlMap",
        setter: set_target_https_proxy, body: model::UrlMapReference, region: region);
    verb!(set_region_target_https_proxy_ssl_certificates,
        client: region_target_https_proxies, verb: set_ssl_certificates,
        api: "regionTargetHttpsProxies.setSslCertificates", setter: set_target_https_proxy,
        body: model::RegionTargetHttpsProxiesSetSslCertificatesRequest, region: region);

    // Proxy Network Load Balancers (the Gateway controller's TLS listeners).
    crud!(client: target_tcp_proxies, model: TargetTcpProxy, api: "targetTcpProxies",
        setter: set_target_tcp_proxy, get: get_target_tcp_proxy,
        insert: insert_target_tcp_proxy, delete: delete_target_tcp_proxy,
        list: list_target_tcp_proxies);
    verb!(set_target_tcp_proxy_backend_service, client: target_tcp_proxies,
        verb: set_backend_service, api: "targetTcpProxies.setBackendService",
        setter: set_target_tcp_proxy, body: model::TargetTcpProxiesSetBackendServiceRequest);
    crud!(client: target_ssl_proxies, model: TargetSslProxy, api: "targetSslProxies",
        setter: set_target_ssl_proxy, get: get_target_ssl_proxy,
        insert: insert_target_ssl_proxy, delete: delete_target_ssl_proxy,
        list: list_target_ssl_proxies);
    verb!(set_target_ssl_proxy_backend_service, client: target_ssl_proxies,
        verb: set_backend_service, api: "targetSslProxies.setBackendService",
        setter: set_target_ssl_proxy, body: model::TargetSslProxiesSetBackendServiceRequest);
    verb!(set_target_ssl_proxy_ssl_certificates, client: target_ssl_proxies,
        verb: set_ssl_certificates, api: "targetSslProxies.setSslCertificates",
        setter: set_target_ssl_proxy, body: model::TargetSslProxiesSetSslCertificatesRequest);

    crud!(client: ssl_certificates, model: SslCertificate, api: "sslCertificates",
        setter: set_ssl_certificate, get: get_ssl_certificate, insert: insert_ssl_certificate,
        delete: delete_ssl_certificate, list: list_ssl_certificates, cached: state);
    crud!(client: region_ssl_certificates, model: SslCertificate,
        api: "regionSslCertificates", setter: set_ssl_certificate,
        get: get_region_ssl_certificate, insert: insert_region_ssl_certificate,
        delete: delete_region_ssl_certificate, list: list_region_ssl_certificates,
        region: region);

    // Reserved global addresses: the `global-static-ip-name` lookup, and the address GKE
    // promotes from the HTTP rule's ephemeral IP when HTTPS shares it (inventory §1, §4).
    crud!(client: global_addresses, model: Address, api: "globalAddresses",
        setter: set_address, get: get_global_address, insert: insert_global_address,
        delete: delete_global_address, list: list_global_addresses, cached: state);
    // Reserved regional addresses: the `kubernetes.io/ingress.regional-static-ip-name` lookup.
    crud!(client: addresses, model: Address, api: "addresses", setter: set_address,
        get: get_region_address, insert: insert_region_address,
        delete: delete_region_address, list: list_region_addresses, region: region);

    /// `compute.backendServices.getHealth` for one backend group (a NEG reference).
    pub async fn get_backend_service_health(
        &self,
        name: &str,
        group: &str,
    ) -> Result<model::BackendServiceGroupHealth> {
        let client = self.backend_services().await?;
        let body = model::ResourceGroupReference::new().set_group(group);
        self.read("compute.backendServices.getHealth", name, || {
            client
                .get_health()
                .set_project(&self.project)
                .set_backend_service(name)
                .set_body(body.clone())
                .with_user_agent(crate::compute::USER_AGENT)
                .send()
        })
        .await
    }

    /// `compute.regionBackendServices.getHealth` for one backend group (a NEG reference).
    pub async fn get_region_backend_service_health(
        &self,
        region: &str,
        name: &str,
        group: &str,
    ) -> Result<model::BackendServiceGroupHealth> {
        let client = self.region_backend_services().await?;
        let body = model::ResourceGroupReference::new().set_group(group);
        self.read("compute.regionBackendServices.getHealth", name, || {
            client
                .get_health()
                .set_project(&self.project)
                .set_region(region)
                .set_backend_service(name)
                .set_body(body.clone())
                .with_user_agent(crate::compute::USER_AGENT)
                .send()
        })
        .await
    }

    /// `compute.subnetworks.list` of `project` (the network project: the Shared VPC host's on
    /// a Shared VPC cluster) in `region`, every page: the proxy-only subnet precondition.
    pub async fn list_subnetworks(
        &self,
        project: &str,
        region: &str,
    ) -> Result<Vec<model::Subnetwork>> {
        let client = self.subnetworks().await?;
        self.paginate(
            "compute.subnetworks.list",
            region,
            |token| {
                client
                    .list()
                    .set_project(project)
                    .set_region(region)
                    .set_page_token(token)
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
            |page| (page.items, page.next_page_token),
        )
        .await
    }
}
