//! The status, Events and requeue of a plan once the executor knows which writes failed.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::applied::Applied;
use super::slots::Stage;
use super::{Blocker, Change, Plan, Standing};
use crate::api::reasons::{READY, RECONCILING, STALLED, TRUST_EXPIRING, VERIFIED, event, reason};
use crate::api::{
    EgressProxyPolicyStatus, RotationCounts, RotationPhase, RotationStatus, UncoveredIntent,
    WorkloadCounts,
};
use crate::controller::conditions::{self, Decided};
use crate::controller::objects::Rollout;
use crate::rotation::Gate;
use crate::workloads::WorkloadId;

/// At most this many workloads are named in status and messages.
const LISTED: usize = 20;

/// What to publish after the writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The new status, when it differs from the previous one.
    pub status: Option<EgressProxyPolicyStatus>,
    pub events: Vec<Note>,
    pub requeue: Requeue,
    /// The new status only tells that workloads are rolling (the rotation's and the
    /// verification's records unchanged): it may wait up to [`HOLD`], so that a rollout
    /// that finishes by then is told by one status write, the final one.
    pub rolling: bool,
}

/// How long a status that only tells that workloads roll may wait before it is written;
/// also the least time between two such writes while a rollout goes on.
pub const HOLD: std::time::Duration = std::time::Duration::from_secs(3);

/// One Event on the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// The last steps of a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub delete_secret: bool,
    pub delete_config_map: bool,
    pub remove_finalizer: bool,
}

/// When to look at the policy again (besides changes to what it watches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// At the resync interval.
    Resync,
    /// Soon: workloads are rolling.
    Soon,
    /// Only on a change.
    AwaitChange,
}

