//! Element order of merged lists: `normalizeElementOrder`, `mergeSortedSlice`, and the
//! partitions they work on.

use serde_json::Value;

use super::DIRECTIVE;
use super::items::{Kind, as_map, find};
use crate::error::ApiResult;

/// `mergeKeyValueEqual`.
pub(super) fn key_equal(left: &Value, right: &Value, key: &str) -> ApiResult<bool> {
    if key.is_empty() {
        return Ok(left == right);
    }
    let l = as_map(left, key)?;
    let r = as_map(right, key)?;
    Ok(l.get(key) == r.get(key))
}

/// `partitionPrimitivesByPresentInList` / `partitionMapsByPresentInList`: the items of
/// `merged` present in `by`, and the others.
pub(super) fn partition(
    merged: Vec<Value>,
    by: &[Value],
    key: &str,
) -> ApiResult<(Vec<Value>, Vec<Value>)> {
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for v in merged {
        let present = if key.is_empty() {
            by.contains(&v)
        } else {
            let value = &as_map(&v, key)?[key];
            find(by, key, value)?.is_some()
        };
        if present {
            inside.push(v);
        } else {
            outside.push(v);
        }
    }
    Ok((inside, outside))
}

/// `normalizeElementOrder`: patch items in `patch_order`, server-only items in
/// `server_order`, then interleaved by [`merge_sorted`].
pub(super) fn normalize(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: &str,
    kind: Kind,
) -> ApiResult<Vec<Value>> {
    let patch = sort_by_order(patch, patch_order, key, kind)?;
    let server_only = sort_by_order(server_only, server_order, key, kind)?;
    Ok(merge_sorted(server_only, patch, server_order, key, kind))
}

/// `normalizeSliceOrder`: a stable sort by position in `order` (Go's insertion sort, with
/// its "unknown items sort first" comparison); `$patch: delete` items go last.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    key: &str,
    kind: Kind,
) -> ApiResult<Vec<Value>> {
    let mut items = items;
    let mut deletes = Vec::new();
    if kind == Kind::Map {
        for v in items.iter().chain(order) {
            as_map(v, key)?;
        }
        let (keep, del): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|v| v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"));
        items = keep;
        deletes = del;
    }
    let less = |a: &Value, b: &Value| match (index(order, a, key, kind), index(order, b, key, kind))
    {
        (Some(i), Some(j)) => i < j,
        _ => true,
    };
    for i in 1..items.len() {
        let mut j = i;
        while j > 0 && less(&items[j], &items[j - 1]) {
            items.swap(j, j - 1);
            j -= 1;
        }
    }
    items.extend(deletes);
    Ok(items)
}

/// `mergeSortedSlice`: inserts the server-only items (`left`) among the patch items
/// (`right`); a server item goes first only when both are live items and it is earlier.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    key: &str,
    kind: Kind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_left = match (l.peek(), r.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => matches!(
                (index(server_order, a, key, kind), index(server_order, b, key, kind)),
                (Some(i), Some(j)) if i < j
            ),
        };
        let next = if take_left { l.next() } else { r.next() };
        out.extend(next);
    }
    out
}

/// `index`: position of `v` in `list`, by merge key for maps (a missing key matches a
/// missing key, as Go's nil == nil).
fn index(list: &[Value], v: &Value, key: &str, kind: Kind) -> Option<usize> {
    if kind != Kind::Map {
        return list.iter().position(|x| x == v);
    }
    let val = |x: &Value| x.as_object().and_then(|m| m.get(key)).cloned();
    let want = val(v);
    list.iter().position(|x| val(x) == want)
}
