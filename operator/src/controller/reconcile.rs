//! One reconcile of one policy, the I/O half: read the caches (and the active Secret), ask
//! [`plan`](super::plan) what to do, apply it, publish status and Events, and remember the
//! writes the caches have not seen yet.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::cluster::{self, DiscoverySources};
use super::errors::{self, Category, Error};
use super::objects::{JobView, WorkloadView};
use super::plan::{
    self, Change, Completion, ConfigMapData, Note, Observed, Plan, Report, Requeue, SecretData,
    SlotRead, SourceProblem, SourceRead,
};
use super::tenancy::NamespaceCaches;
use super::watches::SourceKind;
use super::{Ctx, FINALIZER, REPORTER};
use crate::api::{CredentialSlot, EgressProxyPolicy, TrustSource, TrustSpec, WorkloadKind};
use crate::credentials::{self, CredentialError};
use crate::discovery::ClusterInputs;
use crate::trust::{self, TrustError};
use crate::workloads::kinds::{self, Kind, Visit};
use crate::workloads::{self, FIELD_MANAGER, WorkloadId, Write};

/// How long a reconcile waits for the managed-object caches of a namespace it is the first
/// to need.
const CACHE_START: Duration = Duration::from_secs(5);

/// How soon a policy whose workloads are rolling is looked at again.
const ROLLING_RECHECK: Duration = Duration::from_secs(5);

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Discovery inputs from the caches.
pub(super) fn cluster_inputs(ctx: &Ctx) -> ClusterInputs {
    let d = &ctx.discovery;
    let config_maps: Vec<_> = d.config_maps.iter().flat_map(|s| s.state()).collect();
    cluster::cluster_inputs(
        &DiscoverySources {
            nodes: &d.nodes.state(),
            services: &d.services.state(),
            slices: &d.slices.state(),
            service_cidrs: &d.service_cidrs.state(),
            config_maps: &config_maps,
            platform: d.platform.inputs(),
        },
        &ctx.base_inputs,
    )
}

pub(super) async fn reconcile(
    policy: Arc<EgressProxyPolicy>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let ns = policy.namespace().unwrap_or_default();
    if !ctx.settings.leadership.is_leader() {
        warm(&ctx, &ns);
        ctx.settings.metrics.standby();
        return Ok(Action::await_change());
    }
    let started = std::time::Instant::now();
    let pass = ctx.settings.metrics.starting();
    let key = (ns.clone(), policy.name_any());
    let ex = Executor {
        caches: ctx.tenancy.managed(&ns),
        managed: credentials::managed_name(&policy.name_any()),
        name: policy.name_any(),
        policy,
        ctx: ctx.clone(),
        ns,
    };
    let result = ex.run().await;
    match &result {
        // Cut short by the end of the term: the next leader's reconcile counts.
        Err(e) if e.not_leader() => ctx.settings.metrics.standby(),
        r => {
            let category = r.as_ref().err().map(|e| e.category().as_str());
            ctx.settings.metrics.reconciled(started.elapsed(), category);
        }
    }
    ctx.settings.metrics.finished((&key.0, &key.1), pass);
    if result.is_ok() {
        ctx.recent.succeeded(&key);
    }
    result
}

/// A standby starts the managed-object caches of an admitted namespace, as the leader's
/// reconcile does, so that it can take over without waiting for them. (Source Secrets are
/// read directly by a reconcile; their watches only wake policies.)
fn warm(ctx: &Ctx, ns: &str) {
    if ctx.admitted(ns) {
        ctx.tenancy.managed(ns);
    }
}

/// Per-policy exponential backoff (0.5 s doubling to 2 min). kube-runtime's controller has no
/// per-object backoff of its own, and a fixed delay either hammers or stalls.
pub(super) fn error_policy(policy: Arc<EgressProxyPolicy>, err: &Error, ctx: Arc<Ctx>) -> Action {
    let (ns, name) = (policy.namespace().unwrap_or_default(), policy.name_any());
    if err.not_leader() {
        // Leadership ended mid-reconcile; a new term reconciles everything again.
        tracing::debug!(namespace = %ns, policy = %name, "reconcile stopped: no longer leading");
        return Action::await_change();
    }
    let key = (ns.clone(), name.clone());
    let n = ctx.recent.failed(key);
    let delay =
        Duration::from_millis(500u64.saturating_mul(1 << n.min(8))).min(Duration::from_secs(120));
    let category = err.category();
    // A conflict means the cache was behind; the retry reads the newer object.
    if category == Category::Conflict {
        tracing::debug!(namespace = %ns, policy = %name, %category, error = %err,
            retry_in = ?delay, "reconcile conflicted; retrying");
    } else {
        tracing::warn!(namespace = %ns, policy = %name, %category, error = %err,
            retry_in = ?delay, "reconcile failed");
    }
    Action::requeue(delay)
}

