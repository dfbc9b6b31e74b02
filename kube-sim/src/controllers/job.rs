//! Job: Pods from the template until `completions` of them succeed (at most `parallelism`
//! at once), a replacement for each failed Pod until failures exceed `backoffLimit`,
//! `activeDeadlineSeconds`, `suspend`, `ttlSecondsAfterFinished`, and the status and
//! conditions the real Job controller writes.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::pods::{self, NewPod, PodName};
use super::{Ctl, Wake, gr, name, namespace, owned, put_status, str_at, target, uid};
use crate::api;
use crate::object::now;
use crate::store::Store;

/// When a Job started and finished, to the instant (the API keeps whole seconds).
#[derive(Debug, Clone, Copy)]
pub(super) struct Times {
    started: Instant,
    finished: Option<Instant>,
}

const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

fn has_condition(job: &Value, ty: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!(ty)) && c.get("status") == Some(&json!("True")))
}

fn finished(job: &Value) -> bool {
    has_condition(job, "Complete") || has_condition(job, "Failed")
}

fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let ts = now();
    json!({ "type": ty, "status": status, "lastProbeTime": ts, "lastTransitionTime": ts,
            "reason": reason, "message": message })
}

/// Replace or add a condition; one whose status is unchanged keeps its times.
fn set_condition(status: &mut Value, c: Value) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(list) = status["conditions"].as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|o| o.get("type") == c.get("type")) {
        Some(o) if o.get("status") == c.get("status") => {}
        Some(o) => *o = c,
        None => list.push(c),
    }
}

fn phase(p: &Value) -> String {
    str_at(p, "/status/phase")
}

/// A Pod the Job counts as done: terminal, or deleted before it succeeded.
fn outcome(p: &Value) -> Option<bool> {
    match phase(p).as_str() {
        "Succeeded" => Some(true),
        "Failed" => Some(false),
        _ if super::terminating(p) => Some(false),
        _ => None,
    }
}

/// Count newly finished Pods into `status`.
fn count(ctl: &mut Ctl, pods: &[Value], status: &mut Value) {
    for p in pods {
        if let Some(ok) = outcome(p)
            && ctl.counted.insert(uid(p))
        {
            let field = if ok { "succeeded" } else { "failed" };
            status[field] = json!(status[field].as_i64().unwrap_or(0) + 1);
        }
    }
}

/// A Pod removed before its Job counted it: count it now (running Pods count as failed).
pub(super) fn count_deleted(store: &mut Store, ctl: &mut Ctl, p: &Value) {
    if ctl.counted.remove(&uid(p)) {
        return;
    }
    for owner in super::owners(p, "Job") {
        let Some(job) = store.get(&gr("batch", "jobs"), &(namespace(p), owner)) else {
            continue;
        };
        let job = (*job).clone();
        if finished(&job) {
            continue;
        }
        let mut status = job.get("status").cloned().unwrap_or(json!({}));
        let field = if phase(p) == "Succeeded" {
            "succeeded"
        } else {
            "failed"
        };
        status[field] = json!(status[field].as_i64().unwrap_or(0) + 1);
        put_status(store, "batch", "jobs", &job, status);
    }
}

pub(super) fn reconcile(store: &mut Store, ctl: &mut Ctl, ns: &str, jname: &str) {
    let Some(job) = store.get(&gr("batch", "jobs"), &(ns.into(), jname.into())) else {
        return;
    };
    let job = (*job).clone();
    let managed_by = str_at(&job, "/spec/managedBy");
    if super::terminating(&job) || !(managed_by.is_empty() || managed_by == JOB_CONTROLLER) {
        return;
    }
    if finished(&job) {
        return ttl(store, ctl, &job);
    }
    if str_at(&job, "/spec/completionMode") == "Indexed" {
        tracing::warn!(job = jname, "kube-sim does not run Indexed Jobs");
        return;
    }
    let suspended = job.pointer("/spec/suspend") == Some(&json!(true));
    let mut status = job.get("status").cloned().unwrap_or(json!({}));
    count(ctl, &owned(store, "pods", &uid(&job), true), &mut status);
    if !suspended {
        resume(ctl, &job, &mut status);
    }
    let ending = decide(store, ctl, &job, &mut status);
    if ending || suspended {
        for p in active(store, &job) {
            pods::delete(store, &p);
            // A deleted Pod that did not succeed counts as failed.
            if ctl.counted.insert(uid(&p)) {
                status["failed"] = json!(status["failed"].as_i64().unwrap_or(0) + 1);
            }
        }
    } else {
        start_pods(store, ctl, &job, &status);
    }
    if suspended && !ending {
        suspend(&mut status);
    }
    write_status(store, ctl, &job, status);
}

