//! `compute.firewalls`, in a project of the caller's choice: the cluster's network and its
//! firewall rules belong to the Shared VPC host project on a Shared VPC cluster (Google Cloud
//! "Shared VPC overview"), not to the project of the load balancer.

use google_cloud_compute_v1::model;

use super::{Compute, Result};

impl Compute {
    /// `compute.firewalls.get` in `project`: the rule, or `None` on 404.
    pub async fn get_firewall(&self, project: &str, name: &str) -> Result<Option<model::Firewall>> {
        let found = self
            .read("compute.firewalls.get", name, || {
                self.clients
                    .firewalls
                    .get()
                    .set_project(project)
                    .set_firewall(name)
                    .send()
            })
            .await;
        match found {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `compute.firewalls.insert` in `project`, waiting for the Operation.
    pub async fn insert_firewall(&self, project: &str, body: &model::Firewall) -> Result<()> {
        let name = body.name.clone().unwrap_or_default();
        self.mutate("compute.firewalls.insert", &name, None, || {
            self.clients
                .firewalls
                .insert()
                .set_project(project)
                .set_body(body.clone())
                .send()
        })
        .await
        .map(drop)
    }

    /// `compute.firewalls.update` (PUT) in `project`, waiting for the Operation.
    pub async fn update_firewall(
        &self,
        project: &str,
        name: &str,
        body: &model::Firewall,
    ) -> Result<()> {
        self.mutate("compute.firewalls.update", name, None, || {
            self.clients
                .firewalls
                .update()
                .set_project(project)
                .set_firewall(name)
                .set_body(body.clone())
                .send()
        })
        .await
        .map(drop)
    }

    /// `compute.firewalls.delete` in `project`; `Ok(false)` when it was already gone.
    pub async fn delete_firewall(&self, project: &str, name: &str) -> Result<bool> {
        let done = self
            .mutate("compute.firewalls.delete", name, None, || {
                self.clients
                    .firewalls
                    .delete()
                    .set_project(project)
                    .set_firewall(name)
                    .send()
            })
            .await;
        match done {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `compute.firewalls.list` in `project`, every page.
    pub async fn list_firewalls(&self, project: &str) -> Result<Vec<model::Firewall>> {
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .read("compute.firewalls.list", project, || {
                    self.clients
                        .firewalls
                        .list()
                        .set_project(project)
                        .set_page_token(token.clone())
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
