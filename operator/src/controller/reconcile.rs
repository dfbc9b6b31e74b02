//! One reconcile of one policy: evaluate (discovery, entries, credentials), then write the
//! managed objects, the workloads and the status, each only when it changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::conditions::{self, Decided, READY, RECONCILING, STALLED, reason};
use super::objects::{self, DiscoverySources, Workload, WorkloadView};
use super::{Ctx, FINALIZER};
use crate::api::{
    DiscoveredFacts, EgressProxyPolicy, EgressProxyPolicyStatus, UncoveredIntent, WorkloadCounts,
    WorkloadKind,
};
use crate::credentials::{
    self, CredentialError, MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL, ProxyUrls,
};
use crate::discovery::{self, ClusterInputs};
use crate::noproxy::{Intent, IntentSet, Rendered, render};
use crate::workloads::{self, FIELD_MANAGER, Injection, Original, Write};

/// Secret data key of the config-hash key.
const HASH_KEY: &str = "hash-key";
/// The in-flight marker of a cleanup write.
const CLEANED: &str = "cleaned";
/// At most this many workloads are named in status and messages.
const LISTED: usize = 20;

/// A reconcile that could not finish; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {object}: {source}")]
    Kube {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("no random source for the config-hash key")]
    Random,
    #[error("{0} workload update(s) failed")]
    Workloads(usize),
}

impl Error {
    fn kube(action: &'static str, object: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let object = object.into();
        move |source| Error::Kube {
            action,
            object,
            source,
        }
    }
}

/// Discovery inputs from the caches.
pub(super) fn cluster_inputs(ctx: &Ctx) -> ClusterInputs {
    let config_maps: Vec<_> = ctx
        .system_config_maps
        .iter()
        .flat_map(|s| s.state())
        .collect();
    objects::cluster_inputs(
        &DiscoverySources {
            nodes: &ctx.nodes.state(),
            services: &ctx.services.state(),
            slices: &ctx.slices.state(),
            service_cidrs: &ctx.service_cidrs.state(),
            config_maps: &config_maps,
        },
        &ctx.base_inputs,
    )
}

pub(super) async fn reconcile(
    policy: Arc<EgressProxyPolicy>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let ns = policy.namespace().unwrap_or_default();
    if !ctx.in_scope(&ns) {
        return Ok(Action::await_change());
    }
    let name = policy.name_any();
    let key = (ns.clone(), name.clone());
    let r = Reconciler {
        managed: credentials::managed_name(&name),
        rv: std::sync::Mutex::new(policy.meta().resource_version.clone()),
        policy,
        ctx: ctx.clone(),
        ns,
        name,
    };
    let result = r.run().await;
    if result.is_ok()
        && let Ok(mut f) = ctx.failures.lock()
    {
        f.remove(&key);
    }
    result
}

