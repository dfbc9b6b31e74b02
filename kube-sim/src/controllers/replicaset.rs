//! ReplicaSet: as many active Pods as `spec.replicas`, and status counting ready and available
//! (Ready for `minReadySeconds`) Pods. Terminating Pods are not counted, as on a real cluster.

use std::time::Duration;

use serde_json::{Value, json};

use super::pods::{self, NewPod, PodName};
use super::{
    Ctl, Wake, generation, gr, int_at, name, owned, put_status, replicas, terminating, uid,
};
use crate::store::Store;

pub(super) fn min_ready(o: &Value) -> Duration {
    Duration::from_secs(int_at(o, "/spec/minReadySeconds").max(0) as u64)
}

pub(super) fn reconcile(store: &mut Store, ctl: &mut Ctl, ns: &str, rsname: &str) {
    let Some(rs) = store.get(&gr("apps", "replicasets"), &(ns.into(), rsname.into())) else {
        return;
    };
    let rs = (*rs).clone();
    if terminating(&rs) {
        return;
    }
    let want = replicas(&rs) as usize;
    let mut active = owned(store, "pods", &uid(&rs), false);
    // Surplus Pods go, those not Ready first.
    active.sort_by_key(|p| (pods::ready(p), name(p)));
    while active.len() > want {
        let p = active.remove(0);
        pods::delete(store, &p);
    }
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    while active.len() < want {
        let new = NewPod {
            template: &template,
            name: PodName::Generate(format!("{rsname}-")),
            owner_kind: "ReplicaSet",
            owner: &rs,
            extra_labels: &json!({}),
            node: pods::NODE,
        };
        match pods::create(store, ctl, ns, new) {
            Some(p) => active.push(p),
            None => return,
        }
    }
    // A held rollout let go: the kubelet starts the waiting Pods.
    for p in active.iter().filter(|p| !pods::ready(p)) {
        pods::kubelet(store, ctl, ns, &name(p));
    }
    write_status(store, ctl, &rs);
}

fn write_status(store: &mut Store, ctl: &mut Ctl, rs: &Value) {
    let active = owned(store, "pods", &uid(rs), false);
    let min_ready = min_ready(rs);
    let n = active.len() as i64;
    let ready = active.iter().filter(|p| pods::ready(p)).count() as i64;
    let available = active
        .iter()
        .filter(|p| pods::available(ctl, p, min_ready))
        .count() as i64;
    if let Some(at) = active
        .iter()
        .filter_map(|p| pods::available_at(ctl, p, min_ready))
        .min()
    {
        let w = Wake::Workload("replicasets", super::namespace(rs), name(rs));
        ctl.wake_at(at, w);
    }
    let status = if n == 0 {
        json!({ "replicas": 0, "observedGeneration": generation(rs) })
    } else {
        json!({ "replicas": n, "readyReplicas": ready, "availableReplicas": available,
                "fullyLabeledReplicas": n, "observedGeneration": generation(rs) })
    };
    put_status(store, "apps", "replicasets", rs, status);
}
