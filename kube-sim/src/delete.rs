//! DELETE: preconditions, finalizers, propagation policies and garbage collection.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, success_status};
use crate::kinds::sync_crd;
use crate::object::{Target, finalizers, meta_mut, output, set_finalizers, time_after};
use crate::resources::GroupResource;
use crate::store::{Key, Store, key_of, owner_uids, rv_of, uid_of};

/// DELETE options from the body and the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
    /// Seconds a deleted Pod may take to stop (its own `terminationGracePeriodSeconds` when
    /// unset; 0 removes it at once).
    pub grace_period_seconds: Option<i64>,
}

impl DeleteOptions {
    pub fn from_body(body: &[u8]) -> ApiResult<Self> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let mut o = Self {
            propagation: s("/propagationPolicy"),
            precondition_uid: s("/preconditions/uid"),
            precondition_rv: s("/preconditions/resourceVersion"),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All")),
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
        };
        if o.propagation.is_none() {
            match v.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => o.propagation = Some("Orphan".into()),
                Some(false) => o.propagation = Some("Background".into()),
                None => {}
            }
        }
        Ok(o)
    }
}

pub fn delete(store: &mut Store, t: &Target, opts: &DeleteOptions) -> ApiResult<(u16, Value)> {
    let rt = t.rt.clone();
    let old = store.get(&t.gr(), &t.key()).ok_or_else(|| t.not_found())?;
    let name = t.name();
    if let Some(uid) = &opts.precondition_uid
        && Some(uid.as_str()) != uid_of(&old)
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                uid_of(&old).unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_rv
        && *rv != rv_of(&old).to_string()
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                rv_of(&old)
            ),
        ));
    }
    // batch/v1 Jobs orphan their Pods by default, for backward compatibility.
    let default_policy = if rt.group == "batch" && rt.kind == "Job" {
        "Orphan"
    } else {
        "Background"
    };
    let policy = opts.propagation.as_deref().unwrap_or(default_policy);
    if !matches!(policy, "Background" | "Foreground" | "Orphan") {
        return Err(ApiError::invalid(
            "DeleteOptions",
            "",
            &[(
                "propagationPolicy",
                format!(
                    "Unsupported value: \"{policy}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                ),
            )],
        ));
    }
    crate::admission::admit(
        store,
        &crate::admission::Write {
            t,
            operation: "DELETE",
            object: None,
            old: Some(&old),
        },
    )?;
    if opts.dry_run {
        return Ok((200, output(&rt, &old)));
    }
    let result = delete_object(store, &t.gr(), &t.key(), policy, opts.grace_period_seconds);
    sync_crd(store, &rt, &old, result.is_none());
    if rt.group.is_empty() && rt.kind == "Namespace" {
        namespace_check(store, name);
    }
    collect_garbage(store);
    let result = result.and_then(|_| store.get(&t.gr(), &t.key()).map(|o| (*o).clone()));
    match result {
        Some(obj) => Ok((200, output(&rt, &obj))),
        None if rt.group.is_empty() && rt.kind != "Namespace" => Ok((200, output(&rt, &old))),
        None => Ok((
            200,
            success_status(
                &rt.group,
                &rt.plural,
                name,
                uid_of(&old).unwrap_or_default(),
            ),
        )),
    }
}