impl Plan {
    /// The plan as far as it was carried out when the writes to `refused` were refused
    /// because the workload changed after the plan read it: its report tells those neither
    /// done nor failed (the next reconcile plans them again from the newer object).
    pub fn without(&self, refused: &[WorkloadId]) -> std::borrow::Cow<'_, Plan> {
        if refused.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut p = self.clone();
        p.writes.retain(|w| !refused.contains(&w.id));
        std::borrow::Cow::Owned(p)
    }

    /// The failed writes and the workloads no write could be built for: when not empty,
    /// the reconcile failed and is retried with backoff.
    pub fn failures(&self, failed: &[(WorkloadId, String)]) -> Vec<(WorkloadId, String)> {
        failed.iter().chain(&self.unwritable).cloned().collect()
    }

    /// The status, Events and requeue, given the writes that failed (id, message).
    pub fn report(&self, failed: &[(WorkloadId, String)], now: &Time) -> Report {
        let failed = &self.failures(failed);
        let (applied, restored) = (self.done(failed, false), self.done(failed, true));
        let removed = note(event::CONFIG_REMOVED, &restored, |n| {
            format!("removed the proxy settings from {n} workload(s)")
        });
        let Some((status, decided, requeue, mut rotation_events)) =
            self.outcome(&applied, &restored, failed, now)
        else {
            let events = removed.into_iter().collect();
            let requeue = Requeue::AwaitChange;
            return Report {
                status: None,
                events,
                requeue,
                rolling: false,
            };
        };
        let (status, flip) = self.finish(status, &decided, now);
        let rolling = status.as_ref().is_some_and(|s| self.only_rolling(s));
        let mut events: Vec<Note> = expiring(&self.previous, status.as_ref())
            .into_iter()
            .collect();
        if let Standing::Applied(a) = &self.verdict {
            // A configuration is told once, when its rollout starts: not again for the next
            // workloads of a paced rollout, nor for a workload that joins it.
            let fresh = a.mine.iter().all(|m| m.needs_write && !m.written);
            let started = note(event::CONFIG_APPLIED, &applied, |n| {
                format!("rolling {n} workload(s) to config {}", a.hash)
            })
            .filter(|_| fresh);
            // A change in place is one Warning that also tells the rollout.
            let started = match rotation_events
                .iter_mut()
                .find(|e| e.reason == event::CREDENTIAL_CHANGED_IN_PLACE)
            {
                Some(w) if started.is_some() => {
                    let rolled = started.map(|s| s.message).unwrap_or_default();
                    w.message = format!("{}; {rolled}", w.message);
                    None
                }
                _ => started,
            };
            // The status change first, then what was rolled and released. A rollout is
            // told by ConfigApplied when the operator starts it, not by Ready turning False.
            events.extend(flip.filter(|f| f.reason != reason::ROLLOUT_IN_PROGRESS));
            events.extend(rotation_events);
            events.extend(started);
            events.extend(removed);
        } else {
            // The releases that led to the new status first.
            events.extend(removed);
            events.extend(flip);
            events.extend(rotation_events);
        }
        Report {
            status,
            events,
            requeue,
            rolling,
        }
    }

    /// Whether `status` only tells that workloads are rolling: Ready is False for
    /// RolloutInProgress and the records that steps depend on (rotation, verification) are
    /// as before. (The executor keeps a held status's record of the slots.)
    fn only_rolling(&self, status: &EgressProxyPolicyStatus) -> bool {
        let old = &self.previous;
        let ready = status.conditions.iter().find(|c| c.type_ == READY);
        ready.is_some_and(|c| c.status == "False" && c.reason == reason::ROLLOUT_IN_PROGRESS)
            && status.rotation == old.rotation
            && status.verification == old.verification
    }

    /// What the verdict gives: the status (before its conditions), the conditions, when to
    /// look again, and the rotation's Events. `None` while the policy is being deleted.
    fn outcome(
        &self,
        applied: &[String],
        restored: &[String],
        failed: &[(WorkloadId, String)],
        now: &Time,
    ) -> Option<(EgressProxyPolicyStatus, Vec<Decided>, Requeue, Vec<Note>)> {
        let mut status = self.previous.clone();
        let mut rotation_events = Vec::new();
        let (decided, requeue) = match &self.verdict {
            Standing::Deleting => return None,
            Standing::Suspended => (suspended(), Requeue::AwaitChange),
            Standing::NotAdmitted {
                namespace,
                admission,
            } => {
                status.workloads = Some(WorkloadCounts::default());
                let ns_msg = not_admitted(namespace, admission, restored);
                let d = blocked(reason::NAMESPACE_NOT_ENABLED, ns_msg);
                (d, Requeue::AwaitChange)
            }
            Standing::Blocked {
                blocker,
                facts,
                slots,
            } => {
                status.discovered = Some(facts.as_ref().clone());
                if let Some(s) = slots {
                    rotation_events = slots_status(&self.previous, s, &mut status, now);
                }
                (blocked_by(blocker), Requeue::Resync)
            }
            Standing::Revoked { blocker, facts } => {
                status.discovered = Some(facts.as_ref().clone());
                status.active_credential = None;
                status.workloads = Some(WorkloadCounts::default());
                (revoked(blocker), Requeue::Resync)
            }
            Standing::Applied(a) => {
                let (applied_status, decided, requeue) =
                    applied_status(&self.previous, a, applied, failed);
                status = applied_status;
                rotation_events = slots_status(&self.previous, &a.slots, &mut status, now);
                (decided, requeue)
            }
        };
        Some((status, decided, requeue, rotation_events))
    }

    /// The workloads whose injection (or release) succeeded.
    fn done(&self, failed: &[(WorkloadId, String)], release: bool) -> Vec<String> {
        self.writes
            .iter()
            .filter(|w| w.is_release() == release)
            .filter(|w| !failed.iter().any(|(id, _)| *id == w.id))
            .map(|w| w.id.to_string())
            .collect()
    }

    /// The status with its conditions, if it changed, and the Event of a Ready flip.
    fn finish(
        &self,
        mut status: EgressProxyPolicyStatus,
        decided: &[Decided],
        now: &Time,
    ) -> (Option<EgressProxyPolicyStatus>, Option<Note>) {
        let old = &self.previous;
        status.observed_generation = self.generation;
        status.conditions = conditions::build(&old.conditions, decided, self.generation, now);
        let flip = (conditions::ready_of(&old.conditions)
            != conditions::ready_of(&status.conditions))
        .then(|| status.conditions.iter().find(|c| c.type_ == READY))
        .flatten()
        .map(|ready| Note {
            warning: ready.status != "True",
            reason: ready.reason.clone(),
            message: ready.message.clone(),
        });
        ((status != *old).then_some(status), flip)
    }

    /// What ends the reconcile once the writes are done: deleting the managed objects and
    /// removing the finalizer happen only when every workload write succeeded, so a failed
    /// release keeps the originals it must restore.
    pub fn completion(&self, failed: &[(WorkloadId, String)]) -> Completion {
        let ok = failed.is_empty() && self.unwritable.is_empty();
        Completion {
            delete_secret: ok && self.secret == Change::Delete,
            delete_config_map: ok && self.config_map == Change::Delete,
            remove_finalizer: ok && self.remove_finalizer,
        }
    }
}

