//! The stage for a policy that can be applied: which workloads it manages (overlap,
//! handover), what each needs (Keep/Override, originals), how many may roll now, and which
//! workloads it releases.

use k8s_openapi::ByteString;
use kube::core::Selector;
use kube::{Resource, ResourceExt};

use super::evaluate::Rendering;
use super::slots::{self, Stage};
use super::trust::Trusted;
use super::verify::{self, ProbeRun};
use super::{
    Change, ConfigMapData, FINALIZER, Inputs, Marker, Plan, SecretData, Standing, Unwritable,
    WorkloadWrite, labelled_for, left_behind, managed_meta, own_names, release, selects_with,
};
use crate::api::WorkloadKind;
use crate::api::{DiscoveredFacts, EgressProxyPolicy, VerificationStatus};
use crate::controller::objects::{JobView, Rollout, WorkloadView};
use crate::credentials::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::rotation::Gate;
use crate::workloads::{self, Injection, Original, TrustMount, WorkloadId, Write};

impl Applied {
    /// The values a probe of this configuration runs with.
    fn probe_env(&self) -> verify::ProbeEnv<'_> {
        verify::ProbeEnv {
            no_proxy: &self.rendered.no_proxy.value,
            java_options: self.java_options.as_deref(),
            trust: self.trust.as_ref().map(|t| {
                let keep = t.roots == crate::trust::Roots::Keep;
                (t.sources_pem.as_str(), keep)
            }),
        }
    }
}

/// What the status of an applied policy is built from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Applied {
    pub rendered: Rendering,
    /// `java`: what each container's `JAVA_TOOL_OPTIONS` gets appended.
    pub java_options: Option<String>,
    /// The node subnets NO_PROXY lists that are wider than one address.
    pub node_subnets: Vec<String>,
    pub facts: DiscoveredFacts,
    /// The slot `status.activeCredential` names.
    pub active: String,
    /// The slot the workloads are written with.
    pub target: String,
    pub hash: String,
    pub paused: bool,
    /// The workloads this policy manages, in id order.
    pub mine: Vec<ManagedWorkload>,
    /// Selected, but still carrying another policy's entries.
    pub held: Vec<String>,
    /// Selected, but an older policy manages them.
    pub overlaps: Vec<String>,
    /// Variables kept under `existingEnv: Keep`.
    pub conflicts: Vec<String>,
    /// Names in `spec.containers` that no managed workload has (a typo, most likely).
    pub unknown_containers: Vec<String>,
    /// Running Jobs on another configuration, which cannot be written ([`old_jobs`]).
    pub old_jobs: Vec<String>,
    /// The credential slots and the rotation.
    pub slots: Box<Stage>,
    /// The latest finished verification, and what a running one waits on.
    pub verification: Option<VerificationStatus>,
    pub probe_note: Option<String>,
    pub probe_image: bool,
    /// `spec.trust`: the bundle and what the workloads get of it.
    pub trust: Option<Trusted>,
}

/// One managed workload.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ManagedWorkload {
    pub id: WorkloadId,
    /// Its template is not (yet, as far as the cache shows) on the current config.
    pub needs_write: bool,
    /// The write was made and the cache has not seen it yet.
    pub written: bool,
    pub rollout: Rollout,
    /// Its template carries the current trust bundle.
    pub trusted: bool,
}

/// How the policy relates to one workload of its namespace.
enum Selection {
    /// Selected, and this policy is the one that manages it.
    Mine,
    /// Selected, but an older policy manages it.
    Taken(String),
    NotSelected,
}

/// The workloads this policy manages: selected, and no older policy selects them.
pub(super) fn managed<'a>(i: &'a Inputs, selector: &Selector) -> Vec<&'a WorkloadView> {
    let mut out: Vec<&WorkloadView> = i
        .workloads
        .iter()
        .filter(|v| matches!(selection(i, selector, v), Selection::Mine))
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Whether the policy can write `v` at all: no other policy's entries are still in it, and
/// it has a container the policy names (or entries of ours to take out). A workload that
/// cannot be written has no slot to rotate.
pub(super) fn injectable(i: &Inputs, v: &WorkloadView) -> bool {
    let own = own_names(i.policy);
    let held = i
        .others
        .iter()
        .any(|p| workloads::has_entries(&v.template, &own_names(p)));
    let names = &i.policy.spec.containers;
    let named = names.is_empty()
        || names.iter().any(|n| has_container(v, &n.0))
        || workloads::has_entries(&v.template, &own);
    !held && named
}

