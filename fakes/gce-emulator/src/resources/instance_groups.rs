//! `instanceGroups` (zonal, unmanaged): answered for `get` and `list` so that clients which
//! look for a cluster's instance groups (GKE's Ingress controller and its garbage collector)
//! get the real API's answers: an empty list, 404 for a named group. The emulator runs no VMs
//! in groups and load balancer backends are NEGs only, so inserts, deletes and the membership
//! verbs (`addInstances`, `removeInstances`, `setNamedPorts`) are refused, as are
//! instance-group backends of a backend service (see `backend_services`).

use crate::errors::ApiError;

/// The answer to any write: 400 `invalid`, naming what to use instead.
pub fn refuse_write() -> ApiError {
    ApiError::new(
        400,
        "invalid",
        "Instance groups are not emulated: instanceGroups answer get and list only. Use zonal GCE_VM_IP_PORT network endpoint groups (NEGs) as backends (Services annotated cloud.google.com/neg: '{\"ingress\": true}').",
    )
}
