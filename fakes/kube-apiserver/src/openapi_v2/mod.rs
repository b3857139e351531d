//! OpenAPI v2 (`GET /openapi/v2`): the real v1.36 document (`openapi/v2.json`, trimmed by
//! `openapi/trim.py` to the served resources) plus a definition and a List definition for every
//! served custom resource version, built as apiextensions-apiserver's OpenAPI builder does for
//! v2 (`pkg/controller/openapi/builder/builder.go`, `v2/conversion.go` `ToStructuralOpenAPIV2`:
//! junctors dropped, nullable and preserve-unknown-fields nodes untyped). Served as JSON, or as
//! the gnostic protobuf kubectl asks for ([`gnostic`]); kubectl validates with it (`kubectl
//! apply -f` of a `kind: List`). CRD paths are not added (no client reads them from v2).

pub mod from_json;
pub mod gnostic;

use serde_json::{json, Map, Value};

use crate::registry::Registry;

/// The media type of the protobuf form as the server names it in `Content-Type` (clients may
/// ask for it, or for the deprecated `...spec.v2@v1.0+protobuf` kubectl sends).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The two forms of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Format {
    /// `application/json`.
    Json,
    /// [`PROTOBUF`].
    Protobuf,
}

/// The form an `Accept` header asks for, clause by clause as kube-openapi's handler
/// (`pkg/handler/handler.go`) matches them: JSON first, then either protobuf name; `*` matches
/// either part. `None`: nothing acceptable (406). No header is JSON.
pub fn negotiate(accept: &str) -> Option<V2Format> {
    if accept.trim().is_empty() {
        return Some(V2Format::Json);
    }
    let offered = [
        ("application", "json", V2Format::Json),
        (
            "application",
            "com.github.proto-openapi.spec.v2@v1.0+protobuf",
            V2Format::Protobuf,
        ),
        (
            "application",
            "com.github.proto-openapi.spec.v2.v1.0+protobuf",
            V2Format::Protobuf,
        ),
    ];
    for clause in accept.split(',') {
        let media = clause.split(';').next().unwrap_or_default().trim();
        let (ty, sub) = media.split_once('/').unwrap_or((media, ""));
        for (oty, osub, format) in offered {
            if (ty == oty || ty == "*") && (sub == osub || sub == "*") {
                return Some(format);
            }
        }
    }
    None
}

/// The embedded document, parsed once.
pub struct OpenApiV2 {
    builtin: Value,
}

impl Default for OpenApiV2 {
    fn default() -> Self {
        Self::new()
    }
}

/// `ToStructuralOpenAPIV2` of apiextensions-apiserver, on a JSON schema node (recursively).
pub fn to_v2_schema(node: &Value) -> Value {
    let Some(m) = node.as_object() else {
        return node.clone();
    };
    let mut out: Map<String, Value> = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "allOf" | "oneOf" | "anyOf" | "not" | "nullable" | "x-kubernetes-validations" => {}
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, s)| (name.clone(), to_v2_schema(s)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_v2_schema(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let nullable = m.get("nullable").and_then(Value::as_bool) == Some(true);
    let preserve = m
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    if nullable || preserve {
        out.remove("items");
        out.remove("properties");
    }
    if nullable {
        out.remove("type");
    }
    let ty = out.get("type").and_then(Value::as_str).map(str::to_string);
    if (ty.as_deref() == Some("array") && !out.contains_key("items"))
        || (preserve && ty.as_deref() == Some("object"))
    {
        out.remove("type");
    }
    // Required fields that are nullable are not required in v2.
    let nullable_props: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, s)| s.get("nullable").and_then(Value::as_bool) == Some(true))
        .map(|(n, _)| n.clone())
        .collect();
    if let Some(Value::Array(req)) = out.get_mut("required") {
        req.retain(|r| {
            !nullable_props
                .iter()
                .any(|n| Some(n.as_str()) == r.as_str())
        });
        if req.is_empty() {
            out.remove("required");
        }
    }
    Value::Object(out)
}

