//! The reconcile decision, pure. From everything one reconcile knows (the policy, the other
//! policies of its namespace, the cached workloads with their rollout state, the cluster
//! facts, the credential check, the managed objects, the writes the caches have not seen yet
//! and the previous status) to a [`Plan`]: what to write, in which order, and how to report
//! it. No I/O and no clock: the executor (`reconcile.rs`) reads, calls [`plan`], applies the
//! plan, then asks [`Plan::report`] for the status and Events given which writes failed.
//!
//! Stages, in order: deletion and suspension, the namespace opt-in, evaluation (entries,
//! discovery, credentials), the selector and managed-name checks, then [`applied`]:
//! ownership (overlap, handover), injection (Keep/Override, originals), the rollout budget,
//! and releases.

mod applied;
mod evaluate;
mod report;
mod slots;
#[cfg(test)]
mod tests;
mod trust;
pub mod verify;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::Selector;
use kube::{Resource, ResourceExt};

pub use report::{Completion, HOLD, Note, Report, Requeue};
pub use slots::SlotRead;
pub use trust::{SourceProblem, SourceRead};

use super::FINALIZER;

use super::objects::{JobView, WorkloadView};
use crate::api::reasons::reason;
use crate::api::{DiscoveredFacts, EgressProxyPolicy, EgressProxyPolicyStatus};
use crate::credentials::{self, MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL};
use crate::discovery::ClusterInputs;
use crate::workloads::{self, WorkloadId, Write};

/// Secret data key of the config-hash key.
pub const HASH_KEY: &str = "hash-key";
/// Secret data key naming the source Secret (`namespace/name`) of the credential held under
/// the bare keys, as written before credential slots.
pub const SOURCE_KEY: &str = "source-secret";
/// What a write to a workload leaves in its template, remembered until the cache shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// An injection: the config hash written.
    Hash(String),
    /// A release: this policy's entries taken out.
    Released,
}

impl Marker {
    /// Whether this is the injection of `hash`.
    pub fn is_hash(&self, hash: &str) -> bool {
        matches!(self, Marker::Hash(h) if h == hash)
    }
}

/// The managed Secret's data. `Debug` shows the keys only: the values are credentials.
#[derive(Clone, Default, PartialEq)]
pub struct SecretData(pub BTreeMap<String, ByteString>);

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// The managed ConfigMap's data: NO_PROXY, and with `spec.trust` the trust variables'
/// paths, the PEM bundle and (`java`) the truststore. `Debug` shows keys and sizes.
#[derive(Clone, Default, PartialEq)]
pub struct ConfigMapData {
    pub data: BTreeMap<String, String>,
    pub binary: BTreeMap<String, ByteString>,
}

impl fmt::Debug for ConfigMapData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.data.iter().map(|(k, v)| (k, v.len()));
        let binary = self.binary.iter().map(|(k, v)| (k, v.0.len()));
        f.debug_map().entries(text.chain(binary)).finish()
    }
}

impl ConfigMapData {
    /// The data with the trust bundle and truststore as their digests, as the cache keeps
    /// them: what is compared to tell whether the ConfigMap must be written.
    pub fn digested(&self) -> ConfigMapData {
        use crate::controller::lean::{digest_bytes, digest_text};
        use crate::trust::{BUNDLE_KEY, TRUSTSTORE_KEY};
        let mut out = self.clone();
        if let Some(v) = out.data.get_mut(BUNDLE_KEY) {
            *v = digest_text(v);
        }
        if let Some(v) = out.binary.get_mut(TRUSTSTORE_KEY) {
            v.0 = digest_bytes(&v.0);
        }
        out
    }

    /// The data of a ConfigMap as read.
    pub fn of(
        data: Option<BTreeMap<String, String>>,
        binary: Option<BTreeMap<String, ByteString>>,
    ) -> Option<Self> {
        if data.is_none() && binary.is_none() {
            return None;
        }
        Some(ConfigMapData {
            data: data.unwrap_or_default(),
            binary: binary.unwrap_or_default(),
        })
    }
}

