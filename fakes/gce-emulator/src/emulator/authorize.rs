//! The one point of the request path where IAM decides ([`crate::identity`]): with `--iam`,
//! the caller's token must be valid (401) and its principal must hold every permission the
//! method needs (403, [`crate::iam_permissions::needed`]); `--iam-grant`'s restricted tokens
//! are checked after.

use serde_json::Value;

use super::route::Call;
use super::{op_key, ApiRequest, Emulator};
use crate::errors::ApiError;
use crate::methods;

impl Emulator {
    /// Refuses a call its principal may not make: with `--iam`, each permission its method
    /// needs ([`crate::iam_permissions::needed`]) through the project's bindings; with
    /// `--iam-grant`, a mutating call of a restricted token outside its projects.
    pub(super) fn authorize(
        &self,
        call: &Call,
        method: &str,
        req: &ApiRequest,
    ) -> Result<(), ApiError> {
        if self.identity.enforce {
            let principal = self.identity.authenticate(req.token.as_deref())?;
            if let Some((project, resource)) = iam_resource(call, req) {
                let body = methods::parse_body(&req.body).map_or(Value::Null, Value::Object);
                let needed = crate::iam_permissions::needed(method, &project, &resource, &body);
                self.identity
                    .authorize(method, principal.as_deref(), &needed)?;
            }
        }
        if crate::calls::is_reading(method) {
            return Ok(());
        }
        let (project, resource) = match call {
            Call::Insert(t) => {
                let name = methods::parse_body(&req.body)
                    .ok()
                    .and_then(|b| b.get("name")?.as_str().map(str::to_string))
                    .unwrap_or_default();
                (t.project.as_str(), format!("{}{name}", t.prefix()))
            }
            Call::Delete(t) | Call::Update(t, _) | Call::Custom(t, _) => {
                (t.project.as_str(), t.key())
            }
            Call::ProjectVerb(p, _) => (p.as_str(), format!("projects/{p}")),
            _ => return Ok(()),
        };
        self.config
            .grants
            .check(req.token.as_deref(), method, project, &resource)
    }
}

/// The project whose policy decides `call` and the resource IAM names in a refusal: the
/// resource itself (`projects/p/global/urlMaps/um`), a new resource's path for an insert, the
/// project (`projects/p`) for a list.
fn iam_resource(call: &Call, req: &ApiRequest) -> Option<(String, String)> {
    let project = |p: &str| Some((p.to_string(), format!("projects/{p}")));
    match call {
        Call::Insert(t) => {
            let name = methods::parse_body(&req.body)
                .ok()
                .and_then(|b| b.get("name")?.as_str().map(str::to_string))
                .unwrap_or_default();
            Some((t.project.clone(), format!("{}{name}", t.prefix())))
        }
        Call::Get(t) | Call::Delete(t) | Call::Update(t, _) | Call::Custom(t, _) => {
            Some((t.project.clone(), t.key()))
        }
        Call::List(t) => project(&t.project),
        Call::Aggregated(_, p) | Call::ZoneList(p) | Call::ProjectGet(p) => project(p),
        Call::ProjectVerb(p, _) | Call::OpList(p, _) => project(p),
        Call::ZoneGet(p, z) => Some((p.clone(), format!("projects/{p}/zones/{z}"))),
        Call::OpGet(p, z, n) | Call::OpWait(p, z, n) | Call::OpDelete(p, z, n) => {
            Some((p.clone(), op_key(p, z.as_deref(), n)))
        }
    }
}
