//! Project-level calls: `projects.get` and Shared VPC (`enableXpnHost`, `disableXpnHost`,
//! `enableXpnResource`, `disableXpnResource`, `getXpnHost`, `getXpnResources`,
//! `listXpnHosts`), over [`crate::resources::projects`].

use std::sync::Arc;

use serde_json::{json, Value};

use crate::emulator::{ApiRequest, Emulator};
use crate::errors::ApiError;
use crate::methods::{self, Mutation};
use crate::resources::projects;

impl Emulator {
    /// `GET projects/{p}`.
    pub(crate) fn project_get(&self, project: &str) -> Result<Value, ApiError> {
        self.ensure_project(project);
        let state = self.state.lock().expect("state poisoned");
        state
            .resources
            .get(&projects::key(project))
            .map(|v| v.as_ref().clone())
            .ok_or_else(|| ApiError::not_found(&projects::key(project)))
    }

    /// A project-level verb on `project`.
    pub(crate) async fn project_verb(
        self: &Arc<Self>,
        project: &str,
        verb: &str,
        req: &ApiRequest,
    ) -> Result<Value, ApiError> {
        let op = |target: String| Mutation {
            op_type: verb.to_string(),
            target,
            zone: None,
            target_id: None,
        };
        match verb {
            "enableXpnHost" | "disableXpnHost" => {
                let enable = verb == "enableXpnHost";
                self.mutate(project, req, |s| {
                    projects::set_host(s, project, enable)?;
                    Ok(op(projects::key(project)))
                })
                .await
            }
            "enableXpnResource" | "disableXpnResource" => {
                let attach = verb == "enableXpnResource";
                let body = methods::parse_body(&req.body)?;
                self.mutate(project, req, |s| {
                    projects::set_resource(s, project, &body, attach)?;
                    Ok(op(projects::key(project)))
                })
                .await
            }
            "getXpnHost" => {
                self.ensure_project(project);
                let state = self.state.lock().expect("state poisoned");
                Ok(projects::host_of(&state, project)
                    .and_then(|h| state.resources.get(&projects::key(&h)))
                    .map(|v| v.as_ref().clone())
                    .unwrap_or_else(|| json!({})))
            }
            "getXpnResources" => {
                self.ensure_project(project);
                let state = self.state.lock().expect("state poisoned");
                let resources: Vec<Value> = projects::services_of(&state, project)
                    .into_iter()
                    .map(|id| json!({"id": id, "type": "PROJECT"}))
                    .collect();
                Ok(json!({"kind": "compute#projectsGetXpnResources", "resources": resources}))
            }
            "listXpnHosts" => {
                self.ensure_project(project);
                let state = self.state.lock().expect("state poisoned");
                let items: Vec<Value> = state
                    .resources
                    .iter()
                    .filter(|(k, v)| k.split('/').count() == 2 && v["xpnProjectStatus"] == "HOST")
                    .map(|(_, v)| v.as_ref().clone())
                    .collect();
                Ok(
                    json!({"kind": "compute#xpnHostList", "id": format!("projects/{project}/listXpnHosts"),
                    "items": items, "selfLink": format!("{}projects/{project}/listXpnHosts", self.base)}),
                )
            }
            _ => Err(ApiError::not_found(&format!("projects/{project}/{verb}"))),
        }
    }
}
