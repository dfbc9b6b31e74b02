//! StatefulSet: Pods `name-0..n` created in order (`OrderedReady`) or together (`Parallel`),
//! updated one ordinal at a time from the highest down to `partition` (or left to be deleted,
//! `OnDelete`), with ControllerRevisions keeping each template, and `currentRevision` moving
//! to `updateRevision` once every Pod runs it.

use serde_json::{Value, json};

use super::pods::{self, NewPod, PodName};
use super::replicaset::min_ready;
use super::{Ctl, Wake, generation, gr, int_at, name, owned, owner_ref, put, put_status, replicas};
use super::{set, str_at, target, template_hash, terminating, uid};
use crate::api;
use crate::store::Store;

pub(super) const REVISION_LABEL: &str = "controller-revision-hash";

/// The ControllerRevision named `{workload}-{hash}` holding `template`, created or made the
/// newest; returns its name.
pub(super) fn ensure_revision(
    store: &mut Store,
    kind: &str,
    w: &Value,
    template: &Value,
) -> String {
    let hash = template_hash(template);
    let rev_name = format!("{}-{hash}", name(w));
    let revs = owned(store, "controllerrevisions", &uid(w), false);
    let number = |r: &Value| int_at(r, "/revision");
    let max = revs.iter().map(number).max().unwrap_or(0);
    let ns = super::namespace(w);
    match revs.iter().find(|r| name(r) == rev_name) {
        Some(r) if number(r) < max => {
            let mut r = r.clone();
            set(&mut r, &["revision"], json!(max + 1));
            if let Some(t) = target(store, "apps", "controllerrevisions", &ns, Some(&rev_name)) {
                put(store, &t, r);
            }
        }
        Some(_) => {}
        None => {
            let mut labels = template
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            let label = if kind == "DaemonSet" {
                hash
            } else {
                rev_name.clone()
            };
            set(&mut labels, &[REVISION_LABEL], json!(label));
            let mut data_tpl = template.clone();
            set(&mut data_tpl, &["$patch"], json!("replace"));
            let rev = json!({
                "apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": { "name": rev_name, "namespace": ns, "labels": labels,
                              "ownerReferences": owner_ref(kind, w) },
                "data": { "spec": { "template": data_tpl } },
                "revision": max + 1,
            });
            if let Some(t) = target(store, "apps", "controllerrevisions", &ns, None)
                && let Err(e) = api::create(store, &t, rev, false)
            {
                tracing::warn!(error = %e, "controller: creating ControllerRevision");
            }
        }
    }
    rev_name
}

/// The Pod template a ControllerRevision holds.
fn revision_template(store: &Store, ns: &str, rev: &str) -> Option<Value> {
    let r = store.get(&gr("apps", "controllerrevisions"), &(ns.into(), rev.into()))?;
    let mut t = r.pointer("/data/spec/template")?.clone();
    t.as_object_mut()?.remove("$patch");
    Some(t)
}

fn revision_of(p: &Value) -> String {
    str_at(p, &format!("/metadata/labels/{REVISION_LABEL}"))
}

/// What one pass over a StatefulSet works with.
struct Sts {
    w: Value,
    ns: String,
    update_rev: String,
    current_rev: String,
    want: i64,
    parallel: bool,
    on_delete: bool,
    partition: i64,
}

pub(super) fn reconcile(store: &mut Store, ctl: &mut Ctl, ns: &str, wname: &str) {
    let Some(w) = store.get(&gr("apps", "statefulsets"), &(ns.into(), wname.into())) else {
        return;
    };
    let w = (*w).clone();
    if terminating(&w) {
        return;
    }
    let template = w.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let update_rev = ensure_revision(store, "StatefulSet", &w, &template);
    let current_rev = match str_at(&w, "/status/currentRevision") {
        r if r.is_empty() => update_rev.clone(),
        r => r,
    };
    let s = Sts {
        ns: ns.into(),
        want: replicas(&w),
        parallel: str_at(&w, "/spec/podManagementPolicy") == "Parallel",
        on_delete: str_at(&w, "/spec/updateStrategy/type") == "OnDelete",
        partition: int_at(&w, "/spec/updateStrategy/rollingUpdate/partition"),
        update_rev,
        current_rev,
        w,
    };
    if create_missing(store, ctl, &s) && remove_surplus(store, &s) {
        update_one(store, &s);
    }
    write_status(store, ctl, &s);
}