/// What the executor read for one reconcile; [`plan::Inputs`] borrows from it.
struct Observation {
    others: Vec<Arc<EgressProxyPolicy>>,
    admitted: bool,
    admission: String,
    denied: Option<String>,
    cluster: ClusterInputs,
    slots: Option<Vec<SlotRead>>,
    trust: Option<Vec<SourceRead>>,
    secret: Observed<SecretData>,
    config_map: Observed<ConfigMapData>,
    workloads: Vec<WorkloadView>,
    jobs: Vec<JobView>,
    recent: BTreeMap<WorkloadId, plan::Marker>,
    previous: crate::api::EgressProxyPolicyStatus,
    new_key: Vec<u8>,
}

struct Executor {
    policy: Arc<EgressProxyPolicy>,
    ctx: Arc<Ctx>,
    /// The managed-object caches of the policy's namespace.
    caches: NamespaceCaches,
    ns: String,
    name: String,
    /// Name of the managed Secret and ConfigMap.
    managed: String,
}

impl Executor {
    async fn run(&self) -> Result<Action, Error> {
        let mut o = self.observe().await?;
        let mut plan = self.plan(&o, None, None);
        let mut pods = None;
        if plan.needs_pods {
            pods = Some(self.pods_per_slot().await?);
            plan = self.plan(&o, pods.as_ref(), None);
        }
        if let Some(w) = plan.needs_probe.clone() {
            let uid = self.policy.uid().unwrap_or_default();
            let client = &self.ctx.client;
            let run = super::probe::run(client, &self.ns, &self.name, &uid, &w).await?;
            plan = self.plan(&o, pods.as_ref(), Some(&run));
        }
        // The writes take the API server's time; the views are not needed for them, and
        // held by every worker at once they were the largest peak of a startup.
        o.workloads = Vec::new();
        self.execute(&plan, &o).await
    }

    fn plan(
        &self,
        o: &Observation,
        pods: Option<&BTreeMap<String, usize>>,
        probe: Option<&plan::verify::ProbeRun>,
    ) -> Plan {
        let others: Vec<&EgressProxyPolicy> = o.others.iter().map(Arc::as_ref).collect();
        plan::plan(&plan::Inputs {
            policy: &self.policy,
            others: &others,
            admitted: o.admitted,
            admission: &o.admission,
            denied: o.denied.as_deref(),
            cluster: &o.cluster,
            slots: o.slots.as_deref(),
            trust: o.trust.as_deref(),
            root_set: &self.ctx.settings.trust_roots,
            pods,
            secret: &o.secret,
            config_map: &o.config_map,
            workloads: &o.workloads,
            jobs: &o.jobs,
            recent: &o.recent,
            previous: &o.previous,
            new_key: &o.new_key,
            probe_image: self.ctx.settings.probe_image.as_deref(),
            probe,
            unix_now: unix_now(),
        })
    }

