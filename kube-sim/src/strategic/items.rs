//! List items: their shared type, and finding and reading map items by merge key.

use serde_json::{Map, Value};

use super::{invalid, no_merge_key};
use crate::error::{ApiError, ApiResult};

/// The type the items of a list share (Go's `reflect.Kind` of the decoded items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Map,
    Scalar(u8),
}

/// `sliceElementType`: the items of all lists must have one type, and not be lists.
pub(super) fn element_kind(lists: &[&[Value]]) -> ApiResult<Kind> {
    let mut kind = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let k = match v {
            Value::Object(_) => Kind::Map,
            Value::Array(_) if kind.is_none() => {
                return Err(invalid("lists of lists are not supported"));
            }
            Value::Null => Kind::Scalar(0),
            Value::Bool(_) => Kind::Scalar(1),
            Value::Number(_) => Kind::Scalar(2),
            Value::String(_) => Kind::Scalar(3),
            Value::Array(_) => Kind::Scalar(4),
        };
        match kind {
            Some(prev) if prev != k => {
                return Err(invalid(format!(
                    "list element types are not identical: {}",
                    Value::Array(lists.iter().map(|l| Value::Array(l.to_vec())).collect())
                )));
            }
            _ => kind = Some(k),
        }
    }
    kind.ok_or_else(|| invalid("no elements in any of the given slices"))
}

/// `findMapInSliceBasedOnKeyValue`: the first item whose `key` is `value`.
pub(super) fn find(list: &[Value], key: &str, value: &Value) -> ApiResult<Option<usize>> {
    for (i, v) in list.iter().enumerate() {
        let Some(m) = v.as_object() else {
            return Err(not_a_map(i));
        };
        if m.get(key) == Some(value) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn not_a_map(i: usize) -> ApiError {
    invalid(format!("value for key {i} is not a map"))
}

/// The map of a list item, or the error apimachinery gives for a non-map.
pub(super) fn as_map<'a>(v: &'a Value, key: &str) -> ApiResult<&'a Map<String, Value>> {
    let m = v
        .as_object()
        .ok_or_else(|| invalid(format!("expected a map, but received {v}")))?;
    if !m.contains_key(key) {
        return Err(no_merge_key(v, key));
    }
    Ok(m)
}
