//! Server-side apply: field ownership per manager (metadata.managedFields, FieldsV1),
//! conflicts unless forced, and removal of fields a manager stopped applying.
//!
//! Ordinary writes record `Update` ownership of the fields they change (`update_entries`).
//! Entries are per (manager, operation, subresource), as on the real server.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{Target, now};
use crate::patch::{is_set_list, merge_key};
use crate::resources::ResourceType;
use crate::store::Store;

/// One path element in FieldsV1 notation: `f:name`, `k:{"name":"c"}`, `v:"x"`.
type Path = Vec<String>;
type FieldSet = BTreeSet<Path>;

#[derive(Debug, Clone)]
enum ListType {
    Map(Vec<String>),
    Set,
    Atomic,
}

/// How lists are merged: merge keys for built-ins, `x-kubernetes-list-*` for CRDs.
struct Lists<'a> {
    builtin: bool,
    schema: Option<&'a Value>,
}

impl Lists<'_> {
    fn list_type(&self, names: &[String], field: &str) -> ListType {
        if self.builtin {
            if is_set_list(field) {
                return ListType::Set;
            }
            return match merge_key(names, field) {
                Some(k) => ListType::Map(vec![k.to_string()]),
                None => ListType::Atomic,
            };
        }
        let mut node = self.schema;
        for n in names.iter().chain(std::iter::once(&field.to_string())) {
            node = node.and_then(|s| {
                let s = if s.get("items").is_some() && s.get("properties").is_none() {
                    s.get("items")?
                } else {
                    s
                };
                s.get("properties")?.get(n)
            });
        }
        match node
            .and_then(|s| s.get("x-kubernetes-list-type"))
            .and_then(Value::as_str)
        {
            Some("map") => {
                let keys = node
                    .and_then(|s| s.get("x-kubernetes-list-map-keys"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                ListType::Map(keys)
            }
            Some("set") => ListType::Set,
            _ => ListType::Atomic,
        }
    }
}

fn key_element(item: &Value, keys: &[String]) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k)?.clone());
    }
    Some(format!("k:{}", Value::Object(m)))
}

/// The set of leaf fields present in `v`.
fn fields_of(
    v: &Value,
    lists: &Lists,
    names: &mut Vec<String>,
    path: &mut Path,
    out: &mut FieldSet,
) {
    let Some(obj) = v.as_object() else {
        out.insert(path.clone());
        return;
    };
    if obj.is_empty() && !path.is_empty() {
        out.insert(path.clone());
    }
    for (k, val) in obj {
        if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind") {
            continue;
        }
        if path.len() == 1
            && path[0] == "f:metadata"
            && matches!(
                k.as_str(),
                "name"
                    | "namespace"
                    | "managedFields"
                    | "resourceVersion"
                    | "uid"
                    | "creationTimestamp"
                    | "generation"
            )
        {
            continue;
        }
        path.push(format!("f:{k}"));
        match val {
            Value::Array(items) => match lists.list_type(names, k) {
                ListType::Map(keys) => {
                    names.push(k.clone());
                    for item in items {
                        if let Some(el) = key_element(item, &keys) {
                            path.push(el);
                            out.insert(path.clone());
                            fields_of(item, lists, names, path, out);
                            path.pop();
                        }
                    }
                    names.pop();
                    if items.is_empty() {
                        out.insert(path.clone());
                    }
                }
                ListType::Set => {
                    for item in items {
                        path.push(format!("v:{item}"));
                        out.insert(path.clone());
                        path.pop();
                    }
                    if items.is_empty() {
                        out.insert(path.clone());
                    }
                }
                ListType::Atomic => {
                    out.insert(path.clone());
                }
            },
            Value::Object(_) => {
                names.push(k.clone());
                fields_of(val, lists, names, path, out);
                names.pop();
            }
            _ => {
                out.insert(path.clone());
            }
        }
        path.pop();
    }
}

fn step<'a>(v: &'a Value, el: &str) -> Option<&'a Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return v.get(f);
    }
    if let Some(k) = el.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return v
            .as_array()?
            .iter()
            .find(|i| key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
    }
    if let Some(x) = el.strip_prefix("v:") {
        let want: Value = serde_json::from_str(x).ok()?;
        return v.as_array()?.iter().find(|i| **i == want);
    }
    None
}