    /// The namespace's Pods per credential slot of this policy (the annotation their
    /// template carried), metadata only: Terminating Pods count, they still run.
    async fn pods_per_slot(&self) -> Result<BTreeMap<String, usize>, Error> {
        let api: Api<PartialObjectMeta<Pod>> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        // A finished Pod runs nothing; an evicted or completed one may stay listed for long.
        let running = ListParams::default().fields("status.phase!=Failed,status.phase!=Succeeded");
        let pods = api.list_metadata(&running).await.map_err(Error::kube(
            "listing",
            format!("Pods in namespace {}", self.ns),
        ))?;
        let prefix = format!("{}/", self.managed);
        let mut out = BTreeMap::new();
        for p in pods.items {
            let slot = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(workloads::CREDENTIAL_SLOT))
                .and_then(|v| v.strip_prefix(&prefix));
            if let Some(slot) = slot {
                *out.entry(slot.to_owned()).or_default() += 1;
            }
        }
        Ok(out)
    }

    /// The namespace's Jobs, when the policy may select CronJobs: a running Job keeps the
    /// configuration it started with, and status names those on an old one. Not readable
    /// (no tenant role): none.
    async fn jobs(&self) -> Result<Vec<JobView>, Error> {
        if !self
            .policy
            .spec
            .workload_kinds
            .contains(&WorkloadKind::CronJob)
        {
            return Ok(Vec::new());
        }
        let api: Api<Job> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        match api.list(&ListParams::default()).await {
            Ok(list) => Ok(list.items.iter().map(JobView::of).collect()),
            Err(e) if errors::category_of(&e) == Category::Forbidden => Ok(Vec::new()),
            Err(e) => Err(Error::kube(
                "listing",
                format!("Jobs in namespace {}", self.ns),
            )(e)),
        }
    }

    /// Reads what the plan needs. Remembered writes are read before the caches: a watch
    /// event that lands in between then only makes the cache newer, never older.
    async fn observe(&self) -> Result<Observation, Error> {
        let ctx = &self.ctx;
        let recent_status = ctx.recent.status(&self.key());
        let recent = ctx.recent.workloads_in(&self.ns);
        let mut secret = self.observed_secret();
        let mut config_map = self.observed_config_map();
        let previous = recent_status
            .or_else(|| {
                ctx.policies
                    .get(&ObjectRef::from_obj(self.policy.as_ref()))?
                    .status
                    .clone()
            })
            .or_else(|| self.policy.status.clone())
            .map(|mut s| {
                // A held status's record of the slots: a change in place is told once.
                if let Some(c) = ctx.recent.held_credentials(&self.key()) {
                    s.credentials = c;
                }
                s
            })
            .unwrap_or_default();
        let admitted = ctx.admitted(&self.ns);
        let denied = self.access().await?;
        let cluster = cluster_inputs(ctx);
        let active = admitted && denied.is_none();
        let slots = if plan::needs_credentials(&self.policy, active, &cluster) {
            Some(self.read_slots().await?)
        } else {
            None
        };
        let trust = match &self.policy.spec.trust {
            Some(t) if slots.is_some() => Some(self.read_trust(t).await?),
            _ => None,
        };
        if plan::needs_lookup(slots.as_deref(), &secret)
            && let Some(s) = self.get_managed::<Secret>().await?
        {
            secret = self.found(s.metadata, s.data.map(SecretData));
        }
        if plan::needs_lookup(slots.as_deref(), &config_map)
            && let Some(c) = self.get_managed::<ConfigMap>().await?
        {
            config_map = self.found(c.metadata, ConfigMapData::of(c.data, c.binary_data));
        }
        Ok(Observation {
            others: self.others(),
            admitted,
            admission: ctx.admission(),
            denied,
            cluster,
            slots,
            trust,
            secret,
            config_map,
            jobs: if active {
                self.jobs().await?
            } else {
                Vec::new()
            },
            // Last, after every await: the views of a namespace's workloads are the biggest
            // thing a reconcile holds.
            workloads: self.workloads(),
            recent,
            previous,
            new_key: workloads::hash::new_key().map_err(|_| Error::Random)?,
        })
    }

    /// Why the operator may not work in the policy's namespace (the API server refuses it
    /// the managed objects there), once its caches there have started.
    async fn access(&self) -> Result<Option<String>, Error> {
        if self.caches.ready_within(CACHE_START).await {
            return Ok(self.caches.denied());
        }
        match self.caches.denied() {
            Some(why) => Ok(Some(why)),
            None => Err(Error::NotReady(self.ns.clone())),
        }
    }

    fn observed_secret(&self) -> Observed<SecretData> {
        let recent = self.ctx.recent.secret(&self.key_managed());
        let cached = self.caches.secrets.get(&self.managed_ref());
        let data = recent.or_else(|| cached.as_ref().and_then(|s| s.data.clone()));
        Observed {
            data: data.map(SecretData),
            meta: cached.map(|s| s.metadata.clone()),
        }
    }

    fn observed_config_map(&self) -> Observed<ConfigMapData> {
        let recent = self.ctx.recent.config_map(&self.key_managed());
        let cached = self.caches.config_maps.get(&self.managed_ref());
        let read = |c: &ConfigMap| ConfigMapData::of(c.data.clone(), c.binary_data.clone());
        Observed {
            data: recent.or_else(|| cached.as_deref().and_then(read)),
            meta: cached.map(|c| c.metadata.clone()),
        }
    }

    /// An object with the managed name that the caches do not hold, read from the server.
    async fn get_managed<K>(&self) -> Result<Option<K>, Error>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let kind = K::kind(&()).to_string();
        Api::<K>::namespaced(self.ctx.client.clone(), &self.ns)
            .get_opt(&self.managed)
            .await
            .map_err(Error::kube(
                "reading",
                format!("{kind} {}/{}", self.ns, self.managed),
            ))
    }

    /// Its metadata, and its data when it is this policy's (another instance may have just
    /// created it: its hash key is the one to use).
    fn found<T>(&self, meta: ObjectMeta, data: Option<T>) -> Observed<T> {
        let label = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::credentials::POLICY_LABEL));
        let mine = label == Some(&self.name);
        Observed {
            data: if mine { data } else { None },
            meta: Some(meta),
        }
    }

    /// The other policies of the namespace.
    fn others(&self) -> Vec<Arc<EgressProxyPolicy>> {
        self.ctx
            .policies
            .state()
            .into_iter()
            .filter(|p| p.namespace().as_deref() == Some(self.ns.as_str()))
            .filter(|p| p.name_any() != self.name)
            .collect()
    }

    /// Every credential slot: its Secret's content and proxy URLs, or why they cannot be used.
    async fn read_slots(&self) -> Result<Vec<SlotRead>, Error> {
        let mut out = Vec::new();
        for slot in &self.policy.spec.proxy.credentials {
            out.push(self.read_slot(slot).await?);
        }
        Ok(out)
    }

    async fn read_slot(&self, slot: &CredentialSlot) -> Result<SlotRead, Error> {
        let sns = slot.secret_ref.namespace.as_deref().unwrap_or(&self.ns);
        let sname = &slot.secret_ref.name;
        let shown = format!("{sns}/{sname}");
        self.ctx
            .tenancy
            .watch_source(SourceKind::Secret, sns, sname);
        let secret = match Api::<Secret>::namespaced(self.ctx.client.clone(), sns)
            .get_opt(sname)
            .await
        {
            // Not readable: the owner's grant is gone (reported like a missing Secret).
            Err(e) if errors::category_of(&e) == Category::Forbidden => None,
            r => r.map_err(Error::kube("reading Secret", &shown))?,
        };
        let read = |content, urls| SlotRead {
            name: slot.name.clone(),
            source: shown.clone(),
            content,
            urls,
        };
        let Some(secret) = secret else {
            let e = CredentialError::NotAvailable {
                secret: shown.clone(),
                namespace: self.ns.clone(),
            };
            return Ok(read(None, Err(e)));
        };
        let annotations = secret.metadata.annotations.as_ref();
        if let Err(e) = credentials::check_grant(sns, sname, annotations, &self.ns) {
            return Ok(read(None, Err(e)));
        }
        let data = secret.data.as_ref();
        let content = credentials::content(data);
        Ok(read(Some(content), credentials::parse_source(&shown, data)))
    }

    /// Every trust source: its certificates, or why there are none.
    async fn read_trust(&self, spec: &TrustSpec) -> Result<Vec<SourceRead>, Error> {
        let mut out = Vec::new();
        for source in &spec.sources {
            out.push(self.read_trust_source(source).await?);
        }
        Ok(out)
    }

    async fn read_trust_source(&self, source: &TrustSource) -> Result<SourceRead, Error> {
        let shown = source.shown(&self.ns);
        let (kind, r) = match (&source.config_map, &source.secret) {
            (Some(r), _) => (SourceKind::ConfigMap, r),
            (None, Some(r)) => (SourceKind::Secret, r),
            (None, None) => {
                let e = TrustError::NotPem {
                    label: shown.clone(),
                };
                return Ok(SourceRead {
                    shown,
                    certs: Err(e.into()),
                });
            }
        };
        let ns = r.namespace.as_deref().unwrap_or(&self.ns);
        self.ctx.tenancy.watch_source(kind, ns, &r.name);
        let read = match kind {
            SourceKind::ConfigMap => self.get_source::<ConfigMap>(ns, &r.name, &shown).await?,
            SourceKind::Secret => self.get_source::<Secret>(ns, &r.name, &shown).await?,
        };
        let bytes = read.and_then(|(annotations, data)| {
            credentials::check_grant(ns, &r.name, annotations.as_ref(), &self.ns).ok()?;
            data.get(&r.key).cloned()
        });
        let certs = match bytes {
            None => Err(SourceProblem::NotAvailable {
                shown: shown.clone(),
                namespace: self.ns.clone(),
            }),
            Some(pem) => trust::parse_source(&shown, &pem, k8s_openapi::jiff::Timestamp::now())
                .map_err(SourceProblem::from),
        };
        Ok(SourceRead { shown, certs })
    }

    /// A source object's annotations and data (binary and text alike), `None` when it is
    /// missing or not readable (a grant withdrawn).
    async fn get_source<K: SourceObject>(
        &self,
        ns: &str,
        name: &str,
        shown: &str,
    ) -> Result<Option<(Option<BTreeMap<String, String>>, BTreeMap<String, Vec<u8>>)>, Error> {
        let got = match Api::<K>::namespaced(self.ctx.client.clone(), ns)
            .get_opt(name)
            .await
        {
            Err(e) if errors::category_of(&e) == Category::Forbidden => None,
            r => r.map_err(Error::kube("reading", shown))?,
        };
        Ok(got.map(|o| (o.meta().annotations.clone(), o.bytes())))
    }

    /// Every workload of the namespace, of every kind, sorted by id.
    fn workloads(&self) -> Vec<WorkloadView> {
        self.ctx.workloads.views(&self.ns)
    }

    /// Applies the plan in its order; see [`Plan`].
    async fn execute(&self, plan: &Plan, o: &Observation) -> Result<Action, Error> {
        if plan.add_finalizer {
            self.add_finalizer().await?;
        }
        // The managed objects are fenced like the workloads: written against the version
        // read (a create fails if the object exists).
        let secret_rv = version(o.secret.meta.as_ref());
        match &plan.secret {
            Change::Create(data) => self.write_secret(data, None).await?,
            Change::Apply(data) => {
                let before = o.secret.data.clone().unwrap_or_default();
                self.write_secret(data, Some((&before, secret_rv))).await?
            }
            Change::Keep | Change::Delete => {}
        }
        match &plan.config_map {
            Change::Create(data) => self.write_config_map(data, None).await?,
            Change::Apply(data) => {
                let rv = version(o.config_map.meta.as_ref());
                let before = o.config_map.data.clone().unwrap_or_default();
                self.write_config_map(data, Some((&before, rv))).await?
            }
            Change::Keep | Change::Delete => {}
        }
        if let Some(job) = &plan.create_probe {
            super::probe::create(&self.ctx.client, &self.ns, job).await?;
        }
        let Written { failed, refused } = self.write_workloads(plan).await?;
        let ids: Vec<WorkloadId> = refused.iter().map(|(w, _)| w.clone()).collect();
        // A refused write is not done: nothing is deleted nor the finalizer removed yet.
        let mut unfinished = failed.clone();
        unfinished.extend(ids.iter().map(|w| (w.clone(), "changed since read".into())));
        let done = plan.completion(&unfinished);
        self.delete_managed(&done).await?;
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let report = plan.without(&ids).report(&failed, &now);
        let held = self.publish(&report).await?;
        let failed = plan.failures(&failed);
        if !failed.is_empty() {
            return Err(Error::Workloads(failed));
        }
        if let Some((id, e)) = refused.into_iter().next() {
            // Planned against an older object: re-read and plan again, soon (a conflict is
            // retried quietly, see `error_policy`), with no condition and no Event.
            return Err(Error::kube("writing", id.to_string())(e));
        }
        if done.remove_finalizer {
            self.remove_finalizer().await?;
        }
        let resync = self.ctx.settings.resync;
        Ok(match (held, report.requeue) {
            (Some(wait), _) => Action::requeue(wait.min(resync)),
            (None, Requeue::Resync) => Action::requeue(resync),
            (None, Requeue::Soon) => Action::requeue(ROLLING_RECHECK.min(resync)),
            (None, Requeue::AwaitChange) => Action::await_change(),
        })
    }

    /// Every planned workload write; returns the ones that failed, with one-line reasons,
    /// and the ones refused because the workload changed since the plan read it. A write
    /// held back because the term ended stops the reconcile: none of the rest is sent.
    async fn write_workloads(&self, plan: &Plan) -> Result<Written, Error> {
        let mut out = Written::default();
        for w in &plan.writes {
            match self.write(w).await {
                Ok(after) => {
                    let cached = self.cached_version(&w.id);
                    let id = w.id.clone();
                    let marker = w.marker.clone();
                    self.ctx
                        .recent
                        .wrote_workload(id, cached.as_ref(), after, marker);
                }
                Err(e) if crate::client::is_not_leader(&e) => {
                    return Err(Error::kube("writing", w.id.to_string())(e));
                }
                Err(e) if errors::category_of(&e) == Category::Conflict => {
                    tracing::debug!(workload = %w.id, error = %errors::describe(&e),
                        "workload changed since it was read; planning again");
                    out.refused.push((w.id.clone(), e));
                }
                Err(e) => out.failed.push((w.id.clone(), errors::describe(&e))),
            }
        }
        Ok(out)
    }

    /// The resourceVersion the workload cache holds now.
    fn cached_version(&self, id: &WorkloadId) -> Option<String> {
        self.ctx.workloads.version(id)
    }

    /// Writes one workload, fenced by the resourceVersion the plan read
    /// ([`plan::WorkloadWrite::fenced`]); returns the resourceVersion the server gave it.
    async fn write(&self, ww: &plan::WorkloadWrite) -> Result<Option<String>, kube::Error> {
        let id = &ww.id;
        let Some(w) = ww.fenced() else {
            return Err(unversioned(id));
        };
        let (params, patch) = match &w {
            Write::None => return Ok(None),
            Write::Apply(body) => (
                PatchParams::apply(FIELD_MANAGER).force(),
                Patch::Apply(body),
            ),
            Write::Patch(body) => (self.params(), Patch::Strategic(body)),
        };
        let to = PatchWorkload {
            client: self.ctx.client.clone(),
            id,
            params: &params,
            patch: &patch,
        };
        kinds::visit(id.kind, to).await
    }

    /// Creates the managed Secret (`before` is `None`) or brings it to `data`: a merge patch
    /// that also removes the keys of `before` that `data` lacks, fenced by the
    /// resourceVersion `before` was read at. (Server-side apply could not remove keys the
    /// create set: those belong to the create, not to the apply.)
    async fn write_secret(
        &self,
        data: &SecretData,
        before: Option<(&SecretData, Option<&str>)>,
    ) -> Result<(), Error> {
        let shown = format!("Secret {}/{}", self.ns, self.managed);
        let after = match before {
            None => {
                let secret = Secret {
                    metadata: plan::managed_meta(&self.policy),
                    type_: Some("Opaque".into()),
                    data: Some(data.0.clone()),
                    ..Default::default()
                };
                self.create_managed(&secret).await?
            }
            Some((before, rv)) => {
                let meta = plan::managed_meta(&self.policy);
                let mut keys = serde_json::to_value(&data.0)
                    .map_err(|e| Error::Encode(format!("{shown}: {e}")))?;
                for gone in before.0.keys().filter(|k| !data.0.contains_key(*k)) {
                    keys[gone.as_str()] = serde_json::Value::Null;
                }
                let mut patch = json!({
                    "metadata": {"labels": meta.labels, "ownerReferences": meta.owner_references},
                    "data": keys,
                });
                if let Some(rv) = rv {
                    patch = plan::with_version(&patch, rv);
                }
                Api::<Secret>::namespaced(self.ctx.client.clone(), &self.ns)
                    .patch(&self.managed, &self.params(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube("updating", shown))?
                    .metadata
                    .resource_version
            }
        };
        let now = self.caches.secrets.get(&self.managed_ref());
        let cached = now
            .as_ref()
            .and_then(|s| s.metadata.resource_version.as_ref());
        let key = self.key_managed();
        self.ctx
            .recent
            .wrote_secret(key, cached, after, data.0.clone());
        Ok(())
    }

    /// Creates the managed ConfigMap (`before` is `None`) or brings it to `data`: a merge
    /// patch that also removes the keys of `before` that `data` lacks (a trust bundle taken
    /// out, another dialect's variables), fenced by the resourceVersion `before` was read at.
    async fn write_config_map(
        &self,
        data: &ConfigMapData,
        before: Option<(&ConfigMapData, Option<&str>)>,
    ) -> Result<(), Error> {
        let after = match before {
            None => {
                let cm = ConfigMap {
                    metadata: plan::managed_meta(&self.policy),
                    data: Some(data.data.clone()),
                    binary_data: Some(data.binary.clone()).filter(|b| !b.is_empty()),
                    ..Default::default()
                };
                self.create_managed(&cm).await?
            }
            Some((before, rv)) => self.patch_config_map(data, before, rv).await?,
        };
        let now = self.caches.config_maps.get(&self.managed_ref());
        let cached = now
            .as_ref()
            .and_then(|c| c.metadata.resource_version.as_ref());
        let key = self.key_managed();
        self.ctx
            .recent
            .wrote_config_map(key, cached, after, data.digested());
        Ok(())
    }

    async fn patch_config_map(
        &self,
        data: &ConfigMapData,
        before: &ConfigMapData,
        rv: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let shown = format!("ConfigMap {}/{}", self.ns, self.managed);
        let encode = |e: serde_json::Error| Error::Encode(format!("{shown}: {e}"));
        let mut text = serde_json::to_value(&data.data).map_err(encode)?;
        for gone in before.data.keys().filter(|k| !data.data.contains_key(*k)) {
            text[gone.as_str()] = serde_json::Value::Null;
        }
        let mut binary = serde_json::to_value(&data.binary).map_err(encode)?;
        for gone in before
            .binary
            .keys()
            .filter(|k| !data.binary.contains_key(*k))
        {
            binary[gone.as_str()] = serde_json::Value::Null;
        }
        let meta = plan::managed_meta(&self.policy);
        let mut patch = json!({
            "metadata": {"labels": meta.labels, "ownerReferences": meta.owner_references},
            "data": text,
            "binaryData": binary,
        });
        if let Some(rv) = rv {
            patch = plan::with_version(&patch, rv);
        }
        Ok(
            Api::<ConfigMap>::namespaced(self.ctx.client.clone(), &self.ns)
                .patch(&self.managed, &self.params(), &Patch::Merge(&patch))
                .await
                .map_err(Error::kube("updating", shown))?
                .metadata
                .resource_version,
        )
    }

    /// Creates one managed object, failing if it exists; returns its new resourceVersion.
    async fn create_managed<K>(&self, obj: &K) -> Result<Option<String>, Error>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let kind = K::kind(&()).to_string();
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let written = Api::<K>::namespaced(self.ctx.client.clone(), &self.ns)
            .create(&pp, obj)
            .await
            .map_err(Error::kube(
                "creating",
                format!("{kind} {}/{}", self.ns, self.managed),
            ))?;
        Ok(written.meta().resource_version.clone())
    }

    async fn delete_managed(&self, done: &Completion) -> Result<(), Error> {
        let dp = DeleteParams::default();
        let c = self.ctx.client.clone();
        let shown = |kind: &str| format!("{kind} {}/{}", self.ns, self.managed);
        if done.delete_secret {
            let r = Api::<Secret>::namespaced(c.clone(), &self.ns)
                .delete(&self.managed, &dp)
                .await;
            gone(r.map(drop)).map_err(Error::kube("deleting", shown("Secret")))?;
        }
        if done.delete_config_map {
            let r = Api::<ConfigMap>::namespaced(c, &self.ns)
                .delete(&self.managed, &dp)
                .await;
            gone(r.map(drop)).map_err(Error::kube("deleting", shown("ConfigMap")))?;
        }
        if done.delete_secret || done.delete_config_map {
            self.ctx.recent.forget_managed(&self.key_managed());
        }
        Ok(())
    }

    /// Writes the status when it changed, then the Events. A status that only tells that
    /// workloads roll may wait ([`plan::HOLD`]): then it is not written, and how long it
    /// waits is returned.
    async fn publish(&self, report: &Report) -> Result<Option<Duration>, Error> {
        let key = self.key();
        let recent = &self.ctx.recent;
        let held = match (&report.status, report.rolling) {
            (Some(status), true) => recent.hold_rolling(&key, status, Instant::now()),
            _ => None,
        };
        if let Some(status) = report.status.as_ref().filter(|_| held.is_none()) {
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
            let after = written.metadata.resource_version.clone();
            let now = self
                .ctx
                .policies
                .get(&ObjectRef::from_obj(self.policy.as_ref()));
            let cached = now
                .as_ref()
                .and_then(|p| p.metadata.resource_version.as_ref());
            recent.wrote_rolling(&key, report.rolling, Instant::now());
            recent.wrote_status(key, cached, after, status.clone());
        }
        for note in &report.events {
            self.event(note).await;
        }
        Ok(held)
    }

    /// Publishes one Event on the policy. Events mark transitions, so each is its own object
    /// (kube-runtime's Recorder aggregates a repeated reason into a series that keeps the
    /// first note, so a second rollout's Event would show the old hash).
    async fn event(&self, note: &Note) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let message = cut(&note.message, 1000);
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", self.name, now.as_nanosecond())),
                namespace: Some(self.ns.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(note.reason.clone()),
            note: Some(message.clone()),
            action: Some("Reconcile".into()),
            regarding: Some(self.policy.object_ref(&())),
            reporting_controller: Some(REPORTER.into()),
            reporting_instance: Some(self.ctx.settings.instance.clone()),
            ..Default::default()
        };
        tracing::info!(policy = %self.shown(), reason = %note.reason, note = %message, "event");
        let api = Api::<Event>::namespaced(self.ctx.client.clone(), &self.ns);
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            let error = super::errors::describe(&e);
            tracing::warn!(policy = %self.shown(), %error, "publishing event failed");
        }
    }

    /// Adds the finalizer by server-side apply of that one list item: no resourceVersion
    /// precondition, so it never conflicts, and other finalizers are kept (a set).
    async fn add_finalizer(&self) -> Result<(), Error> {
        let body = json!({
            "apiVersion": "egressproxy.io/v1alpha1",
            "kind": "EgressProxyPolicy",
            "metadata": {"name": self.name, "finalizers": [FINALIZER]},
        });
        self.api()
            .patch(
                &self.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(Error::kube("adding finalizer to", self.shown()))?;
        Ok(())
    }

    /// Removes the finalizer with a JSON patch that first tests its position (as
    /// kube-runtime's `finalizer` helper does): a list changed meanwhile fails and is retried.
    async fn remove_finalizer(&self) -> Result<(), Error> {
        let Some(at) = self.policy.finalizers().iter().position(|f| f == FINALIZER) else {
            return Ok(());
        };
        use json_patch::jsonptr::PointerBuf;
        use json_patch::{PatchOperation, RemoveOperation, TestOperation};
        let path =
            PointerBuf::from_tokens(["metadata".to_owned(), "finalizers".into(), at.to_string()]);
        let patch = json_patch::Patch(vec![
            PatchOperation::Test(TestOperation {
                path: path.clone(),
                value: FINALIZER.into(),
            }),
            PatchOperation::Remove(RemoveOperation { path }),
        ]);
        let r = self
            .api()
            .patch(&self.name, &self.params(), &Patch::<()>::Json(patch))
            .await;
        match r {
            // The test failed: someone changed the list; the retry reads the new one.
            Err(kube::Error::Api(s)) if s.code == 422 => Err(Error::FinalizerMoved(self.shown())),
            r => gone(r.map(drop)).map_err(Error::kube("removing finalizer from", self.shown())),
        }
    }

    fn api(&self) -> Api<EgressProxyPolicy> {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
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

    fn managed_ref<K: Resource<DynamicType = ()>>(&self) -> ObjectRef<K> {
        ObjectRef::new(&self.managed).within(&self.ns)
    }

    fn shown(&self) -> String {
        format!("EgressProxyPolicy {}/{}", self.ns, self.name)
    }
}

async fn patch_rv<K>(
    c: kube::Client,
    ns: &str,
    name: &str,
    params: &PatchParams,
    patch: &Patch<&serde_json::Value>,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(c, ns)
        .patch(name, params, patch)
        .await
        .map(|o| o.meta().resource_version.clone())
}

/// One workload patch, for its kind ([`kinds::visit`]).
struct PatchWorkload<'a> {
    client: kube::Client,
    id: &'a WorkloadId,
    params: &'a PatchParams,
    patch: &'a Patch<&'a serde_json::Value>,
}