/// Whether the Job is ending: FailureTarget (too many failures, deadline) or
/// SuccessCriteriaMet, set now or before.
fn decide(store: &Store, ctl: &mut Ctl, job: &Value, status: &mut Value) -> bool {
    let holder = status_holder(status);
    if has_condition(&holder, "FailureTarget") || has_condition(&holder, "SuccessCriteriaMet") {
        return true;
    }
    if let Some((reason, message)) = failure(ctl, job, status) {
        set_condition(status, condition("FailureTarget", "True", reason, message));
        return true;
    }
    if succeeded(job, status, store) {
        let m = "Reached expected number of succeeded pods";
        set_condition(
            status,
            condition("SuccessCriteriaMet", "True", "CompletionsReached", m),
        );
        return true;
    }
    false
}

/// `status` wrapped so the condition helpers can read it.
fn status_holder(status: &Value) -> Value {
    json!({ "status": status })
}

/// Active Pods: not terminating and not finished.
fn active(store: &Store, job: &Value) -> Vec<Value> {
    owned(store, "pods", &uid(job), false)
        .into_iter()
        .filter(|p| outcome(p).is_none())
        .collect()
}

/// Why the Job fails, if it does: too many failed Pods, or the deadline passed.
fn failure(ctl: &mut Ctl, job: &Value, status: &Value) -> Option<(&'static str, &'static str)> {
    let backoff = job
        .pointer("/spec/backoffLimit")
        .and_then(Value::as_i64)
        .unwrap_or(6);
    if status["failed"].as_i64().unwrap_or(0) > backoff {
        return Some((
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ));
    }
    let deadline = job
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)?;
    let started = ctl.job_times.get(&uid(job))?.started;
    let at = started + Duration::from_secs(deadline.max(0) as u64);
    if Instant::now() >= at {
        return Some((
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ));
    }
    let w = Wake::Workload("jobs", namespace(job), name(job));
    ctl.wake_at(at, w);
    None
}

fn succeeded(job: &Value, status: &Value, store: &Store) -> bool {
    let done = status["succeeded"].as_i64().unwrap_or(0);
    match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => done >= c,
        // A work queue: done once one Pod succeeded and no other is still working.
        None => done > 0 && active(store, job).is_empty(),
    }
}

/// Create Pods up to `parallelism`, and no more than the completions still missing.
fn start_pods(store: &mut Store, ctl: &mut Ctl, job: &Value, status: &Value) {
    let parallelism = job
        .pointer("/spec/parallelism")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let done = status["succeeded"].as_i64().unwrap_or(0);
    let missing = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => c - done,
        None if done > 0 => 0,
        None => parallelism,
    };
    let want = parallelism.min(missing).clamp(0, super::MAX_PODS);
    let running = active(store, job).len() as i64;
    let template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let ns = namespace(job);
    for _ in running..want {
        let new = NewPod {
            template: &template,
            name: PodName::Generate(format!("{}-", name(job))),
            owner_kind: "Job",
            owner: job,
            extra_labels: &json!({}),
            node: pods::NODE,
        };
        if pods::create(store, ctl, &ns, new).is_none() {
            return;
        }
    }
}

fn suspend(status: &mut Value) {
    if let Some(s) = status.as_object_mut() {
        s.remove("startTime");
    }
    set_condition(
        status,
        condition("Suspended", "True", "JobSuspended", "Job suspended"),
    );
}

/// A running (not suspended) Job has a start time; resuming one starts it anew.
fn resume(ctl: &mut Ctl, job: &Value, status: &mut Value) {
    if has_condition(&status_holder(status), "Suspended") {
        set_condition(
            status,
            condition("Suspended", "False", "JobResumed", "Job resumed"),
        );
    }
    let id = uid(job);
    let fresh = status.get("startTime").is_none();
    if fresh {
        status["startTime"] = json!(now());
    }
    let started = if fresh {
        Instant::now()
    } else {
        since(status.get("startTime"))
    };
    let times = Times {
        started,
        finished: None,
    };
    if fresh {
        ctl.job_times.insert(id, times);
    } else {
        ctl.job_times.entry(id).or_insert(times);
    }
}