fn ordinal(s: &Sts, p: &Value) -> Option<i64> {
    name(p)
        .strip_prefix(&format!("{}-", name(&s.w)))?
        .parse()
        .ok()
}

/// Create the missing ordinals; with `OrderedReady` one at a time, each after the ones
/// before it are Ready. True when every ordinal has a Ready Pod.
fn create_missing(store: &mut Store, ctl: &mut Ctl, s: &Sts) -> bool {
    let pods = owned(store, "pods", &uid(&s.w), true);
    let mut all_ready = true;
    for i in 0..s.want {
        let pod_name = format!("{}-{i}", name(&s.w));
        let p = match pods.iter().find(|p| name(p) == pod_name) {
            Some(p) => Some(p.clone()),
            None => create(store, ctl, s, i, pod_name),
        };
        let ok = p
            .as_ref()
            .is_some_and(|p| !terminating(p) && pods::ready(p));
        all_ready &= ok;
        if !ok && !s.parallel {
            return false;
        }
    }
    all_ready
}

fn create(store: &mut Store, ctl: &mut Ctl, s: &Sts, i: i64, pod_name: String) -> Option<Value> {
    // Below the partition a recreated Pod keeps the current revision.
    let rev = if !s.on_delete && i < s.partition {
        &s.current_rev
    } else {
        &s.update_rev
    };
    let template = revision_template(store, &s.ns, rev)?;
    let labels = json!({ REVISION_LABEL: rev, "statefulset.kubernetes.io/pod-name": pod_name,
                         "apps.kubernetes.io/pod-index": i.to_string() });
    let new = NewPod {
        template: &template,
        name: PodName::Exact(pod_name),
        owner_kind: "StatefulSet",
        owner: &s.w,
        extra_labels: &labels,
        node: pods::NODE,
    };
    pods::create(store, ctl, &s.ns, new)
}

/// Delete Pods beyond `replicas`, highest first (one at a time with `OrderedReady`). True
/// when none is left.
fn remove_surplus(store: &mut Store, s: &Sts) -> bool {
    let pods = owned(store, "pods", &uid(&s.w), true);
    let mut surplus: Vec<(i64, &Value)> = pods
        .iter()
        .filter_map(|p| Some((ordinal(s, p).filter(|i| *i >= s.want)?, p)))
        .collect();
    if surplus.is_empty() {
        return true;
    }
    surplus.sort_by_key(|(i, _)| -i);
    if !s.parallel {
        surplus.truncate(1);
    }
    for (_, p) in surplus {
        pods::delete(store, p);
    }
    false
}

/// RollingUpdate: replace the highest ordinal at or above the partition that runs an older
/// revision, once every Pod is Ready.
fn update_one(store: &mut Store, s: &Sts) {
    if s.on_delete {
        return;
    }
    let pods = owned(store, "pods", &uid(&s.w), false);
    let stale = pods
        .iter()
        .filter_map(|p| Some((ordinal(s, p)?, p)))
        .filter(|(i, p)| *i >= s.partition && revision_of(p) != s.update_rev)
        .max_by_key(|(i, _)| *i);
    if let Some((_, p)) = stale {
        pods::delete(store, p);
    }
}

fn write_status(store: &mut Store, ctl: &mut Ctl, s: &Sts) {
    let pods = owned(store, "pods", &uid(&s.w), false);
    let min_ready = min_ready(&s.w);
    if let Some(at) = pods
        .iter()
        .filter_map(|p| pods::available_at(ctl, p, min_ready))
        .min()
    {
        ctl.wake_at(at, Wake::Workload("statefulsets", s.ns.clone(), name(&s.w)));
    }
    let count = |f: &dyn Fn(&Value) -> bool| pods.iter().filter(|p| f(p)).count() as i64;
    let n = pods.len() as i64;
    let ready = count(&pods::ready);
    let updated = count(&|p| revision_of(p) == s.update_rev);
    let (mut current_rev, mut current) = (
        s.current_rev.clone(),
        count(&|p| revision_of(p) == s.current_rev),
    );
    if updated == n && ready == n && n == s.want {
        (current_rev, current) = (s.update_rev.clone(), updated);
    }
    let status = json!({
        "observedGeneration": generation(&s.w), "replicas": n, "readyReplicas": ready,
        "currentReplicas": current, "updatedReplicas": updated,
        "availableReplicas": count(&|p| pods::available(ctl, p, min_ready)),
        "currentRevision": current_rev, "updateRevision": s.update_rev, "collisionCount": 0,
    });
    put_status(store, "apps", "statefulsets", &s.w, status);
}