/// A managed Secret or ConfigMap as the executor knows it.
#[derive(Debug, Clone)]
pub struct Observed<T> {
    /// Its data: our last write if the cache has not seen it yet, else the cached data.
    pub data: Option<T>,
    /// The object's metadata: cached, or looked up when [`needs_lookup`] said so; `None`
    /// when there is no such object (as far as the executor knows).
    pub meta: Option<ObjectMeta>,
}

impl<T> Observed<T> {
    /// An object with the managed name that is not this policy's: never taken over, never
    /// deleted.
    fn foreign(&self, policy: &str) -> bool {
        self.meta.as_ref().is_some_and(|m| !labelled_for(m, policy))
    }

    /// Something of this policy's to delete: labelled for it *and* owned by it (its UID),
    /// so an object of the same name that another policy of that name left, or a user
    /// labelled by hand, is never deleted.
    fn exists(&self, policy: &EgressProxyPolicy) -> bool {
        match &self.meta {
            Some(m) => labelled_for(m, &policy.name_any()) && owned_by(m, policy),
            None => self.data.is_some(),
        }
    }
}

impl<T> Default for Observed<T> {
    fn default() -> Self {
        Observed {
            data: None,
            meta: None,
        }
    }
}

/// Everything one reconcile of one policy knows.
pub struct Inputs<'a> {
    pub policy: &'a EgressProxyPolicy,
    /// The other policies of the policy's namespace.
    pub others: &'a [&'a EgressProxyPolicy],
    /// The admin admitted the namespace (namespace selector or explicit list).
    pub admitted: bool,
    /// How the admin admits namespaces, for messages: `namespace selector "..."`.
    pub admission: &'a str,
    /// Why the API server refuses the operator the managed objects of this namespace (no
    /// tenant role bound there): nothing there can be written.
    pub denied: Option<&'a str>,
    pub cluster: &'a ClusterInputs,
    /// Every credential slot, read; `None` when [`needs_credentials`] said it is not needed.
    pub slots: Option<&'a [SlotRead]>,
    /// Every trust source (`spec.trust`), read when the slots are.
    pub trust: Option<&'a [SourceRead]>,
    /// The roots written with the CAs under `roots: Keep` (`--trust-roots`).
    pub root_set: &'a crate::trust::RootSet,
    /// The policy's Pods per credential slot, when [`Plan::needs_pods`] asked for them.
    pub pods: Option<&'a BTreeMap<String, usize>>,
    pub secret: &'a Observed<SecretData>,
    pub config_map: &'a Observed<ConfigMapData>,
    /// Every workload of the namespace (in any order).
    pub workloads: &'a [WorkloadView],
    /// The Jobs of the namespace when the policy may select CronJobs (else empty).
    pub jobs: &'a [JobView],
    /// Writes to workloads the caches have not seen yet.
    pub recent: &'a BTreeMap<WorkloadId, Marker>,
    pub previous: &'a EgressProxyPolicyStatus,
    /// 32 random bytes, used as the config-hash key when the managed Secret has none.
    pub new_key: &'a [u8],
    /// The image probe Jobs run (`--probe-image`); `None`: nothing can be verified.
    pub probe_image: Option<&'a str>,
    /// The probe run [`Plan::needs_probe`] asked about, as the executor found it.
    pub probe: Option<&'a verify::ProbeRun>,
    /// Seconds since the Unix epoch (the `spec.verification.interval` periods).
    pub unix_now: u64,
}

/// Whether to create, apply, keep or delete a managed object.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    Keep,
    /// Create an object that does not exist: if another instance created it first, the
    /// create fails and the retry uses what it wrote (one hash key, even when two
    /// instances start at once).
    Create(T),
    Apply(T),
    Delete,
}

/// One write to a workload.
#[derive(Clone, PartialEq)]
pub struct WorkloadWrite {
    pub id: WorkloadId,
    /// The cached resourceVersion, remembered with the write.
    pub resource_version: Option<String>,
    /// [`Write::Apply`] or [`Write::Patch`]; never [`Write::None`].
    pub write: Write,
    /// Remembered until the cache shows the write.
    pub marker: Marker,
}

impl WorkloadWrite {
    pub fn is_release(&self) -> bool {
        self.marker == Marker::Released
    }

