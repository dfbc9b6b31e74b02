//! Object helpers shared by the verb modules: the request target, metadata access, output.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::{GroupResource, ResourceType};
use crate::store::Key;

/// A resolved request target.
#[derive(Debug, Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    /// Namespace from the URL (None for cluster-scoped and all-namespaces requests).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Field manager of a write (fieldManager, else derived from the User-Agent).
    pub manager: Option<String>,
    /// Who sent a write (the name admission policies see as `request.userInfo.username`).
    pub user: Option<String>,
}

impl Target {
    pub(crate) fn gr(&self) -> GroupResource {
        self.rt.group_resource()
    }

    pub(crate) fn key(&self) -> Key {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }

    pub(crate) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    pub(crate) fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.rt.group, &self.rt.plural, self.name())
    }
}

/// An object as served at the requested version.
pub fn output(rt: &ResourceType, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(rt.api_version()));
        m.insert("kind".into(), Value::String(rt.kind.clone()));
    }
    o
}

/// The current time as the API server writes timestamps (RFC 3339, seconds).
pub fn now() -> String {
    time_after(0)
}

/// The time `secs` seconds from now, written as `now` writes it.
pub fn time_after(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `metadata` of an object, created when missing (a non-object value is replaced).
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    match meta {
        Value::Object(m) => m,
        // Unreachable: metadata was just made an object.
        _ => unreachable!("metadata is an object"),
    }
}

/// A non-empty string field of `metadata`.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Set `metadata.finalizers`, removing the field when `f` is empty.
pub(crate) fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(f));
    }
}

/// Drops null map entries at every depth: the typed objects the API server decodes and
/// stores have none (apimachinery's `discardNullValuesFromPatch` does the same to patches).
pub(crate) fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Drop nulls and empty objects/arrays, so a template round-tripped through typed clients
/// (as `kubectl rollout undo` does) hashes the same.
pub(crate) fn canonical(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(m) => {
            let m: serde_json::Map<String, Value> = m
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), canonical(v)?)))
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        Value::Array(a) => {
            let a: Vec<Value> = a.iter().filter_map(canonical).collect();
            (!a.is_empty()).then_some(Value::Array(a))
        }
        other => Some(other.clone()),
    }
}
