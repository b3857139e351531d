//! Events are stored once, as core/v1 Events, and served both as core/v1 (what `kubectl
//! describe` lists with an `involvedObject.*` field selector) and as events.k8s.io/v1 (what
//! kube-rs' `Recorder` writes). The field mapping is the one of the real server's conversion:
//! regarding <-> involvedObject, note <-> message, deprecatedCount <-> count,
//! deprecatedFirstTimestamp/LastTimestamp <-> firstTimestamp/lastTimestamp,
//! deprecatedSource <-> source, reportingController <-> reportingComponent.

use serde_json::{json, Map, Value};

const SHARED: &[&str] = &[
    "metadata",
    "eventTime",
    "series",
    "action",
    "reason",
    "related",
    "reportingInstance",
    "type",
];

fn copy(from: &Value, to: &mut Map<String, Value>, src: &str, dst: &str) {
    if let Some(v) = from.get(src).filter(|v| !v.is_null()) {
        to.insert(dst.to_string(), v.clone());
    }
}

/// events.k8s.io/v1 -> core/v1.
pub fn v1_to_core(ev: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    for f in SHARED {
        copy(ev, &mut out, f, f);
    }
    copy(ev, &mut out, "regarding", "involvedObject");
    copy(ev, &mut out, "note", "message");
    copy(ev, &mut out, "deprecatedCount", "count");
    copy(ev, &mut out, "deprecatedFirstTimestamp", "firstTimestamp");
    copy(ev, &mut out, "deprecatedLastTimestamp", "lastTimestamp");
    copy(ev, &mut out, "deprecatedSource", "source");
    copy(ev, &mut out, "reportingController", "reportingComponent");
    if out.get("source").is_none() {
        if let Some(c) = ev.get("reportingController") {
            out.insert("source".into(), json!({"component": c}));
        }
    }
    if let Some(series) = ev.get("series").filter(|s| s.is_object()) {
        out.insert("count".into(), series["count"].clone());
        out.insert("lastTimestamp".into(), series["lastObservedTime"].clone());
    }
    Value::Object(out)
}

/// core/v1 -> events.k8s.io/v1.
pub fn core_to_v1(ev: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    for f in SHARED {
        copy(ev, &mut out, f, f);
    }
    copy(ev, &mut out, "involvedObject", "regarding");
    copy(ev, &mut out, "message", "note");
    copy(ev, &mut out, "count", "deprecatedCount");
    copy(ev, &mut out, "firstTimestamp", "deprecatedFirstTimestamp");
    copy(ev, &mut out, "lastTimestamp", "deprecatedLastTimestamp");
    copy(ev, &mut out, "source", "deprecatedSource");
    copy(ev, &mut out, "reportingComponent", "reportingController");
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_regarding_and_note() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Ingress", "name": "web"}, "note": "synced", "reason": "Sync", "type": "Normal",
            "reportingController": "gclb", "eventTime": "2026-01-01T00:00:00.000000Z"});
        let core = v1_to_core(&v1);
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["message"], "synced");
        assert_eq!(core["source"]["component"], "gclb");
        let back = core_to_v1(&core);
        assert_eq!(back["regarding"], v1["regarding"]);
        assert_eq!(back["note"], "synced");
    }
}
