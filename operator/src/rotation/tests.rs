use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn slot(name: &str, fingerprint: &str) -> Slot {
    Slot {
        name: name.into(),
        fingerprint: Some(fingerprint.into()),
        problem: None,
    }
}

fn broken(name: &str) -> Slot {
    Slot {
        name: name.into(),
        fingerprint: Some("garbage".into()),
        problem: Some(Problem {
            reason: "InvalidProxyUrl",
            message: "httpProxy is not a URL".into(),
            withdrawn: false,
        }),
    }
}

fn on(name: &str, slot: &str, current: bool, progress: Progress) -> Workload {
    Workload {
        name: name.into(),
        slot: Some(slot.into()),
        current,
        progress,
    }
}

fn input<'a>(
    mode: RotationMode,
    declared: &'a str,
    slots: &'a [Slot],
    workloads: &'a [Workload],
    baselines: &'a BTreeMap<String, String>,
) -> Input<'a> {
    Input {
        mode,
        declared,
        slots,
        previous_active: None,
        previous: None,
        baselines,
        gate: Gate::NotRequired,
        workloads,
        pods: None,
    }
}

fn status(d: &Decision) -> Option<RotationStatus> {
    d.rotation.as_ref().map(|r| RotationStatus {
        phase: r.phase,
        from: r.from.clone(),
        to: r.to.clone(),
        trigger: r.trigger,
        started_at: None,
        workloads: Default::default(),
        pending: Vec::new(),
        revocable: r.revocable.clone(),
        revocable_since: None,
        message: Some(r.message.clone()),
    })
}

/// A previous Manual rotation as status records it.
fn previous(phase: RotationPhase, from: &str, to: &str, revocable: &[&str]) -> RotationStatus {
    RotationStatus {
        phase,
        from: from.into(),
        to: to.into(),
        trigger: RotationTrigger::Manual,
        started_at: None,
        workloads: Default::default(),
        pending: Vec::new(),
        revocable: revocable.iter().map(|s| s.to_string()).collect(),
        revocable_since: None,
        message: None,
    }
}

#[test]
fn a_fresh_policy_rotates_nothing_and_keeps_its_active_slot() {
    let slots = [slot("blue", "f1"), slot("green", "g1")];
    let ws = [on("Deployment/a", "blue", true, Progress::RolledOut)];
    let none = BTreeMap::new();
    let d = decide(&input(RotationMode::Auto, "blue", &slots, &ws, &none));
    assert_eq!(d.target, "blue");
    assert_eq!(d.rotation, None);
    assert!(d.may_write && d.blocked.is_none());
    assert_eq!(d.keep, BTreeSet::from(["blue".to_string()]));
    assert_eq!(
        d.baselines,
        BTreeMap::from([("blue".into(), "f1".into()), ("green".into(), "g1".into())])
    );
}

#[test]
fn auto_rotates_when_the_standby_content_changes_and_drains_before_revoking() {
    let slots = [slot("blue", "f1"), slot("green", "g2")];
    let base = BTreeMap::from([("blue".into(), "f1".into()), ("green".into(), "g1".into())]);
    let ws = [
        on("Deployment/a", "blue", false, Progress::RolledOut),
        on("Deployment/b", "green", true, Progress::Rolling),
    ];
    let mut i = input(RotationMode::Auto, "blue", &slots, &ws, &base);
    i.previous_active = Some("blue");
    let d = decide(&i);
    assert_eq!(d.target, "green");
    let r = d.rotation.clone().expect("rotation");
    assert_eq!((r.from.as_str(), r.to.as_str()), ("blue", "green"));
    assert_eq!(
        (r.phase, r.trigger, r.started),
        (RotationPhase::Rolling, RotationTrigger::Auto, true)
    );
    assert_eq!((r.total, r.switched, r.rolled_out), (2, 1, 0));
    assert_eq!(r.pending, ["Deployment/a", "Deployment/b"]);
    assert!(r.revocable.is_empty() && d.may_write && !d.needs_pods);
    assert_eq!(d.keep, BTreeSet::from(["blue".into(), "green".into()]));
    assert_eq!(d.active_credential(), "green");

    // Next reconcile: status holds the rotation; everything rolled out; Pods are asked for.
    let prev = status(&d);
    let base = d.baselines.clone();
    let ws = [
        on("Deployment/a", "green", true, Progress::RolledOut),
        on("Deployment/b", "green", true, Progress::RolledOut),
    ];
    let mut i = input(RotationMode::Auto, "blue", &slots, &ws, &base);
    i.previous_active = Some("green");
    i.previous = prev.as_ref();
    let d = decide(&i);
    let r = d.rotation.clone().expect("rotation");
    assert_eq!((r.phase, r.started), (RotationPhase::Draining, false));
    assert!(d.needs_pods && r.revocable.is_empty());
    let pods = BTreeMap::from([("blue".to_string(), 2), ("green".to_string(), 4)]);
    i.pods = Some(&pods);
    let d = decide(&i);
    let r = d.rotation.clone().expect("rotation");
    assert_eq!(r.phase, RotationPhase::Draining);
    assert!(
        r.message.contains("2 Pod(s) started with slot blue"),
        "{}",
        r.message
    );
    let gone = BTreeMap::from([("green".to_string(), 4)]);
    i.pods = Some(&gone);
    let d = decide(&i);
    let r = d.rotation.clone().expect("rotation");
    assert_eq!(
        (r.phase, r.revocable.clone()),
        (RotationPhase::Complete, vec!["blue".to_string()])
    );
    assert_eq!(
        d.keep,
        BTreeSet::from(["green".into()]),
        "blue leaves the managed Secret"
    );

    // Complete stays complete without listing Pods again.
    let prev = status(&d);
    i.previous = prev.as_ref();
    i.pods = None;
    let d = decide(&i);
    assert_eq!(d.rotation.expect("rotation").phase, RotationPhase::Complete);
    assert!(!d.needs_pods);
}

