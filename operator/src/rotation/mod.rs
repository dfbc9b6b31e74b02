//! Credential rotation between two slots, pure. From what the cluster shows — the policy's
//! slots with their content fingerprints, the previous status, every managed workload's slot
//! and rollout, and (when asked for) the Pods still running with each slot — to the slot the
//! workloads should use, whether they may be switched now, where the rotation stands, and
//! which slot may be revoked.
//!
//! Nothing here is remembered between calls: every decision is derived from the cluster, so
//! an operator killed at any moment continues where the cluster stands. A workload's slot is
//! the key its `secretKeyRef` reads; a slot is revocable only once no template references it
//! and no Pod started with it is left (the executor lists them when [`Decision::needs_pods`]
//! says so).

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{RotationMode, RotationPhase, RotationStatus, RotationTrigger};

/// Why a slot cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub reason: &'static str,
    pub message: String,
    /// The Secret is gone or no longer granted (not merely malformed).
    pub withdrawn: bool,
}

/// One credential slot as read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub name: String,
    /// Keyed fingerprint of the Secret's content; `None` when there is no readable Secret.
    pub fingerprint: Option<String>,
    pub problem: Option<Problem>,
}

/// The verification of the target slot (from `spec.verification`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No verification is configured: no gate.
    NotRequired,
    Pending,
    Passed,
    Failed,
}

/// Where one workload's rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Rolling,
    RolledOut,
    /// Waits for something outside the operator (OnDelete, a paused Deployment).
    Waiting,
    /// Past its progress deadline.
    Stalled,
}

/// One managed workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// `Kind/name`, for status.
    pub name: String,
    /// The slot its template reads, if any.
    pub slot: Option<String>,
    /// Its template is on the target configuration.
    pub current: bool,
    pub progress: Progress,
}

/// Everything a decision is made from.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub mode: RotationMode,
    /// `spec.proxy.active`.
    pub declared: &'a str,
    pub slots: &'a [Slot],
    /// `status.activeCredential`.
    pub previous_active: Option<&'a str>,
    pub previous: Option<&'a RotationStatus>,
    /// Fingerprints from `status.credentials`: what `Auto` compares with.
    pub baselines: &'a BTreeMap<String, String>,
    pub gate: Gate,
    pub workloads: &'a [Workload],
    /// Pods per slot (started with that slot, not yet gone), when listed.
    pub pods: Option<&'a BTreeMap<String, usize>>,
}

/// A rotation in progress or finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub from: String,
    pub to: String,
    pub trigger: RotationTrigger,
    pub phase: RotationPhase,
    /// Begun by this decision.
    pub started: bool,
    pub revocable: Vec<String>,
    pub total: usize,
    pub switched: usize,
    pub rolled_out: usize,
    pub pending: Vec<String>,
    pub message: String,
}

/// What the policy does about its credential slots now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The slot every workload should end up on.
    pub target: String,
    /// Why the target cannot be used (the policy is then blocked).
    pub blocked: Option<Problem>,
    pub rotation: Option<Rotation>,
    /// Workloads may be written (switched) now.
    pub may_write: bool,
    /// Every workload is on the target and rolled out: the Pods per slot decide the rest.
    pub needs_pods: bool,
    /// Slots whose credentials stay in the managed Secret: the target, the slots templates
    /// use, and the slot being left until nothing uses it.
    pub keep: BTreeSet<String>,
    /// Slots in use whose content changed since it was last seen: Pods not yet rolled still
    /// run with the old value.
    pub changed_in_place: Vec<String>,
    /// The fingerprints to remember (`status.credentials`).
    pub baselines: BTreeMap<String, String>,
}

fn slot<'a>(i: &Input<'a>, name: &str) -> Option<&'a Slot> {
    i.slots.iter().find(|s| s.name == name)
}

/// The slot the workloads use as far as status knows.
fn active<'a>(i: &Input<'a>) -> &'a str {
    i.previous_active
        .filter(|a| slot(i, a).is_some())
        .unwrap_or(i.declared)
}

