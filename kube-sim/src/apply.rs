//! Server-side apply: field ownership per manager (metadata.managedFields, FieldsV1),
//! conflicts unless forced, and removal of fields a manager stopped applying, computed as
//! structured-merge-diff's `merge.Updater` does (`smd.rs`) over the list and map types of
//! `list_types.rs`. Checked against the library by tests/it/apply_upstream.rs.
//!
//! Ordinary writes record `Update` ownership of the fields they change (`update_entries`).
//! Entries are per (manager, operation, subresource), as on the real server.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::list_types::Types;
use crate::object::{Target, now};
use crate::resources::ResourceType;
use crate::smd::{self, FieldSet, Path};
use crate::store::Store;

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
    /// The fields as stored, to tell whether this write changed them.
    stored: FieldSet,
    raw: Value,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    fn new(manager: &str, operation: &str, subresource: &str) -> Self {
        Entry {
            manager: manager.into(),
            operation: operation.into(),
            api_version: String::new(),
            subresource: subresource.into(),
            fields: FieldSet::new(),
            stored: FieldSet::new(),
            raw: Value::Null,
        }
    }

    /// How conflict messages name the manager (as the API server's `printManager`).
    fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
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
                stored: fields.clone(),
                fields,
                raw: e,
            }
        })
        .collect()
}

/// The fields the API server never tracks (its stripMeta field manager).
fn strip_meta(set: &mut FieldSet) {
    set.retain(|p| {
        let s: Vec<&str> = p.iter().map(String::as_str).collect();
        !matches!(
            s.as_slice(),
            ["f:apiVersion"]
                | ["f:kind"]
                | ["f:metadata"]
                | [
                    "f:metadata",
                    "f:name"
                        | "f:namespace"
                        | "f:creationTimestamp"
                        | "f:selfLink"
                        | "f:uid"
                        | "f:generation"
                        | "f:managedFields"
                        | "f:resourceVersion"
                ]
        )
    });
}

/// The library's `value.ToString` of a key or set value.
fn value_string(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f.fract() == 0.0 && f.abs() < 1e21 {
                format!("{f:.0}")
            } else {
                f.to_string()
            }
        }
        other => other.to_string(),
    }
}

/// A path as the library prints it: `.spec.containers[name="c"].ports[containerPort=53,protocol="UDP"]`.
fn render_path(p: &Path) -> String {
    p.iter()
        .map(|el| {
            if let Some(f) = el.strip_prefix("f:") {
                return format!(".{f}");
            }
            if let Some(k) = el.strip_prefix("k:") {
                let m: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_string(v)))
                    .collect();
                return format!("[{}]", parts.join(","));
            }
            let v: Value =
                serde_json::from_str(el.get(2..).unwrap_or_default()).unwrap_or_default();
            format!("[={}]", value_string(&v))
        })
        .collect()
}