pub(super) fn error_policy(policy: Arc<EgressProxyPolicy>, err: &Error, ctx: Arc<Ctx>) -> Action {
    let key = (policy.namespace().unwrap_or_default(), policy.name_any());
    let n = ctx
        .failures
        .lock()
        .map(|mut f| {
            let n = f.entry(key).or_insert(0);
            *n += 1;
            *n
        })
        .unwrap_or(1);
    let delay =
        Duration::from_millis(500u64.saturating_mul(1 << n.min(8))).min(Duration::from_secs(120));
    tracing::warn!(namespace = %policy.namespace().unwrap_or_default(), policy = %policy.name_any(),
        error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Why the policy cannot be applied now (the workloads keep their last good config).
struct Blocker {
    reason: &'static str,
    message: String,
}

/// What the policy asks for, evaluated against the cluster.
struct Evaluation {
    facts: DiscoveredFacts,
    /// The NO_PROXY value and the proxy URLs, or why the policy cannot be applied.
    config: Result<(Rendered, ProxyUrls), Blocker>,
}

/// How the policy relates to one workload of its namespace.
enum Selection {
    /// Selected, and this policy is the one that manages it.
    Mine,
    /// Selected, but an older policy manages it.
    Taken(String),
    NotSelected,
}

struct Reconciler {
    policy: Arc<EgressProxyPolicy>,
    ctx: Arc<Ctx>,
    ns: String,
    name: String,
    /// Name of the managed Secret and ConfigMap.
    managed: String,
    /// The policy's resourceVersion as of this reconcile's own last write to it.
    rv: std::sync::Mutex<Option<String>>,
}

impl Reconciler {
    async fn run(&self) -> Result<Action, Error> {
        let old = self
            .ctx
            .recent
            .status(&self.key(), self.policy.meta().resource_version.as_ref())
            .or_else(|| self.policy.status.clone())
            .unwrap_or_default();
        if self.policy.meta().deletion_timestamp.is_some() {
            self.cleanup_all().await?;
            self.remove_finalizer().await?;
            return Ok(Action::await_change());
        }
        if self.policy.spec.suspend {
            let decided = vec![
                cond(
                    READY,
                    false,
                    reason::SUSPENDED,
                    "spec.suspend is true: nothing is written until it is false",
                ),
                cond(RECONCILING, false, reason::SUSPENDED, "suspended"),
                cond(STALLED, false, reason::SUSPENDED, "suspended"),
            ];
            self.finish(&old, old.clone(), decided, &[]).await?;
            return Ok(Action::await_change());
        }

        if !self.ctx.admitted(&self.ns) {
            let restored = self.cleanup_all().await?;
            let mut status = old.clone();
            status.workloads = Some(WorkloadCounts::default());
            let msg = format!(
                "namespace {} is not admitted by the operator's namespace selector {:?}; nothing is injected{}",
                self.ns,
                self.ctx.settings.namespace_selector,
                if restored.is_empty() {
                    String::new()
                } else {
                    format!(" (restored {})", restored.join(", "))
                }
            );
            self.finish(
                &old,
                status,
                blocked(reason::NAMESPACE_NOT_ENABLED, msg),
                &[],
            )
            .await?;
            self.remove_finalizer().await?;
            return Ok(Action::await_change());
        }
        let eval = self.evaluate().await?;
        let views = self.views();
        let selector = match Selector::try_from(self.policy.spec.workload_selector.clone()) {
            Ok(s) => s,
            Err(e) => {
                let b = Blocker {
                    reason: reason::INVALID_SELECTOR,
                    message: format!("spec.workloadSelector: {e}"),
                };
                return self.blocked(&old, eval.facts, b).await;
            }
        };
        let (rendered, urls) = match eval.config {
            Ok(config) => config,
            Err(b) => return self.blocked(&old, eval.facts, b).await,
        };
        if let Some(b) = self.name_taken().await? {
            return self.blocked(&old, eval.facts, b).await;
        }
        self.ensure_finalizer().await?;

        // Hash key and remembered originals live in the managed Secret.
        let current = self
            .ctx
            .secrets
            .get(&ObjectRef::new(&self.managed).within(&self.ns));
        let mut data: BTreeMap<String, ByteString> = self
            .ctx
            .recent
            .secret_data(&self.key_managed(), current.as_deref())
            .unwrap_or_default();
        let hash_key = match data.get(HASH_KEY) {
            Some(k) if k.0.len() >= 16 => k.0.clone(),
            _ => workloads::hash::new_key().map_err(|_| Error::Random)?,
        };
        let hash = workloads::hash::config_hash(
            &hash_key,
            &urls.http_proxy,
            &urls.https_proxy,
            &rendered.value,
            &self.managed,
            &self.managed,
        );
        data.insert(HASH_KEY.into(), ByteString(hash_key));
        data.insert(
            "HTTP_PROXY".into(),
            ByteString(urls.http_proxy.clone().into_bytes()),
        );
        data.insert(
            "HTTPS_PROXY".into(),
            ByteString(urls.https_proxy.clone().into_bytes()),
        );

        let spec = &self.policy.spec;
        let names: Vec<String> = spec.containers.iter().map(|c| c.0.clone()).collect();

        let mut mine = Vec::new();
        let mut overlaps = Vec::new();
        let mut leaving = Vec::new();
        for v in &views {
            match self.selection(&selector, v) {
                Selection::Mine => mine.push(v),
                Selection::Taken(by) => {
                    overlaps.push(format!("{} (managed by EgressProxyPolicy {by})", v.id));
                    if workloads::has_entries(&v.template, &self.managed, &self.managed) {
                        leaving.push(v);
                    }
                }
                Selection::NotSelected => {
                    if self.left_behind(v) {
                        leaving.push(v);
                    }
                }
            }
        }

        let mut conflicts = Vec::new();
        let mut plans = Vec::new();
        let mut held = Vec::new();
        for v in &mine {
            // Another policy's entries are not the container's own: wait until it releases
            // the workload rather than remembering them as originals.
            if let Some(other) = self.held_by_other(v) {
                held.push(format!(
                    "{} (waiting for EgressProxyPolicy {other} to release it)",
                    v.id
                ));
                continue;
            }
            let originals: Vec<Original> = self
                .originals_of(v, &data)
                .into_iter()
                .map(|(_, o)| o)
                .collect();
            let inj = Injection {
                containers: &names,
                init_containers: spec.init_containers,
                existing_env: spec.existing_env,
                secret_name: &self.managed,
                config_map_name: &self.managed,
                hash: &hash,
                originals: &originals,
            };
            let plan = workloads::plan(&v.id, &v.template, &inj);
            for c in &plan.conflicts {
                conflicts.push(format!("{}: {c}", v.id));
            }
            for o in &plan.overridden {
                if let (Ok(bytes), Some(var)) = (serde_json::to_vec(o), Some(o.env.name.as_str())) {
                    data.insert(
                        workloads::original_key(&v.id, &o.container, var),
                        ByteString(bytes),
                    );
                }
            }
            plans.push((*v, plan));
        }
        let paused = spec.rollout.paused;

        // Managed objects first: the workloads read them when their pods start.
        let mut failures = Vec::new();
        let mut changed = Vec::new();
        let mut restored = Vec::new();
        if !paused {
            self.apply_secret(current.as_deref(), &data).await?;
            self.apply_config_map(&rendered.value).await?;

            // A workload whose rollout cannot progress on its own (paused, past its deadline,
            // OnDelete) does not hold a slot.
            let in_progress = mine
                .iter()
                .filter(|v| {
                    workloads::current_hash(&v.template) == Some(hash.as_str())
                        && !v.rolled_out
                        && !v.stuck
                })
                .count();
            let mut budget =
                (spec.rollout.max_concurrent.max(1) as usize).saturating_sub(in_progress);
            for (v, plan) in &plans {
                if plan.write == Write::None || budget == 0 {
                    continue;
                }
                let cached_rv = v.resource_version.as_ref();
                if self.ctx.recent.workload(&v.id, cached_rv).as_deref() == Some(hash.as_str()) {
                    budget -= 1;
                    continue;
                }
                match self.write(&v.id, &plan.write).await {
                    Ok(after) => {
                        self.ctx.recent.wrote_workload(
                            v.id.clone(),
                            v.resource_version.clone(),
                            after,
                            hash.clone(),
                        );
                        changed.push(v.id.to_string());
                        budget -= 1;
                    }
                    Err(e) => failures.push(format!("{}: {e}", v.id)),
                }
            }
            let mut forgotten = Vec::new();
            for v in &leaving {
                if self
                    .ctx
                    .recent
                    .workload(&v.id, v.resource_version.as_ref())
                    .as_deref()
                    == Some(CLEANED)
                {
                    continue;
                }
                let originals = self.originals_of(v, &data);
                if let Some(patch) = workloads::cleanup_patch(
                    &v.id,
                    &v.template,
                    &self.managed,
                    &self.managed,
                    &originals.iter().map(|(_, o)| o.clone()).collect::<Vec<_>>(),
                ) {
                    match self.write(&v.id, &Write::Patch(patch)).await {
                        Ok(after) => {
                            self.ctx.recent.wrote_workload(
                                v.id.clone(),
                                v.resource_version.clone(),
                                after,
                                CLEANED.into(),
                            );
                            restored.push(v.id.to_string());
                            forgotten.extend(originals.into_iter().map(|(k, _)| k));
                        }
                        Err(e) => failures.push(format!("{}: {e}", v.id)),
                    }
                }
            }
            if !forgotten.is_empty() {
                for k in &forgotten {
                    data.remove(k);
                }
                self.apply_secret(current.as_deref(), &data).await?;
            }
        }

        // Status: a workload is up to date when it carries this config and finished rolling.
        let changed_set: BTreeSet<&str> = changed.iter().map(String::as_str).collect();
        let mut pending = held.clone();
        let mut up_to_date = 0;
        for (v, plan) in &plans {
            let written = changed_set.contains(v.id.to_string().as_str());
            if plan.write == Write::None && v.rolled_out {
                up_to_date += 1;
            } else {
                let note = if v.stuck {
                    " (rollout not progressing)"
                } else if written || plan.write == Write::None {
                    ""
                } else {
                    " (waiting)"
                };
                pending.push(format!("{}{note}", v.id));
            }
        }
        let mut status = EgressProxyPolicyStatus {
            observed_generation: self.policy.meta().generation,
            conditions: Vec::new(),
            no_proxy: Some(rendered.value.clone()),
            uncovered: rendered
                .uncovered
                .iter()
                .map(|u| UncoveredIntent {
                    entry: u.entry.clone(),
                    reason: u.reason.clone(),
                })
                .collect(),
            warnings: rendered.warnings.clone(),
            discovered: Some(eval.facts),
            active_credential: Some(spec.proxy.active.clone()),
            rotation: old.rotation.clone(),
            workloads: Some(WorkloadCounts {
                selected: mine.len() as i32,
                up_to_date,
                pending: pending.iter().take(LISTED).cloned().collect(),
            }),
        };
        status.conditions = Vec::new();
        let decided = decide(&Outcome {
            selected: mine.len(),
            pending: &pending,
            paused,
            overlaps: &overlaps,
            conflicts: &conflicts,
            failures: &failures,
        });
        let mut notes = Vec::new();
        if !changed.is_empty() {
            notes.push((
                "ConfigApplied",
                format!(
                    "rolling {} workload(s) to config {hash}: {}",
                    changed.len(),
                    list(&changed)
                ),
            ));
        }
        if !restored.is_empty() {
            notes.push((
                "ConfigRemoved",
                format!(
                    "removed the proxy settings from {} workload(s): {}",
                    restored.len(),
                    list(&restored)
                ),
            ));
        }
        self.finish(&old, status, decided, &notes).await?;
        if !failures.is_empty() {
            return Err(Error::Workloads(failures.len()));
        }
        Ok(if pending.is_empty() {
            Action::requeue(self.ctx.settings.resync)
        } else {
            Action::requeue(Duration::from_secs(5))
        })
    }

    /// Bad input: status only; workloads keep their last good configuration.
    async fn blocked(
        &self,
        old: &EgressProxyPolicyStatus,
        facts: DiscoveredFacts,
        b: Blocker,
    ) -> Result<Action, Error> {
        let mut status = old.clone();
        status.discovered = Some(facts);
        status.observed_generation = self.policy.meta().generation;
        self.finish(old, status, blocked(b.reason, b.message), &[])
            .await?;
        Ok(Action::requeue(self.ctx.settings.resync))
    }

    async fn evaluate(&self) -> Result<Evaluation, Error> {
        let spec = &self.policy.spec;
        let facts = discovery::discover(&cluster_inputs(&self.ctx));
        let found = discovery::policy_entries(&facts, &spec.no_proxy);
        let mut blocker = None;
        let mut intents = Vec::new();
        for e in &found.entries {
            match Intent::parse(e) {
                Ok(i) => intents.push(i),
                Err(err) => tracing::warn!(entry = %e, error = %err, "discovered entry skipped"),
            }
        }
        for (i, e) in spec.no_proxy.additional.iter().enumerate() {
            match Intent::parse(e) {
                Ok(intent) => intents.push(intent),
                Err(err) => {
                    blocker.get_or_insert(Blocker {
                        reason: reason::INVALID_NO_PROXY_ENTRY,
                        message: format!("spec.noProxy.additional[{i}] {e:?}: {err}"),
                    });
                }
            }
        }
        if blocker.is_none() && !found.missing.is_empty() {
            blocker = Some(Blocker {
                reason: reason::DISCOVERY_INCOMPLETE,
                message: format!(
                    "not found: {}. Set the fact in spec.noProxy (clusterDomain) or as an operator flag, or turn its discovery off in spec.noProxy.discover",
                    found.missing.join("; ")
                ),
            });
        }
        let config = match blocker {
            Some(b) => Err(b),
            None => match self.credentials().await? {
                Ok(urls) => Ok((
                    render(spec.no_proxy.dialect, &IntentSet::new(intents)),
                    urls,
                )),
                Err(e) => Err(Blocker {
                    reason: e.reason(),
                    message: e.to_string(),
                }),
            },
        };
        Ok(Evaluation { facts, config })
    }

    /// The active slot's proxy URLs, or why they cannot be used.
    async fn credentials(&self) -> Result<Result<ProxyUrls, CredentialError>, Error> {
        let proxy = &self.policy.spec.proxy;
        let Some(slot) = proxy.credentials.iter().find(|c| c.name == proxy.active) else {
            return Ok(Err(CredentialError::NotFound {
                secret: format!(
                    "(spec.proxy.active {:?} names no credential slot)",
                    proxy.active
                ),
            }));
        };
        let sns = slot
            .secret_ref
            .namespace
            .clone()
            .unwrap_or_else(|| self.ns.clone());
        let sname = &slot.secret_ref.name;
        let shown = format!("{sns}/{sname}");
        let secret = Api::<Secret>::namespaced(self.ctx.client.clone(), &sns)
            .get_opt(sname)
            .await
            .map_err(Error::kube("reading Secret", &shown))?;
        let Some(secret) = secret else {
            return Ok(Err(CredentialError::NotFound { secret: shown }));
        };
        if let Err(e) =
            credentials::check_grant(&sns, sname, secret.metadata.annotations.as_ref(), &self.ns)
        {
            return Ok(Err(e));
        }
        Ok(credentials::parse_source(&shown, secret.data.as_ref()))
    }

    /// Every Deployment, StatefulSet and DaemonSet of the namespace.
    fn views(&self) -> Vec<WorkloadView> {
        fn of<K: Workload + kube::Resource>(
            store: &kube::runtime::reflector::Store<K>,
            ns: &str,
        ) -> Vec<WorkloadView> {
            store
                .state()
                .iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(ns))
                .filter_map(|o| o.view())
                .collect()
        }
        let mut v = of::<Deployment>(&self.ctx.deployments, &self.ns);
        v.extend(of::<StatefulSet>(&self.ctx.statefulsets, &self.ns));
        v.extend(of::<DaemonSet>(&self.ctx.daemonsets, &self.ns));
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Whether this policy manages `v`: it selects it and no older policy does.
    fn selection(&self, selector: &Selector, v: &WorkloadView) -> Selection {
        if !selects(&self.policy, selector, v) {
            return Selection::NotSelected;
        }
        let me = order_key(&self.policy);
        let older = self
            .ctx
            .policies
            .state()
            .iter()
            .filter(|p| {
                p.namespace().as_deref() == Some(self.ns.as_str()) && p.name_any() != self.name
            })
            .filter(|p| p.meta().deletion_timestamp.is_none())
            .filter(|p| {
                Selector::try_from(p.spec.workload_selector.clone())
                    .map(|s| selects(p, &s, v))
                    .unwrap_or(false)
            })
            .filter(|p| order_key(p) < me)
            .map(|p| p.name_any())
            .min();
        match older {
            Some(by) => Selection::Taken(by),
            None => Selection::Mine,
        }
    }

    /// Originals remembered for `v`, with their Secret data keys.
    fn originals_of(
        &self,
        v: &WorkloadView,
        data: &BTreeMap<String, ByteString>,
    ) -> Vec<(String, Original)> {
        let spec = v.template.spec.as_ref();
        let containers = spec
            .into_iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .map(|c| c.name.clone());
        let mut out = Vec::new();
        for c in containers {
            for var in workloads::PROXY_VARS {
                let key = workloads::original_key(&v.id, &c, var);
                if let Some(o) = data
                    .get(&key)
                    .and_then(|b| serde_json::from_slice::<Original>(&b.0).ok())
                {
                    out.push((key, o));
                }
            }
        }
        out
    }

    /// Writes one workload; returns the resourceVersion the server gave it.
    async fn write(
        &self,
        id: &workloads::WorkloadId,
        w: &Write,
    ) -> Result<Option<String>, kube::Error> {
        let (params, patch) = match w {
            Write::None => return Ok(None),
            Write::Apply(body) => (
                PatchParams::apply(FIELD_MANAGER).force(),
                Patch::Apply(body),
            ),
            Write::Patch(body) => (
                PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                Patch::Strategic(body),
            ),
        };
        let c = self.ctx.client.clone();
        match id.kind {
            WorkloadKind::Deployment => Api::<Deployment>::namespaced(c, &id.namespace)
                .patch(&id.name, &params, &patch)
                .await
                .map(|o| o.metadata.resource_version),
            WorkloadKind::StatefulSet => Api::<StatefulSet>::namespaced(c, &id.namespace)
                .patch(&id.name, &params, &patch)
                .await
                .map(|o| o.metadata.resource_version),
            WorkloadKind::DaemonSet => Api::<DaemonSet>::namespaced(c, &id.namespace)
                .patch(&id.name, &params, &patch)
                .await
                .map(|o| o.metadata.resource_version),
        }
    }

    fn managed_meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.managed.clone()),
            namespace: Some(self.ns.clone()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                (POLICY_LABEL.to_owned(), self.name.clone()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "egressproxy.io/v1alpha1".into(),
                kind: "EgressProxyPolicy".into(),
                name: self.name.clone(),
                uid: self.policy.meta().uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        }
    }

    fn is_current(&self, meta: &ObjectMeta) -> bool {
        let want = self.managed_meta();
        meta.labels.as_ref().is_some_and(|l| {
            want.labels
                .iter()
                .flatten()
                .all(|(k, v)| l.get(k) == Some(v))
        }) && meta.owner_references == want.owner_references
    }

    /// Applies the managed Secret unless the cache, or our own write it has not seen yet,
    /// already holds `data`.
    async fn apply_secret(
        &self,
        current: Option<&Secret>,
        data: &BTreeMap<String, ByteString>,
    ) -> Result<(), Error> {
        let known = self.ctx.recent.secret_data(&self.key_managed(), current);
        if known.as_ref() == Some(data) && current.is_none_or(|s| self.is_current(&s.metadata)) {
            return Ok(());
        }
        let secret = Secret {
            metadata: self.managed_meta(),
            type_: Some("Opaque".into()),
            data: Some(data.clone()),
            ..Default::default()
        };
        let after = self.apply_managed(&secret, "applying Secret").await?;
        let before = current.and_then(|s| s.metadata.resource_version.clone());
        let key = self.key_managed();
        self.ctx
            .recent
            .wrote_secret(key, before, after, data.clone());
        Ok(())
    }

    /// Applies the managed ConfigMap (NO_PROXY) the same way.
    async fn apply_config_map(&self, no_proxy: &str) -> Result<(), Error> {
        let data = BTreeMap::from([("NO_PROXY".to_owned(), no_proxy.to_owned())]);
        let current = self
            .ctx
            .config_maps
            .get(&ObjectRef::new(&self.managed).within(&self.ns));
        let known = self
            .ctx
            .recent
            .config_map_data(&self.key_managed(), current.as_deref());
        if known.as_ref() == Some(&data)
            && current
                .as_ref()
                .is_none_or(|c| self.is_current(&c.metadata))
        {
            return Ok(());
        }
        let cm = ConfigMap {
            metadata: self.managed_meta(),
            data: Some(data.clone()),
            ..Default::default()
        };
        let after = self.apply_managed(&cm, "applying ConfigMap").await?;
        let before = current.and_then(|c| c.metadata.resource_version.clone());
        let key = self.key_managed();
        self.ctx.recent.wrote_config_map(key, before, after, data);
        Ok(())
    }

    /// Server-side apply of one managed object; returns its new resourceVersion.
    async fn apply_managed<K>(&self, obj: &K, action: &'static str) -> Result<Option<String>, Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let written = Api::<K>::namespaced(self.ctx.client.clone(), &self.ns)
            .patch(
                &self.managed,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(obj),
            )
            .await
            .map_err(Error::kube(action, format!("{}/{}", self.ns, self.managed)))?;
        Ok(written.meta().resource_version.clone())
    }

    /// Removes what the operator added to every workload of the namespace and deletes the
    /// managed objects. Returns the workloads restored.
    async fn cleanup_all(&self) -> Result<Vec<String>, Error> {
        let cached = self
            .ctx
            .secrets
            .get(&ObjectRef::new(&self.managed).within(&self.ns));
        let data = self
            .ctx
            .recent
            .secret_data(&self.key_managed(), cached.as_deref())
            .unwrap_or_default();
        let mut restored = Vec::new();
        for v in self.views() {
            if !workloads::has_entries(&v.template, &self.managed, &self.managed)
                && !self.left_behind(&v)
            {
                continue;
            }
            let originals: Vec<Original> = self
                .originals_of(&v, &data)
                .into_iter()
                .map(|(_, o)| o)
                .collect();
            if let Some(patch) = workloads::cleanup_patch(
                &v.id,
                &v.template,
                &self.managed,
                &self.managed,
                &originals,
            ) {
                if self
                    .ctx
                    .recent
                    .workload(&v.id, v.resource_version.as_ref())
                    .as_deref()
                    == Some(CLEANED)
                {
                    continue;
                }
                let after = self
                    .write(&v.id, &Write::Patch(patch))
                    .await
                    .map_err(Error::kube(
                        "removing proxy settings from",
                        v.id.to_string(),
                    ))?;
                self.ctx.recent.wrote_workload(
                    v.id.clone(),
                    v.resource_version.clone(),
                    after,
                    CLEANED.into(),
                );
                restored.push(v.id.to_string());
            }
        }
        let dp = kube::api::DeleteParams::default();
        let key = ObjectRef::new(&self.managed).within(&self.ns);
        if cached.is_some() || !data.is_empty() {
            delete_ok(
                Api::<Secret>::namespaced(self.ctx.client.clone(), &self.ns)
                    .delete(&self.managed, &dp)
                    .await
                    .map(drop),
            )
            .map_err(Error::kube(
                "deleting Secret",
                format!("{}/{}", self.ns, self.managed),
            ))?;
        }
        let cm = self.ctx.config_maps.get(&key);
        if cm.is_some()
            || self
                .ctx
                .recent
                .config_map_data(&self.key_managed(), cm.as_deref())
                .is_some()
        {
            delete_ok(
                Api::<ConfigMap>::namespaced(self.ctx.client.clone(), &self.ns)
                    .delete(&self.managed, &dp)
                    .await
                    .map(drop),
            )
            .map_err(Error::kube(
                "deleting ConfigMap",
                format!("{}/{}", self.ns, self.managed),
            ))?;
        }
        self.ctx.recent.forget_managed(&self.key_managed());
        if !restored.is_empty() {
            self.event(
                EventType::Normal,
                "ConfigRemoved",
                format!(
                    "removed the proxy settings from {} workload(s): {}",
                    restored.len(),
                    list(&restored)
                ),
            )
            .await;
        }
        Ok(restored)
    }

    fn api(&self) -> Api<EgressProxyPolicy> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    async fn ensure_finalizer(&self) -> Result<(), Error> {
        let mut f = self.policy.finalizers().to_vec();
        if f.iter().any(|x| x == FINALIZER) {
            return Ok(());
        }
        f.push(FINALIZER.into());
        let patch = json!({"metadata": {"finalizers": f, "resourceVersion": self.current_rv()}});
        let p = self
            .api()
            .patch(&self.name, &self.params(), &Patch::Merge(&patch))
            .await
            .map_err(Error::kube("adding finalizer to", self.shown()))?;
        self.set_rv(p.metadata.resource_version);
        Ok(())
    }

    async fn remove_finalizer(&self) -> Result<(), Error> {
        let f: Vec<&String> = self
            .policy
            .finalizers()
            .iter()
            .filter(|x| *x != FINALIZER)
            .collect();
        if f.len() == self.policy.finalizers().len() {
            return Ok(());
        }
        let patch = json!({"metadata": {"finalizers": f, "resourceVersion": self.current_rv()}});
        delete_ok(
            self.api()
                .patch(&self.name, &self.params(), &Patch::Merge(&patch))
                .await
                .map(drop),
        )
        .map_err(Error::kube("removing finalizer from", self.shown()))
    }

    /// Merge patches of the policy carry the resourceVersion, so a finalizer list that
    /// changed meanwhile is a conflict (retried) rather than overwritten.
    fn current_rv(&self) -> Option<String> {
        self.rv.lock().ok().and_then(|r| r.clone())
    }

    fn set_rv(&self, rv: Option<String>) {
        if let (Ok(mut r), Some(rv)) = (self.rv.lock(), rv) {
            *r = Some(rv);
        }
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        }
    }

    fn key(&self) -> (String, String) {
        (self.ns.clone(), self.name.clone())
    }

    fn key_managed(&self) -> (String, String) {
        (self.ns.clone(), self.managed.clone())
    }

    /// A Secret or ConfigMap that already has the managed name but is not this policy's: it
    /// is never taken over (or later deleted).
    async fn name_taken(&self) -> Result<Option<Blocker>, Error> {
        let key = ObjectRef::new(&self.managed).within(&self.ns);
        let mine = |labels: Option<&BTreeMap<String, String>>| {
            labels.and_then(|l| l.get(POLICY_LABEL)) == Some(&self.name)
        };
        let secret_known = self
            .ctx
            .secrets
            .get(&key)
            .is_some_and(|s| mine(s.metadata.labels.as_ref()))
            || self
                .ctx
                .recent
                .secret_data(&self.key_managed(), None)
                .is_some();
        if !secret_known {
            let found = Api::<Secret>::namespaced(self.ctx.client.clone(), &self.ns)
                .get_metadata_opt(&self.managed)
                .await
                .map_err(Error::kube(
                    "reading Secret",
                    format!("{}/{}", self.ns, self.managed),
                ))?;
            if let Some(m) = found
                && !mine(m.metadata.labels.as_ref())
            {
                return Ok(Some(taken("Secret", &self.ns, &self.managed)));
            }
        }
        let cm_known = self
            .ctx
            .config_maps
            .get(&ObjectRef::new(&self.managed).within(&self.ns))
            .is_some_and(|c| mine(c.metadata.labels.as_ref()))
            || self
                .ctx
                .recent
                .config_map_data(&self.key_managed(), None)
                .is_some();
        if !cm_known {
            let found = Api::<ConfigMap>::namespaced(self.ctx.client.clone(), &self.ns)
                .get_metadata_opt(&self.managed)
                .await
                .map_err(Error::kube(
                    "reading ConfigMap",
                    format!("{}/{}", self.ns, self.managed),
                ))?;
            if let Some(m) = found
                && !mine(m.metadata.labels.as_ref())
            {
                return Ok(Some(taken("ConfigMap", &self.ns, &self.managed)));
            }
        }
        Ok(None)
    }

    /// Another policy of the namespace whose entries the workload still carries.
    fn held_by_other(&self, v: &WorkloadView) -> Option<String> {
        self.ctx
            .policies
            .state()
            .iter()
            .filter(|p| {
                p.namespace().as_deref() == Some(self.ns.as_str()) && p.name_any() != self.name
            })
            .map(|p| p.name_any())
            .find(|other| {
                let m = credentials::managed_name(other);
                workloads::has_entries(&v.template, &m, &m)
            })
    }

    /// A workload this policy no longer selects that still carries what it added: its entries,
    /// or a config-hash annotation that no other policy of the namespace accounts for.
    fn left_behind(&self, v: &WorkloadView) -> bool {
        if workloads::has_entries(&v.template, &self.managed, &self.managed) {
            return true;
        }
        if workloads::current_hash(&v.template).is_none() {
            return false;
        }
        let others = self.ctx.policies.state();
        !others.iter().any(|p| {
            p.namespace().as_deref() == Some(self.ns.as_str())
                && p.name_any() != self.name
                && (workloads::has_entries(
                    &v.template,
                    &credentials::managed_name(&p.name_any()),
                    &credentials::managed_name(&p.name_any()),
                ) || Selector::try_from(p.spec.workload_selector.clone())
                    .is_ok_and(|s| selects(p, &s, v)))
        })
    }

    fn shown(&self) -> String {
        format!("EgressProxyPolicy {}/{}", self.ns, self.name)
    }

    /// Writes the status when it changed, and an Event when Ready flips or workloads changed.
    async fn finish(
        &self,
        old: &EgressProxyPolicyStatus,
        mut status: EgressProxyPolicyStatus,
        decided: Vec<Decided>,
        notes: &[(&str, String)],
    ) -> Result<(), Error> {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        status.observed_generation = self.policy.meta().generation;
        status.conditions =
            conditions::build(&old.conditions, &decided, status.observed_generation, &now);
        if &status != old {
            let body = json!({
                "apiVersion": "egressproxy.io/v1alpha1",
                "kind": "EgressProxyPolicy",
                "status": status,
            });
            let written = self
                .api()
                .patch_status(
                    &self.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
                .map_err(Error::kube("writing status of", self.shown()))?;
            let before = self.policy.meta().resource_version.clone();
            let after = written.metadata.resource_version.clone();
            self.set_rv(after.clone());
            self.ctx
                .recent
                .wrote_status(self.key(), before, after, status.clone());
        }
        let before = conditions::ready_of(&old.conditions);
        let after = conditions::ready_of(&status.conditions);
        if before != after
            && let Some(ready) = status.conditions.iter().find(|c| c.type_ == READY)
        {
            let kind = if ready.status == "True" {
                EventType::Normal
            } else {
                EventType::Warning
            };
            self.event(kind, &ready.reason.clone(), ready.message.clone())
                .await;
        }
        for (reason, note) in notes {
            self.event(EventType::Normal, reason, note.clone()).await;
        }
        Ok(())
    }

    /// Publishes one Event on the policy. Events mark transitions, so each is its own object
    /// (no series aggregation that would keep an old note under a new count).
    async fn event(&self, type_: EventType, reason: &str, note: String) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", self.name, now.as_nanosecond())),
                namespace: Some(self.ns.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(match type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            reason: Some(reason.into()),
            note: Some(cut(&note, 1000)),
            action: Some("Reconcile".into()),
            regarding: Some(self.policy.object_ref(&())),
            reporting_controller: Some(super::REPORTER.into()),
            reporting_instance: Some(self.ctx.instance.clone()),
            ..Default::default()
        };
        tracing::info!(policy = %self.shown(), reason, note = %cut(&note, 1000), "event");
        let api = Api::<Event>::namespaced(self.ctx.client.clone(), &self.ns);
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            tracing::warn!(policy = %self.shown(), error = %e, "publishing event failed");
        }
    }
}

