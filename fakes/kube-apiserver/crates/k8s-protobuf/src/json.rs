//! The walk between a message and its Kubernetes JSON form (see the crate docs for the types
//! mapped specially and the rules for absent and empty values).

use std::collections::HashMap;

use base64::Engine as _;
use prost_reflect::Value as Pb;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage,
};
use serde_json::{Map, Value};

use crate::duration;
use crate::Error;

const META: &str = "apimachinery.pkg.apis.meta.v1.";

/// How a message whose JSON form is not its shape is written.
enum Special {
    Time,
    MicroTime,
    Duration,
    Quantity,
    IntOrString,
    Raw(&'static str),
    Items,
}

fn special(desc: &MessageDescriptor) -> Option<Special> {
    let name = desc.full_name();
    Some(match name {
        n if n == format!("{META}Time") => Special::Time,
        n if n == format!("{META}MicroTime") => Special::MicroTime,
        n if n == format!("{META}Duration") => Special::Duration,
        n if n == format!("{META}FieldsV1") => Special::Raw("Raw"),
        "apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
        "apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
        "apimachinery.pkg.runtime.RawExtension" => Special::Raw("raw"),
        n if n.ends_with(".ExtraValue") => Special::Items,
        _ => return None,
    })
}

/// Whether `field` is an embedded Go struct whose fields JSON shows in the parent object (the
/// list build.rs derives from the OpenAPI document).
fn is_inline(field: &FieldDescriptor) -> bool {
    static INLINE: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    INLINE
        .get_or_init(|| {
            include_str!(concat!(env!("OUT_DIR"), "/inline.txt"))
                .lines()
                .collect()
        })
        .contains(field.full_name())
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// The Kubernetes JSON form of `msg` (an object; a specially mapped message gives its JSON
/// value, `Null` for a zero time).
pub fn to_json(msg: &DynamicMessage) -> Value {
    if let Some(s) = special(&msg.descriptor()) {
        return special_to_json(msg, s);
    }
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        let v = field_to_json(&field, value);
        match v {
            Value::Object(inner) if is_inline(&field) => out.extend(inner),
            v if !is_empty(&v) => {
                out.insert(field.name().to_owned(), v);
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// What Go's `omitempty` leaves out and a protobuf body cannot tell from absent.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn field_to_json(field: &FieldDescriptor, value: &Pb) -> Value {
    match value {
        Pb::List(items) => Value::Array(items.iter().map(scalar_to_json).collect()),
        Pb::Map(entries) => {
            let mut m: Vec<(String, Value)> = entries
                .iter()
                .map(|(k, v)| (map_key(k), scalar_to_json(v)))
                .collect();
            m.sort_by(|a, b| a.0.cmp(&b.0));
            let _ = field;
            Value::Object(m.into_iter().collect())
        }
        other => scalar_to_json(other),
    }
}

fn map_key(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(i) => i.to_string(),
        MapKey::I64(i) => i.to_string(),
        MapKey::U32(i) => i.to_string(),
        MapKey::U64(i) => i.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn scalar_to_json(value: &Pb) -> Value {
    match value {
        Pb::Bool(b) => Value::from(*b),
        Pb::I32(i) => Value::from(*i),
        Pb::I64(i) => Value::from(*i),
        Pb::U32(i) => Value::from(*i),
        Pb::U64(i) => Value::from(*i),
        Pb::F32(f) => Value::from(f64::from(*f)),
        Pb::F64(f) => Value::from(*f),
        Pb::String(s) => Value::from(s.as_str()),
        Pb::Bytes(b) => Value::from(b64().encode(b)),
        Pb::EnumNumber(n) => Value::from(*n),
        Pb::Message(m) => {
            let v = to_json(m);
            // A present message is an object even when empty; a zero time is null.
            if v.is_null() {
                Value::Null
            } else {
                v
            }
        }
        Pb::List(_) | Pb::Map(_) => Value::Null,
    }
}

fn int_field(msg: &DynamicMessage, name: &str) -> i64 {
    match msg.get_field_by_name(name).as_deref() {
        Some(Pb::I64(i)) => *i,
        Some(Pb::I32(i)) => i64::from(*i),
        _ => 0,
    }
}

fn string_field(msg: &DynamicMessage, name: &str) -> String {
    match msg.get_field_by_name(name).as_deref() {
        Some(Pb::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn special_to_json(msg: &DynamicMessage, s: Special) -> Value {
    match s {
        Special::Time | Special::MicroTime => {
            let (secs, nanos) = (int_field(msg, "seconds"), int_field(msg, "nanos"));
            if secs == 0 && nanos == 0 {
                return Value::Null;
            }
            let Some(at) =
                chrono::DateTime::from_timestamp(secs, u32::try_from(nanos).unwrap_or(0))
            else {
                return Value::Null;
            };
            let format = if matches!(s, Special::Time) {
                chrono::SecondsFormat::Secs
            } else {
                chrono::SecondsFormat::Micros
            };
            Value::from(at.to_rfc3339_opts(format, true))
        }
        Special::Duration => Value::from(duration::format(int_field(msg, "duration"))),
        Special::Quantity => Value::from(string_field(msg, "string")),
        Special::IntOrString => {
            if int_field(msg, "type") == 1 {
                Value::from(string_field(msg, "strVal"))
            } else {
                Value::from(int_field(msg, "intVal"))
            }
        }
        Special::Raw(field) => match msg.get_field_by_name(field).as_deref() {
            Some(Pb::Bytes(b)) if !b.is_empty() => serde_json::from_slice(b).unwrap_or(Value::Null),
            _ => Value::Null,
        },
        Special::Items => match msg.get_field_by_name("items").as_deref() {
            Some(Pb::List(items)) => Value::Array(items.iter().map(scalar_to_json).collect()),
            _ => Value::Array(Vec::new()),
        },
    }
}

fn bad(path: &str, reason: impl Into<String>) -> Error {
    Error::Json {
        field: path.to_owned(),
        reason: reason.into(),
    }
}

/// The message `desc` holding the JSON value `v` (an object; or the JSON form of a specially
/// mapped message). Keys the message does not define (`apiVersion`, `kind` of a top-level
/// object) are skipped; `null` values are absent.
///
/// Errors: [`Error::Json`] naming the path of a value of the wrong JSON type.
pub fn from_json(desc: &MessageDescriptor, v: &Value) -> Result<DynamicMessage, Error> {
    message_from_json(desc, v, "")
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn message_from_json(
    desc: &MessageDescriptor,
    v: &Value,
    path: &str,
) -> Result<DynamicMessage, Error> {
    let mut msg = DynamicMessage::new(desc.clone());
    if let Some(s) = special(desc) {
        special_from_json(&mut msg, s, v, path)?;
        return Ok(msg);
    }
    let obj = v
        .as_object()
        .ok_or_else(|| bad(path, format!("expected an object for {}", desc.name())))?;
    // Embedded structs: their fields are the parent's in JSON.
    let mut consumed = std::collections::HashSet::new();
    for field in desc.fields().filter(is_inline) {
        let Kind::Message(inner) = field.kind() else {
            continue;
        };
        let part: Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| {
                desc.get_field_by_name(k).is_none() && inner.get_field_by_name(k).is_some()
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !part.is_empty() {
            consumed.extend(part.keys().cloned());
            let m = message_from_json(&inner, &Value::Object(part), path)?;
            msg.set_field(&field, Pb::Message(m));
        }
    }
    for (key, value) in obj {
        if value.is_null() || consumed.contains(key) {
            continue;
        }
        let Some(field) = desc
            .get_field_by_name(key)
            .or_else(|| desc.get_field_by_json_name(key))
        else {
            continue;
        };
        let at = join(path, key);
        let pb = if field.is_map() {
            map_from_json(&field, value, &at)?
        } else if field.is_list() {
            let items = value
                .as_array()
                .ok_or_else(|| bad(&at, "expected an array"))?;
            Pb::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| scalar_from_json(&field.kind(), item, &format!("{at}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            scalar_from_json(&field.kind(), value, &at)?
        };
        msg.set_field(&field, pb);
    }
    Ok(msg)
}

fn map_from_json(field: &FieldDescriptor, value: &Value, at: &str) -> Result<Pb, Error> {
    let Kind::Message(entry) = field.kind() else {
        return Err(bad(at, "a map field without an entry message"));
    };
    let value_kind = entry.map_entry_value_field().kind();
    let obj = value
        .as_object()
        .ok_or_else(|| bad(at, "expected an object"))?;
    let mut out = HashMap::new();
    for (k, v) in obj {
        out.insert(
            MapKey::String(k.clone()),
            scalar_from_json(&value_kind, v, &format!("{at}[{k}]"))?,
        );
    }
    Ok(Pb::Map(out))
}

fn scalar_from_json(kind: &Kind, v: &Value, at: &str) -> Result<Pb, Error> {
    let int = || {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| bad(at, "expected an integer"))
    };
    Ok(match kind {
        Kind::Bool => Pb::Bool(v.as_bool().ok_or_else(|| bad(at, "expected a boolean"))?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Pb::I32(i32::try_from(int()?).map_err(|_| bad(at, "out of the int32 range"))?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Pb::I64(int()?),
        Kind::Uint32 | Kind::Fixed32 => {
            Pb::U32(u32::try_from(int()?).map_err(|_| bad(at, "out of the uint32 range"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => Pb::U64(
            v.as_u64()
                .ok_or_else(|| bad(at, "expected an unsigned integer"))?,
        ),
        Kind::Float => Pb::F32(v.as_f64().ok_or_else(|| bad(at, "expected a number"))? as f32),
        Kind::Double => Pb::F64(v.as_f64().ok_or_else(|| bad(at, "expected a number"))?),
        Kind::String => Pb::String(
            v.as_str()
                .ok_or_else(|| bad(at, "expected a string"))?
                .to_owned(),
        ),
        Kind::Bytes => {
            let s = v.as_str().ok_or_else(|| bad(at, "expected base64 text"))?;
            Pb::Bytes(
                b64()
                    .decode(s)
                    .map_err(|e| bad(at, format!("not base64: {e}")))?
                    .into(),
            )
        }
        Kind::Enum(_) => Pb::EnumNumber(i32::try_from(int()?).map_err(|_| bad(at, "enum"))?),
        Kind::Message(desc) => Pb::Message(message_from_json(desc, v, at)?),
    })
}

fn special_from_json(
    msg: &mut DynamicMessage,
    s: Special,
    v: &Value,
    at: &str,
) -> Result<(), Error> {
    match s {
        Special::Time | Special::MicroTime => {
            let text = v
                .as_str()
                .ok_or_else(|| bad(at, "expected an RFC 3339 time"))?;
            let t = chrono::DateTime::parse_from_rfc3339(text)
                .map_err(|e| bad(at, format!("not an RFC 3339 time: {e}")))?;
            msg.set_field_by_name("seconds", Pb::I64(t.timestamp()));
            let nanos = i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0);
            msg.set_field_by_name("nanos", Pb::I32(nanos));
        }
        Special::Duration => {
            let text = v.as_str().ok_or_else(|| bad(at, "expected a duration"))?;
            let nanos = duration::parse(text).ok_or_else(|| bad(at, "not a duration"))?;
            msg.set_field_by_name("duration", Pb::I64(nanos));
        }
        Special::Quantity => {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(bad(at, "expected a quantity")),
            };
            msg.set_field_by_name("string", Pb::String(text));
        }
        Special::IntOrString => match v {
            Value::String(s) => {
                msg.set_field_by_name("type", Pb::I64(1));
                msg.set_field_by_name("strVal", Pb::String(s.clone()));
            }
            Value::Number(n) => {
                let i = n.as_i64().and_then(|i| i32::try_from(i).ok());
                let i = i.ok_or_else(|| bad(at, "expected an int32 or a string"))?;
                msg.set_field_by_name("type", Pb::I64(0));
                msg.set_field_by_name("intVal", Pb::I32(i));
            }
            _ => return Err(bad(at, "expected an integer or a string")),
        },
        Special::Raw(field) => {
            let raw = serde_json::to_vec(v).map_err(|e| bad(at, e.to_string()))?;
            msg.set_field_by_name(field, Pb::Bytes(raw.into()));
        }
        Special::Items => {
            let items = v.as_array().ok_or_else(|| bad(at, "expected an array"))?;
            let items = items
                .iter()
                .map(|i| i.as_str().map(|s| Pb::String(s.to_owned())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(at, "expected strings"))?;
            msg.set_field_by_name("items", Pb::List(items));
        }
    }
    Ok(())
}
