//! `$patch` in a map, `$retainKeys`, and cleaning directives out of values taken as is.

use serde_json::{Map, Value};

use super::{DELETE_PREFIX, DIRECTIVE, ORDER_PREFIX, bad, bad_patch_type};
use crate::error::ApiResult;

/// `handleDirectiveInMergeMap`: `replace` keeps the patch (without the marker), `delete`
/// leaves an empty map, anything else is refused.
pub(super) fn in_map(d: &Value, mut patch: Map<String, Value>) -> ApiResult<Map<String, Value>> {
    match d.as_str() {
        Some("replace") => {
            patch.remove(DIRECTIVE);
            Ok(patch)
        }
        Some("delete") => Ok(Map::new()),
        _ => Err(bad_patch_type(d, &patch)),
    }
}

/// `applyRetainKeysDirective`: every (non-null, non-directive) patch key must be listed;
/// keys of `original` not listed are cleared.
pub(super) fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> ApiResult<()> {
    let Some(list) = patch.remove("$retainKeys") else {
        return Ok(());
    };
    let Value::Array(list) = list else {
        return Err(bad("invalid patch format of retainKeys"));
    };
    let listed = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_PREFIX) || k.starts_with(ORDER_PREFIX) {
            continue;
        }
        if !listed(k) {
            return Err(bad("invalid patch format of retainKeys"));
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `removeDirectives`: None when the value is a map holding `$patch` (it is left out);
/// otherwise the value with such maps dropped at every depth.
pub(super) fn remove(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            let kept = m
                .into_iter()
                .filter_map(|(k, v)| remove(v).map(|v| (k, v)))
                .collect();
            Some(Value::Object(kept))
        }
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(remove).collect())),
        other => Some(other),
    }
}
