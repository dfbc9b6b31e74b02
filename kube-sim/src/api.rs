//! Verb semantics on top of the store: create, update, patch, apply, get.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::User;
use crate::error::{ApiError, ApiResult};
use crate::kinds::{normalize, sync_crd, validate_custom, validate_name};
use crate::object::{Target, finalizers, meta_mut, meta_str, now, output};
use crate::patch::{PatchKind, apply_patch};
use crate::resources::{GroupResource, ResourceType};
use crate::store::{Store, key_of, owner_uids, rv_of, uid_of};

use crate::delete::orphan_check;
pub use crate::delete::{DeleteOptions, collect_garbage, delete};

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Everything except metadata (and status, when it is a subresource): changes here bump
/// `metadata.generation`.
fn spec_part(rt: &ResourceType, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        for k in ["metadata", "apiVersion", "kind"] {
            m.remove(k);
        }
        if rt.status {
            m.remove("status");
        }
    }
    o
}

/// Check apiVersion/kind in a request body against the URL's resource.
fn check_type(t: &Target, body: &mut Value) -> ApiResult<()> {
    let Some(m) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let rt = &t.rt;
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({}) or kind {k} is not {}",
                m.get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                rt.api_version(),
                rt.kind
            )));
        }
        _ => {}
    }
    if let Some(av) = m.get("apiVersion").and_then(Value::as_str) {
        let (g, _) = crate::resources::split_api_version(av);
        if g != rt.group {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
    }
    m.insert("apiVersion".into(), Value::String(rt.api_version()));
    m.insert("kind".into(), Value::String(rt.kind.clone()));
    if m.get("metadata")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// Check the body's namespace against the URL and fill it in.
fn check_namespace(t: &Target, body: &mut Value) -> ApiResult<()> {
    let url_ns = t.namespace.clone().unwrap_or_default();
    let m = meta_mut(body);
    if !t.rt.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    match m
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(ns) if ns != url_ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            m.insert("namespace".into(), Value::String(url_ns));
            Ok(())
        }
    }
}

fn check_namespace_exists(store: &Store, t: &Target) -> ApiResult<()> {
    let Some(ns) = t.namespace.as_deref().filter(|_| t.rt.namespaced) else {
        return Ok(());
    };
    let gr = GroupResource {
        group: String::new(),
        resource: "namespaces".into(),
    };
    match store.get(&gr, &(String::new(), ns.to_string())) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                t.rt.plural,
                t.name()
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// POST to a collection.
pub fn create(store: &mut Store, t: &Target, body: Value, dry_run: bool) -> ApiResult<Value> {
    create_with(store, t, body, dry_run, None, None)
}

/// Create, storing `managed` as metadata.managedFields (server-side apply). `creator` is the
/// user an apply creates for: it must be allowed `create` too, checked where upstream's
/// `withAuthorization` checks it (after validation, before validating admission). A POST
/// passes None: the request itself was authorized as `create`.
pub(crate) fn create_with(
    store: &mut Store,
    t: &Target,
    mut body: Value,
    dry_run: bool,
    managed: Option<Value>,
    creator: Option<&User>,
) -> ApiResult<Value> {
    check_type(t, &mut body)?;
    check_namespace(t, &mut body)?;
    let rt = t.rt.clone();
    let name = new_name(&rt, &mut body)?;
    let t = Target {
        name: Some(name.clone()),
        ..t.clone()
    };
    check_namespace_exists(store, &t)?;
    if store.contains(&t.gr(), &t.key()) {
        return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
    }
    stamp_new(&rt, &mut body);
    validate_custom(store, &rt, &mut body, None)?;
    normalize(store, &rt, &mut body, None)?;
    crate::limits::check(&rt, &body)?;
    if let Some(user) = creator {
        crate::auth::authorize(store, user, "create", &t)?;
    }
    crate::admission::admit(
        store,
        &crate::admission::Write {
            t: &t,
            operation: "CREATE",
            object: Some(&body),
            old: None,
        },
    )?;
    let managed = managed.or_else(|| {
        let manager = t.manager.as_deref()?;
        crate::apply::update_entries(store, &rt, &json!({}), &body, manager, None)
    });
    if let Some(mf) = managed {
        meta_mut(&mut body).insert("managedFields".into(), mf);
    }
    if dry_run {
        return Ok(output(&rt, &body));
    }
    let rv = store.next_rv();
    meta_mut(&mut body).insert("resourceVersion".into(), json!(rv.to_string()));
    let stored = store.put(&t.gr(), body);
    sync_crd(store, &rt, &stored, false);
    if !owner_uids(&stored).is_empty() {
        orphan_check(store, &t.gr(), &t.key());
        collect_garbage(store);
    }
    Ok(output(&rt, &stored))
}

/// The name of an object being created: its own, or one made from `generateName`.
fn new_name(rt: &crate::resources::ResourceType, body: &mut Value) -> ApiResult<String> {
    let m = meta_mut(body);
    let mut name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty()
        && let Some(prefix) = m.get("generateName").and_then(Value::as_str)
    {
        name = format!("{prefix}{}", random_suffix());
        m.insert("name".into(), json!(name));
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            &rt.kind,
            "",
            &[(
                "metadata.name",
                "Required value: name or generateName is required".into(),
            )],
        ));
    }
    validate_name(rt, &name)
        .map_err(|e| ApiError::invalid(&rt.kind, &name, &[("metadata.name", e)]))?;
    Ok(name)
}

