//! OpenAPI v3 documents: the index (`/openapi/v3`) and one document per group version. The
//! built-in documents are the real v1.36 ones (`openapi/v3/`, trimmed to the served resources);
//! CRD group versions get a document generated from the CRD schema, with the PATCH operations
//! and `fieldValidation` parameter kubectl looks for before it sends server-side field
//! validation. The same component schemas drive strategic merge (see [`crate::schema`]).
//! `/openapi/v2` is [`crate::openapi_v2`].

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::registry::{Registry, ResourceInfo};
use crate::schema::Schema;

/// The real documents, by group-version path (`api/v1`, `apis/networking.k8s.io/v1`).
pub const BUILTIN_V3: &[(&str, &str)] = &[
    ("api/v1", include_str!("../openapi/v3/api_v1.json")),
    (
        "apis/admissionregistration.k8s.io/v1",
        include_str!("../openapi/v3/apis_admissionregistration.k8s.io_v1.json"),
    ),
    (
        "apis/apiextensions.k8s.io/v1",
        include_str!("../openapi/v3/apis_apiextensions.k8s.io_v1.json"),
    ),
    (
        "apis/apps/v1",
        include_str!("../openapi/v3/apis_apps_v1.json"),
    ),
    (
        "apis/coordination.k8s.io/v1",
        include_str!("../openapi/v3/apis_coordination.k8s.io_v1.json"),
    ),
    (
        "apis/discovery.k8s.io/v1",
        include_str!("../openapi/v3/apis_discovery.k8s.io_v1.json"),
    ),
    (
        "apis/events.k8s.io/v1",
        include_str!("../openapi/v3/apis_events.k8s.io_v1.json"),
    ),
    (
        "apis/networking.k8s.io/v1",
        include_str!("../openapi/v3/apis_networking.k8s.io_v1.json"),
    ),
    (
        "apis/policy/v1",
        include_str!("../openapi/v3/apis_policy_v1.json"),
    ),
    (
        "apis/rbac.authorization.k8s.io/v1",
        include_str!("../openapi/v3/apis_rbac.authorization.k8s.io_v1.json"),
    ),
];

/// Parsed component schemas of the built-in documents, indexed by GVK.
pub struct OpenApi {
    /// The OpenAPI v2 document (`/openapi/v2`).
    pub v2: crate::openapi_v2::OpenApiV2,
    components: HashMap<String, Value>,
    by_gvk: HashMap<(String, String, String), String>,
}

impl Default for OpenApi {
    fn default() -> Self {
        Self::new()
    }
}

fn hash(doc: &str) -> String {
    let digest = Sha256::digest(doc.as_bytes());
    digest.iter().take(32).map(|b| format!("{b:02X}")).collect()
}

