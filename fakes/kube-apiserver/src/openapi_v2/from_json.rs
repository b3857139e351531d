//! The conversion from the JSON OpenAPI v2 document to the [`gnostic`](super::gnostic)
//! messages, as gnostic's compiler performs it on a real server (kube-openapi
//! `ToProtoBinary`): every value of an `Any` as YAML text (JSON is YAML), vendor extensions
//! (`x-*` keys) as `NamedAny`s, `$ref`s kept, body/query/path parameters in their `oneof` arms.

use prost::Message;
use serde_json::{Map, Value};

use super::gnostic::*;

fn any(v: &Value) -> Any {
    Any {
        yaml: format!("{v}\n"),
    }
}

fn text(m: &Map<String, Value>, k: &str) -> String {
    m.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn strings(m: &Map<String, Value>, k: &str) -> Vec<String> {
    m.get(k)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn extensions(m: &Map<String, Value>) -> Vec<NamedAny> {
    m.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

/// A JSON schema object as gnostic's compiler reads it.
pub fn schema(v: &Value) -> Schema {
    let empty = Map::new();
    let m = v.as_object().unwrap_or(&empty);
    let f = |k: &str| m.get(k).and_then(Value::as_f64).unwrap_or_default();
    let i = |k: &str| m.get(k).and_then(Value::as_i64).unwrap_or_default();
    let b = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or_default();
    Schema {
        r#ref: text(m, "$ref"),
        format: text(m, "format"),
        title: text(m, "title"),
        description: text(m, "description"),
        default: m.get("default").map(any),
        multiple_of: f("multipleOf"),
        maximum: f("maximum"),
        exclusive_maximum: b("exclusiveMaximum"),
        minimum: f("minimum"),
        exclusive_minimum: b("exclusiveMinimum"),
        max_length: i("maxLength"),
        min_length: i("minLength"),
        pattern: text(m, "pattern"),
        max_items: i("maxItems"),
        min_items: i("minItems"),
        unique_items: b("uniqueItems"),
        max_properties: i("maxProperties"),
        min_properties: i("minProperties"),
        required: strings(m, "required"),
        r#enum: m
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(any)
            .collect(),
        additional_properties: m.get("additionalProperties").map(|a| {
            Box::new(AdditionalPropertiesItem {
                oneof: Some(match a.as_bool() {
                    Some(flag) => AdditionalProperties::Boolean(flag),
                    None => AdditionalProperties::Schema(schema(a)),
                }),
            })
        }),
        r#type: m.get("type").map(|t| TypeItem {
            value: match t {
                Value::Array(a) => a
                    .iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect(),
                other => vec![other.as_str().unwrap_or_default().to_string()],
            },
        }),
        items: m.get("items").map(|it| ItemsItem {
            schema: match it {
                Value::Array(a) => a.iter().map(schema).collect(),
                one => vec![schema(one)],
            },
        }),
        all_of: m
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(schema)
            .collect(),
        properties: m
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| Properties {
                additional_properties: p
                    .iter()
                    .map(|(k, s)| NamedSchema {
                        name: k.clone(),
                        value: Some(schema(s)),
                    })
                    .collect(),
            }),
        discriminator: text(m, "discriminator"),
        read_only: b("readOnly"),
        example: m.get("example").map(any),
        vendor_extension: extensions(m),
    }
}

fn parameter(v: &Value) -> Parameter {
    let empty = Map::new();
    let m = v.as_object().unwrap_or(&empty);
    let required = m.get("required").and_then(Value::as_bool).unwrap_or(false);
    let unique = m
        .get("uniqueItems")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let oneof = match text(m, "in").as_str() {
        "body" => ParameterOneof::BodyParameter(BodyParameter {
            description: text(m, "description"),
            name: text(m, "name"),
            r#in: "body".into(),
            required,
            schema: m.get("schema").map(schema),
        }),
        "path" => ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(NonBodyOneof::PathParameterSubSchema(PathParameter {
                required,
                r#in: "path".into(),
                description: text(m, "description"),
                name: text(m, "name"),
                r#type: text(m, "type"),
                unique_items: unique,
            })),
        }),
        other => ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(NonBodyOneof::QueryParameterSubSchema(SimpleParameter {
                required,
                r#in: other.to_string(),
                description: text(m, "description"),
                name: text(m, "name"),
                r#type: text(m, "type"),
                unique_items: unique,
            })),
        }),
    };
    Parameter { oneof: Some(oneof) }
}

fn parameters_item(v: &Value) -> ParametersItem {
    let oneof = match v.get("$ref").and_then(Value::as_str) {
        Some(r) => ParametersItemOneof::JsonReference(JsonReference {
            r#ref: r.to_string(),
            description: String::new(),
        }),
        None => ParametersItemOneof::Parameter(parameter(v)),
    };
    ParametersItem { oneof: Some(oneof) }
}

fn operation(v: &Value) -> Operation {
    let empty = Map::new();
    let m = v.as_object().unwrap_or(&empty);
    Operation {
        tags: strings(m, "tags"),
        summary: text(m, "summary"),
        description: text(m, "description"),
        operation_id: text(m, "operationId"),
        produces: strings(m, "produces"),
        consumes: strings(m, "consumes"),
        parameters: m
            .get("parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(parameters_item)
            .collect(),
        responses: m
            .get("responses")
            .and_then(Value::as_object)
            .map(|r| Responses {
                response_code: r
                    .iter()
                    .map(|(code, resp)| NamedResponseValue {
                        name: code.clone(),
                        value: Some(ResponseValue {
                            response: Some(Response {
                                description: resp["description"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_string(),
                                schema: resp.get("schema").map(|s| SchemaItem {
                                    schema: Some(schema(s)),
                                }),
                            }),
                        }),
                    })
                    .collect(),
            }),
        schemes: strings(m, "schemes"),
        deprecated: m
            .get("deprecated")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        vendor_extension: extensions(m),
    }
}

fn path_item(v: &Value) -> PathItem {
    let op = |k: &str| v.get(k).map(operation);
    PathItem {
        r#ref: v["$ref"].as_str().unwrap_or_default().to_string(),
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: v["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(parameters_item)
            .collect(),
        vendor_extension: v.as_object().map(extensions).unwrap_or_default(),
    }
}

/// The whole document, as gnostic's compiler builds it from the JSON form.
pub fn document(v: &Value) -> Document {
    let named = |k: &str| v[k].as_object().cloned().unwrap_or_default();
    Document {
        swagger: v["swagger"].as_str().unwrap_or("2.0").to_string(),
        info: Some(Info {
            title: v["info"]["title"].as_str().unwrap_or_default().to_string(),
            version: v["info"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            description: v["info"]["description"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        }),
        paths: Some(Paths {
            vendor_extension: Vec::new(),
            path: named("paths")
                .iter()
                .map(|(p, item)| NamedPathItem {
                    name: p.clone(),
                    value: Some(path_item(item)),
                })
                .collect(),
        }),
        definitions: Some(Definitions {
            additional_properties: named("definitions")
                .iter()
                .map(|(n, s)| NamedSchema {
                    name: n.clone(),
                    value: Some(schema(s)),
                })
                .collect(),
        }),
        parameters: Some(ParameterDefinitions {
            additional_properties: named("parameters")
                .iter()
                .map(|(n, p)| NamedParameter {
                    name: n.clone(),
                    value: Some(parameter(p)),
                })
                .collect(),
        }),
        vendor_extension: v.as_object().map(extensions).unwrap_or_default(),
    }
}

/// The protobuf bytes of [`document`].
pub fn encode(v: &Value) -> Vec<u8> {
    document(v).encode_to_vec()
}