/// The system fields of a new object: what a client may not set is dropped, uid, creation
/// time and generation are set.
fn stamp_new(rt: &crate::resources::ResourceType, body: &mut Value) {
    let m = meta_mut(body);
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        m.remove(k);
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now()));
    m.insert("generation".into(), json!(1));
    // Like the real registries, status given on create is dropped for custom resources and
    // workloads (their controllers own it); Nodes, Pods and the rest keep what they were given.
    let workload = matches!(
        (rt.group.as_str(), rt.kind.as_str()),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ) | ("batch", "Job" | "CronJob")
    );
    if rt.status
        && (rt.crd.is_some() || workload)
        && let Some(o) = body.as_object_mut()
    {
        o.remove("status");
    }
}

/// PUT of an object or its status subresource.
pub fn update(store: &mut Store, t: &Target, body: Value, dry_run: bool) -> ApiResult<Value> {
    update_with(store, t, body, dry_run, None)
}

/// Update; `managed` replaces metadata.managedFields, otherwise the stored ones are kept.
pub(crate) fn update_with(
    store: &mut Store,
    t: &Target,
    mut body: Value,
    dry_run: bool,
    managed: Option<Value>,
) -> ApiResult<Value> {
    check_type(t, &mut body)?;
    check_namespace(t, &mut body)?;
    let has_managed = managed.is_some();
    let rt = t.rt.clone();
    let name = t.name().to_string();
    match meta_str(&body, "name") {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {
            meta_mut(&mut body).insert("name".into(), json!(name));
        }
    }
    let old = store.get(&t.gr(), &t.key()).ok_or_else(|| t.not_found())?;
    if let Some(rv) = meta_str(&body, "resourceVersion")
        && rv != rv_of(&old).to_string()
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            &name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    if let Some(uid) = meta_str(&body, "uid")
        && Some(uid) != uid_of(&old)
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            &name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                uid_of(&old).unwrap_or_default()
            ),
        ));
    }
    let status_only = t.subresource.as_deref() == Some("status");
    let mut new = if status_only {
        let mut n = (*old).clone();
        match body.get("status") {
            Some(s) => n["status"] = s.clone(),
            None => {
                if let Some(o) = n.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        n
    } else {
        if rt.status {
            match old.get("status") {
                Some(s) => body["status"] = s.clone(),
                None => {
                    if let Some(o) = body.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        body
    };
    // Fields the client cannot change.
    {
        let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
        let m = meta_mut(&mut new);
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
        ] {
            match old_meta.get(k) {
                Some(v) => m.insert(k.into(), v.clone()),
                None => m.remove(k),
            };
        }
        match managed
            .clone()
            .or_else(|| old_meta.get("managedFields").cloned())
        {
            Some(mf) => m.insert("managedFields".into(), mf),
            None => m.remove("managedFields"),
        };
        m.remove("selfLink");
        m.insert("resourceVersion".into(), json!(rv_of(&old).to_string()));
    }
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let before = finalizers(&old);
        if let Some(f) = finalizers(&new).iter().find(|f| !before.contains(f)) {
            return Err(ApiError::invalid(
                &rt.kind,
                &name,
                &[(
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{f}\"]"
                    ),
                )],
            ));
        }
    }
    validate_custom(store, &rt, &mut new, Some(&old))?;
    normalize(store, &rt, &mut new, Some(&old))?;
    crate::limits::check(&rt, &new)?;
    crate::admission::admit(
        store,
        &crate::admission::Write {
            t,
            operation: "UPDATE",
            object: Some(&new),
            old: Some(&old),
        },
    )?;
    if !has_managed && let Some(manager) = t.manager.as_deref() {
        let mf =
            crate::apply::update_entries(store, &rt, &old, &new, manager, t.subresource.as_deref());
        let m = meta_mut(&mut new);
        match mf {
            Some(mf) => m.insert("managedFields".into(), mf),
            None => m.remove("managedFields"),
        };
    }
    if spec_part(&rt, &new) != spec_part(&rt, &old) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    if new == *old {
        store.noop_writes += 1;
        return Ok(output(&rt, &old));
    }
    if dry_run {
        return Ok(output(&rt, &new));
    }
    if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty() {
        store.remove(&t.gr(), &t.key());
        sync_crd(store, &rt, &new, true);
        collect_garbage(store);
        return Ok(output(&rt, &new));
    }
    let rv = store.next_rv();
    meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
    let stored = store.put(&t.gr(), new);
    sync_crd(store, &rt, &stored, false);
    if owner_uids(&old) != owner_uids(&stored) {
        orphan_check(store, &t.gr(), &t.key());
        collect_garbage(store);
    }
    Ok(output(&rt, &stored))
}

/// PATCH of an object or its status subresource.
pub fn patch(
    store: &mut Store,
    t: &Target,
    kind: PatchKind,
    body: &[u8],
    dry_run: bool,
) -> ApiResult<Value> {
    if kind == PatchKind::Strategic && !t.rt.strategic {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let old = store.get(&t.gr(), &t.key()).ok_or_else(|| t.not_found())?;
    let current = output(&t.rt, &old);
    let mut patched = apply_patch(kind, &current, body)?;
    if t.subresource.is_none() && t.rt.status {
        // Status changes through the main resource are ignored.
        match old.get("status") {
            Some(s) => patched["status"] = s.clone(),
            None => {
                if let Some(o) = patched.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    update(store, t, patched, dry_run)
}

/// PATCH with `application/apply-patch+yaml` (server-side apply) by `user`. An apply that
/// creates the object needs `create` as well as `patch` (`apply::plan` answers 404 for the
/// status of a missing object: subresources never create).
pub(crate) fn apply(
    store: &mut Store,
    t: &Target,
    body: &[u8],
    manager: Option<&str>,
    force: bool,
    dry_run: bool,
    user: &User,
) -> ApiResult<Value> {
    let existing = get(store, t).ok();
    let (live, managed) = crate::apply::plan(store, t, existing.as_ref(), body, manager, force)?;
    match existing {
        Some(_) => update_with(store, t, live, dry_run, Some(managed)),
        None => {
            let collection = Target {
                name: None,
                ..t.clone()
            };
            create_with(store, &collection, live, dry_run, Some(managed), Some(user))
        }
    }
}

/// The object at the target, as served.
pub fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    store
        .get(&t.gr(), &t.key())
        .map(|o| output(&t.rt, &o))
        .ok_or_else(|| t.not_found())
}

/// [`get`], encoded as JSON: the stored JSON when it is stored at the requested version.
pub fn get_json(store: &Store, t: &Target) -> ApiResult<bytes::Bytes> {
    let o = store
        .get_stored(&t.gr(), &t.key())
        .ok_or_else(|| t.not_found())?;
    if o.is_served_as(&t.rt.api_version(), &t.rt.kind) {
        return Ok(o.bytes().clone());
    }
    Ok(bytes::Bytes::from(output(&t.rt, &o.value()).to_string()))
}

/// Insert seed objects (default namespaces etc.) bypassing validation.
pub fn seed(store: &mut Store, rt: &ResourceType, obj: Value) -> ApiResult<Value> {
    let ns = key_of(&obj).0;
    let t = Target {
        rt: Arc::new(rt.clone()),
        namespace: if rt.namespaced { Some(ns) } else { None },
        name: None,
        subresource: None,
        manager: None,
        user: None,
    };
    create(store, &t, obj, false)
}
