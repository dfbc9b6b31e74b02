//! Lists: `mergeSliceHandler`, `mergeSlice` and the `$patch` elements of merged lists.

use serde_json::Value;

use super::items::{Kind, element_kind, find};
use super::meta::{Field, Strategy, Ty};
use super::{DIRECTIVE, bad_patch_type, invalid, merge_map, no_merge_key, order};
use crate::error::ApiResult;

/// `mergeSliceHandler`: merge-strategy lists (and deletion lists) merge, others are replaced.
pub(super) fn merge_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: Field,
    delete_list: bool,
) -> ApiResult<Vec<Value>> {
    if field.strategy == Strategy::Merge || delete_list {
        merge(original, patch, field, delete_list)
    } else {
        Ok(patch)
    }
}

/// `mergeSlice`.
fn merge(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: Field,
    delete_list: bool,
) -> ApiResult<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?;
    let key = field.key;
    let (server, patch, merged) = if kind == Kind::Map {
        if key.is_empty() {
            return Err(invalid("cannot merge lists without merge key"));
        }
        let (server, patch) = special_elements(original, patch, key)?;
        let merged = without_special(server.clone(), &patch, key, field.ty)?;
        (server, patch, merged)
    } else {
        if delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let both = original.iter().chain(&patch).cloned().collect();
        (original, patch, dedup(both))
    };
    let (patch_items, server_only) = order::partition(merged, &patch, key)?;
    order::normalize(patch_items, server_only, &patch, &server, key, kind)
}

/// `deduplicateScalars`, with its order: a duplicate is overwritten by the last item.
fn dedup(mut s: Vec<Value>) -> Vec<Value> {
    let mut i = 0;
    while i + 1 < s.len() {
        let mut j = i + 1;
        while j < s.len() {
            if s[i] == s[j] {
                let last = s.len() - 1;
                s.swap(j, last);
                s.truncate(last);
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    s
}

/// `mergeSliceWithSpecialElements`: applies `$patch: delete` items to `original`; a
/// `$patch: replace` item makes the other items the whole list. Returns the list to merge
/// into and the patch items left to merge.
fn special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> ApiResult<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::new();
    let mut replace = false;
    for v in patch {
        let Some(m) = v.as_object() else {
            return Err(invalid("list element types are not identical"));
        };
        let Some(d) = m.get(DIRECTIVE) else {
            plain.push(v);
            continue;
        };
        match d.as_str() {
            Some("delete") => {
                let value = m.get(key).ok_or_else(|| no_merge_key(&v, key))?;
                while let Some(i) = find(&original, key, value)? {
                    original.remove(i);
                }
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(invalid(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            _ => return Err(bad_patch_type(d, m)),
        }
    }
    if replace {
        return Ok((plain, Vec::new()));
    }
    Ok((original, plain))
}

/// `mergeSliceWithoutSpecialElements`: items found by merge key are merged, others appended
/// as they are.
fn without_special(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
    ty: Ty,
) -> ApiResult<Vec<Value>> {
    for v in patch {
        let value = v.get(key).ok_or_else(|| no_merge_key(v, key))?;
        match find(&original, key, value)? {
            Some(i) => {
                let (Value::Object(o), Value::Object(p)) = (original[i].take(), v.clone()) else {
                    return Err(invalid("expected a map"));
                };
                original[i] = Value::Object(merge_map(o, p, ty)?);
            }
            None => original.push(v.clone()),
        }
    }
    Ok(original)
}
