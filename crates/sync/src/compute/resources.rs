//! Typed calls per Compute resource. Method ids (`compute.urlMaps.insert`) match the Compute
//! API discovery document and the emulator's call counters.

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

/// `get` (404 -> `None`), `insert`, `delete` (404 -> `false`) and paged `list` of a global
/// resource; with `project: project`, each takes the project as its first argument (the
/// firewall rules of a Shared VPC host).
macro_rules! global_crud {
    (client: $client:ident, model: $model:ident, api: $api:literal, setter: $setter:ident,
     get: $get:ident, insert: $insert:ident, delete: $delete:ident, list: $list:ident
     $(, project: $project:ident)?) => {
        #[doc = concat!("`compute.", $api, ".get`: the resource, or `None` on 404.")]
        pub async fn $get(&self, $($project: &str,)? name: &str) -> Result<Option<model::$model>> {
            let client = self.$client().await?;
            let found = self
                .read(concat!("compute.", $api, ".get"), name, || {
                    client
                        .get()
                        .set_project(project_of!(self $($project)?))
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
        pub async fn $insert(&self, $($project: &str,)? body: &model::$model) -> Result<()> {
            let client = self.$client().await?;
            let name = body.name.clone().unwrap_or_default();
            self.mutate(concat!("compute.", $api, ".insert"), &name, None, || {
                client
                    .insert()
                    .set_project(project_of!(self $($project)?))
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            })
            .await
            .map(drop)
        }

        #[doc = concat!("`compute.", $api, ".delete`; `Ok(false)` when it was already gone.")]
        pub async fn $delete(&self, $($project: &str,)? name: &str) -> Result<bool> {
            let client = self.$client().await?;
            let done = self
                .mutate(concat!("compute.", $api, ".delete"), name, None, || {
                    client
                        .delete()
                        .set_project(project_of!(self $($project)?))
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
        pub async fn $list(&self $(, $project: &str)?) -> Result<Vec<model::$model>> {
            let client = self.$client().await?;
            let mut items = Vec::new();
            let mut token = String::new();
            loop {
                let page = self
                    .read(concat!("compute.", $api, ".list"), "", || {
                        client
                            .list()
                            .set_project(project_of!(self $($project)?))
                            .set_page_token(token.clone())
                            .with_user_agent(crate::compute::USER_AGENT)
                            .send()
                    })
                    .await?;
                items.extend(page.items);
                match page.next_page_token {
                    Some(t) if !t.is_empty() => token = t,
                    _ => return Ok(items),
                }
            }
        }
    };
}

/// A mutation on one named global resource with a request body (update, setUrlMap, ...);
/// `project: project` as in [`global_crud`].
macro_rules! global_verb {
    ($fn_name:ident, client: $client:ident, verb: $verb:ident, api: $api:literal,
     setter: $setter:ident, body: $body:ty $(, project: $project:ident)?) => {
        #[doc = concat!("`compute.", $api, "`, waiting for the Operation.")]
        pub async fn $fn_name(&self, $($project: &str,)? name: &str, body: &$body) -> Result<()> {
            let client = self.$client().await?;
            self.mutate(concat!("compute.", $api), name, None, || {
                client
                    .$verb()
                    .set_project(project_of!(self $($project)?))
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
    global_crud!(client: security_policies, model: SecurityPolicy, api: "securityPolicies",
        setter: set_security_policy, get: get_security_policy, insert: insert_security_policy,
        delete: delete_security_policy, list: list_security_policies);
    global_crud!(client: url_maps, model: UrlMap, api: "urlMaps", setter: set_url_map,
        get: get_url_map, insert: insert_url_map, delete: delete_url_map, list: list_url_maps);
    global_verb!(update_url_map, client: url_maps, verb: update, api: "urlMaps.update",
        setter: set_url_map, body: model::UrlMap);

    global_crud!(client: backend_services, model: BackendService, api: "backendServices",
        setter: set_backend_service, get: get_backend_service, insert: insert_backend_service,
        delete: delete_backend_service, list: list_backend_services);
    global_verb!(update_backend_service, client: backend_services, verb: update,
        api: "backendServices.update", setter: set_backend_service, body: model::BackendService);

    global_verb!(set_backend_service_security_policy, client: backend_services,
        verb: set_security_policy, api: "backendServices.setSecurityPolicy",
        setter: set_backend_service, body: model::SecurityPolicyReference);

    global_crud!(client: health_checks, model: HealthCheck, api: "healthChecks",
        setter: set_health_check, get: get_health_check, insert: insert_health_check,
        delete: delete_health_check, list: list_health_checks);
    global_verb!(update_health_check, client: health_checks, verb: update,
        api: "healthChecks.update", setter: set_health_check, body: model::HealthCheck);

    // The cluster's network and its firewall rules belong to the network project (the Shared
    // VPC host's on a Shared VPC cluster), so these take the project.
    global_crud!(client: firewalls, model: Firewall, api: "firewalls", setter: set_firewall,
        get: get_firewall, insert: insert_firewall, delete: delete_firewall, list: list_firewalls,
        project: project);
    global_verb!(update_firewall, client: firewalls, verb: update, api: "firewalls.update",
        setter: set_firewall, body: model::Firewall, project: project);

    global_crud!(client: global_forwarding_rules, model: ForwardingRule,
        api: "globalForwardingRules", setter: set_forwarding_rule,
        get: get_forwarding_rule, insert: insert_forwarding_rule,
        delete: delete_forwarding_rule, list: list_forwarding_rules);
    global_verb!(set_forwarding_rule_target, client: global_forwarding_rules, verb: set_target,
        api: "globalForwardingRules.setTarget", setter: set_forwarding_rule,
        body: model::TargetReference);

    global_crud!(client: target_http_proxies, model: TargetHttpProxy, api: "targetHttpProxies",
        setter: set_target_http_proxy, get: get_target_http_proxy,
        insert: insert_target_http_proxy, delete: delete_target_http_proxy,
        list: list_target_http_proxies);
    global_verb!(set_target_http_proxy_url_map, client: target_http_proxies, verb: set_url_map,
        api: "targetHttpProxies.setUrlMap", setter: set_target_http_proxy,
        body: model::UrlMapReference);

    global_crud!(client: target_https_proxies, model: TargetHttpsProxy,
        api: "targetHttpsProxies", setter: set_target_https_proxy,
        get: get_target_https_proxy, insert: insert_target_https_proxy,
        delete: delete_target_https_proxy, list: list_target_https_proxies);
    global_verb!(set_target_https_proxy_url_map, client: target_https_proxies,
        verb: set_url_map, api: "targetHttpsProxies.setUrlMap",
        setter: set_target_https_proxy, body: model::UrlMapReference);
    global_verb!(set_target_https_proxy_ssl_certificates, client: target_https_proxies,
        verb: set_ssl_certificates, api: "targetHttpsProxies.setSslCertificates",
        setter: set_target_https_proxy, body: model::TargetHttpsProxiesSetSslCertificatesRequest);
    global_verb!(set_target_https_proxy_ssl_policy, client: target_https_proxies,
        verb: set_ssl_policy, api: "targetHttpsProxies.setSslPolicy",
        setter: set_target_https_proxy, body: model::SslPolicyReference);

    // Proxy Network Load Balancers (the Gateway controller's TLS listeners).
    global_crud!(client: target_tcp_proxies, model: TargetTcpProxy, api: "targetTcpProxies",
        setter: set_target_tcp_proxy, get: get_target_tcp_proxy,
        insert: insert_target_tcp_proxy, delete: delete_target_tcp_proxy,
        list: list_target_tcp_proxies);
    global_verb!(set_target_tcp_proxy_backend_service, client: target_tcp_proxies,
        verb: set_backend_service, api: "targetTcpProxies.setBackendService",
        setter: set_target_tcp_proxy, body: model::TargetTcpProxiesSetBackendServiceRequest);
    global_crud!(client: target_ssl_proxies, model: TargetSslProxy, api: "targetSslProxies",
        setter: set_target_ssl_proxy, get: get_target_ssl_proxy,
        insert: insert_target_ssl_proxy, delete: delete_target_ssl_proxy,
        list: list_target_ssl_proxies);
    global_verb!(set_target_ssl_proxy_backend_service, client: target_ssl_proxies,
        verb: set_backend_service, api: "targetSslProxies.setBackendService",
        setter: set_target_ssl_proxy, body: model::TargetSslProxiesSetBackendServiceRequest);
    global_verb!(set_target_ssl_proxy_ssl_certificates, client: target_ssl_proxies,
        verb: set_ssl_certificates, api: "targetSslProxies.setSslCertificates",
        setter: set_target_ssl_proxy, body: model::TargetSslProxiesSetSslCertificatesRequest);

    global_crud!(client: ssl_certificates, model: SslCertificate, api: "sslCertificates",
        setter: set_ssl_certificate, get: get_ssl_certificate, insert: insert_ssl_certificate,
        delete: delete_ssl_certificate, list: list_ssl_certificates);

    // Reserved global addresses: the `global-static-ip-name` lookup, and the address GKE
    // promotes from the HTTP rule's ephemeral IP when HTTPS shares it (inventory §1, §4).
    global_crud!(client: global_addresses, model: Address, api: "globalAddresses",
        setter: set_address, get: get_global_address, insert: insert_global_address,
        delete: delete_global_address, list: list_global_addresses);

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

    /// `compute.networkEndpointGroups.get` in `zone`; `None` on 404.
    pub async fn get_network_endpoint_group(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Option<model::NetworkEndpointGroup>> {
        let client = self.network_endpoint_groups().await?;
        let found = self
            .read("compute.networkEndpointGroups.get", name, || {
                client
                    .get()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_network_endpoint_group(name)
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

    /// `compute.networkEndpointGroups.insert` in `zone`, waiting for the zonal Operation.
    pub async fn insert_network_endpoint_group(
        &self,
        zone: &str,
        body: &model::NetworkEndpointGroup,
    ) -> Result<()> {
        let client = self.network_endpoint_groups().await?;
        let name = body.name.clone().unwrap_or_default();
        self.mutate(
            "compute.networkEndpointGroups.insert",
            &name,
            Some(zone),
            || {
                client
                    .insert()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
        )
        .await
        .map(drop)
    }

    /// `compute.networkEndpointGroups.delete`; `Ok(false)` when it was already gone.
    pub async fn delete_network_endpoint_group(&self, zone: &str, name: &str) -> Result<bool> {
        let client = self.network_endpoint_groups().await?;
        let done = self
            .mutate(
                "compute.networkEndpointGroups.delete",
                name,
                Some(zone),
                || {
                    client
                        .delete()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_network_endpoint_group(name)
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                },
            )
            .await;
        match done {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `compute.networkEndpointGroups.list` in `zone`, every page.
    pub async fn list_network_endpoint_groups(
        &self,
        zone: &str,
    ) -> Result<Vec<model::NetworkEndpointGroup>> {
        let client = self.network_endpoint_groups().await?;
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .read("compute.networkEndpointGroups.list", zone, || {
                    client
                        .list()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_page_token(token.clone())
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                })
                .await?;
            items.extend(page.items);
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(items),
            }
        }
    }

    /// `compute.networkEndpointGroups.aggregatedList`, every page: the NEGs of every zone as
    /// `(zone, NEG)`, so garbage collection finds NEGs in zones the cluster has left.
    pub async fn aggregated_list_network_endpoint_groups(
        &self,
    ) -> Result<Vec<(String, model::NetworkEndpointGroup)>> {
        let client = self.network_endpoint_groups().await?;
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .read("compute.networkEndpointGroups.aggregatedList", "", || {
                    client
                        .aggregated_list()
                        .set_project(&self.project)
                        .set_page_token(token.clone())
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                })
                .await?;
            for (scope, list) in page.items {
                let Some(zone) = scope.strip_prefix("zones/") else {
                    continue;
                };
                items.extend(
                    list.network_endpoint_groups
                        .into_iter()
                        .map(|neg| (zone.to_owned(), neg)),
                );
            }
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => {
                    items.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
                    return Ok(items);
                }
            }
        }
    }

    /// `compute.networkEndpointGroups.listNetworkEndpoints` (with health), every page.
    pub async fn list_network_endpoints(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Vec<model::NetworkEndpointWithHealthStatus>> {
        let client = self.network_endpoint_groups().await?;
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .read(
                    "compute.networkEndpointGroups.listNetworkEndpoints",
                    name,
                    || {
                        client
                            .list_network_endpoints()
                            .set_project(&self.project)
                            .set_zone(zone)
                            .set_network_endpoint_group(name)
                            .set_page_token(token.clone())
                            // Without SHOW real GCE omits `healths[]` (readiness, annotations).
                            .set_body(
                                model::NetworkEndpointGroupsListEndpointsRequest::new()
                                    .set_health_status(
                                        model::network_endpoint_groups_list_endpoints_request::HealthStatus::Show,
                                    ),
                            )
                            .with_user_agent(crate::compute::USER_AGENT)
                            .send()
                    },
                )
                .await?;
            items.extend(page.items);
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(items),
            }
        }
    }

    /// `compute.networkEndpointGroups.attachNetworkEndpoints` (at most 500 per call).
    pub async fn attach_network_endpoints(
        &self,
        zone: &str,
        name: &str,
        endpoints: Vec<model::NetworkEndpoint>,
    ) -> Result<()> {
        let client = self.network_endpoint_groups().await?;
        let body = model::NetworkEndpointGroupsAttachEndpointsRequest::new()
            .set_network_endpoints(endpoints);
        self.mutate(
            "compute.networkEndpointGroups.attachNetworkEndpoints",
            name,
            Some(zone),
            || {
                client
                    .attach_network_endpoints()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_network_endpoint_group(name)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
        )
        .await
        .map(drop)
    }

    /// `compute.networkEndpointGroups.detachNetworkEndpoints` (at most 500 per call).
    pub async fn detach_network_endpoints(
        &self,
        zone: &str,
        name: &str,
        endpoints: Vec<model::NetworkEndpoint>,
    ) -> Result<()> {
        let client = self.network_endpoint_groups().await?;
        let body = model::NetworkEndpointGroupsDetachEndpointsRequest::new()
            .set_network_endpoints(endpoints);
        self.mutate(
            "compute.networkEndpointGroups.detachNetworkEndpoints",
            name,
            Some(zone),
            || {
                client
                    .detach_network_endpoints()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_network_endpoint_group(name)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
        )
        .await
        .map(drop)
    }
}
