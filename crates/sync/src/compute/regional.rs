//! Typed calls on the regional collections of the regional Application Load Balancers
//! (Compute API v1 reference: `regionUrlMaps`, `regionBackendServices`, `regionHealthChecks`,
//! `regionTargetHttpProxies`, `regionTargetHttpsProxies`, `regionSslCertificates`,
//! `forwardingRules`, `addresses`, `subnetworks`). Each takes the region as its first argument; mutations
//! wait for their regional Operation (`regionOperations.wait`). Same conventions as the global
//! calls: `get_*` gives `Ok(None)` on 404, `delete_*` gives `Ok(false)` when already gone.

use google_cloud_compute_v1::model;
use google_cloud_gax::options::RequestOptionsBuilder as _;

use super::{Compute, Result};

/// `get`/`insert`/`delete`/`list` of one regional collection.
macro_rules! regional_crud {
    (client: $client:ident, model: $model:ident, api: $api:literal, setter: $setter:ident,
     get: $get:ident, insert: $insert:ident, delete: $delete:ident, list: $list:ident) => {
        #[doc = concat!("`compute.", $api, ".get` in `region`: the resource, or `None` on 404.")]
        pub async fn $get(&self, region: &str, name: &str) -> Result<Option<model::$model>> {
            let client = self.$client().await?;
            let found = self
                .read(concat!("compute.", $api, ".get"), name, || {
                    client
                        .get()
                        .set_project(&self.project)
                        .set_region(region)
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

        #[doc = concat!("`compute.", $api, ".insert` in `region`, waiting for the Operation.")]
        pub async fn $insert(&self, region: &str, body: &model::$model) -> Result<()> {
            let client = self.$client().await?;
            let name = body.name.clone().unwrap_or_default();
            self.mutate(concat!("compute.", $api, ".insert"), &name, None, || {
                client
                    .insert()
                    .set_project(&self.project)
                    .set_region(region)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            })
            .await
            .map(drop)
        }

        #[doc = concat!("`compute.", $api, ".delete` in `region`; `Ok(false)` when it was already gone.")]
        pub async fn $delete(&self, region: &str, name: &str) -> Result<bool> {
            let client = self.$client().await?;
            let done = self
                .mutate(concat!("compute.", $api, ".delete"), name, None, || {
                    client
                        .delete()
                        .set_project(&self.project)
                        .set_region(region)
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

        #[doc = concat!("`compute.", $api, ".list` in `region`, every page.")]
        pub async fn $list(&self, region: &str) -> Result<Vec<model::$model>> {
            let client = self.$client().await?;
            let mut items = Vec::new();
            let mut token = String::new();
            loop {
                let page = self
                    .read(concat!("compute.", $api, ".list"), region, || {
                        client
                            .list()
                            .set_project(&self.project)
                            .set_region(region)
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

/// A mutation with a body on one named regional resource (`update`, `setUrlMap`, ...).
macro_rules! regional_verb {
    ($fn_name:ident, client: $client:ident, verb: $verb:ident, api: $api:literal,
     setter: $setter:ident, body: $body:ty) => {
        #[doc = concat!("`compute.", $api, "` in `region`, waiting for the Operation.")]
        pub async fn $fn_name(&self, region: &str, name: &str, body: &$body) -> Result<()> {
            let client = self.$client().await?;
            self.mutate(concat!("compute.", $api), name, None, || {
                client
                    .$verb()
                    .set_project(&self.project)
                    .set_region(region)
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
    regional_crud!(client: region_url_maps, model: UrlMap, api: "regionUrlMaps",
        setter: set_url_map, get: get_region_url_map, insert: insert_region_url_map,
        delete: delete_region_url_map, list: list_region_url_maps);
    regional_verb!(update_region_url_map, client: region_url_maps, verb: update,
        api: "regionUrlMaps.update", setter: set_url_map, body: model::UrlMap);

    regional_crud!(client: region_backend_services, model: BackendService,
        api: "regionBackendServices", setter: set_backend_service,
        get: get_region_backend_service, insert: insert_region_backend_service,
        delete: delete_region_backend_service, list: list_region_backend_services);
    regional_verb!(update_region_backend_service, client: region_backend_services,
        verb: update, api: "regionBackendServices.update", setter: set_backend_service,
        body: model::BackendService);

    regional_crud!(client: region_health_checks, model: HealthCheck, api: "regionHealthChecks",
        setter: set_health_check, get: get_region_health_check,
        insert: insert_region_health_check, delete: delete_region_health_check,
        list: list_region_health_checks);
    regional_verb!(update_region_health_check, client: region_health_checks, verb: update,
        api: "regionHealthChecks.update", setter: set_health_check, body: model::HealthCheck);

    regional_crud!(client: region_target_http_proxies, model: TargetHttpProxy,
        api: "regionTargetHttpProxies", setter: set_target_http_proxy,
        get: get_region_target_http_proxy, insert: insert_region_target_http_proxy,
        delete: delete_region_target_http_proxy, list: list_region_target_http_proxies);
    regional_verb!(set_region_target_http_proxy_url_map, client: region_target_http_proxies,
        verb: set_url_map, api: "regionTargetHttpProxies.setUrlMap",
        setter: set_target_http_proxy, body: model::UrlMapReference);

    regional_crud!(client: region_target_https_proxies, model: TargetHttpsProxy,
        api: "regionTargetHttpsProxies", setter: set_target_https_proxy,
        get: get_region_target_https_proxy, insert: insert_region_target_https_proxy,
        delete: delete_region_target_https_proxy, list: list_region_target_https_proxies);
    regional_verb!(set_region_target_https_proxy_url_map, client: region_target_https_proxies,
        verb: set_url_map, api: "regionTargetHttpsProxies.setUrlMap",
        setter: set_target_https_proxy, body: model::UrlMapReference);
    regional_verb!(set_region_target_https_proxy_ssl_certificates,
        client: region_target_https_proxies, verb: set_ssl_certificates,
        api: "regionTargetHttpsProxies.setSslCertificates", setter: set_target_https_proxy,
        body: model::RegionTargetHttpsProxiesSetSslCertificatesRequest);

    regional_crud!(client: region_ssl_certificates, model: SslCertificate,
        api: "regionSslCertificates", setter: set_ssl_certificate,
        get: get_region_ssl_certificate, insert: insert_region_ssl_certificate,
        delete: delete_region_ssl_certificate, list: list_region_ssl_certificates);

    regional_crud!(client: forwarding_rules, model: ForwardingRule, api: "forwardingRules",
        setter: set_forwarding_rule, get: get_region_forwarding_rule,
        insert: insert_region_forwarding_rule, delete: delete_region_forwarding_rule,
        list: list_region_forwarding_rules);
    regional_verb!(set_region_forwarding_rule_target, client: forwarding_rules,
        verb: set_target, api: "forwardingRules.setTarget", setter: set_forwarding_rule,
        body: model::TargetReference);

    // Reserved regional addresses: the `kubernetes.io/ingress.regional-static-ip-name` lookup.
    regional_crud!(client: addresses, model: Address, api: "addresses", setter: set_address,
        get: get_region_address, insert: insert_region_address,
        delete: delete_region_address, list: list_region_addresses);

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
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .read("compute.subnetworks.list", region, || {
                    client
                        .list()
                        .set_project(project)
                        .set_region(region)
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
}