#[test]
fn an_unusable_target_blocks_without_touching_anything() {
    let slots = [slot("blue", "f1"), broken("green")];
    let ws = [on("Deployment/a", "blue", false, Progress::RolledOut)];
    let none = BTreeMap::new();
    let mut i = input(RotationMode::Manual, "green", &slots, &ws, &none);
    i.previous_active = Some("blue");
    let d = decide(&i);
    let r = d.rotation.clone().expect("rotation");
    assert_eq!(r.phase, RotationPhase::Blocked);
    assert!(
        r.message.contains("httpProxy is not a URL"),
        "{}",
        r.message
    );
    assert!(!d.may_write && d.blocked.is_some());
    assert_eq!(d.active_credential(), "blue");
    assert_eq!(d.keep, BTreeSet::from(["blue".into()]));
}

#[test]
fn a_stalled_switch_stops_the_rotation_and_nothing_is_revocable() {
    let slots = [slot("blue", "f1"), slot("green", "g1")];
    let ws = [
        on("Deployment/a", "green", true, Progress::Stalled),
        on("Deployment/b", "blue", false, Progress::RolledOut),
    ];
    let none = BTreeMap::new();
    let mut i = input(RotationMode::Manual, "green", &slots, &ws, &none);
    i.previous_active = Some("blue");
    let d = decide(&i);
    let r = d.rotation.expect("rotation");
    assert_eq!(r.phase, RotationPhase::Stalled);
    assert!(
        r.message
            .contains("Deployment/a exceeded the progress deadline")
    );
    assert!(!d.may_write && r.revocable.is_empty());
}

#[test]
fn verification_gates_the_switch() {
    let slots = [slot("blue", "f1"), slot("green", "g1")];
    let ws = [on("Deployment/a", "blue", false, Progress::RolledOut)];
    let none = BTreeMap::new();
    let mut i = input(RotationMode::Manual, "green", &slots, &ws, &none);
    i.previous_active = Some("blue");
    for (gate, phase, writes) in [
        (Gate::Pending, RotationPhase::Verifying, false),
        (Gate::Failed, RotationPhase::Blocked, false),
        (Gate::Passed, RotationPhase::Rolling, true),
    ] {
        i.gate = gate;
        let d = decide(&i);
        assert_eq!(d.rotation.expect("rotation").phase, phase);
        assert_eq!(d.may_write, writes);
    }
}

#[test]
fn the_newest_target_wins_and_leaves_the_previous_one() {
    let slots = [slot("blue", "f1"), slot("green", "g1")];
    let prev = previous(RotationPhase::Rolling, "blue", "green", &[]);
    let ws = [
        on("Deployment/a", "green", false, Progress::RolledOut),
        on("Deployment/b", "blue", true, Progress::RolledOut),
    ];
    let none = BTreeMap::new();
    let mut i = input(RotationMode::Manual, "blue", &slots, &ws, &none);
    i.previous_active = Some("green");
    i.previous = Some(&prev);
    let d = decide(&i);
    let r = d.rotation.expect("rotation");
    assert_eq!(
        (r.from.as_str(), r.to.as_str(), r.started),
        ("green", "blue", true)
    );
    assert_eq!(
        (r.switched, r.pending.clone()),
        (1, vec!["Deployment/a".to_string()])
    );
}

