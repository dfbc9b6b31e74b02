//! `events.k8s.io/v1` Events are also served as `core/v1` Events, as a real API server does
//! (one storage, two versions): `kubectl describe` lists the core ones. The mirror is
//! one-way: a core Event written directly is not shown under events.k8s.io.

use serde_json::{Map, Value, json};

use crate::resources::GroupResource;

pub(crate) fn is_events_k8s_io(gr: &GroupResource) -> bool {
    gr.group == "events.k8s.io" && gr.resource == "events"
}

pub(crate) fn core_events() -> GroupResource {
    GroupResource {
        group: String::new(),
        resource: "events".into(),
    }
}

/// The core/v1 view of an events.k8s.io/v1 Event, with resourceVersion `rv`.
pub(crate) fn core_view(ev: &Value, rv: u64) -> Value {
    let get = |k: &str| ev.get(k).cloned();
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let mut meta = ev.get("metadata").cloned().unwrap_or(json!({}));
    meta["resourceVersion"] = json!(rv.to_string());
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
    }
    out.insert("metadata".into(), meta);
    let renamed = [
        ("regarding", "involvedObject"),
        ("note", "message"),
        ("reportingController", "reportingComponent"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
    ];
    for (from, to) in renamed {
        if let Some(v) = get(from) {
            out.insert(to.into(), v);
        }
    }
    for k in [
        "reason",
        "type",
        "action",
        "related",
        "eventTime",
        "reportingInstance",
        "series",
    ] {
        if let Some(v) = get(k) {
            out.insert(k.into(), v);
        }
    }
    if !out.contains_key("source")
        && let Some(c) = ev.get("reportingController")
    {
        out.insert("source".into(), json!({ "component": c }));
    }
    if !out.contains_key("involvedObject") {
        out.insert("involvedObject".into(), json!({}));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_take_their_core_names() {
        let ev = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "a", "uid": "u1", "resourceVersion": "7",
                         "managedFields": [{"manager": "m"}]},
            "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "a"},
            "note": "hello", "reason": "Saw", "type": "Normal", "action": "Look",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "eventTime": "2026-12-03T10:00:00.000000Z",
        });
        assert_eq!(
            core_view(&ev, 9),
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e1", "namespace": "a", "uid": "u1", "resourceVersion": "9"},
                "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "a"},
                "message": "hello", "reason": "Saw", "type": "Normal", "action": "Look",
                "reportingComponent": "example.com/ctl", "reportingInstance": "ctl-1",
                "source": {"component": "example.com/ctl"},
                "eventTime": "2026-12-03T10:00:00.000000Z",
            })
        );
    }
}