    /// The write to send, fenced: it carries the resourceVersion the plan was computed
    /// against as `metadata.resourceVersion`, a precondition the API server checks for a
    /// server-side apply and a patch alike. A write from an ended term, or planned against a
    /// workload that changed since, is refused (409 Conflict) instead of landing. `None`
    /// when the cached object had no resourceVersion: nothing to fence with, not sent.
    pub fn fenced(&self) -> Option<Write> {
        let rv = self.resource_version.as_deref()?;
        Some(match &self.write {
            Write::None => Write::None,
            Write::Apply(body) => Write::Apply(with_version(body, rv)),
            Write::Patch(body) => Write::Patch(with_version(body, rv)),
        })
    }
}

/// `body` (an apply configuration or a merge patch) with `metadata.resourceVersion` set.
pub fn with_version(body: &serde_json::Value, rv: &str) -> serde_json::Value {
    let mut out = body.clone();
    if let Some(o) = out.as_object_mut() {
        let meta = o
            .entry("metadata")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(m) = meta.as_object_mut() {
            m.insert("resourceVersion".into(), rv.into());
        }
    }
    out
}

impl fmt::Debug for WorkloadWrite {
    /// Without the body: a restore patch may carry a container's own credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.write {
            Write::None => "none",
            Write::Apply(_) => "apply",
            Write::Patch(_) => "patch",
        };
        f.debug_struct("WorkloadWrite")
            .field("id", &self.id.to_string())
            .field("write", &kind)
            .field("marker", &self.marker)
            .finish()
    }
}

/// What one reconcile does, in this order: add the finalizer, apply the managed objects,
/// write the workloads (injections, then releases), delete the managed objects, write status
/// and Events, remove the finalizer. Deleting and removing the finalizer happen only when
/// every workload write succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub add_finalizer: bool,
    pub secret: Change<SecretData>,
    pub config_map: Change<ConfigMapData>,
    pub writes: Vec<WorkloadWrite>,
    pub remove_finalizer: bool,
    /// The decision depends on the Pods still running with each credential slot: list them
    /// and plan again with [`Inputs::pods`].
    pub needs_pods: bool,
    /// A verification run is wanted and its result is not in status: look up its Job (and
    /// Pods) and plan again with [`Inputs::probe`].
    pub needs_probe: Option<verify::Wanted>,
    /// The probe Job to create, after the managed objects are written.
    pub create_probe: Option<k8s_openapi::api::batch::v1::Job>,
    /// Workloads whose write could not be built (reported like a failed write).
    unwritable: Vec<(WorkloadId, String)>,
    verdict: Standing,
    previous: EgressProxyPolicyStatus,
    generation: Option<i64>,
}

/// Why the policy cannot be applied now.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocker {
    pub reason: &'static str,
    pub message: String,
    /// The source Secret is gone or no longer granted (not merely malformed).
    pub withdrawn: bool,
}

/// What the status will say.
#[derive(Debug, Clone, PartialEq)]
enum Standing {
    /// Being deleted: no status, only the cleanup.
    Deleting,
    Suspended,
    NotAdmitted {
        namespace: String,
        admission: String,
    },
    Blocked {
        blocker: Blocker,
        facts: Box<DiscoveredFacts>,
        /// The credential slots, when the block is about them.
        slots: Option<Box<slots::Stage>>,
    },
    /// The credential's source was withdrawn: removed and released.
    Revoked {
        blocker: Blocker,
        facts: Box<DiscoveredFacts>,
    },
    Applied(Box<applied::Applied>),
}

/// Whether the executor must read the credential slots: only for a policy that is active
/// and whose entries and facts are complete (they are reported first).
pub fn needs_credentials(
    policy: &EgressProxyPolicy,
    admitted: bool,
    cluster: &ClusterInputs,
) -> bool {
    let previous = policy.status.as_ref().and_then(|s| s.discovered.as_ref());
    let subnets = previous.and_then(|d| d.node_subnets.as_ref());
    active(policy, admitted) && evaluate::rendered(policy, cluster, subnets).1.is_ok()
}

/// Whether the executor must look up an object with the managed name that its caches (which
/// hold only objects labelled managed-by) do not know, before the plan would write it: one
/// of a user's would be taken over.
pub fn needs_lookup<T>(slots: Option<&[SlotRead]>, o: &Observed<T>) -> bool {
    slots.is_some_and(|s| s.iter().any(|r| r.urls.is_ok())) && o.meta.is_none() && o.data.is_none()
}

