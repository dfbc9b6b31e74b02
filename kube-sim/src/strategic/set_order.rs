//! `$setElementOrder/<field>` (`mergePatchIntoOriginal`): the lists it names, merged and
//! put in its order.

use serde_json::{Map, Value};

use super::items::element_kind;
use super::meta::{self, Ty};
use super::order::{key_equal, normalize, partition};
use super::{DIRECTIVE, ORDER_PREFIX, bad, directives, extract_key, invalid, slice};
use crate::error::ApiResult;

/// `mergePatchIntoOriginal`: merges every list that has a `$setElementOrder/<field>` and
/// orders it: `$setElementOrder` first, then the live order for the server's own items.
pub(super) fn set_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: Ty,
) -> ApiResult<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(Value::Array(order)) = patch.remove(&key) else {
            return Err(invalid(
                "expected a []interface {}, but received another type",
            ));
        };
        let name = extract_key(&key, ORDER_PREFIX)?;
        let orig = list_at(original, &name)?;
        let pat = list_at(patch, &name)?;
        let field = meta::field(ty, &name);
        validate(pat.as_deref().unwrap_or_default(), &order, field.key)?;
        let merged = match (orig.clone(), pat.clone()) {
            (Some(o), None) => o,
            (None, Some(p)) => match directives::remove(Value::Array(p)) {
                Some(Value::Array(p)) => p,
                _ => continue,
            },
            (Some(o), Some(p)) => slice::merge_handler(o, p, field, false)?,
            (None, None) => continue,
        };
        let (patch_items, server_only) = partition(merged, &order, field.key)?;
        let orig = orig.unwrap_or_default();
        let kind = element_kind(&[&orig, pat.as_deref().unwrap_or_default()])?;
        let both = normalize(patch_items, server_only, &order, &orig, field.key, kind)?;
        original.insert(name.clone(), Value::Array(both));
        patch.remove(&name);
    }
    Ok(())
}

fn list_at(m: &Map<String, Value>, name: &str) -> ApiResult<Option<Vec<Value>>> {
    match m.get(name) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a.clone())),
        Some(_) => Err(invalid(
            "expected a []interface {}, but received another type",
        )),
    }
}

/// `validatePatchWithSetOrderList`: the patch items (deletions aside) must appear in the
/// `$setElementOrder` list, in its order.
fn validate(patch: &[Value], order: &[Value], key: &str) -> ApiResult<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let mut kept = Vec::new();
    for v in patch {
        if !key.is_empty() {
            let m = v
                .as_object()
                .ok_or_else(|| invalid(format!("expected a map, but received {v}")))?;
            if m.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                continue;
            }
        }
        kept.push(v);
    }
    let (mut pi, mut si) = (0, 0);
    while pi < kept.len() && si < order.len() {
        if kept[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        if key_equal(kept[pi], &order[si], key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < kept.len() && si >= order.len() {
        return Err(bad(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            Value::Array(patch.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}