/// The types of `rt`: the built-in table, or the schema of the CRD's version.
fn types<'s>(rt: &ResourceType, crd: Option<&'s Value>) -> Types<'s> {
    Types {
        kind: rt.kind.clone(),
        crd_schema: crd.and_then(|c| crate::schema::version_schema(c, &rt.version)),
        custom: rt.crd.is_some(),
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// The library's `Updater.update`: other managers lose the fields this write changed (a
/// conflict unless forced) and the fields it removed. Returns the comparison, or the
/// conflicts as (entry index, field).
fn update(
    t: &Types,
    old: &Value,
    new: &Value,
    all: &mut [Entry],
    me: Option<usize>,
    force: bool,
) -> Result<smd::Comparison, Vec<(usize, Path)>> {
    let c = smd::compare(t, old, new);
    let mut conflicts = Vec::new();
    for (i, e) in all.iter().enumerate().filter(|(i, _)| Some(*i) != me) {
        for p in &e.fields {
            if c.modified.contains(p) || c.added.contains(p) {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for (i, p) in &conflicts {
        all[*i].fields.remove(p);
    }
    for (i, e) in all.iter_mut().enumerate() {
        if Some(i) != me {
            e.fields.retain(|p| !c.removed.contains(p));
        }
    }
    Ok(c)
}

/// The library's `Updater.prune`: remove what `me` applied last time and no longer applies,
/// unless another manager (or this apply) owns it.
fn prune(t: &Types, merged: Value, all: &[Entry], last: &FieldSet) -> Value {
    if last.is_empty() {
        return merged;
    }
    let last = smd::with_named_fields(t, last);
    let pruned = smd::remove_items(t, &merged, &last);
    // Add back what anybody owns.
    let managed: FieldSet = all.iter().flat_map(|e| e.fields.iter().cloned()).collect();
    let managed = smd::with_named_fields(t, &managed);
    let merged_set = smd::with_named_fields(t, &smd::field_set(t, &merged));
    let pruned_set = smd::with_named_fields(t, &smd::field_set(t, &pruned));
    let drop: FieldSet = merged_set
        .iter()
        .filter(|p| !pruned_set.contains(*p) && !managed.contains(*p))
        .cloned()
        .collect();
    let pruned = smd::remove_items(t, &merged, &drop);
    // Remove only what this manager had applied.
    let pruned_set = smd::with_named_fields(t, &smd::field_set(t, &pruned));
    let drop: FieldSet = merged_set
        .iter()
        .filter(|p| !pruned_set.contains(*p) && last.contains(*p))
        .cloned()
        .collect();
    smd::remove_items(t, &merged, &drop)
}

fn conflict_error(
    all: &[Entry],
    conflicts: &[(usize, Path)],
    name: &str,
    rt: &ResourceType,
) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(i, p)| {
            json!({"reason": "FieldManagerConflict",
                "message": format!("conflict with {}", all[*i].display()),
                "field": render_path(p)})
        })
        .collect();
    let message = match conflicts {
        [(i, p)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            all[*i].display(),
            render_path(p)
        ),
        _ => {
            let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for (i, p) in conflicts {
                by.entry(all[*i].display())
                    .or_default()
                    .push(render_path(p));
            }
            let lines: Vec<String> = by
                .iter()
                .flat_map(|(m, ps)| {
                    std::iter::once(format!("conflicts with {m}:"))
                        .chain(ps.iter().map(|p| format!("- {p}")))
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    let mut e = ApiError::new(409, "Conflict", message);
    e.details = Some(json!({"name": name, "group": rt.group, "kind": rt.plural, "causes": causes}));
    e
}

/// managedFields from the entries: stripped, empty ones dropped, changed ones re-encoded
/// (the writer's with a new time and apiVersion).
fn render(all: Vec<Entry>, me: Option<usize>, api_version: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, mut e) in all.into_iter().enumerate() {
        strip_meta(&mut e.fields);
        if e.fields.is_empty() {
            continue;
        }
        if e.fields == e.stored && !e.raw.is_null() {
            out.push(e.raw);
            continue;
        }
        let mut raw = e.raw;
        if raw.is_null() || Some(i) == me {
            let mut fresh = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": api_version,
                "time": now(),
                "fieldsType": "FieldsV1",
            });
            if !e.subresource.is_empty() {
                fresh["subresource"] = json!(e.subresource);
            }
            raw = fresh;
        }
        raw["fieldsV1"] = to_fields_v1(&e.fields);
        out.push(raw);
    }
    out
}

/// The applied configuration, parsed and checked.
fn parse_config(body: &[u8], name: &str, sub: &str) -> ApiResult<Value> {
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
    Ok(cfg)
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
    let cfg = parse_config(body, &name, &sub)?;
    if existing.is_none() && sub == "status" {
        return Err(ApiError::not_found(&rt.group, &rt.plural, &name));
    }
    let crd = crd_of(store, rt);
    let types = types(rt, crd.as_deref());
    let live = existing.map_or_else(|| json!({}), without_managed_fields);
    let mut all = existing.map(entries).unwrap_or_default();
    let me = match all.iter().position(|e| e.is(manager, "Apply", &sub)) {
        Some(i) => i,
        None => {
            all.push(Entry::new(manager, "Apply", &sub));
            all.len() - 1
        }
    };
    let merged = smd::merge(&types, &live, &cfg);
    let last = std::mem::replace(&mut all[me].fields, smd::field_set(&types, &cfg));
    let mut new = prune(&types, merged, &all, &last);
    if let Err(conflicts) = update(&types, &live, &new, &mut all, Some(me), force) {
        return Err(conflict_error(&all, &conflicts, &name, rt));
    }
    crate::object::drop_nulls(&mut new);
    if existing.is_none()
        && let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.insert("name".into(), json!(name));
    }
    Ok((new, Value::Array(render(all, Some(me), &rt.api_version()))))
}

/// managedFields after a non-apply write by `manager` (the library's `Updater.Update`): it
/// takes the fields it added or changed, other managers lose them, removed fields leave
/// every set.
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
    let types = types(rt, crd.as_deref());
    let (old_v, new_v) = (without_managed_fields(old), without_managed_fields(new));
    let mut all = entries(old);
    let me = all.iter().position(|e| e.is(manager, "Update", sub));
    let c = update(&types, &old_v, &new_v, &mut all, me, true).ok()?;
    let me = me.unwrap_or_else(|| {
        all.push(Entry::new(manager, "Update", sub));
        all.len() - 1
    });
    let mine = &mut all[me].fields;
    mine.extend(c.modified.iter().chain(&c.added).cloned());
    mine.retain(|p| !c.removed.contains(p));
    let out = render(all, Some(me), &rt.api_version());
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

    fn deployment() -> Types<'static> {
        Types {
            kind: "Deployment".into(),
            crd_schema: None,
            custom: false,
        }
    }

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let set = smd::field_set(&deployment(), &v);
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

    #[test]
    fn paths_render_as_upstream() {
        let p: Path = vec![
            "f:spec".into(),
            "k:{\"containerPort\":5353,\"protocol\":\"UDP\"}".into(),
            "v:32.0".into(),
        ];
        assert_eq!(
            render_path(&p),
            ".spec[containerPort=5353,protocol=\"UDP\"][=32]"
        );
    }
}