impl<'a> Visit for PatchWorkload<'a> {
    type Out = BoxFuture<'a, Result<Option<String>, kube::Error>>;
    fn visit<K: Kind>(self) -> Self::Out {
        let PatchWorkload {
            client,
            id,
            params,
            patch,
        } = self;
        Box::pin(patch_rv::<K>(
            client,
            &id.namespace,
            &id.name,
            params,
            patch,
        ))
    }
}

/// The resourceVersion of an object read.
fn version(meta: Option<&ObjectMeta>) -> Option<&str> {
    meta?.resource_version.as_deref()
}

/// What the workload writes came to: the failed ones (id, one-line reason) and the ones
/// refused because the workload changed after the plan read it.
#[derive(Default)]
struct Written {
    failed: Vec<(WorkloadId, String)>,
    refused: Vec<(WorkloadId, kube::Error)>,
}

/// A cached workload without a resourceVersion: no write can be fenced, so none is sent;
/// reported as a conflict, to be read again.
fn unversioned(id: &WorkloadId) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code: 409,
        reason: "Conflict".into(),
        message: format!("{id} was read without a resourceVersion; reading it again"),
        ..Default::default()
    }))
}

/// A delete (or patch) of something already gone is done.
fn gone(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
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

/// An object a policy reads trust sources from: its data as bytes.
trait SourceObject:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
    fn bytes(self) -> BTreeMap<String, Vec<u8>>;
}

impl SourceObject for ConfigMap {
    fn bytes(self) -> BTreeMap<String, Vec<u8>> {
        let text = self.data.into_iter().flatten();
        let binary = self.binary_data.into_iter().flatten();
        text.map(|(k, v)| (k, v.into_bytes()))
            .chain(binary.map(|(k, v)| (k, v.0)))
            .collect()
    }
}

impl SourceObject for Secret {
    fn bytes(self) -> BTreeMap<String, Vec<u8>> {
        let data = self.data.into_iter().flatten();
        data.map(|(k, v)| (k, v.0)).collect()
    }
}
