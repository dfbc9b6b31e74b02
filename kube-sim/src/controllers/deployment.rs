//! Deployment: one ReplicaSet per Pod template (`pod-template-hash`), rolled by `maxSurge` and
//! `maxUnavailable` (or `Recreate`), with `minReadySeconds`, `paused` and
//! `progressDeadlineSeconds`, and the status and conditions the real controller writes.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::pods::{READY_AFTER_ANNOTATION, ROLLOUT_ANNOTATION, rollout_mode};
use super::rolling::{Set, scale_down, scale_up, surge_and_unavailable};
use super::{
    Ctl, Wake, annotation, generation, gr, int_at, name, owned, owner_ref, put, put_status,
    replicas, scale, set, target, template_hash, terminating, uid,
};
use crate::api;
use crate::object::now;
use crate::store::Store;

pub(super) const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
/// Annotations a Deployment passes on to its ReplicaSets.
const PASSED_ON: [&str; 2] = [ROLLOUT_ANNOTATION, READY_AFTER_ANNOTATION];

fn revision(o: &Value) -> i64 {
    annotation(o, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn is_new(rs: &Value, hash: &str) -> bool {
    rs.pointer(&format!("/metadata/labels/{HASH_LABEL}"))
        .and_then(Value::as_str)
        == Some(hash)
}

pub(super) fn reconcile(store: &mut Store, ctl: &mut Ctl, ns: &str, dname: &str) {
    let Some(d) = store.get(&gr("apps", "deployments"), &(ns.into(), dname.into())) else {
        return;
    };
    let d = (*d).clone();
    if terminating(&d) {
        return;
    }
    let hash = template_hash(d.pointer("/spec/template").unwrap_or(&json!({})));
    let rss = owned(store, "replicasets", &uid(&d), false);
    let max_rev = rss.iter().map(revision).max().unwrap_or(0);
    let paused = d.pointer("/spec/paused") == Some(&json!(true));
    let new_rs = match rss.iter().find(|rs| is_new(rs, &hash)) {
        Some(rs) => Some(sync_new(store, &d, rs, max_rev)),
        None if !paused => create_new(store, &d, &hash, max_rev, &rss),
        None => None,
    };
    if let Some(new_rs) = &new_rs
        && !paused
    {
        let mut old: Vec<Value> = rss.into_iter().filter(|rs| !is_new(rs, &hash)).collect();
        old.sort_by_key(revision);
        if d.pointer("/spec/strategy/type") == Some(&json!("Recreate")) {
            recreate(store, &d, new_rs, &old);
        } else {
            roll(store, &d, new_rs, &old);
        }
    }
    write_status(store, ctl, &d, &hash, paused);
}

/// Keep the current ReplicaSet's revision, annotations and `minReadySeconds` in line.
fn sync_new(store: &mut Store, d: &Value, rs: &Value, max_rev: i64) -> Value {
    let mut next = rs.clone();
    // Rolling back to an older template makes its ReplicaSet the newest revision.
    if revision(rs) < max_rev {
        let r = json!((max_rev + 1).to_string());
        set(&mut next, &["metadata", "annotations", REVISION], r);
    }
    for key in PASSED_ON {
        let a = next.pointer_mut("/metadata/annotations");
        match (annotation(d, key), a.and_then(Value::as_object_mut)) {
            (Some(v), _) => set(&mut next, &["metadata", "annotations", key], json!(v)),
            (None, Some(a)) => {
                a.remove(key);
            }
            (None, None) => {}
        }
    }
    let min_ready = d.pointer("/spec/minReadySeconds").cloned();
    if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
        match min_ready {
            Some(m) => spec.insert("minReadySeconds".into(), m),
            None => spec.remove("minReadySeconds"),
        };
    }
    if next != *rs
        && let Some(t) = target(
            store,
            "apps",
            "replicasets",
            &super::namespace(rs),
            Some(&name(rs)),
        )
    {
        put(store, &t, next.clone());
    }
    next
}

fn create_new(
    store: &mut Store,
    d: &Value,
    hash: &str,
    max_rev: i64,
    rss: &[Value],
) -> Option<Value> {
    let want = replicas(d);
    let all: i64 = rss.iter().map(replicas).sum();
    let start = if all == 0 || d.pointer("/spec/strategy/type") == Some(&json!("Recreate")) {
        if all == 0 { want } else { 0 }
    } else {
        let (surge, _) = surge_and_unavailable(d.pointer("/spec/strategy/rollingUpdate"), want);
        scale_up(want, surge, all, 0)
    };
    let mut tpl = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    set(&mut tpl, &["metadata", "labels", HASH_LABEL], json!(hash));
    let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    set(&mut selector, &["matchLabels", HASH_LABEL], json!(hash));
    let labels = tpl.pointer("/metadata/labels").cloned();
    let mut annotations = json!({ REVISION: (max_rev + 1).to_string() });
    for key in PASSED_ON {
        if let Some(v) = annotation(d, key) {
            annotations[key] = json!(v);
        }
    }
    let mut spec = json!({ "replicas": start, "selector": selector, "template": tpl });
    if let Some(m) = d.pointer("/spec/minReadySeconds") {
        spec["minReadySeconds"] = m.clone();
    }
    let ns = super::namespace(d);
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": { "name": format!("{}-{hash}", name(d)), "namespace": ns, "labels": labels,
                      "annotations": annotations, "ownerReferences": owner_ref("Deployment", d) },
        "spec": spec,
    });
    let t = target(store, "apps", "replicasets", &ns, None)?;
    api::create(store, &t, rs, false)
        .inspect_err(|e| tracing::warn!(error = %e, "deployment controller: creating ReplicaSet"))
        .ok()
}