impl OpenApi {
    /// Parses the embedded documents (a few hundred milliseconds in debug builds).
    pub fn new() -> Self {
        let mut components = HashMap::new();
        let mut by_gvk = HashMap::new();
        for (_, doc) in BUILTIN_V3 {
            let v: Value = serde_json::from_str(doc).expect("embedded OpenAPI JSON is valid");
            if let Some(schemas) = v["components"]["schemas"].as_object() {
                for (name, schema) in schemas {
                    for gvk in schema["x-kubernetes-group-version-kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let key = (
                            gvk["group"].as_str().unwrap_or_default().to_string(),
                            gvk["version"].as_str().unwrap_or_default().to_string(),
                            gvk["kind"].as_str().unwrap_or_default().to_string(),
                        );
                        by_gvk.insert(key, name.clone());
                    }
                    components.insert(name.clone(), schema.clone());
                }
            }
        }
        OpenApi {
            v2: crate::openapi_v2::OpenApiV2::new(),
            components,
            by_gvk,
        }
    }

    /// The schema of a built-in kind.
    pub fn schema_for(&self, group: &str, version: &str, kind: &str) -> Option<Schema<'_>> {
        let name = self
            .by_gvk
            .get(&(group.to_string(), version.to_string(), kind.to_string()))?;
        Some(Schema {
            node: &self.components[name],
            components: &self.components,
        })
    }

    /// The component table (for CRD schemas, whose nodes are inline).
    pub fn components(&self) -> &HashMap<String, Value> {
        &self.components
    }

    /// The schema strategic merge and apply use for `res`: the built-in schema, or the CRD's
    /// `openAPIV3Schema`.
    pub fn schema_of<'a>(&'a self, res: &'a ResourceInfo) -> Option<Schema<'a>> {
        match &res.crd_version {
            Some(v) => v["schema"].get("openAPIV3Schema").map(|node| Schema {
                node,
                components: &self.components,
            }),
            None => self.schema_for(&res.group, &res.version, &res.kind),
        }
    }

    /// The document for `gv_path` (`api/v1`, `apis/{group}/{version}`), or `None`.
    pub fn document(&self, registry: &Registry, gv_path: &str) -> Option<String> {
        if let Some((_, doc)) = BUILTIN_V3.iter().find(|(p, _)| *p == gv_path) {
            return Some(doc.to_string());
        }
        let rest = gv_path.strip_prefix("apis/")?;
        let (group, version) = rest.split_once('/')?;
        let resources: Vec<_> = registry
            .all()
            .into_iter()
            .filter(|r| r.group == group && r.version == version && r.crd_version.is_some())
            .collect();
        if resources.is_empty() {
            return None;
        }
        Some(self.crd_document(&resources).to_string())
    }

    /// `GET /openapi/v3`: every group version with a hashed `serverRelativeURL`.
    pub fn index(&self, registry: &Registry) -> Value {
        let mut paths = BTreeMap::new();
        let mut gvs: Vec<String> = BUILTIN_V3.iter().map(|(p, _)| p.to_string()).collect();
        for r in registry.all() {
            if r.crd_version.is_some() {
                gvs.push(format!("apis/{}/{}", r.group, r.version));
            }
        }
        for gv in gvs {
            if let Some(doc) = self.document(registry, &gv) {
                paths.insert(
                    gv.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash(&doc))}),
                );
            }
        }
        json!({"paths": paths})
    }

    fn crd_document(&self, resources: &[std::sync::Arc<ResourceInfo>]) -> Value {
        let mut schemas = serde_json::Map::new();
        let mut paths = serde_json::Map::new();
        let mut needed = vec![
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".to_string(),
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".to_string(),
            "io.k8s.apimachinery.pkg.apis.meta.v1.Status".to_string(),
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions".to_string(),
        ];
        for r in resources {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            let reversed: Vec<&str> = r.group.split('.').rev().collect();
            let name = format!("{}.{}.{}", reversed.join("."), r.version, r.kind);
            let mut schema = r
                .crd_version
                .as_ref()
                .and_then(|v| v["schema"].get("openAPIV3Schema").cloned())
                .unwrap_or_else(
                    || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                );
            schema["properties"]["apiVersion"] = json!({"type": "string"});
            schema["properties"]["kind"] = json!({"type": "string"});
            schema["properties"]["metadata"] = json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]});
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            schemas.insert(name.clone(), schema);
            let list_name = format!("{name}List");
            schemas.insert(list_name.clone(), json!({
                "type": "object", "required": ["items"],
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{name}")}},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}]}},
                "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version, "kind": format!("{}List", r.kind)}],
            }));
            needed.push("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta".into());
            let obj_ref = json!({"$ref": format!("#/components/schemas/{name}")});
            let content = json!({"application/json": {"schema": obj_ref}, "application/yaml": {"schema": obj_ref}});
            let ok = json!({"200": {"description": "OK", "content": content}});
            let q = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
            let patch_body = json!({"content": {
                "application/apply-patch+yaml": {"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                "application/json-patch+json": {"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                "application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}}, "required": true});
            let op = |verb: &str, action: &str, params: Vec<Value>, body: Option<Value>| {
                let mut o = json!({"operationId": format!("{verb}{}", r.kind), "parameters": params, "responses": ok,
                    "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk});
                if let Some(b) = body {
                    o["requestBody"] = b;
                }
                o
            };
            let write_params = || vec![q("dryRun"), q("fieldManager"), q("fieldValidation")];
            let object_item = |sub: &str| {
                json!({
                    "get": op("read", "get", vec![], None),
                    "put": op("replace", "put", write_params(), Some(json!({"content": {"application/json": {"schema": obj_ref}}, "required": true}))),
                    "patch": op("patch", "patch", { let mut p = write_params(); p.push(q("force")); p }, Some(patch_body.clone())),
                    "delete": if sub.is_empty() { op("delete", "delete", vec![q("gracePeriodSeconds"), q("propagationPolicy")], None) } else { Value::Null },
                    "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                })
            };
            let base = if r.namespaced {
                format!(
                    "/apis/{}/{}/namespaces/{{namespace}}/{}",
                    r.group, r.version, r.plural
                )
            } else {
                format!("/apis/{}/{}/{}", r.group, r.version, r.plural)
            };
            let mut item = object_item("");
            if let Some(m) = item.as_object_mut() {
                m.retain(|_, v| !v.is_null());
            }
            paths.insert(format!("{base}/{{name}}"), item);
            paths.insert(base.clone(), json!({
                "get": op("list", "list", vec![q("labelSelector"), q("fieldSelector"), q("limit"), q("continue"), q("watch")], None),
                "post": op("create", "post", write_params(), Some(json!({"content": {"application/json": {"schema": obj_ref}}, "required": true}))),
            }));
            if r.status_subresource {
                let mut st = object_item("status");
                if let Some(m) = st.as_object_mut() {
                    m.retain(|_, v| !v.is_null());
                }
                paths.insert(format!("{base}/{{name}}/status"), st);
            }
        }
        // Copy the apimachinery schemas the generated ones reference, with their closure.
        while let Some(n) = needed.pop() {
            if schemas.contains_key(&n) {
                continue;
            }
            if let Some(s) = self.components.get(&n) {
                let text = s.to_string();
                for part in text.split("#/components/schemas/").skip(1) {
                    let dep: String = part.chars().take_while(|c| *c != '"').collect();
                    needed.push(dep);
                }
                schemas.insert(n, s.clone());
            }
        }
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}, "paths": paths, "components": {"schemas": schemas}})
    }
}