fn active(policy: &EgressProxyPolicy, admitted: bool) -> bool {
    policy.meta().deletion_timestamp.is_none() && !policy.spec.suspend && admitted
}

fn owned_by(meta: &ObjectMeta, policy: &EgressProxyPolicy) -> bool {
    let uid = policy.meta().uid.as_deref();
    uid.is_some()
        && meta
            .owner_references
            .iter()
            .flatten()
            .any(|r| Some(r.uid.as_str()) == uid)
}

fn labelled_for(meta: &ObjectMeta, policy: &str) -> bool {
    meta.labels.as_ref().and_then(|l| l.get(POLICY_LABEL)) == Some(&policy.to_owned())
}

/// The metadata of the policy's managed Secret and ConfigMap: name, labels, and the policy
/// as controller owner.
pub fn managed_meta(policy: &EgressProxyPolicy) -> ObjectMeta {
    ObjectMeta {
        name: Some(credentials::managed_name(&policy.name_any())),
        namespace: policy.namespace(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (POLICY_LABEL.to_owned(), policy.name_any()),
        ])),
        // blockOwnerDeletion, so foreground deletion of the policy waits for them.
        owner_references: policy.controller_owner_ref(&()).map(|o| {
            vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..o
            }]
        }),
        ..Default::default()
    }
}

/// Decides one reconcile.
/// The domain NO_PROXY is rendered with: the spec's override, else the discovered one.
fn rendered_domain<'a>(p: &'a EgressProxyPolicy, facts: &'a DiscoveredFacts) -> Option<&'a str> {
    let spec = p
        .spec
        .no_proxy
        .cluster_domain
        .as_ref()
        .filter(|d| !d.is_empty());
    spec.or(facts.cluster_domain.as_ref().and_then(|f| f.values.first()))
        .map(String::as_str)
}

pub fn plan(i: &Inputs) -> Plan {
    let p = i.policy;
    let mut plan = Plan {
        add_finalizer: false,
        secret: Change::Keep,
        config_map: Change::Keep,
        writes: Vec::new(),
        remove_finalizer: false,
        needs_pods: false,
        needs_probe: None,
        create_probe: None,
        unwritable: Vec::new(),
        verdict: Standing::Suspended,
        previous: i.previous.clone(),
        generation: p.meta().generation,
    };
    if p.meta().deletion_timestamp.is_some() {
        return release_all(i, plan, Standing::Deleting);
    }
    if p.spec.suspend {
        return plan;
    }
    if !i.admitted {
        let verdict = Standing::NotAdmitted {
            namespace: p.namespace().unwrap_or_default(),
            admission: i.admission.to_owned(),
        };
        return release_all(i, plan, verdict);
    }
    let subnets = i.previous.discovered.as_ref();
    let subnets = subnets.and_then(|d| d.node_subnets.as_ref());
    let (facts, rendered) = evaluate::rendered(p, i.cluster, subnets);
    if let Some(why) = i.denied {
        return blocked(plan, not_authorized(i, why), facts, None);
    }
    let name = p.name_any();
    let checked = selector(p).and_then(|s| {
        let rendered = rendered?;
        if i.secret.foreign(&name) {
            return Err(taken("Secret", p));
        }
        if i.config_map.foreign(&name) {
            return Err(taken("ConfigMap", p));
        }
        Ok((s, rendered))
    });
    let (s, rendered) = match checked {
        Ok(c) => c,
        Err(blocker) => return blocked(plan, blocker, facts, None),
    };
    let mine: Vec<&WorkloadView> = applied::managed(i, &s)
        .into_iter()
        .filter(|v| applied::injectable(i, v))
        .collect();
    let domain = rendered_domain(p, &facts);
    let trusted = match trust::stage(i) {
        Ok(t) => t,
        Err(blocker) => return blocked(plan, blocker, facts, None),
    };
    let hashed = rendered.hashed() + &trusted.as_ref().map(|t| t.hashed()).unwrap_or_default();
    let stage = match slots::stage(i, &hashed, &mine, domain) {
        Ok(stage) => stage,
        Err(blocker) => return blocked(plan, blocker, facts, None),
    };
    if let Some(blocker) = stage.withdrawn.clone() {
        return revoke(i, plan, blocker, facts);
    }
    let usable = match (&stage.decision.blocked, &stage.urls) {
        (None, Some(urls)) => evaluate::within_budget(&rendered, urls),
        (Some(p), _) => Err(Blocker {
            reason: p.reason,
            message: p.message.clone(),
            withdrawn: false,
        }),
        (None, None) => Err(Blocker {
            reason: reason::SECRET_NOT_AVAILABLE,
            message: "the target credential slot has no proxy URLs".into(),
            withdrawn: false,
        }),
    };
    if let Err(blocker) = usable {
        return blocked(plan, blocker, facts, Some(stage));
    }
    plan.needs_pods = stage.decision.needs_pods && i.pods.is_none();
    applied::plan(i, plan, &s, rendered, stage, facts, trusted)
}

