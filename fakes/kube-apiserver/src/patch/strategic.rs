//! Strategic merge patch, as kubectl and client-go send it: maps merge recursively, `null`
//! deletes a field, lists merge by their patch merge key (`containers` by `name`, container
//! `ports` by `containerPort`, Service `ports` by `port`, `conditions` by `type`,
//! `readinessGates` by `conditionType`...) taken from the OpenAPI schema of the kind, primitive
//! lists with strategy `merge` are unions, and other lists are replaced. Directives: `$patch:
//! replace|delete|merge`, `$retainKeys`, `$setElementOrder/<list>`,
//! `$deleteFromPrimitiveList/<list>`. Semantics from the Kubernetes "strategic merge patch" design
//! document (community/contributors/devel/sig-api-machinery/strategic-merge-patch.md).

use serde_json::{Map, Value};

use crate::schema::{ListStrategy, Schema};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Removes directives from a value that is inserted as a whole.
pub fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !(k.as_str() == PATCH
                        || k.as_str() == RETAIN_KEYS
                        || k.starts_with(SET_ORDER)
                        || k.starts_with(DELETE_FROM))
                })
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| i.get(PATCH).is_none() || i.as_object().is_some_and(|m| m.len() > 1))
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Merges `patch` into `doc` in place (`schema` of `doc`, `None` when unknown: lists replace).
pub fn merge(doc: &mut Value, patch: &Value, schema: Option<Schema<'_>>) {
    let Some(pmap) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    match pmap.get(PATCH).and_then(Value::as_str) {
        Some("replace") => {
            *doc = strip_directives(patch);
            return;
        }
        Some("delete") => {
            *doc = Value::Object(Map::new());
            return;
        }
        _ => {}
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let target = doc.as_object_mut().expect("object");
    for (k, pv) in pmap {
        if let Some(list) = k.strip_prefix(DELETE_FROM) {
            if let (Some(Value::Array(items)), Some(remove)) = (target.get_mut(list), pv.as_array())
            {
                items.retain(|i| !remove.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if pv.is_null() {
            target.remove(k);
            continue;
        }
        let field_schema = schema.and_then(|s| s.property(k));
        match (target.get_mut(k), pv) {
            (Some(ov), Value::Object(pm)) if ov.is_object() => {
                if pm.get(PATCH).and_then(Value::as_str) == Some("delete") {
                    target.remove(k);
                } else {
                    merge(ov, pv, field_schema);
                }
            }
            (Some(Value::Array(ov)), Value::Array(pa)) => merge_list(ov, pa, field_schema),
            (_, pv) => {
                let mut fresh = Value::Null;
                if pv.is_object() {
                    merge(&mut fresh, pv, field_schema);
                    if pv.get(PATCH).and_then(Value::as_str) == Some("delete") {
                        continue;
                    }
                } else if let Value::Array(pa) = pv {
                    let mut items = Vec::new();
                    merge_list(&mut items, pa, field_schema);
                    fresh = Value::Array(items);
                } else {
                    fresh = pv.clone();
                }
                target.insert(k.clone(), fresh);
            }
        }
    }
    if let Some(keep) = pmap.get(RETAIN_KEYS).and_then(Value::as_array) {
        target.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k)));
    }
    for (k, order) in pmap {
        if let (Some(list), Some(order)) = (k.strip_prefix(SET_ORDER), order.as_array()) {
            let key = schema
                .and_then(|s| s.property(list))
                .map(|s| s.list_strategy());
            if let Some(Value::Array(items)) = target.get_mut(list) {
                reorder(items, order, key);
            }
        }
    }
}

/// The first list element of `patch` that lacks its list's merge key (`name` of `containers`,
/// `containerPort` of `ports`...), or is not an object, as `spec.containers[1]`, if any. The real
/// server refuses such a patch ("map: ... does not contain declared merge key: name"); merged
/// here, the element would be appended again by every patch or apply that carries it.
/// `directives`: whether an element holding only `$patch`-style directives is allowed (strategic
/// merge patch: `{"$patch": "replace"}`); apply configurations carry no directives, so there
/// such an element is an element without its key too.
///
/// A merge key that is an object or a list (`"name": {"$patch": "delete"}`) is refused too:
/// merged here, its object was read as a directive and the element appended without its key;
/// kube-apiserver v1.28.7 panics in its strategic merge on it (the request is reset), and
/// answers 422 for a number (`cannot convert int64 to string`).
pub fn missing_merge_key(
    patch: &Value,
    schema: Option<Schema<'_>>,
    path: &str,
    directives: bool,
) -> Option<String> {
    patch
        .as_object()?
        .iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .find_map(|(k, v)| {
            let field = schema.and_then(|s| s.property(k));
            let here = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            let Value::Array(items) = v else {
                return missing_merge_key(v, field, &here, directives);
            };
            let key = match field.map(|f| f.list_strategy()) {
                Some(ListStrategy::MergeByKey(key)) => Some(key),
                _ => None,
            };
            let item_schema = field.and_then(|f| f.items());
            items.iter().enumerate().find_map(|(i, item)| {
                let directive_only = directives
                    && item
                        .as_object()
                        .is_some_and(|m| !m.is_empty() && m.keys().all(|k| k.starts_with('$')));
                let value = item.get(key.as_deref().unwrap_or_default());
                match &key {
                    Some(key) if !directive_only && value.is_none_or(Value::is_null) => {
                        Some(format!(
                            "{here}[{i}] has no merge key {key:?}; set {here}[{i}].{key}"
                        ))
                    }
                    Some(key) if value.is_some_and(|v| v.is_object() || v.is_array()) => {
                        Some(format!(
                            "{here}[{i}].{key} is the list's merge key and must be a string or a number, not {}",
                            value.map(Value::to_string).unwrap_or_default()
                        ))
                    }
                    _ => missing_merge_key(item, item_schema, &format!("{here}[{i}]"), directives),
                }
            })
        })
}

fn reorder(items: &mut [Value], order: &[Value], strategy: Option<ListStrategy>) {
    let position = |item: &Value| -> usize {
        order
            .iter()
            .position(|o| match &strategy {
                Some(ListStrategy::MergeByKey(k)) => o.get(k).is_some() && o.get(k) == item.get(k),
                _ => o == item,
            })
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(|i| position(i));
}

fn merge_list(doc: &mut Vec<Value>, patch: &[Value], schema: Option<Schema<'_>>) {
    let strategy = schema
        .map(|s| s.list_strategy())
        .unwrap_or(ListStrategy::Replace);
    let replace = patch.iter().any(|i| {
        i.get(PATCH).and_then(Value::as_str) == Some("replace")
            && i.as_object().is_some_and(|m| m.len() == 1)
    });
    if replace || strategy == ListStrategy::Replace {
        *doc = patch
            .iter()
            .filter(|i| !(i.get(PATCH).is_some() && i.as_object().is_some_and(|m| m.len() == 1)))
            .map(strip_directives)
            .collect();
        return;
    }
    let item_schema = schema.and_then(|s| s.items());
    match strategy {
        ListStrategy::MergeByKey(key) => {
            for p in patch {
                let Some(kv) = p.get(&key) else {
                    doc.push(strip_directives(p));
                    continue;
                };
                let pos = doc.iter().position(|d| d.get(&key) == Some(kv));
                let delete = p.get(PATCH).and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        doc.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge(&mut doc[i], p, item_schema),
                    (None, false) => {
                        let mut fresh = Value::Null;
                        merge(&mut fresh, p, item_schema);
                        doc.push(fresh);
                    }
                }
            }
        }
        ListStrategy::Set => {
            for p in patch {
                if !doc.contains(p) {
                    doc.push(p.clone());
                }
            }
        }
        ListStrategy::Replace => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OpenApi;
    use serde_json::json;

    fn pod_schema(api: &OpenApi) -> Schema<'_> {
        api.schema_for("", "v1", "Pod").expect("Pod schema")
    }

    #[test]
    fn containers_merge_by_name_and_ports_by_container_port() {
        let api = OpenApi::new();
        let mut pod = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "b", "image": "y"}]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "image": "x2", "ports": [{"containerPort": 8080}]}]}});
        merge(&mut pod, &patch, Some(pod_schema(&api)));
        let cs = pod["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0]["image"], "x2");
        assert_eq!(cs[0]["ports"].as_array().unwrap().len(), 2);
        assert_eq!(cs[1]["name"], "b");
    }

    #[test]
    fn service_ports_merge_by_port_and_delete_directive() {
        let api = OpenApi::new();
        let schema = api.schema_for("", "v1", "Service").unwrap();
        let mut svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9376}, {"port": 443, "$patch": "delete"}]}});
        merge(&mut svc, &patch, Some(schema));
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 80, "targetPort": 9376}])
        );
    }

    #[test]
    fn conditions_merge_by_type_and_null_deletes() {
        let api = OpenApi::new();
        let mut pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "cloud.google.com/load-balancer-neg-ready", "status": "False"}]}});
        let patch = json!({"metadata": {"labels": {"a": null}}, "status": {"conditions": [
            {"type": "cloud.google.com/load-balancer-neg-ready", "status": "True"}]}});
        merge(&mut pod, &patch, Some(pod_schema(&api)));
        assert_eq!(pod["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(pod["status"]["conditions"][0]["status"], "False");
        assert_eq!(pod["status"]["conditions"][1]["status"], "True");
    }

    #[test]
    fn finalizers_are_a_union_and_lists_without_key_replace() {
        let api = OpenApi::new();
        let mut pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "c", "args": ["1", "2"]}]}});
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "c", "args": ["3"]}]}});
        merge(&mut pod, &patch, Some(pod_schema(&api)));
        assert_eq!(pod["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(pod["spec"]["containers"][0]["args"], json!(["3"]));
    }

    #[test]
    fn merge_keys_that_are_objects_or_lists_are_refused() {
        let api = OpenApi::new();
        let patch = json!({"spec": {"containers": [{"name": "web"}, {"name": {"$patch": "delete"}, "image": "x"}]}});
        assert_eq!(
            missing_merge_key(&patch, Some(pod_schema(&api)), "", true).as_deref(),
            Some(
                r#"spec.containers[1].name is the list's merge key and must be a string or a number, not {"$patch":"delete"}"#
            )
        );
        let patch = json!({"spec": {"containers": [{"name": ["a"]}]}});
        assert!(missing_merge_key(&patch, Some(pod_schema(&api)), "", true).is_some());
        let patch = json!({"spec": {"containers": [{"name": "web"}, {"$patch": "replace"}]}});
        assert_eq!(
            missing_merge_key(&patch, Some(pod_schema(&api)), "", true),
            None
        );
    }

    #[test]
    fn replace_directive_retain_keys_and_element_order() {
        let api = OpenApi::new();
        let mut pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}],
            "volumes": [{"name": "v", "emptyDir": {}}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}]}});
        merge(&mut pod, &patch, Some(pod_schema(&api)));
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "b"}, {"name": "a"}])
        );
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "v", "configMap": {"name": "cm"}}])
        );
        let replace = json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "z"}]}});
        merge(&mut pod, &replace, Some(pod_schema(&api)));
        assert_eq!(pod["spec"]["containers"], json!([{"name": "z"}]));
    }
}