fn applied_status(
    previous: &EgressProxyPolicyStatus,
    a: &Applied,
    written_now: &[String],
    failed: &[(WorkloadId, String)],
) -> (EgressProxyPolicyStatus, Vec<Decided>, Requeue) {
    let written: BTreeSet<&str> = written_now.iter().map(String::as_str).collect();
    let mut pending = a.held.clone();
    let mut up_to_date = 0;
    for m in &a.mine {
        let id = m.id.to_string();
        if !m.needs_write && m.rollout == Rollout::RolledOut {
            up_to_date += 1;
            continue;
        }
        let note = if m.rollout.stuck() {
            m.rollout.note()
        } else if m.needs_write && !m.written && !written.contains(id.as_str()) {
            " (waiting)"
        } else {
            ""
        };
        pending.push(format!("{id}{note}"));
    }
    let status = EgressProxyPolicyStatus {
        observed_generation: previous.observed_generation,
        conditions: Vec::new(),
        no_proxy: Some(a.rendered.no_proxy.value.clone()),
        java_options: a.java_options.clone(),
        uncovered: a
            .rendered
            .reported()
            .uncovered
            .iter()
            .map(|u| UncoveredIntent {
                entry: u.entry.clone(),
                reason: u.reason.clone(),
                clients: u.clients.clone(),
            })
            .collect(),
        warnings: warnings(a),
        discovered: Some(a.facts.clone()),
        active_credential: Some(a.active.clone()),
        rotation: previous.rotation.clone(),
        credentials: previous.credentials.clone(),
        workloads: Some(WorkloadCounts {
            selected: a.mine.len() as i32 + a.held.len() as i32,
            up_to_date,
            pending: pending.iter().take(LISTED).cloned().collect(),
            old_jobs: a.old_jobs.iter().take(LISTED).cloned().collect(),
        }),
        verification: a.verification.clone(),
        trust: a.trust.as_ref().map(|t| {
            let (done, rest): (Vec<_>, Vec<_>) = a
                .mine
                .iter()
                .partition(|m| m.trusted && !m.needs_write && m.rollout == Rollout::RolledOut);
            let pending = rest.iter().take(LISTED).map(|m| m.id.to_string());
            t.status(done.len() as i32, pending.collect())
        }),
    };
    let failures: Vec<String> = failed.iter().map(|(id, e)| format!("{id}: {e}")).collect();
    let mut decided = decide(&Outcome {
        selected: a.mine.len() + a.held.len(),
        pending: &pending,
        paused: a.paused,
        overlaps: &a.overlaps,
        unknown_containers: &a.unknown_containers,
        conflicts: &a.conflicts,
        failures: &failures,
        old_jobs: &a.old_jobs,
    });
    verification_conditions(a, &mut decided);
    decided.extend(trust_condition(a));
    (status, decided, requeue(a))
}

/// The Warning Event of `TrustExpiring` turning True.
fn expiring(old: &EgressProxyPolicyStatus, new: Option<&EgressProxyPolicyStatus>) -> Option<Note> {
    let is_true = |s: &EgressProxyPolicyStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == TRUST_EXPIRING && c.status == "True")
            .cloned()
    };
    let now = is_true(new?)?;
    is_true(old).is_none().then_some(Note {
        warning: true,
        reason: now.reason,
        message: now.message,
    })
}

/// `TrustExpiring`, when the policy has `spec.trust`.
fn trust_condition(a: &Applied) -> Option<Decided> {
    let t = a.trust.as_ref()?;
    Some(if t.expiring.is_empty() {
        let n = t.certs.len();
        let message = format!("no source certificate (of {n}) expires soon");
        cond(TRUST_EXPIRING, false, reason::CERTIFICATES_VALID, message)
    } else {
        let message = t.expiring.join("; ");
        cond(TRUST_EXPIRING, true, reason::CERTIFICATE_EXPIRING, message)
    })
}

