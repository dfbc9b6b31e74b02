//! Pods: created from a workload's template, made Ready after a delay by a simulated kubelet,
//! and removed by it once the grace period of a deletion has passed.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    Ctl, Wake, annotation, gr, int_at, name, owner_ref, put_status, set, target, terminating, uid,
};
use crate::api;
use crate::object::now;
use crate::store::Store;

/// `kube-sim.io/rollout` on a workload: `hang` (new Pods never become Ready) or `fail`
/// (a Deployment also reports ProgressDeadlineExceeded).
pub const ROLLOUT_ANNOTATION: &str = "kube-sim.io/rollout";

/// `kube-sim.io/ready-after` on a workload or its Pod template: how long its new Pods take
/// to become Ready (`500ms`, `2s`, `1m`).
pub const READY_AFTER_ANNOTATION: &str = "kube-sim.io/ready-after";

/// The node Pods of ReplicaSets and StatefulSets run on.
pub(super) const NODE: &str = "kube-sim-node";

pub(super) fn rollout_mode(o: &Value) -> Option<&str> {
    annotation(o, ROLLOUT_ANNOTATION).filter(|m| matches!(*m, "hang" | "fail"))
}

/// A Go-style duration of one unit: `250ms`, `2s`, `1m`.
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok()
}

pub(super) enum PodName {
    Exact(String),
    Generate(String),
}

/// How a controller wants a Pod created.
pub(super) struct NewPod<'a> {
    pub template: &'a Value,
    pub name: PodName,
    pub owner_kind: &'a str,
    pub owner: &'a Value,
    pub extra_labels: &'a Value,
    pub node: &'a str,
}

/// Create a Pod from a template, owned by `owner`: Ready at once when nothing delays it.
pub(super) fn create(store: &mut Store, ctl: &mut Ctl, ns: &str, new: NewPod) -> Option<Value> {
    let NewPod {
        template,
        name,
        owner_kind,
        owner,
        extra_labels,
        node,
    } = new;
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    let executed = super::run::executes(&spec);
    let held = rollout_mode(owner).is_some();
    let ready = !held && !executed && ready_after(ctl, template, Some(owner)).is_zero();
    set(&mut spec, &["nodeName"], json!(node));
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    for (k, v) in extra_labels.as_object().into_iter().flatten() {
        set(&mut labels, &[k], v.clone());
    }
    let mut meta = json!({
        "namespace": ns, "labels": labels,
        "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
        "ownerReferences": owner_ref(owner_kind, owner),
    });
    match name {
        PodName::Exact(n) => set(&mut meta, &["name"], json!(n)),
        PodName::Generate(p) => set(&mut meta, &["generateName"], json!(p)),
    }
    let state = match (ready, held) {
        (true, _) => Start::Ready,
        (false, true) => Start::Pending,
        (false, false) => Start::Starting,
    };
    let status = if executed {
        super::run::pending_status(&spec)
    } else {
        status(&spec, state)
    };
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status,
    });
    let t = target(store, "", "pods", ns, None)?;
    match api::create(store, &t, pod, false) {
        Ok(p) => {
            if ready {
                ctl.ready_since.insert(uid(&p), Instant::now());
            }
            Some(p)
        }
        Err(e) => {
            tracing::warn!(error = %e, "controller: creating Pod");
            None
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// Containers not created (a held rollout).
    Pending,
    /// Containers running, readiness not yet passed.
    Starting,
    Ready,
}

fn status(spec: &Value, state: Start) -> Value {
    let ready = state == Start::Ready;
    let ts = now();
    let statuses: Vec<Value> = spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let st = if state == Start::Pending {
                json!({ "waiting": { "reason": "ContainerCreating" } })
            } else {
                json!({ "running": { "startedAt": ts } })
            };
            json!({ "name": c.get("name").cloned().unwrap_or(json!("")),
                    "image": c.get("image").cloned().unwrap_or(json!("")),
                    "ready": ready, "started": state != Start::Pending, "restartCount": 0, "state": st })
        })
        .collect();
    let flag = if ready { "True" } else { "False" };
    let mut s = json!({
        "phase": if state == Start::Pending { "Pending" } else { "Running" },
        "startTime": ts,
        "conditions": [{ "type": "Ready", "status": flag, "lastTransitionTime": ts },
                       { "type": "ContainersReady", "status": flag, "lastTransitionTime": ts }],
        "containerStatuses": statuses,
    });
    if state != Start::Pending {
        s["podIP"] = json!(pod_ip());
    }
    s
}