pub(super) fn plan(
    i: &Inputs,
    mut plan: Plan,
    selector: &Selector,
    rendered: Rendering,
    stage: Stage,
    facts: DiscoveredFacts,
    trust: Option<Trusted>,
) -> Plan {
    let own = own_names(i.policy);
    let mut data = slots::managed_data(i, &stage, i.secret.data.clone().unwrap_or_default());
    let mut applied = applied(i, rendered, stage, facts, trust);
    let mut injections = Vec::new();
    let mut leaving = Vec::new();
    let mut workloads: Vec<&WorkloadView> = i.workloads.iter().collect();
    workloads.sort_by(|a, b| a.id.cmp(&b.id));
    for v in workloads {
        let mine = selection(i, selector, v);
        if !matches!(mine, Selection::Mine) && !workloads::has_entries(&v.template, &own) {
            // Its release is in the cache: the originals it restored are no longer needed.
            for (k, _) in workloads::originals_of(&v.id, &v.template, &data.0) {
                data.0.remove(&k);
            }
        }
        match mine {
            Selection::Mine => match inject(i, v, &mut data, &mut applied) {
                Ok(write) => injections.extend(write),
                Err(e) => plan.unwritable.push(e),
            },
            Selection::Taken(by) => {
                let id = &v.id;
                applied
                    .overlaps
                    .push(format!("{id} (managed by EgressProxyPolicy {by})"));
                if workloads::has_entries(&v.ours_only(), &own) {
                    leaving.push(v);
                }
            }
            Selection::NotSelected if left_behind(i, v) => leaving.push(v),
            Selection::NotSelected => {}
        }
    }
    applied.unknown_containers = unknown_containers(i, selector);
    applied.old_jobs = old_jobs(i, selector, &applied);
    // The finalizer comes first, even while paused: workloads may already carry entries.
    plan.add_finalizer = !i.policy.finalizers().iter().any(|f| f == FINALIZER);
    // A paused policy writes no managed Secret: a probe could not read the slot under test.
    if !applied.paused {
        probe(i, &mut plan, &applied);
    }
    // A closed gate keeps the workloads and the NO_PROXY they read where they are.
    let open = matches!(applied.slots.gate, Gate::NotRequired | Gate::Passed);
    if !applied.paused {
        plan.secret = change(i.policy, &i.secret.meta, &i.secret.data, data.clone());
        let cm = config_map_data(&applied);
        let exists = i.config_map.meta.is_some() || i.config_map.data.is_some();
        if open || !exists {
            // Compared as digests: the cache keeps the bundle's digest only.
            let known = i.config_map.data.as_ref().map(ConfigMapData::digested);
            plan.config_map = match change(i.policy, &i.config_map.meta, &known, cm.digested()) {
                Change::Create(_) => Change::Create(cm),
                Change::Apply(_) => Change::Apply(cm),
                Change::Keep => Change::Keep,
                Change::Delete => Change::Delete,
            };
        }
        if applied.slots.decision.may_write && open {
            plan.writes = budgeted(i, &applied, injections);
        }
        for v in leaving {
            match release(i, v, &data) {
                Ok(w) => plan.writes.extend(w),
                Err(e) => plan.unwritable.push(e),
            }
        }
    }
    plan.verdict = Standing::Applied(Box::new(applied));
    plan
}

/// The managed ConfigMap's data: NO_PROXY, and the trust keys.
fn config_map_data(a: &Applied) -> ConfigMapData {
    let mut cm = ConfigMapData::default();
    let no_proxy = a.rendered.no_proxy.value.clone();
    cm.data.insert("NO_PROXY".to_owned(), no_proxy);
    if let Some(t) = &a.trust {
        t.add_to(&mut cm);
    }
    cm
}

/// What the status is built from, before the workloads are looked at.
fn applied(
    i: &Inputs,
    rendered: Rendering,
    stage: Stage,
    facts: DiscoveredFacts,
    trust: Option<Trusted>,
) -> Applied {
    let spec = &i.policy.spec;
    // Checked by `within_budget` before this stage: an error here cannot happen.
    let proxy_options = stage
        .urls
        .as_ref()
        .and_then(|u| rendered.java_options(u))
        .and_then(Result::ok);
    let trust_options = trust.as_ref().and_then(|t| t.bundle.java_options.clone());
    // The trust part follows the proxy part (a java policy here always has one).
    let java_options = match (proxy_options, trust_options) {
        (Some(p), Some(t)) => Some(format!("{p} {t}")),
        (p, _) => p,
    };
    let node_subnets = facts
        .node_subnets
        .as_ref()
        .filter(|_| spec.no_proxy.discover.node_addresses)
        .map(|f| f.values.iter().filter(|v| wider(v)).cloned().collect())
        .unwrap_or_default();
    Applied {
        rendered,
        java_options,
        node_subnets,
        facts,
        active: stage.decision.active_credential().to_owned(),
        target: stage.decision.target.clone(),
        hash: stage.hash.clone().unwrap_or_default(),
        paused: spec.rollout.paused,
        mine: Vec::new(),
        held: Vec::new(),
        overlaps: Vec::new(),
        conflicts: Vec::new(),
        unknown_containers: Vec::new(),
        old_jobs: Vec::new(),
        slots: Box::new(stage),
        verification: verify::latest(i).cloned(),
        probe_note: match i.probe {
            Some(ProbeRun::Running(note)) => Some(note.clone()),
            Some(ProbeRun::Missing) => Some("the probe Job is being created".into()),
            _ => None,
        },
        probe_image: i.probe_image.is_some(),
        trust,
    }
}