/// The slot to end on, and what asked for it (independent of the workloads, so the plan
/// can compute the target configuration before it knows which workloads are on it).
pub fn target(i: &Input) -> (String, RotationTrigger) {
    if i.mode == RotationMode::Manual {
        return (i.declared.to_owned(), RotationTrigger::Manual);
    }
    let active = active(i);
    let changed = i.slots.iter().find(|s| {
        s.name != active
            && s.fingerprint.is_some()
            && i.baselines
                .get(&s.name)
                .is_some_and(|b| Some(b) != s.fingerprint.as_ref())
    });
    if let Some(s) = changed {
        return (s.name.clone(), RotationTrigger::Auto);
    }
    match i.previous {
        // A rotation that has not switched anything yet (Blocked, Verifying) goes on.
        Some(r) if r.phase != RotationPhase::Complete && slot(i, &r.to).is_some() => {
            (r.to.clone(), r.trigger)
        }
        _ => (active.to_owned(), RotationTrigger::Auto),
    }
}

/// The slot being left: the previous rotation's when it has the same target; when a newer
/// target replaces it, the previous target if workloads may have moved to it (not when it was
/// blocked or being verified: then nothing used it, and it is not revocable), else the
/// active slot if the target differs.
fn from(i: &Input, target: &str) -> Option<String> {
    let unused =
        |r: &RotationStatus| matches!(r.phase, RotationPhase::Blocked | RotationPhase::Verifying);
    match i.previous {
        Some(r) if r.to == target => Some(r.from.clone()),
        Some(r) if unused(r) && slot(i, &r.from).is_some() => Some(r.from.clone()),
        Some(r) if !unused(r) && slot(i, &r.to).is_some() => Some(r.to.clone()),
        _ => (active(i) != target).then(|| active(i).to_owned()),
    }
    .filter(|f| f != target)
}

impl Decision {
    /// The slot `status.activeCredential` names: the target once workloads may switch to
    /// it, the slot being left while the rotation is verified or blocked.
    pub fn active_credential(&self) -> &str {
        match &self.rotation {
            Some(r) if matches!(r.phase, RotationPhase::Verifying | RotationPhase::Blocked) => {
                &r.from
            }
            _ => &self.target,
        }
    }
}

/// Decides what the policy does about its slots.
pub fn decide(i: &Input) -> Decision {
    let (target, trigger) = target(i);
    let problem = match slot(i, &target) {
        Some(s) => s.problem.clone(),
        None => Some(Problem {
            reason: crate::api::reasons::reason::SECRET_NOT_AVAILABLE,
            message: format!("no credential slot is named {target}"),
            withdrawn: false,
        }),
    };
    let mut d = Decision {
        blocked: problem.clone(),
        rotation: None,
        may_write: problem.is_none(),
        needs_pods: false,
        keep: keep(i, &target, problem.is_none()),
        changed_in_place: changed_in_place(i),
        baselines: baselines(i),
        target,
    };
    let Some(from) = from(i, &d.target) else {
        return d;
    };
    let started = i
        .previous
        .is_none_or(|r| r.to != d.target || r.from != from);
    let r = rotation(i, &mut d, from, trigger, started);
    if r.phase != RotationPhase::Complete {
        d.keep.insert(r.from.clone());
    }
    d.may_write = matches!(
        r.phase,
        RotationPhase::Rolling | RotationPhase::Draining | RotationPhase::Complete
    );
    d.rotation = Some(r);
    d
}

/// Counts and phase of a rotation from `from` to the decision's target.
fn rotation(
    i: &Input,
    d: &mut Decision,
    from: String,
    trigger: RotationTrigger,
    started: bool,
) -> Rotation {
    let to = d.target.clone();
    let on_target = |w: &&Workload| w.slot.as_deref() == Some(to.as_str()) && w.current;
    let switched: Vec<&Workload> = i.workloads.iter().filter(on_target).collect();
    let rolled_out = switched
        .iter()
        .filter(|w| w.progress == Progress::RolledOut)
        .count();
    let pending: Vec<String> = i
        .workloads
        .iter()
        .filter(|w| !(on_target(w) && w.progress == Progress::RolledOut))
        .map(|w| w.name.clone())
        .collect();
    let mut r = Rotation {
        from,
        to,
        trigger,
        phase: RotationPhase::Rolling,
        started,
        revocable: Vec::new(),
        total: i.workloads.len(),
        switched: switched.len(),
        rolled_out,
        pending,
        message: String::new(),
    };
    let stalled: Vec<String> = switched
        .iter()
        .filter(|w| w.progress == Progress::Stalled)
        .map(|w| w.name.clone())
        .collect();
    // Once complete, a rotation stays complete while no template reads the old slot again:
    // later changes (a new NO_PROXY) roll workloads on the same slot, not back.
    let completed = i
        .previous
        .is_some_and(|p| p.phase == RotationPhase::Complete && p.to == r.to && p.from == r.from)
        && !i.workloads.iter().any(|w| w.slot.as_ref() == Some(&r.from));
    let (phase, message) = if completed && d.blocked.is_none() {
        r.revocable = revocable(i, &r.to, None);
        (RotationPhase::Complete, complete_message(&r))
    } else if let Some(p) = &d.blocked {
        let m = format!(
            "slot {} cannot be used: {}; no workload is switched",
            r.to, p.message
        );
        (RotationPhase::Blocked, m)
    } else if !matches!(i.gate, Gate::NotRequired | Gate::Passed) {
        gated(i.gate, &r)
    } else if !stalled.is_empty() {
        let m = format!(
            "{} exceeded the progress deadline on slot {}: nothing more is switched and slot {} \
             stays in use; fix the rollout, or switch back to {} (spec.proxy.active)",
            stalled.join(", "),
            r.to,
            r.from,
            r.from
        );
        (RotationPhase::Stalled, m)
    } else if !r.pending.is_empty() {
        let m = format!(
            "{}/{} workload(s) switched to slot {}, {} rolled out",
            r.switched, r.total, r.to, r.rolled_out
        );
        (RotationPhase::Rolling, m)
    } else {
        draining(i, d, &mut r)
    };
    r.phase = phase;
    r.message = message;
    r
}