#[test]
fn a_slot_in_use_whose_content_changed_is_reported() {
    let slots = [slot("blue", "f2"), slot("green", "g1")];
    let base = BTreeMap::from([("blue".into(), "f1".into()), ("green".into(), "g1".into())]);
    let ws = [on("Deployment/a", "blue", false, Progress::RolledOut)];
    let mut i = input(RotationMode::Auto, "blue", &slots, &ws, &base);
    i.previous_active = Some("blue");
    let d = decide(&i);
    assert_eq!(d.target, "blue", "the active slot changed: no rotation");
    assert_eq!(d.rotation, None);
    assert_eq!(d.changed_in_place, ["blue"]);
}

/// A simulated cluster for the property tests: workloads with their slot, the content they
/// were switched with, their rollout, and Pods of older slots still stopping.
#[derive(Debug, Clone)]
struct SimWorkload {
    slot: String,
    content: String,
    progress: Progress,
    /// Pods of an older slot: (slot, reconciles until they are gone).
    lingering: Vec<(String, u8)>,
    /// Writes per target content.
    writes: BTreeMap<String, usize>,
}

#[derive(Debug, Clone)]
struct Scenario {
    workloads: usize,
    max_concurrent: usize,
    auto: bool,
    /// The target slot's content is malformed.
    broken_target: bool,
    /// Rollout completion per step and workload (cycled).
    finishes: Vec<bool>,
    /// Reconciles until Pods of the old slot stop.
    linger: u8,
    /// Switch back to blue at this step (Manual only).
    reverse_at: Option<usize>,
}

fn scenarios() -> impl Strategy<Value = Scenario> {
    (
        1usize..10,
        1usize..4,
        any::<bool>(),
        prop::bool::weighted(0.15),
        prop::collection::vec(any::<bool>(), 1..32),
        0u8..4,
        prop::option::weighted(0.3, 1usize..12),
    )
        .prop_map(
            |(workloads, max_concurrent, auto, broken_target, finishes, linger, reverse_at)| {
                Scenario {
                    workloads,
                    max_concurrent,
                    auto,
                    broken_target,
                    finishes,
                    linger,
                    reverse_at: if auto { None } else { reverse_at },
                }
            },
        )
}

/// Runs a rotation from blue to green (and maybe back) through `decide` and the plan's
/// budget, checking the invariants after every reconcile. Returns the last phase.
fn run(s: &Scenario) -> Result<Option<RotationPhase>, TestCaseError> {
    let mut green = slot("green", "g2");
    if s.broken_target {
        green = broken("green");
    }
    let slots = [slot("blue", "b1"), green];
    let mut baselines = BTreeMap::from([
        ("blue".to_string(), "b1".to_string()),
        ("green".to_string(), "g1".to_string()),
    ]);
    let mut sim: Vec<SimWorkload> = (0..s.workloads)
        .map(|_| SimWorkload {
            slot: "blue".into(),
            content: "b1".into(),
            progress: Progress::RolledOut,
            lingering: Vec::new(),
            writes: BTreeMap::new(),
        })
        .collect();
    let mut declared = if s.auto { "blue" } else { "green" };
    let mut active = "blue".to_string();
    let mut previous: Option<RotationStatus> = None;
    let mut phase = None;
    for step in 0..200 {
        if s.reverse_at == Some(step) {
            declared = "blue";
        }
        let mode = if s.auto {
            RotationMode::Auto
        } else {
            RotationMode::Manual
        };
        let pods: BTreeMap<String, usize> = sim.iter().fold(BTreeMap::new(), |mut m, w| {
            *m.entry(w.slot.clone()).or_default() += 1;
            for (sl, _) in &w.lingering {
                *m.entry(sl.clone()).or_default() += 1;
            }
            m
        });
        let mut i = Input {
            mode,
            declared,
            slots: &slots,
            previous_active: Some(&active),
            previous: previous.as_ref(),
            baselines: &baselines,
            gate: Gate::NotRequired,
            workloads: &[],
            pods: None,
        };
        let (target, _) = target(&i);
        let content_of = |name: &str| {
            slots
                .iter()
                .find(|x| x.name == name)
                .and_then(|x| x.fingerprint.clone())
                .unwrap_or_default()
        };
        let target_content = content_of(&target);
        let views: Vec<Workload> = sim
            .iter()
            .enumerate()
            .map(|(n, w)| Workload {
                name: format!("Deployment/w{n}"),
                slot: Some(w.slot.clone()),
                current: w.slot == target && w.content == target_content,
                progress: w.progress,
            })
            .collect();
        i.workloads = &views;
        let mut d = decide(&i);
        if d.needs_pods {
            i.pods = Some(&pods);
            d = decide(&i);
        }
        let target_usable = slots
            .iter()
            .any(|x| x.name == d.target && x.problem.is_none());
        // Revocable slots: no template, no Pod.
        for r in d.rotation.iter().flat_map(|r| &r.revocable) {
            prop_assert!(
                !sim.iter().any(|w| &w.slot == r),
                "{r} revocable while a template uses it"
            );
            prop_assert!(
                pods.get(r).copied().unwrap_or(0) == 0,
                "{r} revocable while Pods run it"
            );
        }
        prop_assert!(
            !d.may_write || target_usable,
            "writes allowed to an unusable slot"
        );
        // The plan's budget: maxConcurrent minus the workloads rolling to the target.
        if d.may_write {
            let rolling = views
                .iter()
                .filter(|v| v.current && v.progress != Progress::RolledOut)
                .count();
            let mut budget = s.max_concurrent.saturating_sub(rolling);
            for (w, v) in sim.iter_mut().zip(&views) {
                if v.current || budget == 0 {
                    continue;
                }
                budget -= 1;
                if w.slot != d.target {
                    w.lingering.push((w.slot.clone(), s.linger));
                }
                w.slot = d.target.clone();
                w.content = target_content.clone();
                w.progress = Progress::Rolling;
                *w.writes
                    .entry(format!("{}={}", d.target, target_content))
                    .or_default() += 1;
            }
        }
        for (n, w) in sim.iter_mut().enumerate() {
            if w.progress == Progress::Rolling && s.finishes[(step + n) % s.finishes.len()] {
                w.progress = Progress::RolledOut;
            }
            if w.progress == Progress::RolledOut {
                w.lingering.retain_mut(|(_, left)| {
                    *left = left.saturating_sub(1);
                    *left > 0
                });
            }
        }
        for w in &sim {
            for (content, n) in &w.writes {
                prop_assert!(*n <= 1, "a workload was written {n} times for {content}");
            }
        }
        active = d.active_credential().to_owned();
        baselines = d.baselines.clone();
        previous = status(&d).or(previous);
        phase = d.rotation.as_ref().map(|r| r.phase);
        if phase == Some(RotationPhase::Complete) && s.reverse_at.is_none_or(|r| step > r) {
            break;
        }
        if s.finishes.iter().all(|f| !f) && s.reverse_at.is_none_or(|r| step >= r) {
            // Nothing ever finishes rolling: no termination to prove (once the reversal, if
            // any, has been seen).
            break;
        }
    }
    Ok(phase)
}

