//! `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` responses (what `kubectl get` prints).

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// kubectl's `HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
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
    if hours < 24 * 365 * 8 {
        let d = (hours / 24) % 365;
        return if d == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{d}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(ts: Option<&Value>) -> Value {
    let Some(ts) = ts.and_then(Value::as_str) else {
        return json!("<unknown>");
    };
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        Err(_) => json!("<invalid>"),
    }
}

/// A small JSONPath subset: `.a.b`, `[0]`, `[*]` (first), `[?(@.k=="v")]`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            let arr = cur.as_array()?;
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = arr
                    .iter()
                    .find(|e| e.get(field.trim()).and_then(Value::as_str) == Some(want))?;
            } else if inner == "*" {
                cur = arr.first()?;
            } else {
                cur = arr.get(inner.parse::<usize>().ok()?)?;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

struct Col {
    name: String,
    ty: String,
    priority: i64,
    cell: Box<dyn Fn(&Value) -> Value>,
}

fn col(name: &str, ty: &str, priority: i64, f: impl Fn(&Value) -> Value + 'static) -> Col {
    Col {
        name: name.into(),
        ty: ty.into(),
        priority,
        cell: Box::new(f),
    }
}

fn s(v: &Value, p: &str) -> Value {
    match json_path(v, p) {
        Some(Value::String(x)) => json!(x),
        Some(Value::Null) | None => json!("<none>"),
        Some(other) => json!(other.to_string()),
    }
}

fn n(v: &Value, p: &str) -> i64 {
    json_path(v, p).and_then(Value::as_i64).unwrap_or(0)
}

fn count(v: &Value, p: &str) -> i64 {
    json_path(v, p)
        .map(|x| {
            x.as_object()
                .map(|m| m.len())
                .or(x.as_array().map(Vec::len))
                .unwrap_or(0)
        })
        .unwrap_or(0) as i64
}

fn ready(v: &Value) -> Value {
    json!(format!(
        "{}/{}",
        n(v, ".status.readyReplicas"),
        n(v, ".spec.replicas")
    ))
}

fn containers(v: &Value, field: &str) -> Value {
    // A CronJob's Pods come from its job template.
    let cs = json_path(v, ".spec.template.spec.containers")
        .or_else(|| json_path(v, ".spec.jobTemplate.spec.template.spec.containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    json!(
        cs.iter()
            .filter_map(|c| c.get(field).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn ports(v: &Value) -> Value {
    let ps = json_path(v, ".spec.ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ps.is_empty() {
        return json!("<none>");
    }
    let fmt = |p: &Value| {
        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        match p.get("nodePort").and_then(Value::as_i64) {
            Some(np) => format!(
                "{}:{np}/{proto}",
                p.get("port").and_then(Value::as_i64).unwrap_or(0)
            ),
            None => format!(
                "{}/{proto}",
                p.get("port").and_then(Value::as_i64).unwrap_or(0)
            ),
        }
    };
    json!(ps.iter().map(fmt).collect::<Vec<_>>().join(","))
}

fn selector_map(v: &Value, p: &str) -> Value {
    match json_path(v, p).and_then(Value::as_object) {
        Some(m) if !m.is_empty() => {
            json!(
                m.iter()
                    .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        _ => json!("<none>"),
    }
}

fn builtin_columns(kind: &str) -> Vec<Col> {
    match kind {
        "Namespace" => vec![col("Status", "string", 0, |v| s(v, ".status.phase"))],
        "ConfigMap" => vec![col("Data", "string", 0, |v| {
            json!(count(v, ".data") + count(v, ".binaryData"))
        })],
        "Secret" => vec![
            col("Type", "string", 0, |v| s(v, ".type")),
            col("Data", "string", 0, |v| json!(count(v, ".data"))),
        ],
        "Service" => vec![
            col("Type", "string", 0, |v| s(v, ".spec.type")),
            col("Cluster-IP", "string", 0, |v| s(v, ".spec.clusterIP")),
            col("External-IP", "string", 0, |v| s(v, ".spec.externalIPs[0]")),
            col("Port(s)", "string", 0, ports),
            col("Selector", "string", 1, |v| {
                selector_map(v, ".spec.selector")
            }),
        ],
        "Deployment" => vec![
            col("Ready", "string", 0, ready),
            col("Up-to-date", "integer", 0, |v| {
                json!(n(v, ".status.updatedReplicas"))
            }),
            col("Available", "integer", 0, |v| {
                json!(n(v, ".status.availableReplicas"))
            }),
            col("Containers", "string", 1, |v| containers(v, "name")),
            col("Images", "string", 1, |v| containers(v, "image")),
            col("Selector", "string", 1, |v| {
                selector_map(v, ".spec.selector.matchLabels")
            }),
        ],
        "StatefulSet" => vec![
            col("Ready", "string", 0, ready),
            col("Containers", "string", 1, |v| containers(v, "name")),
            col("Images", "string", 1, |v| containers(v, "image")),
        ],
        "ReplicaSet" => vec![
            col("Desired", "integer", 0, |v| json!(n(v, ".spec.replicas"))),
            col("Current", "integer", 0, |v| json!(n(v, ".status.replicas"))),
            col("Ready", "integer", 0, |v| {
                json!(n(v, ".status.readyReplicas"))
            }),
        ],
        "DaemonSet" => vec![
            col("Desired", "integer", 0, |v| {
                json!(n(v, ".status.desiredNumberScheduled"))
            }),
            col("Current", "integer", 0, |v| {
                json!(n(v, ".status.currentNumberScheduled"))
            }),
            col("Ready", "integer", 0, |v| {
                json!(n(v, ".status.numberReady"))
            }),
        ],
        "Pod" => vec![
            col("Ready", "string", 0, |v| {
                let cs = json_path(v, ".status.containerStatuses")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let total = json_path(v, ".spec.containers")
                    .and_then(Value::as_array)
                    .map(Vec::len)
                    .unwrap_or(0);
                let ready = cs
                    .iter()
                    .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                    .count();
                json!(format!("{ready}/{total}"))
            }),
            col("Status", "string", 0, pod_status),
            col("Restarts", "integer", 0, |v| {
                json!(n(v, ".status.containerStatuses[0].restartCount"))
            }),
            col("IP", "string", 1, |v| s(v, ".status.podIP")),
            col("Node", "string", 1, |v| s(v, ".spec.nodeName")),
        ],
        "Job" => job_columns(),
        "CronJob" => vec![
            col("Schedule", "string", 0, |v| s(v, ".spec.schedule")),
            col("Timezone", "string", 0, |v| {
                json!(
                    json_path(v, ".spec.timeZone")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                )
            }),
            col("Suspend", "boolean", 0, |v| {
                json!(
                    json_path(v, ".spec.suspend")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                )
            }),
            col("Active", "integer", 0, |v| {
                let active = json_path(v, ".status.active").and_then(Value::as_array);
                json!(active.map(Vec::len).unwrap_or(0))
            }),
            col("Last Schedule", "date", 0, |v| {
                s(v, ".status.lastScheduleTime")
            }),
            col("Containers", "string", 1, |v| containers(v, "name")),
            col("Images", "string", 1, |v| containers(v, "image")),
        ],
        "Lease" => vec![col("Holder", "string", 0, |v| s(v, ".spec.holderIdentity"))],
        "CustomResourceDefinition" => vec![col("Created At", "date", 0, |v| {
            s(v, ".metadata.creationTimestamp")
        })],
        _ => vec![],
    }
}

/// Columns for a type: built-in ones, or a CRD version's additionalPrinterColumns.
fn columns(rt: &ResourceType, crd: Option<&Value>) -> Vec<Col> {
    let mut cols = vec![col("Name", "string", 0, |v| s(v, ".metadata.name"))];
    let printer = crd.and_then(|c| {
        c.pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(rt.version.as_str()))?
            .get("additionalPrinterColumns")?
            .as_array()
            .cloned()
    });
    match printer {
        Some(pc) => {
            for c in pc {
                let name = c
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let ty = c
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string")
                    .to_string();
                let path = c
                    .get("jsonPath")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let priority = c.get("priority").and_then(Value::as_i64).unwrap_or(0);
                let is_date = ty == "date";
                cols.push(Col {
                    name,
                    ty,
                    priority,
                    cell: Box::new(move |v| match json_path(v, &path) {
                        Some(x) if is_date => age(Some(x)),
                        Some(x) => x.clone(),
                        None => Value::Null,
                    }),
                });
            }
        }
        None => {
            cols.extend(builtin_columns(if rt.crd.is_some() {
                ""
            } else {
                &rt.kind
            }));
            if rt.kind != "CustomResourceDefinition" {
                // AGE ends the default columns; the `-o wide` ones follow it.
                let at = cols
                    .iter()
                    .position(|c| c.priority > 0)
                    .unwrap_or(cols.len());
                let age_col = col("Age", "string", 0, |v| {
                    age(v.pointer("/metadata/creationTimestamp"))
                });
                cols.insert(at, age_col);
            }
        }
    }
    cols
}

fn row_object(obj: &Value, include: &str, table_api: &str) -> Value {
    match include {
        "Object" => obj.clone(),
        "None" => Value::Null,
        _ => crate::accept::partial_object_metadata(obj, table_api),
    }
}

/// Render objects as a Table.
pub fn render(
    rt: &ResourceType,
    crd: Option<&Value>,
    objs: &[Value],
    list_meta: Value,
    include: &str,
    table_api: &str,
) -> Value {
    let cols = columns(rt, crd);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            let mut d = json!({ "name": c.name, "type": c.ty, "format": "", "description": c.name, "priority": c.priority });
            if c.name == "Name" {
                d["format"] = json!("name");
            }
            d
        })
        .collect();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            json!({
                "cells": cols.iter().map(|c| (c.cell)(o)).collect::<Vec<_>>(),
                "object": row_object(o, include, table_api),
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": table_api,
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

fn job_columns() -> Vec<Col> {
    vec![
        col("Status", "string", 0, job_status),
        col("Completions", "string", 0, job_completions),
        col("Duration", "string", 0, job_duration),
        col("Containers", "string", 1, |v| containers(v, "name")),
        col("Images", "string", 1, |v| containers(v, "image")),
        col("Selector", "string", 1, |v| {
            json!(crate::selectors::selector_string(
                json_path(v, ".spec.selector").unwrap_or(&Value::Null)
            ))
        }),
    ]
}

fn job_condition(v: &Value, ty: &str) -> bool {
    json_path(v, ".status.conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!(ty)) && c.get("status") == Some(&json!("True")))
}

/// A Job's STATUS column, in kubectl's order of precedence.
fn job_status(v: &Value) -> Value {
    let status = if job_condition(v, "Complete") {
        "Complete"
    } else if job_condition(v, "Failed") {
        "Failed"
    } else if json_path(v, ".metadata.deletionTimestamp").is_some_and(|t| !t.is_null()) {
        "Terminating"
    } else if job_condition(v, "Suspended") {
        "Suspended"
    } else if job_condition(v, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    json!(status)
}

fn job_completions(v: &Value) -> Value {
    let done = n(v, ".status.succeeded");
    if let Some(c) = json_path(v, ".spec.completions").and_then(Value::as_i64) {
        return json!(format!("{done}/{c}"));
    }
    match n(v, ".spec.parallelism") {
        p if p > 1 => json!(format!("{done}/1 of {p}")),
        _ => json!(format!("{done}/1")),
    }
}

fn job_duration(v: &Value) -> Value {
    let at = |p: &str| {
        json_path(v, p)
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
    };
    let Some(start) = at(".status.startTime") else {
        return json!("");
    };
    let end = at(".status.completionTime").unwrap_or_else(chrono::Utc::now);
    json!(human_duration((end - start).num_seconds()))
}

/// A Pod's STATUS column as the real server prints it: Terminating, a waiting container's
/// reason, a finished container's reason, else the phase.
fn pod_status(v: &Value) -> Value {
    if json_path(v, ".metadata.deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return json!("Terminating");
    }
    let statuses = json_path(v, ".status.containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let waiting = statuses
        .iter()
        .find_map(|c| c.pointer("/state/waiting/reason").cloned());
    // A finished Pod shows how its (last) container ended: Completed, Error.
    let phase = s(v, ".status.phase");
    let ended = matches!(phase.as_str(), Some("Succeeded" | "Failed"))
        .then(|| {
            statuses
                .iter()
                .rev()
                .find_map(|c| c.pointer("/state/terminated/reason").cloned())
        })
        .flatten();
    waiting.or(ended).unwrap_or(phase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(3600 * 5 + 60), "5h1m");
        assert_eq!(human_duration(3600 * 24 * 3), "3d");
    }

    #[test]
    fn json_paths() {
        let v = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(
            json_path(&v, ".status.conditions[0].type"),
            Some(&json!("A"))
        );
        assert_eq!(json_path(&v, ".nope"), None);
    }
}
