//! Small helpers over object metadata in `serde_json::Value` form, and timestamps.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// RFC 3339 with second precision and `Z`, the format of `metav1.Time`.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// RFC 3339 with microseconds, the format of `metav1.MicroTime` (events `eventTime`).
pub fn micro_timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Parses a `metav1.Time`.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `metadata.<field>` as a string, `""` when absent.
pub fn str_field<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    str_field(obj, "name")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Mutable `metadata` map, created when missing or not an object.
pub fn metadata_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Default::default());
    }
    let map = obj.as_object_mut().expect("object");
    let md = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if !md.is_object() {
        *md = Value::Object(Default::default());
    }
    md.as_object_mut().expect("object")
}

/// Kubernetes' `duration.HumanDuration`, used for AGE columns (`45s`, `3m20s`, `5h`, `12d`).
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    let days = hours / 24;
    if hours < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{dy}d", days / 365)
        };
    }
    format!("{}y", days / 365)
}

/// Age of an object from `metadata.creationTimestamp`, as `kubectl get` shows it.
pub fn age(obj: &Value) -> String {
    match parse_time(str_field(obj, "creationTimestamp")) {
        Some(t) => human_duration(Utc::now() - t),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_kubernetes() {
        let d = chrono::Duration::seconds;
        assert_eq!(human_duration(d(45)), "45s");
        assert_eq!(human_duration(d(200)), "3m20s");
        assert_eq!(human_duration(d(3600 * 5)), "5h");
        assert_eq!(human_duration(d(3600 * 24 * 3 + 3600)), "3d1h");
    }
}