fn blocked(
    mut plan: Plan,
    blocker: Blocker,
    facts: DiscoveredFacts,
    slots: Option<slots::Stage>,
) -> Plan {
    plan.verdict = Standing::Blocked {
        blocker,
        facts: Box::new(facts),
        slots: slots.map(Box::new),
    };
    plan
}

fn not_authorized(i: &Inputs, why: &str) -> Blocker {
    let ns = i.policy.namespace().unwrap_or_default();
    Blocker {
        reason: reason::NAMESPACE_NOT_AUTHORIZED,
        message: format!(
            "the operator may not manage Secrets and ConfigMaps in namespace {ns} ({why}); \
             the namespace's admin opts in by binding the ClusterRole \
             egress-proxy-operator-tenant to the operator's ServiceAccount there"
        ),
        withdrawn: false,
    }
}

fn selector(p: &EgressProxyPolicy) -> Result<Selector, Blocker> {
    Selector::try_from(p.spec.workload_selector.clone()).map_err(|e| Blocker {
        reason: reason::INVALID_SELECTOR,
        message: format!("spec.workloadSelector: {e}"),
        withdrawn: false,
    })
}

fn taken(kind: &str, p: &EgressProxyPolicy) -> Blocker {
    let ns = p.namespace().unwrap_or_default();
    let name = credentials::managed_name(&p.name_any());
    Blocker {
        reason: reason::MANAGED_OBJECT_CONFLICT,
        message: format!(
            "{kind} {ns}/{name} already exists and is not managed by this policy (label {POLICY_LABEL}); the operator will not take it over: rename the policy or that {kind}"
        ),
        withdrawn: false,
    }
}

/// A withdrawn source: the credential leaves the managed Secret at once and every workload
/// is released. The managed objects stay (the hash key, and the originals the releases
/// restore), and so does the finalizer.
fn revoke(i: &Inputs, plan: Plan, blocker: Blocker, facts: DiscoveredFacts) -> Plan {
    let verdict = Standing::Revoked {
        blocker,
        facts: Box::new(facts),
    };
    let mut plan = release_all(i, plan, verdict);
    plan.secret = match &i.secret.data {
        Some(d) if slots::stripped(d) != *d => Change::Apply(slots::stripped(d)),
        _ => Change::Keep,
    };
    plan.config_map = Change::Keep;
    plan.remove_finalizer = false;
    plan
}

/// Deletion or a namespace that lost the opt-in: release every workload that carries what
/// this policy added, delete the managed objects, then remove the finalizer. Nothing is
/// written where the operator was refused access.
fn release_all(i: &Inputs, mut plan: Plan, verdict: Standing) -> Plan {
    plan.remove_finalizer = i.policy.finalizers().iter().any(|f| f == FINALIZER);
    plan.verdict = verdict;
    if i.denied.is_some() {
        // The namespace withdrew the operator's access: nothing there can be undone, and a
        // deleted policy must not hang on it.
        return plan;
    }
    let data = i.secret.data.clone().unwrap_or_default();
    let own = own_names(i.policy);
    let mut workloads: Vec<&WorkloadView> = i.workloads.iter().collect();
    workloads.sort_by(|a, b| a.id.cmp(&b.id));
    for v in workloads {
        if !workloads::has_entries(&v.ours_only(), &own) && !left_behind(i, v) {
            continue;
        }
        match release(i, v, &data) {
            Ok(w) => plan.writes.extend(w),
            Err(e) => plan.unwritable.push(e),
        }
    }
    if i.secret.exists(i.policy) {
        plan.secret = Change::Delete;
    }
    if i.config_map.exists(i.policy) {
        plan.config_map = Change::Delete;
    }
    plan
}