/// Event severity.
#[derive(Clone, Copy)]
enum EventType {
    Normal,
    Warning,
}

fn taken(kind: &str, ns: &str, name: &str) -> Blocker {
    Blocker {
        reason: reason::MANAGED_OBJECT_CONFLICT,
        message: format!(
            "{kind} {ns}/{name} already exists and is not managed by this policy (label {POLICY_LABEL}); the operator will not take it over: rename the policy or that {kind}"
        ),
    }
}

fn delete_ok(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

fn selects(p: &EgressProxyPolicy, selector: &Selector, v: &WorkloadView) -> bool {
    !selector.selects_all()
        && p.spec.workload_kinds.contains(&v.id.kind)
        && selector.matches(&v.labels)
}

/// Older policies win an overlap; equal ages are ordered by name.
fn order_key(p: &EgressProxyPolicy) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        p.meta().creation_timestamp.as_ref().map(|t| t.0),
        p.name_any(),
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
    conflicts: &'a [String],
    failures: &'a [String],
}

/// Ready, Reconciling and Stalled for an applied policy.
fn decide(o: &Outcome) -> Vec<Decided> {
    let (ready_reason, ready_msg): (&'static str, String) = if !o.failures.is_empty() {
        (
            "WorkloadUpdateFailed",
            format!("updating failed for {}", list(o.failures)),
        )
    } else if !o.overlaps.is_empty() {
        (
            reason::POLICY_OVERLAP,
            format!(
                "selected, but an older policy manages them: {}",
                list(o.overlaps)
            ),
        )
    } else if !o.conflicts.is_empty() {
        (
            reason::ENV_CONFLICT,
            format!(
                "existingEnv is Keep, so these variables keep the container's own value: {}",
                list(o.conflicts)
            ),
        )
    } else if !o.pending.is_empty() && o.paused {
        (
            reason::ROLLOUT_PAUSED,
            format!(
                "spec.rollout.paused: {} workload(s) wait: {}",
                o.pending.len(),
                list(o.pending)
            ),
        )
    } else if !o.pending.is_empty() {
        (
            reason::ROLLOUT_IN_PROGRESS,
            format!(
                "{} workload(s) not yet on the current config: {}",
                o.pending.len(),
                list(o.pending)
            ),
        )
    } else if o.selected == 0 {
        (
            reason::NO_WORKLOADS,
            "the policy selects no workload in this namespace".into(),
        )
    } else {
        (
            reason::RECONCILED,
            format!(
                "{} workload(s) run the current proxy configuration",
                o.selected
            ),
        )
    };
    let ready = matches!(ready_reason, reason::RECONCILED | reason::NO_WORKLOADS);
    let reconciling = if o.pending.is_empty() {
        cond(
            RECONCILING,
            false,
            reason::IDLE,
            "every selected workload is up to date",
        )
    } else if o.paused {
        cond(RECONCILING, false, reason::ROLLOUT_PAUSED, "rollout paused")
    } else {
        cond(
            RECONCILING,
            true,
            reason::ROLLOUT_IN_PROGRESS,
            format!("{} workload(s) rolling or waiting", o.pending.len()),
        )
    };
    vec![
        cond(READY, ready, ready_reason, ready_msg),
        reconciling,
        cond(
            STALLED,
            false,
            reason::IDLE,
            "the spec and its Secret are valid",
        ),
    ]
}

