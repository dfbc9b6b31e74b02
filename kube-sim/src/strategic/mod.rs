//! Strategic merge patch as apimachinery's `strategicpatch` applies it (the API server and
//! `kubectl patch` run that code): `mergeMap`, `mergeSlice`, the `$patch`, `$retainKeys`,
//! `$setElementOrder` and `$deleteFromPrimitiveList` directives, and the element order of
//! merged lists. The patch metadata of the built-in types is in [`meta`].

mod directives;
mod items;
pub(crate) mod meta;
mod order;
mod set_order;
mod slice;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use meta::{Strategy, Ty};

const DIRECTIVE: &str = "$patch";
const DELETE_PREFIX: &str = "$deleteFromPrimitiveList";
const ORDER_PREFIX: &str = "$setElementOrder";

/// Applies strategic merge `patch` to `doc`, an object whose `kind` selects the patch
/// metadata.
pub(crate) fn apply(doc: &Value, patch: Map<String, Value>) -> ApiResult<Value> {
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let ty = meta::root(doc.get("kind").and_then(Value::as_str));
    merge_map(original, patch, ty).map(Value::Object)
}

/// A patch the server refuses as malformed (apimachinery's `mergepatch` format errors).
fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(msg.into())
}

/// A patch that does not fit the object (merge keys, element types, unknown directives).
fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::new(422, "Invalid", msg.into())
}

fn no_merge_key(m: &Value, key: &str) -> ApiError {
    invalid(format!(
        "map: {m} does not contain declared merge key: {key}"
    ))
}

fn bad_patch_type(t: &Value, m: &Map<String, Value>) -> ApiError {
    invalid(format!(
        "unknown patch type: {t} in map: {}",
        Value::Object(m.clone())
    ))
}

/// The part of `key` after `prefix/`; the error of a key that has `prefix` but not `/`.
fn extract_key(key: &str, prefix: &str) -> ApiResult<String> {
    match key.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest.to_owned()),
        _ if prefix == DELETE_PREFIX => Err(bad("invalid patch format of primitive list")),
        _ => Err(bad("invalid patch format of setElementOrder list")),
    }
}

/// Go's `reflect.TypeOf(a) == reflect.TypeOf(b)` for decoded JSON (null has no type).
fn same_type(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => false,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

/// apimachinery `mergeMap` (with `MergeParallelList` and `IgnoreUnmatchedNulls`).
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: Ty,
) -> ApiResult<Map<String, Value>> {
    if let Some(d) = patch.get(DIRECTIVE).cloned() {
        return directives::in_map(&d, patch);
    }
    directives::retain_keys(&mut original, &mut patch)?;
    set_order::set_element_orders(&mut original, &mut patch, ty)?;
    for (k, patch_v) in patch {
        let (k, delete_list) = if k.starts_with(DELETE_PREFIX) {
            (extract_key(&k, DELETE_PREFIX)?, true)
        } else {
            (k, false)
        };
        if patch_v.is_null() {
            original.remove(&k);
            continue;
        }
        let Some(orig_v) = original.remove(&k) else {
            if !delete_list {
                put_patch_value(&mut original, k, patch_v);
            }
            continue;
        };
        if !same_type(&orig_v, &patch_v) {
            if delete_list {
                original.insert(k, orig_v);
            } else {
                put_patch_value(&mut original, k, patch_v);
            }
            continue;
        }
        let merged = merge_value(orig_v, patch_v, ty, &k, delete_list)?;
        original.insert(k, merged);
    }
    Ok(original)
}

/// A patch value taken as is: nulls dropped, maps holding a `$patch` left out.
fn put_patch_value(original: &mut Map<String, Value>, k: String, mut v: Value) {
    crate::object::drop_nulls(&mut v);
    if let Some(v) = directives::remove(v) {
        original.insert(k, v);
    }
}

/// Merges two values of the same JSON type under field `k` of `ty`.
fn merge_value(orig: Value, patch: Value, ty: Ty, k: &str, delete_list: bool) -> ApiResult<Value> {
    let field = meta::field(ty, k);
    match (orig, patch) {
        (Value::Object(o), Value::Object(p)) => {
            if field.strategy == Strategy::Replace {
                Ok(Value::Object(p))
            } else {
                merge_map(o, p, field.ty).map(Value::Object)
            }
        }
        (Value::Array(o), Value::Array(p)) => {
            slice::merge_handler(o, p, field, delete_list).map(Value::Array)
        }
        (_, p) => Ok(p),
    }
}
