//! structured-merge-diff's operations on JSON values, as the API server runs them for
//! server-side apply: field sets (FieldsV1), comparison, merge, removal of items, and the
//! Updater's bookkeeping (conflicts, force, pruning of fields a manager stopped applying).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::list_types::{ListType, Ty, Types};

/// One path element in FieldsV1 notation: `f:name`, `k:{"name":"c"}`, `v:"x"`.
pub(crate) type Path = Vec<String>;
pub(crate) type FieldSet = BTreeSet<Path>;

/// Values compared as values: 32 == 32.0, as the library's `value.Equals`.
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) if x.is_i64() && y.is_i64() => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) if !x.is_f64() && !y.is_f64() => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// The path element of a list item: its key fields (with their defaults), its value in a
/// set, None in an atomic list or when a key field is missing.
fn item_element(item: &Value, lt: &ListType) -> Option<String> {
    match lt {
        ListType::Atomic => None,
        ListType::Set => Some(format!("v:{item}")),
        ListType::Map(keys) => {
            let mut m = Map::new();
            for k in keys {
                let v = item.get(&k.name).or(k.default.as_ref())?;
                m.insert(k.name.clone(), v.clone());
            }
            Some(format!("k:{}", Value::Object(m)))
        }
    }
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// The fields set in `v` (the library's `ToFieldSet`).
pub(crate) fn field_set(t: &Types, v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    to_set(t, v, &t.root(), &mut Vec::new(), &mut out);
    out
}

fn insert(out: &mut FieldSet, path: &Path) {
    if !path.is_empty() {
        out.insert(path.clone());
    }
}

fn to_set(t: &Types, v: &Value, ty: &Ty, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Array(items) => {
            let lt = t.list_type(ty);
            if lt == ListType::Atomic {
                return insert(out, path);
            }
            let ity = t.item(ty);
            for item in items {
                if let Some(el) = item_element(item, &lt) {
                    path.push(el);
                    to_set(t, item, &ity, path, out);
                    insert(out, path);
                    path.pop();
                }
            }
        }
        Value::Object(m) => {
            if t.map_atomic(ty) {
                return insert(out, path);
            }
            for (k, val) in m {
                let (cty, named) = t.child(ty, k);
                path.push(format!("f:{k}"));
                to_set(t, val, &cty, path, out);
                let empty = val.is_null() || val.as_object().is_some_and(Map::is_empty);
                if empty || !named {
                    insert(out, path);
                }
                path.pop();
            }
        }
        Value::Null => {}
        _ => insert(out, path),
    }
}

/// What changed between two objects (the library's `Compare`).
#[derive(Default, Debug)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, path: &Path) {
        match (lhs, rhs) {
            (None, Some(_)) => insert(&mut self.added, path),
            (Some(_), None) => insert(&mut self.removed, path),
            (Some(a), Some(b)) if !values_equal(a, b) => insert(&mut self.modified, path),
            _ => {}
        }
    }

    /// A container that appeared or went (its fields are counted one by one as well).
    fn container(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, path: &Path) {
        match (lhs, rhs) {
            (None, _) => insert(&mut self.added, path),
            (_, None) => insert(&mut self.removed, path),
            _ => {}
        }
    }
}

pub(crate) fn compare(t: &Types, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut ctx = Compare { t, c: &mut c };
    ctx.walk(Some(lhs), Some(rhs), &t.root(), &mut Vec::new(), false);
    c
}

struct Compare<'a, 't, 's> {
    t: &'t Types<'s>,
    c: &'a mut Comparison,
}

enum Shape {
    Map,
    List,
    Leaf,
}

fn shape(lhs: Option<&Value>, rhs: Option<&Value>) -> Shape {
    // A null stands for an empty container of the other side's kind.
    let kinds: Vec<u8> = [lhs, rhs]
        .into_iter()
        .flatten()
        .filter(|v| !v.is_null())
        .map(|v| match v {
            Value::Object(_) => 1,
            Value::Array(_) => 2,
            _ => 0,
        })
        .collect();
    match kinds.as_slice() {
        [1] | [1, 1] => Shape::Map,
        [2] | [2, 2] => Shape::List,
        _ => Shape::Leaf,
    }
}

impl Compare<'_, '_, '_> {
    /// `struct_field`: a named field of a built-in kind holding a struct; the API server's
    /// typed objects always have those (non-pointer Go structs), so they never appear or go.
    fn walk(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        ty: &Ty,
        path: &mut Path,
        struct_field: bool,
    ) {
        let t = self.t;
        let empty = is_empty_container(lhs.filter(|v| !v.is_null()))
            && is_empty_container(rhs.filter(|v| !v.is_null()));
        match shape(lhs, rhs) {
            Shape::Map if !t.map_atomic(ty) && !empty => {
                let l = lhs.and_then(Value::as_object);
                let r = rhs.and_then(Value::as_object);
                let mut keys: BTreeSet<&String> = BTreeSet::new();
                keys.extend(l.into_iter().flat_map(Map::keys));
                keys.extend(r.into_iter().flat_map(Map::keys));
                for k in keys {
                    let (cty, named) = t.child(ty, k);
                    let (lv, rv) = (l.and_then(|m| m.get(k)), r.and_then(|m| m.get(k)));
                    let is_struct = named
                        && t.builtin_struct(&cty)
                        && lv.or(rv).is_some_and(Value::is_object)
                        && !t.map_atomic(&cty);
                    path.push(format!("f:{k}"));
                    self.walk(lv, rv, &cty, path, is_struct);
                    path.pop();
                }
                if !struct_field {
                    self.c.container(lhs, rhs, path);
                }
            }
            Shape::List if t.list_type(ty) != ListType::Atomic && !empty => {
                self.items(lhs, rhs, ty, path);
                self.c.container(lhs, rhs, path);
            }
            _ => self.c.leaf(lhs, rhs, path),
        }
    }

    fn items(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, ty: &Ty, path: &mut Path) {
        let lt = self.t.list_type(ty);
        let ity = self.t.item(ty);
        let keyed = |v: Option<&Value>| -> Vec<(String, Value)> {
            v.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| Some((item_element(i, &lt)?, i.clone())))
                .collect()
        };
        let (l, r) = (keyed(lhs), keyed(rhs));
        let mut seen = BTreeSet::new();
        for el in l.iter().chain(&r).map(|(e, _)| e) {
            if !seen.insert(el) {
                continue;
            }
            path.push(el.clone());
            self.walk(find(&l, el), find(&r, el), &ity, path, false);
            path.pop();
        }
    }
}