/// The `Verified` condition, and `Ready`/`Reconciling`/`Stalled` when a closed gate holds
/// back workloads that need the new configuration.
fn verification_conditions(a: &Applied, decided: &mut Vec<Decided>) {
    let Some(w) = a.slots.verify.as_ref() else {
        return;
    };
    let what = format!("slot {} with config {}", w.slot, w.hash);
    let latest = a.verification.as_ref().filter(|v| v.key == w.key);
    let (status, why, message) = match (a.slots.gate, latest) {
        _ if !a.probe_image => (
            false,
            reason::VERIFICATION_FAILED,
            "spec.verification is set, but the operator runs without --probe-image: nothing \
             can be verified, so nothing is switched"
                .to_owned(),
        ),
        _ if w.refused.is_some() => (
            false,
            reason::VERIFICATION_FAILED,
            format!(
                "{}: nothing is verified, so nothing is switched",
                w.refused.as_deref().unwrap_or_default()
            ),
        ),
        (Gate::Passed, Some(v)) => (
            true,
            reason::VERIFICATION_PASSED,
            format!("{what}: {} (Job {})", v.message, v.job),
        ),
        (Gate::Failed, Some(v)) => (
            false,
            reason::VERIFICATION_FAILED,
            format!("{what}: {} (Job {})", v.message, v.job),
        ),
        _ => {
            let note = a
                .probe_note
                .as_deref()
                .unwrap_or("the probe Job is being looked up");
            (
                false,
                reason::VERIFICATION_PENDING,
                format!("checking {what} from inside the cluster: {note}"),
            )
        }
    };
    let held = a.slots.gate != Gate::Passed && a.mine.iter().any(|m| m.needs_write);
    if held {
        let failed = why == reason::VERIFICATION_FAILED;
        let n = a.mine.iter().filter(|m| m.needs_write).count();
        let m = format!("{n} workload(s) wait for the verification of {what}: {message}");
        decided.retain(|d| ![READY, RECONCILING, STALLED].contains(&d.type_));
        decided.push(cond(READY, false, why, m.clone()));
        decided.push(cond(RECONCILING, !failed, why, m.clone()));
        decided.push(cond(STALLED, failed, why, m));
    }
    decided.push(cond(VERIFIED, status, why, message));
}

/// The rendering's warnings; for `java` with a proxy that wants credentials, what the JDK
/// does not do by itself.
fn warnings(a: &Applied) -> Vec<String> {
    let mut out = a.rendered.reported().warnings.clone();
    let with_user = |u: &str| url::Url::parse(u).is_ok_and(|u| !u.username().is_empty());
    let urls = a.slots.urls.as_ref();
    if a.java_options.is_some()
        && urls.is_some_and(|u| with_user(&u.http_proxy) || with_user(&u.https_proxy))
    {
        out.push(JAVA_CREDENTIALS.to_owned());
    }
    let nodes = &a.node_subnets;
    if !nodes.is_empty() {
        out.push(format!(
            "node addresses are listed as the subnets that cover them ({}): every other host \
             in them bypasses the proxy too; spec.noProxy.nodeSubnets sets the prefix (32 and \
             128 list each address)",
            nodes.join(", ")
        ));
    }
    out
}

/// The warning of a `java` policy whose proxy URLs carry credentials.
pub const JAVA_CREDENTIALS: &str = "java: the JDK sends no proxy credentials by itself: the \
     application needs a java.net.Authenticator (it can read them from HTTPS_PROXY, which the \
     operator sets too), and for https URLs the JDK refuses Basic proxy authentication unless \
     jdk.http.auth.tunneling.disabledSchemes is set to an empty value";

/// When to look again: soon while workloads roll, a rotation drains or a probe runs.
fn requeue(a: &Applied) -> Requeue {
    // Stuck rollouts (paused, past their deadline, OnDelete) do not progress by themselves:
    // their change wakes the policy.
    let progressing = !a.paused
        && (!a.held.is_empty()
            || a.mine
                .iter()
                .any(|m| !m.rollout.stuck() && (m.needs_write || m.rollout != Rollout::RolledOut)));
    // Pods stopping change nothing the operator watches: a draining rotation looks again soon.
    let phase = a.slots.decision.rotation.as_ref().map(|r| r.phase);
    let draining = matches!(
        phase,
        Some(RotationPhase::Draining | RotationPhase::Verifying)
    );
    // A run in flight (also a re-run of a configuration already judged) is read soon.
    let verifying = (a.slots.gate == Gate::Pending && a.probe_image) || a.probe_note.is_some();
    if progressing || draining || verifying {
        Requeue::Soon
    } else {
        Requeue::Resync
    }
}

