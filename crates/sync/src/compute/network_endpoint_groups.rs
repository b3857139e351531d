//! Typed calls on the zonal `networkEndpointGroups` collection (Compute API v1 reference):
//! each takes the zone; mutations wait for the zonal Operation (`zoneOperations.wait`). Same
//! conventions as [`super::resources`]: `get_*` gives `Ok(None)` on 404, `delete_*` `Ok(false)`
//! when already gone.

use google_cloud_compute_v1::model;
use google_cloud_gax::options::RequestOptionsBuilder as _;

use super::{Compute, Result};

impl Compute {
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

    /// `compute.networkEndpointGroups.insert` in `zone`, waiting for the zonal Operation; the
    /// NEG is in the state cache from the moment the API accepts it
    /// ([`Compute::note_neg_insert`]).
    pub async fn insert_network_endpoint_group(
        &self,
        zone: &str,
        body: &model::NetworkEndpointGroup,
    ) -> Result<()> {
        let client = self.network_endpoint_groups().await?;
        let name = body.name.clone().unwrap_or_default();
        self.mutate_tracked(
            "compute.networkEndpointGroups.insert",
            &name,
            Some(zone),
            |fate| self.note_neg_insert(zone, &name, body, fate),
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
        self.paginate(
            "compute.networkEndpointGroups.list",
            zone,
            |token| {
                client
                    .list()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_page_token(token)
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
            |page| (page.items, page.next_page_token),
        )
        .await
    }

    /// `compute.networkEndpointGroups.aggregatedList`, every page: the NEGs of every zone as
    /// `(zone, NEG)`, so garbage collection finds NEGs in zones the cluster has left.
    pub async fn aggregated_list_network_endpoint_groups(
        &self,
    ) -> Result<Vec<(String, model::NetworkEndpointGroup)>> {
        let client = self.network_endpoint_groups().await?;
        let scopes = self
            .paginate(
                "compute.networkEndpointGroups.aggregatedList",
                "",
                |token| {
                    client
                        .aggregated_list()
                        .set_project(&self.project)
                        .set_page_token(token)
                        .with_user_agent(crate::compute::USER_AGENT)
                        .send()
                },
                |page| {
                    (
                        page.items.into_iter().collect::<Vec<_>>(),
                        page.next_page_token,
                    )
                },
            )
            .await?;
        let mut items: Vec<(String, model::NetworkEndpointGroup)> = Vec::new();
        for (scope, list) in scopes {
            let Some(zone) = scope.strip_prefix("zones/") else {
                continue;
            };
            items.extend(
                list.network_endpoint_groups
                    .into_iter()
                    .map(|neg| (zone.to_owned(), neg)),
            );
        }
        items.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
        Ok(items)
    }

    /// `compute.networkEndpointGroups.listNetworkEndpoints` (with health), every page.
    pub async fn list_network_endpoints(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Vec<model::NetworkEndpointWithHealthStatus>> {
        let client = self.network_endpoint_groups().await?;
        // Without SHOW real GCE omits `healths[]` (readiness, annotations).
        let body = model::NetworkEndpointGroupsListEndpointsRequest::new().set_health_status(
            model::network_endpoint_groups_list_endpoints_request::HealthStatus::Show,
        );
        self.paginate(
            "compute.networkEndpointGroups.listNetworkEndpoints",
            name,
            |token| {
                client
                    .list_network_endpoints()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_network_endpoint_group(name)
                    .set_page_token(token)
                    .set_body(body.clone())
                    .with_user_agent(crate::compute::USER_AGENT)
                    .send()
            },
            |page| (page.items, page.next_page_token),
        )
        .await
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