/// One step of a rolling update: scale the new ReplicaSet up within `maxSurge`, or the old
/// ones down within `maxUnavailable`.
fn roll(store: &mut Store, d: &Value, new_rs: &Value, old: &[Value]) {
    let want = replicas(d);
    let (surge, unavailable) =
        surge_and_unavailable(d.pointer("/spec/strategy/rollingUpdate"), want);
    let all: i64 = replicas(new_rs) + old.iter().map(replicas).sum::<i64>();
    let target = if old.iter().all(|rs| replicas(rs) == 0) {
        want
    } else {
        scale_up(want, surge, all, replicas(new_rs))
    };
    if target != replicas(new_rs) {
        scale(store, new_rs, target);
        if target > replicas(new_rs) {
            return;
        }
    }
    let set_of = |rs: &Value| Set {
        replicas: replicas(rs),
        available: int_at(rs, "/status/availableReplicas"),
    };
    let new = Set {
        replicas: target,
        ..set_of(new_rs)
    };
    let old_sets: Vec<Set> = old.iter().map(set_of).collect();
    for (rs, n) in old
        .iter()
        .zip(scale_down(want, unavailable, new, &old_sets))
    {
        scale(store, rs, n);
    }
}

/// `Recreate`: every old Pod is gone (terminating ones too) before the new ones start.
fn recreate(store: &mut Store, d: &Value, new_rs: &Value, old: &[Value]) {
    for rs in old {
        scale(store, rs, 0);
    }
    let running = old
        .iter()
        .any(|rs| !owned(store, "pods", &uid(rs), true).is_empty());
    if !running {
        scale(store, new_rs, replicas(d));
    }
}