/// The name of the policy's managed Secret and ConfigMap.
fn own_names(p: &EgressProxyPolicy) -> String {
    credentials::managed_name(&p.name_any())
}

/// A workload whose write could not be built, and why.
type Unwritable = (WorkloadId, String);

/// The write that takes this policy's entries out of `v` (restoring remembered originals),
/// unless it carries nothing of ours or that write is already made.
fn release(
    i: &Inputs,
    v: &WorkloadView,
    data: &SecretData,
) -> Result<Option<WorkloadWrite>, Unwritable> {
    if i.recent.get(&v.id) == Some(&Marker::Released) {
        return Ok(None);
    }
    let own = own_names(i.policy);
    let originals: Vec<_> = workloads::originals_of(&v.id, &v.template, &data.0)
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    let patch = workloads::cleanup_patch(v.id.kind, &v.ours_only(), &own, &originals)
        .map_err(|e| (v.id.clone(), e.to_string()))?;
    let Some(patch) = patch else {
        return Ok(None);
    };
    Ok(Some(WorkloadWrite {
        id: v.id.clone(),
        resource_version: v.resource_version.clone(),
        write: Write::Patch(patch),
        marker: Marker::Released,
    }))
}

/// A workload this policy does not manage that still carries what it added: its entries,
/// or a config-hash annotation that no other policy of the namespace accounts for. Only
/// what the operator's field manager owns counts.
fn left_behind(i: &Inputs, v: &WorkloadView) -> bool {
    let own = own_names(i.policy);
    let ours = v.ours_only();
    if workloads::has_entries(&ours, &own) {
        return true;
    }
    if workloads::current_hash(&ours).is_none() {
        return false;
    }
    !i.others.iter().any(|p| {
        let m = own_names(p);
        workloads::has_entries(&v.template, &m) || selects(p, v)
    })
}

/// Whether `p` selects `v` by kind and labels (an empty or invalid selector selects nothing).
fn selects(p: &EgressProxyPolicy, v: &WorkloadView) -> bool {
    Selector::try_from(p.spec.workload_selector.clone()).is_ok_and(|s| selects_with(p, &s, v))
}

fn selects_with(p: &EgressProxyPolicy, s: &Selector, v: &WorkloadView) -> bool {
    use kube::core::SelectorExt;
    !s.selects_all() && p.spec.workload_kinds.contains(&v.id.kind) && s.matches(&v.labels)
}

#[cfg(test)]
mod fence_tests {
    use serde_json::json;

    use super::*;
    use crate::api::WorkloadKind;

    fn write(rv: Option<&str>, w: Write) -> WorkloadWrite {
        WorkloadWrite {
            id: WorkloadId {
                kind: WorkloadKind::Deployment,
                namespace: "team-a".into(),
                name: "api".into(),
            },
            resource_version: rv.map(str::to_owned),
            write: w,
            marker: Marker::Hash("v2-abc".into()),
        }
    }

    #[test]
    fn every_workload_write_carries_the_version_it_was_planned_against() {
        let apply = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "team-a"}, "spec": {}});
        let fenced = write(Some("41"), Write::Apply(apply.clone())).fenced();
        let mut want = apply;
        want["metadata"]["resourceVersion"] = json!("41");
        assert_eq!(fenced, Some(Write::Apply(want)));

        // A patch without metadata gets one.
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {"a": null}}}}});
        let Some(Write::Patch(p)) = write(Some("7"), Write::Patch(patch.clone())).fenced() else {
            panic!("a patch stays a patch");
        };
        assert_eq!(p["metadata"], json!({"resourceVersion": "7"}));
        assert_eq!(p["spec"], patch["spec"]);

        // Nothing to fence with: not sent.
        assert_eq!(write(None, Write::Patch(patch)).fenced(), None);
    }
}