fn gated(gate: Gate, r: &Rotation) -> (RotationPhase, String) {
    if gate == Gate::Failed {
        let m = format!(
            "slot {} failed verification through the proxy; no workload is switched",
            r.to
        );
        return (RotationPhase::Blocked, m);
    }
    let m = format!(
        "checking slot {} through the proxy before switching any workload",
        r.to
    );
    (RotationPhase::Verifying, m)
}

/// Every template is on the target and rolled out: the Pods decide.
fn draining(i: &Input, d: &mut Decision, r: &mut Rotation) -> (RotationPhase, String) {
    d.needs_pods = true;
    let Some(pods) = i.pods else {
        let m = format!(
            "every workload runs slot {}; looking for Pods of slot {}",
            r.to, r.from
        );
        return (RotationPhase::Draining, m);
    };
    let left: usize = pods
        .iter()
        .filter(|(s, _)| **s != r.to)
        .map(|(_, n)| n)
        .sum();
    if left > 0 {
        let m = format!(
            "every workload runs slot {}; waiting for {left} Pod(s) started with slot {} to stop",
            r.to, r.from
        );
        return (RotationPhase::Draining, m);
    }
    r.revocable = revocable(i, &r.to, Some(pods));
    (RotationPhase::Complete, complete_message(r))
}

fn complete_message(r: &Rotation) -> String {
    format!(
        "no workload or Pod uses slot {} any more: it may be revoked",
        r.from
    )
}

/// Slots other than the target that no template uses and no Pod runs with.
fn revocable(i: &Input, target: &str, pods: Option<&BTreeMap<String, usize>>) -> Vec<String> {
    i.slots
        .iter()
        .map(|s| s.name.clone())
        .filter(|s| s != target)
        .filter(|s| !i.workloads.iter().any(|w| w.slot.as_ref() == Some(s)))
        .filter(|s| pods.is_none_or(|p| p.get(s).copied().unwrap_or(0) == 0))
        .collect()
}

/// The target (when usable) and every slot a template uses.
fn keep(i: &Input, target: &str, usable: bool) -> BTreeSet<String> {
    let mut keep: BTreeSet<String> = i.workloads.iter().filter_map(|w| w.slot.clone()).collect();
    if usable {
        keep.insert(target.to_owned());
    }
    keep
}

/// Slots a template reads whose content is not what was seen last.
fn changed_in_place(i: &Input) -> Vec<String> {
    i.slots
        .iter()
        .filter(|s| i.workloads.iter().any(|w| w.slot.as_ref() == Some(&s.name)))
        .filter(|s| {
            let base = i.baselines.get(&s.name);
            s.fingerprint.is_some() && base.is_some() && s.fingerprint.as_ref() != base
        })
        .map(|s| s.name.clone())
        .collect()
}

/// Current fingerprints; a slot that cannot be read keeps the one seen before.
fn baselines(i: &Input) -> BTreeMap<String, String> {
    i.slots
        .iter()
        .filter_map(|s| {
            let f = s
                .fingerprint
                .clone()
                .or_else(|| i.baselines.get(&s.name).cloned())?;
            Some((s.name.clone(), f))
        })
        .collect()
}