fn write_status(store: &mut Store, ctl: &mut Ctl, d: &Value, hash: &str, paused: bool) {
    let rss = owned(store, "replicasets", &uid(d), false);
    let new_rs = rss.iter().find(|rs| is_new(rs, hash));
    if let Some(rs) = new_rs {
        let rev = revision(rs).to_string();
        if annotation(d, REVISION) != Some(rev.as_str())
            && let Some(t) = target(
                store,
                "apps",
                "deployments",
                &super::namespace(d),
                Some(&name(d)),
            )
        {
            let mut d2 = d.clone();
            set(&mut d2, &["metadata", "annotations", REVISION], json!(rev));
            put(store, &t, d2);
        }
    }
    let sum = |p: &str| rss.iter().map(|rs| int_at(rs, p)).sum::<i64>();
    let want = replicas(d);
    let updated = new_rs.map_or(0, |rs| int_at(rs, "/status/replicas"));
    let (total, available) = (sum("/status/replicas"), sum("/status/availableReplicas"));
    let mut status = json!({
        "observedGeneration": generation(d),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": sum("/status/readyReplicas"),
        "availableReplicas": available,
    });
    let unavailable = (rss.iter().map(replicas).sum::<i64>() - available).max(0);
    if unavailable > 0 {
        status["unavailableReplicas"] = json!(unavailable);
    }
    let complete = updated == want && total == want && available == want;
    let new_name = new_rs.map(name).unwrap_or_default();
    let (_, max_unavailable) =
        surge_and_unavailable(d.pointer("/spec/strategy/rollingUpdate"), want);
    let available_cond = if available >= want - max_unavailable {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let progressing = progressing(ctl, d, &status, complete, paused, &new_name);
    let conditions = [
        condition(
            "Available",
            available_cond.0,
            available_cond.1,
            available_cond.2,
        ),
        progressing,
    ];
    status["conditions"] = merge_conditions(d.pointer("/status/conditions"), conditions);
    let d = store
        .get(&gr("apps", "deployments"), &(super::namespace(d), name(d)))
        .map(|o| (*o).clone())
        .unwrap_or_else(|| d.clone());
    put_status(store, "apps", "deployments", &d, status);
}

fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({ "type": ty, "status": status, "reason": reason, "message": message })
}

/// The Progressing condition; a rollout that made no progress for `progressDeadlineSeconds`
/// is reported as ProgressDeadlineExceeded (and the controller wakes up to say so).
fn progressing(
    ctl: &mut Ctl,
    d: &Value,
    status: &Value,
    complete: bool,
    paused: bool,
    new_name: &str,
) -> Value {
    if paused {
        return condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused",
        );
    }
    if complete {
        let m = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        ctl.progress.remove(&uid(d));
        return condition("Progressing", "True", "NewReplicaSetAvailable", &m);
    }
    let timed_out = |m: &str| {
        let m = format!("ReplicaSet \"{m}\" has timed out progressing.");
        condition("Progressing", "False", "ProgressDeadlineExceeded", &m)
    };
    if rollout_mode(d) == Some("fail") {
        return timed_out(new_name);
    }
    let seen = json!([new_name, status]);
    let now = Instant::now();
    let since = match ctl.progress.get(&uid(d)) {
        Some((at, s)) if *s == seen => *at,
        _ => {
            ctl.progress.insert(uid(d), (now, seen));
            now
        }
    };
    let deadline = d
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(600)
        .max(0) as u64;
    let at = since + Duration::from_secs(deadline);
    if now >= at {
        return timed_out(new_name);
    }
    let w = Wake::Workload("deployments", super::namespace(d), name(d));
    ctl.wake_at(at, w);
    let m = format!("ReplicaSet \"{new_name}\" is progressing.");
    condition("Progressing", "True", "ReplicaSetUpdated", &m)
}

/// Timestamps: a condition that did not change keeps them; one whose status is unchanged
/// keeps its transition time.
fn merge_conditions(old: Option<&Value>, new: [Value; 2]) -> Value {
    let ts = now();
    let old = old.and_then(Value::as_array).cloned().unwrap_or_default();
    let out: Vec<Value> = new
        .into_iter()
        .map(|mut c| {
            let prev = old.iter().find(|o| o.get("type") == c.get("type"));
            let same = |k: &str| prev.is_some_and(|p| p.get(k) == c.get(k));
            let keep = |k: &str, fresh: bool| match prev.and_then(|p| p.get(k)) {
                Some(v) if !fresh => v.clone(),
                _ => json!(ts),
            };
            let unchanged = same("status") && same("reason") && same("message");
            let (updated, moved) = (
                keep("lastUpdateTime", !unchanged),
                keep("lastTransitionTime", !same("status")),
            );
            c["lastUpdateTime"] = updated;
            c["lastTransitionTime"] = moved;
            c
        })
        .collect();
    Value::Array(out)
}