fn not_admitted(namespace: &str, admission: &str, restored: &[String]) -> String {
    let restored = if restored.is_empty() {
        String::new()
    } else {
        format!(" (restored {})", restored.join(", "))
    };
    format!(
        "namespace {namespace} is not admitted by the operator's {admission}; nothing is injected{restored}"
    )
}

fn cond(
    type_: &'static str,
    status: bool,
    reason: &'static str,
    message: impl Into<String>,
) -> Decided {
    Decided {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

fn suspended() -> Vec<Decided> {
    vec![
        cond(
            READY,
            false,
            reason::SUSPENDED,
            "spec.suspend is true: nothing is written until it is false",
        ),
        cond(RECONCILING, false, reason::SUSPENDED, "suspended"),
        cond(STALLED, false, reason::SUSPENDED, "suspended"),
    ]
}

fn revoked(b: &Blocker) -> Vec<Decided> {
    let message = format!(
        "{}; the credential was removed from the managed Secret and the workloads were released",
        b.message
    );
    vec![
        cond(READY, false, b.reason, message.clone()),
        cond(RECONCILING, false, b.reason, "credential withdrawn"),
        cond(STALLED, true, b.reason, message),
    ]
}

fn blocked_by(b: &Blocker) -> Vec<Decided> {
    blocked(b.reason, b.message.clone())
}

fn blocked(reason: &'static str, message: String) -> Vec<Decided> {
    vec![
        cond(
            READY,
            false,
            reason,
            format!("{message}; the workloads keep their last applied configuration"),
        ),
        cond(RECONCILING, false, reason, "blocked"),
        cond(STALLED, true, reason, message),
    ]
}

struct Outcome<'a> {
    selected: usize,
    pending: &'a [String],
    paused: bool,
    overlaps: &'a [String],
    unknown_containers: &'a [String],
    conflicts: &'a [String],
    failures: &'a [String],
    old_jobs: &'a [String],
}

/// The Ready reason and message of an applied policy, with the running Jobs that keep an
/// old configuration (they change nothing about readiness: the next Job starts anew).
fn ready(o: &Outcome) -> (&'static str, String) {
    let (reason, mut message) = ready_first(o);
    if !o.old_jobs.is_empty() {
        message.push_str(&format!(
            "; {} running Job(s) cannot change and finish with the previous proxy configuration: {}",
            o.old_jobs.len(),
            list(o.old_jobs)
        ));
    }
    (reason, message)
}

/// The Ready reason and message of an applied policy, most urgent first.
fn ready_first(o: &Outcome) -> (&'static str, String) {
    let n = o.pending.len();
    if !o.failures.is_empty() {
        let m = format!("updating failed for {}", list(o.failures));
        (reason::WORKLOAD_UPDATE_FAILED, m)
    } else if !o.overlaps.is_empty() {
        let m = format!(
            "selected, but an older policy manages them: {}",
            list(o.overlaps)
        );
        (reason::POLICY_OVERLAP, m)
    } else if !o.unknown_containers.is_empty() {
        let m = format!(
            "spec.containers names containers that no selected workload has: {}",
            list(o.unknown_containers)
        );
        (reason::CONTAINER_NOT_FOUND, m)
    } else if !o.conflicts.is_empty() {
        let m = format!(
            "existingEnv is Keep, so these variables keep the container's own value: {}",
            list(o.conflicts)
        );
        (reason::ENV_CONFLICT, m)
    } else if n > 0 && o.paused {
        let m = format!(
            "spec.rollout.paused: {n} workload(s) wait: {}",
            list(o.pending)
        );
        (reason::ROLLOUT_PAUSED, m)
    } else if n > 0 {
        let m = format!(
            "{n} workload(s) not yet on the current config: {}",
            list(o.pending)
        );
        (reason::ROLLOUT_IN_PROGRESS, m)
    } else if o.selected == 0 {
        let m = "the policy selects no workload in this namespace".into();
        (reason::NO_WORKLOADS, m)
    } else {
        let m = format!(
            "{} workload(s) run the current proxy configuration",
            o.selected
        );
        (reason::RECONCILED, m)
    }
}

/// Ready, Reconciling and Stalled for an applied policy.
fn decide(o: &Outcome) -> Vec<Decided> {
    let (ready_reason, ready_msg) = ready(o);
    let is_ready = matches!(ready_reason, reason::RECONCILED | reason::NO_WORKLOADS);
    let reconciling = if o.pending.is_empty() {
        let m = "every selected workload is up to date";
        cond(RECONCILING, false, reason::IDLE, m)
    } else if o.paused {
        cond(RECONCILING, false, reason::ROLLOUT_PAUSED, "rollout paused")
    } else {
        let m = format!("{} workload(s) rolling or waiting", o.pending.len());
        cond(RECONCILING, true, reason::ROLLOUT_IN_PROGRESS, m)
    };
    let stalled = cond(
        STALLED,
        false,
        reason::IDLE,
        "the spec and its Secret are valid",
    );
    vec![
        cond(READY, is_ready, ready_reason, ready_msg),
        reconciling,
        stalled,
    ]
}

/// A Normal Event naming `workloads`, if there are any.
fn note(reason: &str, workloads: &[String], what: impl Fn(usize) -> String) -> Option<Note> {
    (!workloads.is_empty()).then(|| Note {
        warning: false,
        reason: reason.into(),
        message: format!("{}: {}", what(workloads.len()), list(workloads)),
    })
}

/// The first few names, and how many more.
pub(crate) fn list(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(LISTED).map(String::as_str).collect();
    if items.len() > LISTED {
        format!("{} and {} more", shown.join(", "), items.len() - LISTED)
    } else {
        shown.join(", ")
    }
}

/// `status.activeCredential`, `status.credentials` and `status.rotation` from the slot
/// stage, and the rotation's Events (each once: on the change that causes it).
fn slots_status(
    previous: &EgressProxyPolicyStatus,
    s: &Stage,
    status: &mut EgressProxyPolicyStatus,
    now: &Time,
) -> Vec<Note> {
    let d = &s.decision;
    status.active_credential = Some(d.active_credential().to_owned());
    status.credentials = s.credentials.clone();
    let old = previous.rotation.as_ref();
    status.rotation = d.rotation.as_ref().map(|r| {
        let same = old.filter(|o| !r.started && o.from == r.from && o.to == r.to);
        let since = same.and_then(|o| o.revocable_since.clone());
        RotationStatus {
            phase: r.phase,
            from: r.from.clone(),
            to: r.to.clone(),
            trigger: r.trigger,
            started_at: same
                .and_then(|o| o.started_at.clone())
                .or_else(|| Some(now.clone())),
            workloads: RotationCounts {
                total: r.total as i32,
                switched: r.switched as i32,
                rolled_out: r.rolled_out as i32,
            },
            pending: r.pending.iter().take(LISTED).cloned().collect(),
            revocable: r.revocable.clone(),
            revocable_since: (!r.revocable.is_empty())
                .then(|| since.unwrap_or_else(|| now.clone())),
            message: Some(r.message.clone()),
        }
    });
    let mut events = Vec::new();
    let note = |warning: bool, reason: &str, message: String| Note {
        warning,
        reason: reason.into(),
        message,
    };
    for slot in &d.changed_in_place {
        let m = format!(
            "the Secret of credential slot {slot} changed while workloads use it: Pods not yet \
             rolled still run with the old value until they restart; rotating through the other \
             slot avoids this"
        );
        events.push(note(true, event::CREDENTIAL_CHANGED_IN_PLACE, m));
    }
    let Some(r) = &d.rotation else {
        return events;
    };
    if r.started {
        let m = format!(
            "rotating from credential slot {} to {} ({:?}): {} workload(s)",
            r.from, r.to, r.trigger, r.total
        );
        events.push(note(false, event::ROTATION_STARTED, m));
    }
    let entered = r.started || old.is_none_or(|o| o.phase != r.phase);
    let (warning, reason) = match r.phase {
        RotationPhase::Blocked => (true, event::ROTATION_BLOCKED),
        RotationPhase::Stalled => (true, event::ROTATION_STALLED),
        RotationPhase::Complete => (false, event::CREDENTIAL_REVOCABLE),
        RotationPhase::Verifying | RotationPhase::Rolling | RotationPhase::Draining => {
            return events;
        }
    };
    if entered {
        events.push(note(warning, reason, r.message.clone()));
    }
    events
}