impl OpenApiV2 {
    /// Parses the embedded document.
    pub fn new() -> Self {
        let builtin = serde_json::from_str(include_str!("../../openapi/v2.json"))
            .expect("embedded OpenAPI v2 JSON is valid");
        OpenApiV2 { builtin }
    }

    /// The document with the CRDs currently served.
    pub fn document(&self, registry: &Registry) -> Value {
        let mut doc = self.builtin.clone();
        let meta = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.";
        for r in registry.all() {
            let Some(version) = &r.crd_version else {
                continue;
            };
            let reversed: Vec<&str> = r.group.split('.').rev().collect();
            let name = format!("{}.{}.{}", reversed.join("."), r.version, r.kind);
            let mut schema = version["schema"]
                .get("openAPIV3Schema")
                .map(to_v2_schema)
                .unwrap_or_else(|| json!({}));
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            if !preserve {
                schema["properties"]["apiVersion"] = json!({"type": "string"});
                schema["properties"]["kind"] = json!({"type": "string"});
                schema["properties"]["metadata"] = json!({"$ref": format!("{meta}ObjectMeta")});
            }
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
            doc["definitions"][&name] = schema;
            doc["definitions"][format!("{name}List")] = json!({
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("#/definitions/{name}")}},
                    "metadata": {"$ref": format!("{meta}ListMeta")},
                },
                "x-kubernetes-group-version-kind":
                    [{"group": r.group, "version": r.version, "kind": format!("{}List", r.kind)}],
            });
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn accept_negotiation_follows_the_clause_order() {
        assert_eq!(
            negotiate("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
            Some(V2Format::Protobuf)
        );
        assert_eq!(negotiate("*/*"), Some(V2Format::Json));
        assert_eq!(
            negotiate("text/html, application/json"),
            Some(V2Format::Json)
        );
        assert_eq!(negotiate("application/yaml"), None);
    }

    #[test]
    fn v2_conversion_untypes_nullable_and_preserved_nodes() {
        let v3 = json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "string", "nullable": true},
            "b": {"type": "array", "items": {"type": "string"}, "oneOf": [{"required": ["x"]}]},
            "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                  "properties": {"d": {"type": "string"}}},
        }});
        let v2 = to_v2_schema(&v3);
        assert_eq!(
            v2,
            json!({"type": "object", "required": ["b"], "properties": {
                "a": {},
                "b": {"type": "array", "items": {"type": "string"}},
                "c": {"x-kubernetes-preserve-unknown-fields": true},
            }})
        );
    }

    #[test]
    fn protobuf_document_decodes_with_definitions_and_extensions() {
        let doc = OpenApiV2::new().document(&Registry::new());
        let bytes = from_json::encode(&doc);
        let decoded = gnostic::Document::decode(bytes.as_slice()).expect("decodes");
        let defs = decoded
            .definitions
            .expect("definitions")
            .additional_properties;
        let ingress = defs
            .iter()
            .find(|d| d.name == "io.k8s.api.networking.v1.Ingress")
            .and_then(|d| d.value.clone())
            .expect("Ingress definition");
        let gvk = ingress
            .vendor_extension
            .iter()
            .find(|e| e.name == "x-kubernetes-group-version-kind")
            .and_then(|e| e.value.clone())
            .expect("gvk extension");
        let parsed: Value = serde_yaml::from_str(&gvk.yaml).expect("yaml");
        assert_eq!(
            parsed,
            json!([{"group": "networking.k8s.io", "kind": "Ingress", "version": "v1"}])
        );
        let props = ingress
            .properties
            .expect("properties")
            .additional_properties;
        let spec = props.iter().find(|p| p.name == "spec").expect("spec");
        assert_eq!(
            spec.value.as_ref().map(|s| s.r#ref.as_str()),
            Some("#/definitions/io.k8s.api.networking.v1.IngressSpec")
        );
    }
}