/// Counts of the Pods left, and the terminal condition once none is active or terminating.
fn write_status(store: &mut Store, ctl: &mut Ctl, job: &Value, mut status: Value) {
    let all = owned(store, "pods", &uid(job), true);
    let active: Vec<&Value> = all.iter().filter(|p| outcome(p).is_none()).collect();
    let terminating = all
        .iter()
        .filter(|p| super::terminating(p) && !matches!(phase(p).as_str(), "Succeeded" | "Failed"))
        .count();
    let ready = active.iter().filter(|p| pods::ready(p)).count();
    status["active"] = json!(active.len());
    status["ready"] = json!(ready);
    status["terminating"] = json!(terminating);
    status["uncountedTerminatedPods"] = json!({});
    for k in ["active", "succeeded", "failed"] {
        if status[k].as_i64().unwrap_or(0) == 0
            && let Some(s) = status.as_object_mut()
        {
            s.remove(k);
        }
    }
    if active.is_empty() && terminating == 0 {
        finish(ctl, job, &mut status);
    }
    let done = finished(&status_holder(&status));
    put_status(store, "batch", "jobs", job, status);
    if done {
        let fresh = store.get(&gr("batch", "jobs"), &(namespace(job), name(job)));
        if let Some(j) = fresh {
            ttl(store, ctl, &(*j).clone());
        }
    }
}

/// FailureTarget becomes Failed, SuccessCriteriaMet becomes Complete.
fn finish(ctl: &mut Ctl, job: &Value, status: &mut Value) {
    let holder = status_holder(status);
    let target = holder
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| {
            matches!(
                c["type"].as_str(),
                Some("FailureTarget" | "SuccessCriteriaMet")
            ) && c["status"] == json!("True")
        })
        .cloned();
    let Some(t) = target else {
        return;
    };
    let failed = t["type"] == json!("FailureTarget");
    let ty = if failed { "Failed" } else { "Complete" };
    let (reason, message) = (str_at(&t, "/reason"), str_at(&t, "/message"));
    set_condition(status, condition(ty, "True", &reason, &message));
    if !failed {
        status["completionTime"] = json!(now());
    }
    if let Some(times) = ctl.job_times.get_mut(&uid(job)) {
        times.finished = Some(Instant::now());
    }
}

/// `ttlSecondsAfterFinished`: delete the finished Job (and, in the foreground, its Pods)
/// once that long has passed, as the TTL-after-finished controller does.
fn ttl(store: &mut Store, ctl: &mut Ctl, job: &Value) {
    let Some(secs) = job
        .pointer("/spec/ttlSecondsAfterFinished")
        .and_then(Value::as_i64)
    else {
        return;
    };
    let finished_at = ctl
        .job_times
        .get(&uid(job))
        .and_then(|t| t.finished)
        .unwrap_or_else(|| since(terminal_time(job)));
    let due = finished_at + Duration::from_secs(secs.max(0) as u64);
    if Instant::now() < due {
        ctl.wake_at(due, Wake::Workload("jobs", namespace(job), name(job)));
        return;
    }
    let Some(t) = target(store, "batch", "jobs", &namespace(job), Some(&name(job))) else {
        return;
    };
    let opts = api::DeleteOptions {
        propagation: Some("Foreground".into()),
        precondition_uid: Some(uid(job)),
        ..Default::default()
    };
    if let Err(e) = api::delete(store, &t, &opts) {
        tracing::warn!(error = %e, "ttl-after-finished: deleting a Job");
    }
}

/// When a finished Job's terminal condition was written.
fn terminal_time(job: &Value) -> Option<&Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| matches!(c["type"].as_str(), Some("Complete" | "Failed")))
        .find_map(|c| c.get("lastTransitionTime"))
}

/// The instant of an API timestamp (now when there is none).
fn since(ts: Option<&Value>) -> Instant {
    let written = ts
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let ago = written
        .map(|t| chrono::Utc::now() - t.with_timezone(&chrono::Utc))
        .and_then(|d| d.to_std().ok())
        .unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}