proptest! {
    #[test]
    fn rotations_never_revoke_early_never_switch_to_a_broken_slot_and_finish(s in scenarios()) {
        let phase = run(&s)?;
        if s.broken_target && s.reverse_at.is_none() {
            prop_assert_eq!(phase, Some(RotationPhase::Blocked));
        } else if s.broken_target {
            // Back to the slot in use before anything switched: no rotation to report.
            prop_assert_eq!(phase, None);
        } else if s.finishes.iter().any(|f| *f) {
            prop_assert_eq!(phase, Some(RotationPhase::Complete), "{:?}", s);
        }
    }
}

#[test]
fn reverting_a_blocked_rotation_declares_nothing_revocable() {
    let slots = [slot("blue", "f1"), broken("green")];
    let ws = [on("Deployment/a", "blue", true, Progress::RolledOut)];
    let none = BTreeMap::new();
    let blocked = previous(RotationPhase::Blocked, "blue", "green", &[]);
    let mut i = input(RotationMode::Manual, "blue", &slots, &ws, &none);
    i.previous_active = Some("blue");
    i.previous = Some(&blocked);
    let d = decide(&i);
    assert_eq!(
        d.rotation, None,
        "green was never used: it is not revocable"
    );
    assert!(d.may_write);
}

#[test]
fn a_complete_rotation_stays_complete_when_the_configuration_changes_later() {
    let slots = [slot("blue", "f1"), slot("green", "g1")];
    let done = previous(RotationPhase::Complete, "blue", "green", &["blue"]);
    // A new NO_PROXY: the workloads roll again, on green.
    let ws = [on("Deployment/a", "green", false, Progress::Rolling)];
    let none = BTreeMap::new();
    let mut i = input(RotationMode::Manual, "green", &slots, &ws, &none);
    i.previous_active = Some("green");
    i.previous = Some(&done);
    let d = decide(&i);
    let r = d.rotation.expect("rotation");
    assert_eq!(
        (r.phase, r.revocable),
        (RotationPhase::Complete, vec!["blue".to_string()])
    );
    assert!(!r.started && !d.needs_pods && d.may_write);
    assert_eq!(
        d.keep,
        BTreeSet::from(["green".into()]),
        "blue is not copied back"
    );
}
