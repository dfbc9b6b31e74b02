//! The `scale` subresource (autoscaling/v1 Scale).

use serde_json::{Value, json};

use crate::api;
use crate::error::{ApiError, ApiResult};
use crate::object::Target;
use crate::patch::{PatchKind, apply_patch};
use crate::resources::ScalePaths;
use crate::store::Store;

fn paths(t: &Target) -> ApiResult<&ScalePaths> {
    t.rt.scale_paths.as_ref().ok_or_else(|| {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    })
}

fn to_scale(t: &Target, obj: &Value) -> ApiResult<Value> {
    let p = paths(t)?;
    let selector = match &p.label_selector {
        Some(ptr) => obj
            .pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => obj
            .pointer("/spec/selector")
            .map(crate::selectors::selector_string)
            .unwrap_or_default(),
    };
    let m = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut meta = json!({});
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(k) {
            meta[k] = v.clone();
        }
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": { "replicas": obj.pointer(&p.spec_replicas).and_then(Value::as_i64).unwrap_or(0) },
        "status": {
            "replicas": obj.pointer(&p.status_replicas).and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    }))
}

fn main_target(t: &Target) -> Target {
    Target {
        subresource: None,
        ..t.clone()
    }
}

pub fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    to_scale(t, &api::get(store, &main_target(t))?)
}

/// Write `spec.replicas` of a Scale back into the object.
pub fn update(store: &mut Store, t: &Target, scale: Value, dry_run: bool) -> ApiResult<Value> {
    let p = paths(t)?.clone();
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            ApiError::invalid(
                "Scale",
                t.name.as_deref().unwrap_or_default(),
                &[("spec.replicas", "Required value".into())],
            )
        })?;
    if replicas < 0 {
        return Err(ApiError::invalid(
            "Scale",
            t.name.as_deref().unwrap_or_default(),
            &[(
                "spec.replicas",
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            )],
        ));
    }
    let main = main_target(t);
    let mut obj = api::get(store, &main)?;
    if let Some(rv) = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        obj["metadata"]["resourceVersion"] = json!(rv);
    }
    set_pointer(&mut obj, &p.spec_replicas, json!(replicas));
    let updated = api::update(store, &main, obj, dry_run)?;
    to_scale(t, &updated)
}

pub fn patch(
    store: &mut Store,
    t: &Target,
    kind: PatchKind,
    body: &[u8],
    dry_run: bool,
) -> ApiResult<Value> {
    let current = get(store, t)?;
    let patched = apply_patch(kind, &current, body)?;
    update(store, t, patched, dry_run)
}

fn set_pointer(obj: &mut Value, ptr: &str, v: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            map.insert(part.to_string(), v);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}