/// Delete (or mark for deletion) one object. Returns the object when it still exists.
pub(crate) fn delete_object(
    store: &mut Store,
    gr: &GroupResource,
    key: &Key,
    policy: &str,
    grace: Option<i64>,
) -> Option<Value> {
    let old = store.get(gr, key)?;
    let uid = uid_of(&old).unwrap_or_default().to_string();
    let dependents = dependents_of(store, &uid);
    if policy == "Orphan" {
        for (dgr, dkey) in &dependents {
            let Some(d) = store.get(dgr, dkey) else {
                continue;
            };
            let mut d = (*d).clone();
            if let Some(Value::Array(refs)) = d.pointer_mut("/metadata/ownerReferences") {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
            }
            let rv = store.next_rv();
            meta_mut(&mut d).insert("resourceVersion".into(), json!(rv.to_string()));
            store.put(dgr, d);
        }
    }
    let mut fins = finalizers(&old);
    let foreground = policy == "Foreground" && !dependents.is_empty();
    if foreground && !fins.iter().any(|f| f == "foregroundDeletion") {
        fins.push("foregroundDeletion".into());
    }
    let is_namespace = gr.group.is_empty() && gr.resource == "namespaces";
    let grace = pod_grace(store, gr, &old, grace);
    if fins.is_empty() && !is_namespace && grace == 0 {
        store.remove(gr, key);
        return None;
    }
    let mut obj = (*old).clone();
    let shorter = grace < old_grace(&old);
    let changed = shorter || finalizers(&old) != fins;
    if changed {
        set_finalizers(&mut obj, &fins);
        let m = meta_mut(&mut obj);
        if shorter {
            m.insert("deletionTimestamp".into(), json!(time_after(grace)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        let rv = store.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        store.put(gr, obj.clone());
    }
    if foreground {
        for (dgr, dkey) in dependents {
            delete_object(store, &dgr, &dkey, "Foreground", None);
        }
    }
    if is_namespace {
        let ns = key.1.clone();
        for other in store.group_resources() {
            let keys: Vec<Key> = store
                .range_stored(&other, Some(&ns), None)
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                if !k.0.is_empty() {
                    delete_object(store, &other, &k, "Background", None);
                }
            }
        }
    }
    Some(obj)
}

/// How long a deleted object may take to go: a running Pod's grace period when the simulated
/// kubelet stops Pods (`Store::graceful_pods`), else 0.
fn pod_grace(store: &Store, gr: &GroupResource, pod: &Value, asked: Option<i64>) -> i64 {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    let running =
        pod.pointer("/spec/nodeName").is_some() && !matches!(phase, Some("Succeeded" | "Failed"));
    if !(store.graceful_pods && gr.group.is_empty() && gr.resource == "pods" && running) {
        return 0;
    }
    asked
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

/// The grace period of an object being deleted; one not being deleted has none yet.
fn old_grace(o: &Value) -> i64 {
    if o.pointer("/metadata/deletionTimestamp").is_none() {
        return i64::MAX;
    }
    o.pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub(crate) fn dependents_of(store: &Store, uid: &str) -> Vec<(GroupResource, Key)> {
    if uid.is_empty() {
        Vec::new()
    } else {
        store.dependents_of(uid)
    }
}

/// Delete an object whose owners are all gone (background propagation).
pub(crate) fn orphan_check(store: &mut Store, gr: &GroupResource, key: &Key) {
    let Some(o) = store.get(gr, key) else { return };
    let owners = owner_uids(&o);
    let deleting = o.pointer("/metadata/deletionTimestamp").is_some();
    if !deleting && !owners.is_empty() && owners.iter().all(|u| !store.uid_exists(u)) {
        delete_object(store, gr, key, "Background", None);
    }
}

/// Finish a foreground deletion once the owner has no dependents left.
pub(crate) fn foreground_check(store: &mut Store, owner_uid: &str) {
    let Some(o) = store.by_uid(owner_uid) else {
        return;
    };
    let fins = finalizers(&o);
    if o.pointer("/metadata/deletionTimestamp").is_none()
        || !fins.iter().any(|f| f == "foregroundDeletion")
        || !store.dependents_of(owner_uid).is_empty()
    {
        return;
    }
    let gr = match store.uid_location(owner_uid) {
        Some((gr, _)) => gr,
        None => return,
    };
    let key = key_of(&o);
    let rest: Vec<String> = fins
        .into_iter()
        .filter(|f| f != "foregroundDeletion")
        .collect();
    if rest.is_empty() {
        store.remove(&gr, &key);
    } else {
        let mut o = (*o).clone();
        set_finalizers(&mut o, &rest);
        let rv = store.next_rv();
        meta_mut(&mut o).insert("resourceVersion".into(), json!(rv.to_string()));
        store.put(&gr, o);
    }
}

/// Remove a terminating namespace once nothing is left in it.
pub(crate) fn namespace_check(store: &mut Store, ns: &str) {
    let gr = GroupResource {
        group: String::new(),
        resource: "namespaces".into(),
    };
    let key = (String::new(), ns.to_string());
    let Some(n) = store.get(&gr, &key) else {
        return;
    };
    if n.pointer("/metadata/deletionTimestamp").is_none() || !finalizers(&n).is_empty() {
        return;
    }
    if store
        .group_resources()
        .iter()
        .all(|g| store.count(g, Some(ns)) == 0)
    {
        store.remove(&gr, &key);
    }
}

/// Garbage collection for objects removed since the last pass: dependents whose owners are
/// gone, owners waiting for foreground deletion, and terminating namespaces.
pub fn collect_garbage(store: &mut Store) {
    while !store.removed.is_empty() {
        let removed = std::mem::take(&mut store.removed);
        for obj in removed {
            let uid = uid_of(&obj).unwrap_or_default().to_string();
            for (gr, key) in dependents_of(store, &uid) {
                orphan_check(store, &gr, &key);
            }
            for owner in owner_uids(&obj) {
                foreground_check(store, &owner);
            }
            let ns = key_of(&obj).0;
            if !ns.is_empty() {
                namespace_check(store, &ns);
            }
        }
    }
}
