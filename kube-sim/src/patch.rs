//! PATCH bodies: JSON merge patch, JSON patch and strategic merge patch.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

pub fn apply_patch(kind: PatchKind, doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Merge => {
            let p: Value = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut out, &p);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &p.0).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchKind::Strategic => {
            let p: Value = parse_json(body)?;
            let Value::Object(p) = p else {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            };
            strategic_merge(&mut out, &p, &mut Vec::new())?;
        }
        PatchKind::Apply => {
            return Err(ApiError::unsupported_media_type(
                "server-side apply (application/apply-patch+yaml) is not implemented by kube-sim yet",
            ));
        }
    }
    if !out.is_object() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "the patched object must be a JSON object",
        ));
    }
    Ok(out)
}

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in patch body: {e}")))
}

/// The merge key of a list field for built-in kinds; None means "replace the list".
pub(crate) fn merge_key(path: &[String], field: &str) -> Option<&'static str> {
    let in_container = path.last().is_some_and(|p| {
        matches!(
            p.as_str(),
            "containers" | "initContainers" | "ephemeralContainers"
        )
    });
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" if in_container => Some("containerPort"),
        "ports" => Some("port"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        _ => None,
    }
}

/// Lists of scalars merged as sets.
pub(crate) fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(
    doc: &mut Value,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> ApiResult<()> {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = patch.clone();
        p.remove("$patch");
        *doc = Value::Object(p);
        return Ok(());
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(target) = doc.as_object_mut() else {
        return Ok(());
    };
    for (k, v) in patch {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (target.get_mut(field), v.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                target.remove(k);
            }
            Value::Object(pm) => {
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(k);
                    continue;
                }
                path.push(k.clone());
                let entry = target.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(entry, pm, path)?;
                path.pop();
            }
            Value::Array(items) => {
                let cur = target.remove(k);
                let merged = merge_list(cur, items, path, k)?;
                target.insert(k.clone(), merged);
            }
            other => {
                target.insert(k.clone(), other.clone());
            }
        }
    }
    Ok(())
}

fn merge_list(
    cur: Option<Value>,
    items: &[Value],
    path: &mut Vec<String>,
    field: &str,
) -> ApiResult<Value> {
    // A `{"$patch": "replace"}` element replaces the whole list.
    let replace = items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let items: Vec<&Value> = items
        .iter()
        .filter(|i| {
            i.get("$patch").and_then(Value::as_str) != Some("replace")
                || i.as_object().is_some_and(|o| o.len() > 1)
        })
        .collect();
    let cur = match cur {
        Some(Value::Array(a)) if !replace => a,
        _ => Vec::new(),
    };
    if is_set_list(field) {
        let mut out = cur;
        for i in items {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    let Some(key) = merge_key(path, field) else {
        return Ok(Value::Array(items.into_iter().cloned().collect()));
    };
    let mut out = cur;
    for item in items {
        let Some(obj) = item.as_object() else {
            return Err(ApiError::bad_request(format!(
                "strategic merge patch: {field} items must be objects"
            )));
        };
        let Some(kv) = obj.get(key) else {
            return Err(ApiError::bad_request(format!(
                "strategic merge patch: map in list {field} is missing the merge key {key:?}"
            )));
        };
        let pos = out.iter().position(|e| e.get(key) == Some(kv));
        let delete = obj.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                out.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => {
                path.push(field.to_string());
                strategic_merge(&mut out[p], obj, path)?;
                path.pop();
            }
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                path.push(field.to_string());
                strategic_merge(&mut fresh, obj, path)?;
                path.pop();
                out.push(fresh);
            }
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(doc: Value, p: Value) -> Value {
        apply_patch(PatchKind::Strategic, &doc, p.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}});
        let out = smp(
            doc,
            json!({"spec": {"containers": [
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ]}}),
        );
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0]["image"], "a:1");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
        assert_eq!(cs[2]["name"], "c");
    }

    #[test]
    fn strategic_directives() {
        let doc = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "tolerations": [{"key": "x"}]},
            "metadata": {"finalizers": ["f1"]}});
        let out = smp(
            doc,
            json!({
                "spec": {"containers": [{"name": "a", "$patch": "delete"}], "tolerations": [{"key": "y"}]},
                "metadata": {"finalizers": ["f2"], "labels": {"a": "b"}}
            }),
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let out = smp(
            out,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": null}}),
        );
        assert_eq!(out["metadata"], json!({"finalizers": ["f2"]}));
    }

    #[test]
    fn merge_and_json_patch() {
        let doc = json!({"a": {"b": 1, "c": 2}});
        let out = apply_patch(PatchKind::Merge, &doc, br#"{"a":{"b":null,"d":3}}"#).unwrap();
        assert_eq!(out, json!({"a": {"c": 2, "d": 3}}));
        let out = apply_patch(
            PatchKind::Json,
            &doc,
            br#"[{"op":"replace","path":"/a/b","value":5}]"#,
        )
        .unwrap();
        assert_eq!(out["a"]["b"], 5);
        let err = apply_patch(
            PatchKind::Json,
            &doc,
            br#"[{"op":"test","path":"/a/b","value":9}]"#,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            apply_patch(PatchKind::Merge, &doc, b"{").unwrap_err().code,
            400
        );
        let to_array = br#"[{"op":"replace","path":"","value":[1]}]"#;
        assert_eq!(
            apply_patch(PatchKind::Json, &doc, to_array)
                .unwrap_err()
                .code,
            422
        );
    }
}