fn find<'v>(items: &'v [(String, Value)], el: &str) -> Option<&'v Value> {
    items.iter().find(|(e, _)| e == el).map(|(_, i)| i)
}

/// `live` with `cfg` merged in (the library's `Merge`): maps key by key, associative lists
/// item by item (live items in place, new ones after them), everything else replaced.
pub(crate) fn merge(t: &Types, lhs: &Value, rhs: &Value) -> Value {
    merge_at(t, lhs, rhs, &t.root())
}

fn merge_at(t: &Types, lhs: &Value, rhs: &Value, ty: &Ty) -> Value {
    match (lhs, rhs) {
        (Value::Object(l), Value::Object(r)) if !t.map_atomic(ty) => {
            let mut out = l.clone();
            for (k, rv) in r {
                let merged = match l.get(k) {
                    Some(lv) => merge_at(t, lv, rv, &t.child(ty, k).0),
                    None => rv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(r)) => {
            let lt = t.list_type(ty);
            if lt == ListType::Atomic {
                return rhs.clone();
            }
            let ity = t.item(ty);
            let el = |i: &Value| item_element(i, &lt);
            let mut out = Vec::new();
            for li in l {
                let e = el(li);
                match r.iter().find(|ri| e.is_some() && el(ri) == e) {
                    Some(ri) => out.push(merge_at(t, li, ri, &ity)),
                    None => out.push(li.clone()),
                }
            }
            for ri in r {
                let e = el(ri);
                if e.is_none() || !l.iter().any(|li| el(li) == e) {
                    out.push(ri.clone());
                }
            }
            Value::Array(out)
        }
        _ => rhs.clone(),
    }
}

/// Members of `set` under `prefix`, with the prefix taken off.
fn with_prefix(set: &FieldSet, prefix: &Path) -> FieldSet {
    set.range(prefix.clone()..)
        .take_while(|p| p.starts_with(prefix))
        .filter(|p| p.len() > prefix.len())
        .map(|p| p[prefix.len()..].to_vec())
        .collect()
}

/// `v` without the items and fields of `set` (the library's `RemoveItems`); a container
/// emptied by the removal becomes null.
pub(crate) fn remove_items(t: &Types, v: &Value, set: &FieldSet) -> Value {
    remove_at(t, v, set, &t.root())
}

fn remove_at(t: &Types, v: &Value, set: &FieldSet, ty: &Ty) -> Value {
    match v {
        Value::Array(items) => {
            let lt = t.list_type(ty);
            if items.is_empty() || lt == ListType::Atomic {
                return Value::Null;
            }
            let ity = t.item(ty);
            let mut out = Vec::new();
            for item in items {
                let Some(el) = item_element(item, &lt) else {
                    out.push(item.clone());
                    continue;
                };
                let p = vec![el];
                if set.contains(&p) {
                    continue;
                }
                let sub = with_prefix(set, &p);
                out.push(match sub.is_empty() {
                    true => item.clone(),
                    false => remove_at(t, item, &sub, &ity),
                });
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
        Value::Object(m) => {
            if m.is_empty() || t.map_atomic(ty) {
                return Value::Null;
            }
            let mut out = Map::new();
            for (k, val) in m {
                let p = vec![format!("f:{k}")];
                if set.contains(&p) {
                    continue;
                }
                let sub = with_prefix(set, &p);
                let kept = match sub.is_empty() {
                    true => val.clone(),
                    false => remove_at(t, val, &sub, &t.child(ty, k).0),
                };
                out.insert(k.clone(), kept);
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Object(out)
            }
        }
        _ => v.clone(),
    }
}

/// `set` plus the named fields above its members (`EnsureNamedFieldsAreMembers`).
pub(crate) fn with_named_fields(t: &Types, set: &FieldSet) -> FieldSet {
    let mut out = set.clone();
    for p in set {
        let mut ty = t.root();
        for i in 0..p.len().saturating_sub(1) {
            let el = &p[i];
            ty = match el.strip_prefix("f:") {
                Some(k) => {
                    let (cty, named) = t.child(&ty, k);
                    if named {
                        out.insert(p[..=i].to_vec());
                    }
                    cty
                }
                None => t.item(&ty),
            };
        }
    }
    out
}