fn value_at<'a>(v: &'a Value, path: &Path) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, el| step(cur, el))
}

/// Objects left empty by removed fields go too (the manager stopped applying all of them),
/// unless a field set still names something inside them.
fn prune_emptied(live: &mut Value, removed: &[&Path], applied: &FieldSet, others: &FieldSet) {
    for p in removed {
        for end in (1..p.len()).rev() {
            let parent: Path = p[..end].to_vec();
            let empty =
                value_at(live, &parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
            let named = applied.iter().chain(others).any(|f| f.starts_with(&parent));
            if !empty || named {
                break;
            }
            remove_at(live, &parent);
        }
    }
}

/// Remove the field at `path` from `v`.
fn remove_at(v: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for el in parents {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = el.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else {
                return;
            };
            cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|i| key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)))
            })
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:") {
        if let (Ok(key), Some(a)) = (
            serde_json::from_str::<Map<String, Value>>(k),
            cur.as_array_mut(),
        ) {
            a.retain(|i| !key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
        }
    } else if let Some(x) = last.strip_prefix("v:")
        && let (Ok(want), Some(a)) = (serde_json::from_str::<Value>(x), cur.as_array_mut())
    {
        a.retain(|i| *i != want);
    }
}

/// Merge the applied configuration into the live object.
fn merge(live: &mut Value, cfg: &Value, lists: &Lists, names: &mut Vec<String>) {
    let (Some(l), Some(c)) = (live.as_object_mut(), cfg.as_object()) else {
        *live = cfg.clone();
        return;
    };
    for (k, cv) in c {
        match cv {
            Value::Object(_) => {
                let entry = l.entry(k.clone()).or_insert_with(|| json!({}));
                if !entry.is_object() {
                    *entry = json!({});
                }
                names.push(k.clone());
                merge(entry, cv, lists, names);
                names.pop();
            }
            Value::Array(items) => {
                let merged = match (lists.list_type(names, k), l.remove(k)) {
                    (ListType::Map(keys), Some(Value::Array(mut cur))) => {
                        names.push(k.clone());
                        for item in items {
                            let el = key_element(item, &keys);
                            let pos = cur
                                .iter()
                                .position(|x| el.is_some() && key_element(x, &keys) == el);
                            match pos {
                                Some(p) => merge(&mut cur[p], item, lists, names),
                                None => cur.push(item.clone()),
                            }
                        }
                        names.pop();
                        cur
                    }
                    (ListType::Set, Some(Value::Array(mut cur))) => {
                        for item in items {
                            if !cur.contains(item) {
                                cur.push(item.clone());
                            }
                        }
                        cur
                    }
                    _ => items.clone(),
                };
                l.insert(k.clone(), Value::Array(merged));
            }
            other => {
                l.insert(k.clone(), other.clone());
            }
        }
    }
}

/// FieldsV1 JSON for a set of paths.
fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = json!({});
    for path in set {
        let mut cur = &mut root;
        for el in path {
            let Some(m) = cur.as_object_mut() else { break };
            cur = m.entry(el.clone()).or_insert_with(|| json!({}));
        }
    }
    // Mark nodes that are members and also have children.
    fn mark(node: &mut Value, path: &mut Path, set: &FieldSet) {
        let Some(m) = node.as_object_mut() else {
            return;
        };
        if !path.is_empty() && !m.is_empty() && set.contains(path) {
            m.insert(".".into(), json!({}));
        }
        for (k, child) in m.iter_mut() {
            if k == "." {
                continue;
            }
            path.push(k.clone());
            mark(child, path, set);
            path.pop();
        }
    }
    mark(&mut root, &mut Vec::new(), set);
    root
}

fn from_fields_v1(v: &Value, path: &mut Path, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, child) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(k.clone());
        from_fields_v1(child, path, out);
        path.pop();
    }
}

struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
    fields: FieldSet,
    raw: Value,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

fn entries(obj: &Value) -> Vec<Entry> {
    let list = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    list.into_iter()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                from_fields_v1(f, &mut Vec::new(), &mut fields);
            }
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                subresource: s("subresource"),
                fields,
                raw: e,
            }
        })
        .collect()
}

fn render_path(p: &Path) -> String {
    p.iter()
        .map(|el| match el.strip_prefix("f:") {
            Some(f) => format!(".{f}"),
            None => format!("[{}]", el.get(2..).unwrap_or_default()),
        })
        .collect()
}