/// A network of more than one address.
fn wider(net: &str) -> bool {
    !(net.ends_with("/32") || net.ends_with("/128"))
}

/// The verification run the target needs: look for its Job, or create it.
fn probe(i: &Inputs, plan: &mut Plan, applied: &Applied) {
    let Some(w) = applied
        .slots
        .verify
        .as_ref()
        .filter(|w| verify::needs_probe(i, w))
    else {
        return;
    };
    match (i.probe, i.probe_image) {
        (None, _) => plan.needs_probe = Some(w.clone()),
        (Some(ProbeRun::Missing), Some(image)) => {
            plan.create_probe = Some(verify::job(i, w, &applied.probe_env(), image));
        }
        _ => {}
    }
}

/// Create when nothing is known of the object; apply unless the data is already there and
/// the object carries our labels and owner.
fn change<T: PartialEq>(
    policy: &EgressProxyPolicy,
    meta: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    known: &Option<T>,
    want: T,
) -> Change<T> {
    if meta.is_none() && known.is_none() {
        return Change::Create(want);
    }
    let current = meta.as_ref().is_none_or(|m| {
        let w = managed_meta(policy);
        labelled_for(m, &policy.name_any())
            && w.labels
                .iter()
                .flatten()
                .all(|(k, v)| m.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
            && m.owner_references == w.owner_references
    });
    if known.as_ref() == Some(&want) && current {
        Change::Keep
    } else {
        Change::Apply(want)
    }
}

/// Whether this policy manages `v`: it selects it and no older policy does.
fn selection(i: &Inputs, selector: &Selector, v: &WorkloadView) -> Selection {
    if !selects_with(i.policy, selector, v) {
        return Selection::NotSelected;
    }
    let me = order_key(i.policy);
    let older = i
        .others
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none())
        .filter(|p| super::selects(p, v))
        .filter(|p| order_key(p) < me)
        .map(|p| p.name_any())
        .min();
    match older {
        Some(by) => Selection::Taken(by),
        None => Selection::Mine,
    }
}

/// Older policies win an overlap; equal ages are ordered by name.
fn order_key(p: &EgressProxyPolicy) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        p.meta().creation_timestamp.as_ref().map(|t| t.0),
        p.name_any(),
    )
}

/// The write that brings a managed workload to the current config, if it needs one; the
/// originals it replaces are added to `data`.
fn inject(
    i: &Inputs,
    v: &WorkloadView,
    data: &mut SecretData,
    applied: &mut Applied,
) -> Result<Option<WorkloadWrite>, Unwritable> {
    // Another policy's entries are not the container's own: wait until it releases the
    // workload rather than remembering them as originals.
    let holder = i.others.iter().find(|p| {
        let m = own_names(p);
        workloads::has_entries(&v.template, &m)
    });
    if let Some(other) = holder {
        let (id, by) = (&v.id, other.name_any());
        applied.held.push(format!(
            "{id} (waiting for EgressProxyPolicy {by} to release it)"
        ));
        return Ok(None);
    }
    let spec = &i.policy.spec;
    let own = own_names(i.policy);
    let names: Vec<String> = spec.containers.iter().map(|c| c.0.clone()).collect();
    if !names.is_empty()
        && !names.iter().any(|n| has_container(v, n))
        && !workloads::has_entries(&v.template, &own)
    {
        // None of the named containers: nothing to inject, and no annotation-only write
        // that would restart its Pods for nothing.
        applied.mine.push(ManagedWorkload {
            id: v.id.clone(),
            needs_write: false,
            written: false,
            rollout: v.rollout,
            trusted: false,
        });
        return Ok(None);
    }
    let originals: Vec<Original> = workloads::originals_of(&v.id, &v.template, &data.0)
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    let inj = Injection {
        containers: &names,
        init_containers: spec.init_containers,
        existing_env: spec.existing_env,
        managed: &own,
        slot: &applied.target,
        hash: &applied.hash,
        originals: &originals,
        java_options: applied.java_options.as_deref(),
        trust: applied.trust.as_ref().map(|t| TrustMount {
            vars: &t.vars,
            files: &t.files,
            bundle: &t.bundle.id,
        }),
    };
    let decided =
        workloads::plan(&v.id, &v.template, &inj).map_err(|e| (v.id.clone(), e.to_string()))?;
    record(&v.id, &decided, data, applied);
    let written = i
        .recent
        .get(&v.id)
        .is_some_and(|m| m.is_hash(&applied.hash));
    applied.mine.push(ManagedWorkload {
        id: v.id.clone(),
        needs_write: decided.write != Write::None,
        written,
        rollout: v.rollout,
        trusted: applied
            .trust
            .as_ref()
            .is_some_and(|t| workloads::trust_bundle(&v.template) == Some(t.bundle.id.as_str())),
    });
    Ok((decided.write != Write::None).then(|| WorkloadWrite {
        id: v.id.clone(),
        resource_version: v.resource_version.clone(),
        write: decided.write,
        marker: Marker::Hash(applied.hash.clone()),
    }))
}

