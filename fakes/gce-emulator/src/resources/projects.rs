//! `projects`: the project resource (`compute#project`) and Shared VPC (XPN): a host project
//! (`enableXpnHost`) shares its networks with the service projects attached to it
//! (`enableXpnResource`); a service project's instances and NEGs may then name the host's
//! networks, and `getXpnHost` / `getXpnResources` report the relation (Compute API v1
//! reference, `projects`; Google Cloud "Shared VPC" overview).
//!
//! Stored in the resource store like everything else, so the state file keeps it: the project
//! at key `projects/{p}`, each attached service project at `projects/{host}/xpnResources/{svc}`
//! (the `XpnResourceId` JSON, `{"id": svc, "type": "PROJECT"}`).

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::collections::name_of;
use crate::resources::default_network;
use crate::store::State;

pub use crate::project_number::number;

/// The Compute Engine default service account of `project`
/// (`{number}-compute@developer.gserviceaccount.com`), what `"email": "default"` stands for.
pub fn default_service_account(project: &str) -> String {
    format!("{}-compute@developer.gserviceaccount.com", number(project))
}

/// Key of the project resource.
pub fn key(project: &str) -> String {
    format!("projects/{project}")
}

/// Key of the record that `service` is attached to `host`.
pub fn xpn_key(host: &str, service: &str) -> String {
    format!("projects/{host}/xpnResources/{service}")
}

/// The `compute#project` JSON of a new project.
pub fn new_project(base: &str, project: &str) -> Value {
    json!({
        "kind": "compute#project",
        "id": number(project).to_string(),
        "creationTimestamp": crate::store::timestamp(),
        "name": project,
        "selfLink": format!("{base}projects/{project}"),
        "defaultServiceAccount": default_service_account(project),
        "defaultNetworkTier": "PREMIUM",
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
        "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": "42WmSpB8rSM="},
        "vmDnsSetting": "ZONAL_ONLY",
    })
}

/// Sets up `project` on its first use, as Google Cloud creates a project: the project
/// resource, its auto-mode `default` network and that network's four default firewall rules
/// (see [`default_network`]). Returns true when something was created (a mutation to
/// publish). Nothing that already exists is replaced.
pub fn ensure(state: &mut State, project: &str) -> bool {
    if !state.mark_project(project) {
        return false;
    }
    let mut created = false;
    let base = state.base.clone();
    if !state.resources.contains_key(&key(project)) {
        state.put(key(project), new_project(&base, project));
        created = true;
    }
    let network = format!("projects/{project}/global/networks/default");
    if !state.resources.contains_key(&network) {
        state.put(network.clone(), default_network::network(&base, &network));
        for (k, v) in default_network::firewall_rules(&base, project) {
            if !state.resources.contains_key(&k) {
                state.put(k, v);
            }
        }
        created = true;
    }
    created
}

/// Whether `project` is a Shared VPC host.
pub fn is_host(state: &State, project: &str) -> bool {
    state
        .resources
        .get(&key(project))
        .is_some_and(|p| p["xpnProjectStatus"] == "HOST")
}

/// Whether `service` is attached to the Shared VPC host `host` (so it may use host networks).
pub fn attached(state: &State, host: &str, service: &str) -> bool {
    is_host(state, host) && state.resources.contains_key(&xpn_key(host, service))
}

/// The host `service` is attached to, if any.
pub fn host_of(state: &State, service: &str) -> Option<String> {
    let suffix = format!("/xpnResources/{service}");
    state
        .resources
        .keys()
        .filter(|k| k.ends_with(&suffix))
        .filter_map(|k| k.split('/').nth(1))
        .find(|h| is_host(state, h))
        .map(str::to_string)
}

/// The service projects attached to `host`, sorted.
pub fn services_of(state: &State, host: &str) -> Vec<String> {
    state
        .scan(&format!("projects/{host}/xpnResources/"))
        .map(|(k, _)| name_of(k).to_string())
        .collect()
}

/// `enableXpnHost` (`enable`) / `disableXpnHost`. Disabling a host with attached service
/// projects is refused, as in the real API.
pub fn set_host(state: &mut State, project: &str, enable: bool) -> Result<(), ApiError> {
    let k = key(project);
    let mut p = state
        .resources
        .get(&k)
        .map(|v| v.as_ref().clone())
        .unwrap_or_else(|| new_project(&state.base, project));
    if !enable && !services_of(state, project).is_empty() {
        return Err(ApiError::new(
            400,
            "invalid",
            format!("Project '{project}' has service projects attached; detach them with disableXpnResource first."),
        ));
    }
    p["xpnProjectStatus"] = json!(if enable {
        "HOST"
    } else {
        "UNSPECIFIED_XPN_PROJECT_STATUS"
    });
    state.put(k, p);
    Ok(())
}

/// `enableXpnResource` (`attach`) / `disableXpnResource` on host `host` with the request body
/// `{"xpnResource": {"id": "svc", "type": "PROJECT"}}`.
pub fn set_resource(
    state: &mut State,
    host: &str,
    body: &serde_json::Map<String, Value>,
    attach: bool,
) -> Result<String, ApiError> {
    let verb = if attach {
        "projectsEnableXpnResourceRequest"
    } else {
        "projectsDisableXpnResourceRequest"
    };
    let r = body
        .get("xpnResource")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::required(&format!("{verb}.xpnResource")))?;
    let id = r
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::required(&format!("{verb}.xpnResource.id")))?
        .to_string();
    let ty = r.get("type").and_then(Value::as_str).unwrap_or("PROJECT");
    if ty != "PROJECT" {
        return Err(ApiError::bad_enum(
            &format!("{verb}.xpnResource.type"),
            ty,
            &["PROJECT"],
        ));
    }
    if !is_host(state, host) {
        return Err(ApiError::new(
            400,
            "invalid",
            format!(
                "Project '{host}' is not a Shared VPC host project; run enableXpnHost on it first."
            ),
        ));
    }
    if attach {
        if let Some(other) = host_of(state, &id).filter(|h| h != host) {
            return Err(ApiError::new(
                400,
                "invalid",
                format!(
                    "Project '{id}' is already attached to the Shared VPC host project '{other}'."
                ),
            ));
        }
        state.put(xpn_key(host, &id), json!({"id": id, "type": "PROJECT"}));
    } else {
        state.remove(&xpn_key(host, &id));
    }
    Ok(id)
}