/// The first few names, and how many more.
fn list(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(LISTED).map(String::as_str).collect();
    if items.len() > LISTED {
        format!("{} and {} more", shown.join(", "), items.len() - LISTED)
    } else {
        shown.join(", ")
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome<'a>(
        pending: &'a [String],
        overlaps: &'a [String],
        conflicts: &'a [String],
    ) -> Outcome<'a> {
        Outcome {
            selected: 3,
            pending,
            paused: false,
            overlaps,
            conflicts,
            failures: &[],
        }
    }

    #[test]
    fn ready_only_when_everything_is_applied() {
        let none: Vec<String> = Vec::new();
        let one = vec!["Deployment/api".to_owned()];
        let d = decide(&outcome(&none, &none, &none));
        assert_eq!((d[0].status, d[0].reason), (true, reason::RECONCILED));
        let d = decide(&outcome(&one, &none, &none));
        assert_eq!(
            (d[0].status, d[0].reason),
            (false, reason::ROLLOUT_IN_PROGRESS)
        );
        assert!(d[1].status, "Reconciling while rolling");
        let d = decide(&outcome(&one, &one, &none));
        assert_eq!(d[0].reason, reason::POLICY_OVERLAP);
        let d = decide(&outcome(&none, &none, &one));
        assert_eq!((d[0].status, d[0].reason), (false, reason::ENV_CONFLICT));
        assert!(!d[2].status, "not Stalled");
    }

    #[test]
    fn lists_are_bounded() {
        let many: Vec<String> = (0..50).map(|i| format!("Deployment/w{i}")).collect();
        let s = list(&many);
        assert!(s.ends_with("and 30 more"), "{s}");
    }
}