/// Server-side apply of `body` by `manager` onto `existing` (the object as served; None when
/// the apply creates it): the object to write and its new managedFields. `api::apply` writes it.
pub(crate) fn plan(
    store: &Store,
    t: &Target,
    existing: Option<&Value>,
    body: &[u8],
    manager: Option<&str>,
    force: bool,
) -> ApiResult<(Value, Value)> {
    let rt: &ResourceType = &t.rt;
    let name = t.name.clone().unwrap_or_default();
    let sub = t.subresource.clone().unwrap_or_default();
    if !sub.is_empty() && sub != "status" {
        return Err(ApiError::unsupported_media_type(format!(
            "server-side apply to the {sub} subresource is not implemented by kube-sim yet"
        )));
    }
    let Some(manager) = manager.filter(|m| !m.is_empty()) else {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "",
            &[(
                "fieldManager",
                "Required value: is required for apply patch".into(),
            )],
        ));
    };
    let mut cfg: Value = serde_yaml_ng::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !cfg.is_object() {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    }
    if cfg.get("apiVersion").and_then(Value::as_str).is_none()
        || cfg.get("kind").and_then(Value::as_str).is_none()
    {
        return Err(ApiError::bad_request(
            "apiVersion and kind must be set in an applied configuration",
        ));
    }
    if let Some(n) = cfg.pointer("/metadata/name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    if sub == "status"
        && let Some(m) = cfg.as_object_mut()
    {
        // Only status is applied through the status subresource.
        m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "status"));
    }
    let crd = rt.crd.as_ref().and_then(|c| {
        let gr = crate::resources::GroupResource {
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
        };
        store.get(&gr, &(String::new(), c.clone()))
    });
    let schema = crd
        .as_deref()
        .and_then(|c| crate::schema::version_schema(c, &rt.version));
    let lists = Lists {
        builtin: rt.crd.is_none(),
        schema,
    };
    let mut applied = FieldSet::new();
    fields_of(&cfg, &lists, &mut Vec::new(), &mut Vec::new(), &mut applied);

    if existing.is_none() && sub == "status" {
        return Err(ApiError::not_found(&rt.group, &rt.plural, &name));
    }
    let mut live = existing.cloned().unwrap_or_else(|| json!({}));
    let mut all = entries(&live);
    let previous: FieldSet = all
        .iter()
        .find(|e| e.is(manager, "Apply", &sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    // Conflicts: fields other managers own with a different value. Only leaves count (scalars,
    // atomic lists, set items, empty maps): a non-empty map or list-map item is compared
    // through its own fields, so applying a subset of a shared container is no conflict.
    let mut conflicts = Vec::new();
    for e in all.iter().filter(|e| !e.is(manager, "Apply", &sub)) {
        for p in e.fields.intersection(&applied) {
            let mine = value_at(&cfg, p);
            let container = matches!(mine, Some(Value::Object(m)) if !m.is_empty());
            if !container && value_at(&live, p) != mine {
                let who = format!("\"{}\" using {}", e.manager, e.api_version);
                conflicts.push((e.manager.clone(), who, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(_, who, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {who}"), "field": render_path(p)}))
            .collect();
        let list: Vec<String> = conflicts
            .iter()
            .map(|(_, who, p)| format!("conflict with {who}: {}", render_path(p)))
            .collect();
        let mut e = ApiError::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                list.join("\n")
            ),
        );
        e.details =
            Some(json!({"name": name, "group": rt.group, "kind": rt.plural, "causes": causes}));
        return Err(e);
    }
    for (m, _, p) in &conflicts {
        for e in all.iter_mut().filter(|e| &e.manager == m) {
            e.fields.remove(p);
        }
    }

    merge(&mut live, &cfg, &lists, &mut Vec::new());
    // Fields this manager stopped applying, owned by nobody else, are removed.
    let others: FieldSet = all
        .iter()
        .filter(|e| !e.is(manager, "Apply", &sub))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous
        .difference(&applied)
        .filter(|p| !others.contains(*p))
        .collect();
    // Remove outermost paths only: removing a list item also removes its fields.
    dropped.sort_by_key(|p| p.len());
    let mut removed: Vec<&Path> = Vec::new();
    for p in dropped {
        if removed.iter().any(|r| p.starts_with(r)) {
            continue;
        }
        remove_at(&mut live, p);
        removed.push(p);
    }
    prune_emptied(&mut live, &removed, &applied, &others);

    // New managedFields: this manager's Apply entry replaced, others kept (minus forced fields).
    let mut managed = Vec::new();
    let mut placed = false;
    for e in all {
        if e.is(manager, "Apply", &sub) {
            placed = true;
            managed.push(entry(manager, "Apply", &sub, &rt.api_version(), &applied));
        } else if !e.fields.is_empty() {
            let mut raw = e.raw.clone();
            raw["fieldsV1"] = to_fields_v1(&e.fields);
            managed.push(raw);
        }
    }
    if !placed {
        managed.push(entry(manager, "Apply", &sub, &rt.api_version(), &applied));
    }
    if let Some(m) = live.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    if existing.is_none()
        && let Some(m) = live.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.insert("name".into(), json!(name));
    }
    Ok((live, Value::Array(managed)))
}

fn entry(manager: &str, operation: &str, sub: &str, api_version: &str, fields: &FieldSet) -> Value {
    let mut e = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(fields),
    });
    if !sub.is_empty() {
        e["subresource"] = json!(sub);
    }
    e
}

/// managedFields after a non-apply write by `manager`: it takes the fields whose values it
/// changed (others lose them), and removed fields leave every set.
pub(crate) fn update_entries(
    store: &Store,
    rt: &ResourceType,
    old: &Value,
    new: &Value,
    manager: &str,
    subresource: Option<&str>,
) -> Option<Value> {
    let sub = subresource.unwrap_or_default();
    let crd = crd_of(store, rt);
    let schema = crd
        .as_deref()
        .and_then(|c| crate::schema::version_schema(c, &rt.version));
    let lists = Lists {
        builtin: rt.crd.is_none(),
        schema,
    };
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    };
    let (old_v, new_v) = (strip(old), strip(new));
    let mut before = FieldSet::new();
    fields_of(
        &old_v,
        &lists,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut before,
    );
    let mut after = FieldSet::new();
    fields_of(&new_v, &lists, &mut Vec::new(), &mut Vec::new(), &mut after);
    let changed: FieldSet = after
        .iter()
        .filter(|p| value_at(&old_v, p) != value_at(&new_v, p))
        .cloned()
        .collect();
    let removed: FieldSet = before.difference(&after).cloned().collect();
    let mut all = entries(old);
    if changed.is_empty() && removed.is_empty() {
        return old.pointer("/metadata/managedFields").cloned();
    }
    let api_version = rt.api_version();
    let mut out = Vec::new();
    let mut placed = false;
    for e in all.iter_mut() {
        let mine = e.is(manager, "Update", sub);
        let mut fields: FieldSet = e.fields.difference(&removed).cloned().collect();
        if mine {
            fields.extend(changed.iter().cloned());
            placed = true;
        } else {
            fields = fields.difference(&changed).cloned().collect();
        }
        if fields == e.fields && !mine {
            out.push(e.raw.clone());
            continue;
        }
        if fields.is_empty() {
            continue;
        }
        let mut raw = e.raw.clone();
        raw["fieldsV1"] = to_fields_v1(&fields);
        if mine {
            raw["time"] = json!(now());
            raw["apiVersion"] = json!(api_version);
        }
        out.push(raw);
    }
    if !placed && !changed.is_empty() {
        out.push(entry(manager, "Update", sub, &api_version, &changed));
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

fn crd_of(store: &Store, rt: &ResourceType) -> Option<std::sync::Arc<Value>> {
    let gr = crate::resources::GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    store.get(&gr, &(String::new(), rt.crd.clone()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trip() {
        let lists = Lists {
            builtin: true,
            schema: None,
        };
        let v = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let mut set = FieldSet::new();
        fields_of(&v, &lists, &mut Vec::new(), &mut Vec::new(), &mut set);
        let fv1 = to_fields_v1(&set);
        assert_eq!(
            fv1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."],
            json!({})
        );
        assert_eq!(fv1["f:metadata"]["f:finalizers"]["v:\"x\""], json!({}));
        let mut back = FieldSet::new();
        from_fields_v1(&fv1, &mut Vec::new(), &mut back);
        assert_eq!(back, set);
    }
}
