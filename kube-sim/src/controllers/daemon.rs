//! DaemonSet: one Pod per Node (the simulated node when there are none), updated node by node
//! within `maxUnavailable` (or left to be deleted, `OnDelete`); a replacement starts once the
//! old Pod is gone.

use serde_json::{Value, json};

use super::pods::{self, NewPod, PodName};
use super::replicaset::min_ready;
use super::rolling::resolve;
use super::stateful::{REVISION_LABEL, ensure_revision};
use super::{Ctl, Wake, generation, gr, name, owned, put_status, str_at, terminating, uid};
use crate::store::Store;

fn nodes(store: &Store) -> Vec<String> {
    let names: Vec<String> = store
        .range_stored(&gr("", "nodes"), None, None)
        .map(|(k, _)| k.1.clone())
        .collect();
    if names.is_empty() {
        vec![pods::NODE.to_string()]
    } else {
        names
    }
}

pub(super) fn reconcile_all(store: &mut Store, ctl: &mut Ctl) {
    let keys: Vec<(String, String)> = store
        .range_stored(&gr("apps", "daemonsets"), None, None)
        .map(|(k, _)| k.clone())
        .collect();
    for (ns, n) in keys {
        reconcile(store, ctl, &ns, &n);
    }
}

pub(super) fn reconcile(store: &mut Store, ctl: &mut Ctl, ns: &str, wname: &str) {
    let Some(w) = store.get(&gr("apps", "daemonsets"), &(ns.into(), wname.into())) else {
        return;
    };
    let w = (*w).clone();
    if terminating(&w) {
        return;
    }
    let template = w.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let rev = ensure_revision(store, "DaemonSet", &w, &template);
    let hash = rev.trim_start_matches(&format!("{wname}-")).to_string();
    let nodes = nodes(store);
    let all = owned(store, "pods", &uid(&w), true);
    let node_of = |p: &Value| str_at(p, "/spec/nodeName");
    // Pods on nodes that are gone.
    for p in all.iter().filter(|p| !nodes.contains(&node_of(p))) {
        pods::delete(store, p);
    }
    let labels =
        json!({ REVISION_LABEL: hash, "pod-template-generation": generation(&w).to_string() });
    for node in nodes
        .iter()
        .filter(|n| !all.iter().any(|p| node_of(p) == **n))
    {
        let new = NewPod {
            template: &template,
            name: PodName::Generate(format!("{wname}-")),
            owner_kind: "DaemonSet",
            owner: &w,
            extra_labels: &labels,
            node,
        };
        pods::create(store, ctl, ns, new);
    }
    if str_at(&w, "/spec/updateStrategy/type") != "OnDelete" {
        replace_stale(store, &w, &hash, nodes.len() as i64);
    }
    write_status(store, ctl, &w, &hash, nodes.len() as i64);
}

/// Delete Pods of an older template: the unavailable ones, then Ready ones while fewer than
/// `maxUnavailable` nodes lack an available Pod.
fn replace_stale(store: &mut Store, w: &Value, hash: &str, desired: i64) {
    let all = owned(store, "pods", &uid(w), true);
    let max = match w.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable") {
        None => 1,
        Some(v) => resolve(Some(v), 0, desired, true).max(1),
    };
    let down = |p: &Value| terminating(p) || !pods::ready(p);
    let active: Vec<&Value> = all.iter().filter(|p| !terminating(p)).collect();
    let missing = desired - active.len() as i64;
    let mut unavailable = missing.max(0) + active.iter().filter(|p| down(p)).count() as i64;
    let mut stale: Vec<&&Value> = active
        .iter()
        .filter(|p| str_at(p, &format!("/metadata/labels/{REVISION_LABEL}")) != hash)
        .collect();
    stale.sort_by_key(|p| (pods::ready(p), name(p)));
    for p in stale {
        if down(p) {
            pods::delete(store, p);
        } else if unavailable < max {
            pods::delete(store, p);
            unavailable += 1;
        }
    }
}

fn write_status(store: &mut Store, ctl: &mut Ctl, w: &Value, hash: &str, desired: i64) {
    let active = owned(store, "pods", &uid(w), false);
    let min_ready = min_ready(w);
    if let Some(at) = active
        .iter()
        .filter_map(|p| pods::available_at(ctl, p, min_ready))
        .min()
    {
        ctl.wake_at(
            at,
            Wake::Workload("daemonsets", super::namespace(w), name(w)),
        );
    }
    let count = |f: &dyn Fn(&Value) -> bool| active.iter().filter(|p| f(p)).count() as i64;
    let available = count(&|p| pods::available(ctl, p, min_ready));
    let mut status = json!({
        "observedGeneration": generation(w), "desiredNumberScheduled": desired,
        "currentNumberScheduled": active.len() as i64, "numberMisscheduled": 0,
        "numberReady": count(&pods::ready), "numberAvailable": available,
        "updatedNumberScheduled": count(&|p| str_at(p, &format!("/metadata/labels/{REVISION_LABEL}")) == hash),
    });
    if desired > available {
        status["numberUnavailable"] = json!(desired - available);
    }
    put_status(store, "apps", "daemonsets", w, status);
}