/// What a workload's plan reports: its conflicts into the status, the own entries it
/// replaces into the managed Secret (the cleanup restores them).
fn record(
    id: &WorkloadId,
    decided: &workloads::TemplatePlan,
    data: &mut SecretData,
    applied: &mut Applied,
) {
    let conflicts = decided.conflicts.iter().map(ToString::to_string);
    let trust = decided.trust_conflicts.iter().map(ToString::to_string);
    for c in conflicts.chain(trust) {
        applied.conflicts.push(format!("{id}: {c}"));
    }
    for o in &decided.overridden {
        if let Ok(b) = serde_json::to_vec(o) {
            let k = workloads::original_key(id, &o.container, &o.env.name);
            data.0.insert(k, ByteString(b));
        }
    }
}

/// The running Jobs the policy selects but cannot change (a Job's template is immutable)
/// whose template carries another configuration than `a.hash`: Jobs started by a CronJob it
/// injects into, and Jobs its selector matches directly (never the operator's own probe
/// Jobs). They finish with the values they started with; the next Job starts with the new.
fn old_jobs(i: &Inputs, selector: &Selector, a: &Applied) -> Vec<String> {
    use kube::core::SelectorExt;
    let own = own_names(i.policy);
    let injected = |name: &str| {
        i.workloads.iter().any(|v| {
            v.id.kind == WorkloadKind::CronJob
                && v.id.name == name
                && a.mine.iter().any(|m| m.id == v.id)
                && (workloads::has_entries(&v.template, &own)
                    || a.mine.iter().any(|m| m.id == v.id && m.needs_write))
        })
    };
    let probe =
        |j: &JobView| j.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY);
    let mut jobs: Vec<String> = i
        .jobs
        .iter()
        .filter(|j| j.running && j.hash.as_deref() != Some(a.hash.as_str()))
        .filter_map(|j| match &j.cron_job {
            Some(c) if injected(c) => Some(format!("Job/{} (CronJob/{c})", j.name)),
            None if !probe(j) && !selector.selects_all() && selector.matches(&j.labels) => {
                Some(format!("Job/{}", j.name))
            }
            _ => None,
        })
        .collect();
    jobs.sort();
    jobs
}

fn has_container(v: &WorkloadView, name: &str) -> bool {
    let spec = v.template.spec.as_ref();
    spec.is_some_and(|s| {
        s.containers.iter().any(|c| c.name == name)
            || s.init_containers.iter().flatten().any(|c| c.name == name)
    })
}

/// The names in `spec.containers` that no workload this policy manages has.
fn unknown_containers(i: &Inputs, selector: &Selector) -> Vec<String> {
    let mine: Vec<&WorkloadView> = i
        .workloads
        .iter()
        .filter(|v| matches!(selection(i, selector, v), Selection::Mine))
        .collect();
    if mine.is_empty() {
        return Vec::new();
    }
    let names = i.policy.spec.containers.iter().map(|c| &c.0);
    names
        .filter(|n| !mine.iter().any(|v| has_container(v, n)))
        .cloned()
        .collect()
}

/// The injections that may start now: `maxConcurrent` minus the workloads already rolling
/// to this config. A workload whose rollout cannot progress by itself holds no slot; one
/// written but not yet seen by the cache holds one and is not written again.
fn budgeted(i: &Inputs, a: &Applied, injections: Vec<WorkloadWrite>) -> Vec<WorkloadWrite> {
    let rolling = i
        .workloads
        .iter()
        .filter(|v| a.mine.iter().any(|m| m.id == v.id))
        .filter(|v| workloads::current_hash(&v.template) == Some(a.hash.as_str()))
        .filter(|v| v.rollout != Rollout::RolledOut && !v.rollout.stuck())
        .count();
    let max = i.policy.spec.rollout.max_concurrent.max(1) as usize;
    let mut budget = max.saturating_sub(rolling);
    let mut out = Vec::new();
    for w in injections {
        if budget == 0 {
            break;
        }
        budget -= 1;
        if !i.recent.get(&w.id).is_some_and(|m| m.is_hash(&a.hash)) {
            out.push(w);
        }
    }
    out
}