fn pod_ip() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    format!("10.244.{}.{}", b[0], b[1].max(2))
}

pub(super) fn ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True"))
            })
        })
}

/// Ready for at least `min_ready` (a Pod made Ready before the controllers started counts).
pub(super) fn available(ctl: &Ctl, p: &Value, min_ready: Duration) -> bool {
    ready(p)
        && ctl
            .ready_since
            .get(&uid(p))
            .is_none_or(|since| since.elapsed() >= min_ready)
}

/// When a Ready Pod becomes available, if it is not yet.
pub(super) fn available_at(ctl: &Ctl, p: &Value, min_ready: Duration) -> Option<Instant> {
    let since = ctl.ready_since.get(&uid(p))?;
    (ready(p) && since.elapsed() < min_ready).then(|| *since + min_ready)
}

/// How long a new Pod takes to become Ready: its template's annotation, its owner's, or the
/// server default.
fn ready_after(ctl: &Ctl, template: &Value, owner: Option<&Value>) -> Duration {
    annotation(template, READY_AFTER_ANNOTATION)
        .or_else(|| owner.and_then(|o| annotation(o, READY_AFTER_ANNOTATION)))
        .and_then(parse_duration)
        .unwrap_or(ctl.pacing.ready_after)
}

/// The workload that controls a Pod.
fn owner_of(store: &Store, p: &Value) -> Option<Value> {
    let r = p
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .first()?;
    let plural = match r.get("kind")?.as_str()? {
        "ReplicaSet" => "replicasets",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        _ => return None,
    };
    let key = (super::namespace(p), r.get("name")?.as_str()?.to_string());
    store.get(&gr("apps", plural), &key).map(|o| (*o).clone())
}

/// The kubelet's part: a terminating Pod is removed when its grace period is over, a Pod
/// that is not Ready becomes Ready when its delay is over (unless its rollout is held).
pub(super) fn kubelet(store: &mut Store, ctl: &mut Ctl, ns: &str, pod: &str) {
    let Some(p) = store.get(&gr("", "pods"), &(ns.into(), pod.into())) else {
        return;
    };
    let p = (*p).clone();
    let id = uid(&p);
    let wake = Wake::Pod(ns.into(), pod.into());
    let executed = p.get("spec").is_some_and(super::run::executes);
    if executed && !terminating(&p) {
        return super::run::sync(store, ctl, &p);
    }
    if executed && super::run::stop(store, ctl, &p) {
        return;
    }
    if terminating(&p) {
        let grace = int_at(&p, "/metadata/deletionGracePeriodSeconds");
        if !store.graceful_pods || grace <= 0 {
            return; // nothing left to stop; finalizers hold it
        }
        let scaled = Duration::from_secs_f64(grace as f64 * ctl.pacing.grace_scale);
        let at = Instant::now() + scaled;
        let due = *ctl
            .gone_due
            .entry(id)
            .and_modify(|d| *d = (*d).min(at))
            .or_insert(at);
        if Instant::now() >= due {
            super::remove_pod(store, ns, pod);
        } else {
            ctl.wake_at(due, wake);
        }
        return;
    }
    if ready(&p) {
        return;
    }
    let owner = owner_of(store, &p);
    if owner.as_ref().and_then(rollout_mode).is_some() {
        ctl.ready_due.remove(&id);
        return;
    }
    let delay = ready_after(ctl, &p, owner.as_ref());
    let due = *ctl
        .ready_due
        .entry(id.clone())
        .or_insert_with(|| Instant::now() + delay);
    if Instant::now() < due {
        ctl.wake_at(due, wake);
        return;
    }
    ctl.ready_due.remove(&id);
    ctl.ready_since.insert(id, Instant::now());
    let spec = p.get("spec").cloned().unwrap_or(json!({}));
    let mut st = status(&spec, Start::Ready);
    if let Some(ip) = p.pointer("/status/podIP") {
        st["podIP"] = ip.clone();
    }
    if let Some(start) = p.pointer("/status/startTime") {
        st["startTime"] = start.clone();
    }
    put_status(store, "", "pods", &p, st);
}

/// Delete a Pod the way a controller does (with the Pod's own grace period).
pub(super) fn delete(store: &mut Store, p: &Value) {
    if terminating(p) {
        return;
    }
    if let Some(t) = target(store, "", "pods", &super::namespace(p), Some(&name(p))) {
        let _ = api::delete(store, &t, &api::DeleteOptions::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go_for_one_unit() {
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("2"), None);
        assert_eq!(parse_duration("2h"), None);
        assert_eq!(parse_duration("s"), None);
    }
}
