//! The reconciler's wiring: caches (lean, label/field-scoped watches), triggers, the
//! controller loop. `plan` decides, `reconcile` reads and writes.

mod conditions;
mod errors;
mod objects;
mod plan;
mod reconcile;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

pub use crate::api::reasons::{READY, RECONCILING, STALLED, reason};
pub use errors::{Category, Error};

use crate::api::{EgressProxyPolicy, EgressProxyPolicyStatus};
use crate::credentials::{MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL};
use crate::discovery::{ClusterInputs, Overrides};
use crate::workloads::WorkloadId;
use objects::strip;

/// `reportingController` of the operator's Events.
pub const REPORTER: &str = "egress-proxy-operator";

/// The finalizer that lets the operator undo its changes when a policy is deleted.
pub const FINALIZER: &str = "egressproxy.io/cleanup";

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Label selector on Namespaces: the admin's opt-in. Empty: every namespace.
    pub namespace_selector: String,
    /// Explicit namespaces (a namespaced install). When set, the selector is not used and
    /// only these namespaces are watched; with exactly one, every watch is namespaced.
    pub namespaces: Vec<String>,
    /// Flags that win over discovery.
    pub overrides: Overrides,
    /// Host of the operator's own client URL (an API server address).
    pub api_host: Option<String>,
    /// The operator's `/etc/resolv.conf` when running in a Pod.
    pub resolv_conf: Option<String>,
    /// Policies reconciled at the same time.
    pub workers: u16,
    /// How often a settled policy is re-evaluated even if nothing it watches changed.
    pub resync: Duration,
    /// How long start-up waits for the cluster-scoped discovery caches before going on
    /// without them (their facts are then reported as not found).
    pub discovery_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace_selector: "egressproxy.io/enabled=true".into(),
            namespaces: Vec::new(),
            overrides: Overrides::default(),
            api_host: None,
            resolv_conf: None,
            workers: 16,
            resync: Duration::from_secs(600),
            discovery_wait: Duration::from_secs(15),
        }
    }
}

/// Errors that stop the operator.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("namespace selector {selector:?} is not valid: {source}")]
    Selector {
        selector: String,
        source: kube::Error,
    },
    #[error("reading EgressProxyPolicies (is the CRD installed?): {0}")]
    Crd(kube::Error),
}

/// Caches and clients shared by every reconcile.
pub struct Ctx {
    pub(crate) client: Client,
    pub(crate) settings: Settings,
    pub(crate) base_inputs: ClusterInputs,
    pub(crate) policies: Store<EgressProxyPolicy>,
    pub(crate) deployments: Store<Deployment>,
    pub(crate) statefulsets: Store<StatefulSet>,
    pub(crate) daemonsets: Store<DaemonSet>,
    /// Admitted namespaces (label-selected watch); unused with an explicit list.
    pub(crate) namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Managed Secrets and ConfigMaps only (label-scoped watches).
    pub(crate) secrets: Store<Secret>,
    pub(crate) config_maps: Store<ConfigMap>,
    pub(crate) nodes: Store<Node>,
    pub(crate) services: Store<Service>,
    pub(crate) slices: Store<EndpointSlice>,
    pub(crate) service_cidrs: Store<ServiceCIDR>,
    /// kube-system ConfigMaps discovery reads, one cache per name.
    pub(crate) system_config_maps: Vec<Store<ConfigMap>>,
    /// `reportingInstance` of the Events this operator publishes.
    pub(crate) instance: String,
    pub(crate) failures: Mutex<HashMap<(String, String), u32>>,
    pub(crate) recent: Recent,
}

/// What this operator wrote, remembered until its caches show the write: a reconcile that
/// runs in between must neither write the same thing again nor mint a new hash key.
/// Each entry holds the resourceVersions before and after the write.
#[derive(Default)]
pub(crate) struct Recent {
    secrets: Writes<(String, String), BTreeMap<String, ByteString>>,
    config_maps: Writes<(String, String), BTreeMap<String, String>>,
    workloads: Writes<WorkloadId, String>,
    statuses: Writes<(String, String), EgressProxyPolicyStatus>,
}

/// One remembered write: the resourceVersion the cache had before it, the one the server
/// returned, and what was written.
struct Written<V> {
    before: Option<String>,
    after: Option<String>,
    value: V,
}

type Writes<K, V> = Mutex<HashMap<K, Written<V>>>;

/// resourceVersions are opaque to clients, but every API server (and kube-sim) hands out
/// increasing integers; when both parse, a cached version below the written one is stale.
fn older(cached: Option<&String>, written: Option<&String>) -> bool {
    match (
        cached.and_then(|c| c.parse::<u64>().ok()),
        written.and_then(|w| w.parse::<u64>().ok()),
    ) {
        (Some(c), Some(w)) => c < w,
        _ => false,
    }
}

fn recall<K: Eq + std::hash::Hash, V: Clone>(
    map: &Writes<K, V>,
    key: &K,
    cached_rv: Option<&String>,
) -> Option<V> {
    let mut m = map.lock().ok()?;
    let w = m.get(key)?;
    if w.before.as_ref() == cached_rv || older(cached_rv, w.after.as_ref()) {
        return Some(w.value.clone());
    }
    m.remove(key);
    None
}

fn remember<K: Eq + std::hash::Hash, V>(
    map: &Writes<K, V>,
    key: K,
    before: Option<String>,
    after: Option<String>,
    value: V,
) {
    if let Ok(mut m) = map.lock() {
        m.insert(
            key,
            Written {
                before,
                after,
                value,
            },
        );
    }
}

impl Recent {
    /// The managed Secret's data: what was written last if the cache has not seen it yet.
    pub(crate) fn secret_data(
        &self,
        key: &(String, String),
        cached: Option<&Secret>,
    ) -> Option<BTreeMap<String, ByteString>> {
        let rv = cached.and_then(|s| s.metadata.resource_version.as_ref());
        recall(&self.secrets, key, rv).or_else(|| cached.and_then(|s| s.data.clone()))
    }

    pub(crate) fn wrote_secret(
        &self,
        key: (String, String),
        before: Option<String>,
        after: Option<String>,
        data: BTreeMap<String, ByteString>,
    ) {
        remember(&self.secrets, key, before, after, data);
    }

    /// The managed ConfigMap's data, the same way.
    pub(crate) fn config_map_data(
        &self,
        key: &(String, String),
        cached: Option<&ConfigMap>,
    ) -> Option<BTreeMap<String, String>> {
        let rv = cached.and_then(|s| s.metadata.resource_version.as_ref());
        recall(&self.config_maps, key, rv).or_else(|| cached.and_then(|s| s.data.clone()))
    }

    pub(crate) fn wrote_config_map(
        &self,
        key: (String, String),
        before: Option<String>,
        after: Option<String>,
        data: BTreeMap<String, String>,
    ) {
        remember(&self.config_maps, key, before, after, data);
    }

    /// Forgets the managed objects of a policy once they are deleted, so a cache that
    /// no longer has them is not mistaken for one that has not seen them yet.
    pub(crate) fn forget_managed(&self, key: &(String, String)) {
        if let Ok(mut m) = self.secrets.lock() {
            m.remove(key);
        }
        if let Ok(mut m) = self.config_maps.lock() {
            m.remove(key);
        }
    }

    /// What was just written to this workload (a config hash, or the cleanup marker), if the
    /// cache does not show it yet.
    pub(crate) fn workload(&self, id: &WorkloadId, cached_rv: Option<&String>) -> Option<String> {
        recall(&self.workloads, id, cached_rv)
    }

    pub(crate) fn wrote_workload(
        &self,
        id: WorkloadId,
        before: Option<String>,
        after: Option<String>,
        what: String,
    ) {
        remember(&self.workloads, id, before, after, what);
    }

    /// The policy's status as last written, if the cached policy predates that write.
    pub(crate) fn status(
        &self,
        key: &(String, String),
        cached_rv: Option<&String>,
    ) -> Option<EgressProxyPolicyStatus> {
        recall(&self.statuses, key, cached_rv)
    }

    pub(crate) fn wrote_status(
        &self,
        key: (String, String),
        before: Option<String>,
        after: Option<String>,
        status: EgressProxyPolicyStatus,
    ) {
        remember(&self.statuses, key, before, after, status);
    }
}

impl Ctx {
    /// Whether the admin admitted this namespace.
    pub(crate) fn admitted(&self, namespace: &str) -> bool {
        if self.settings.namespaces.is_empty() {
            self.namespaces.get(&ObjectRef::new(namespace)).is_some()
        } else {
            self.settings.namespaces.iter().any(|n| n == namespace)
        }
    }

    /// How namespaces are admitted, for messages.
    pub(crate) fn admission(&self) -> String {
        if self.settings.namespaces.is_empty() {
            format!("namespace selector {:?}", self.settings.namespace_selector)
        } else {
            format!("namespace list {:?}", self.settings.namespaces)
        }
    }

    /// Namespaces this operator may act in at all: the explicit list, or every namespace.
    fn in_scope(&self, namespace: &str) -> bool {
        self.settings.namespaces.is_empty()
            || self.settings.namespaces.iter().any(|n| n == namespace)
    }
}

type Trigger = mpsc::UnboundedSender<ObjectRef<EgressProxyPolicy>>;

/// The managed-object label selector.
fn managed_selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY}")
}

fn scoped<K>(client: &Client, settings: &Settings) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match settings.namespaces.as_slice() {
        [only] => Api::namespaced(client.clone(), only),
        _ => Api::all(client.clone()),
    }
}

/// Drives one cache in its own task; every change is mapped to the policies it concerns.
fn spawn_cache<K, M, I>(
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    map: M,
    trigger: Trigger,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    M: Fn(&K) -> I + Send + 'static,
    I: IntoIterator<Item = ObjectRef<EgressProxyPolicy>>,
{
    let kind = K::kind(&()).to_string();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream.default_backoff().reflect(writer).touched_objects());
        while let Some(item) = s.next().await {
            match item {
                Ok(o) => {
                    for r in map(&o) {
                        let _ = trigger.unbounded_send(r);
                    }
                }
                Err(e) => {
                    let error = errors::describe_watch(&e);
                    tracing::warn!(kind = %kind, %error, "watch failed; retrying")
                }
            }
        }
    });
}

/// Policies of one namespace.
fn policies_in(
    store: &Store<EgressProxyPolicy>,
    namespace: Option<String>,
) -> Vec<ObjectRef<EgressProxyPolicy>> {
    let Some(ns) = namespace else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Runs the operator until `shutdown` resolves.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    // Fail fast on a bad selector or a missing CRD instead of retrying forever.
    let lp = kube::api::ListParams::default().limit(1);
    scoped::<EgressProxyPolicy>(&client, &settings)
        .list_metadata(&lp)
        .await
        .map_err(RunError::Crd)?;
    if settings.namespaces.is_empty() {
        Api::<Namespace>::all(client.clone())
            .list_metadata(&lp.clone().labels(&settings.namespace_selector))
            .await
            .map_err(|source| RunError::Selector {
                selector: settings.namespace_selector.clone(),
                source,
            })?;
    }

    let (trigger, triggers) = mpsc::unbounded::<ObjectRef<EgressProxyPolicy>>();
    let (policies, policy_writer) = reflector::store::<EgressProxyPolicy>();
    let wc = watcher::Config::default().any_semantic();

    macro_rules! workload_cache {
        ($k:ty) => {{
            let (store, writer) = reflector::store::<$k>();
            let p = policies.clone();
            spawn_cache(
                watcher(scoped::<$k>(&client, &settings), wc.clone()).modify(strip),
                writer,
                move |o: &$k| policies_in(&p, o.namespace()),
                trigger.clone(),
            );
            store
        }};
    }
    let deployments = workload_cache!(Deployment);
    let statefulsets = workload_cache!(StatefulSet);
    let daemonsets = workload_cache!(DaemonSet);

    let (namespaces, ns_writer) = reflector::store::<PartialObjectMeta<Namespace>>();
    if settings.namespaces.is_empty() {
        let p = policies.clone();
        spawn_cache(
            watcher(
                Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
                wc.clone().labels(&settings.namespace_selector),
            )
            .modify(strip),
            ns_writer,
            move |n: &PartialObjectMeta<Namespace>| policies_in(&p, Some(n.name_any())),
            trigger.clone(),
        );
    }

    // Managed objects: label-scoped, mapped to their policy.
    let managed_wc = wc.clone().labels(&managed_selector());
    let (secrets, secret_writer) = reflector::store::<Secret>();
    spawn_cache(
        watcher(scoped::<Secret>(&client, &settings), managed_wc.clone()).modify(strip),
        secret_writer,
        move |s: &Secret| s.policy_ref(),
        trigger.clone(),
    );
    let (config_maps, cm_writer) = reflector::store::<ConfigMap>();
    spawn_cache(
        watcher(scoped::<ConfigMap>(&client, &settings), managed_wc).modify(strip),
        cm_writer,
        move |c: &ConfigMap| c.policy_ref(),
        trigger.clone(),
    );

    // Source Secrets: metadata only, never cached; a change wakes the policies using it.
    {
        let p = policies.clone();
        let api = scoped::<PartialObjectMeta<Secret>>(&client, &settings);
        let t = trigger.clone();
        tokio::spawn(async move {
            let mut s = std::pin::pin!(
                watcher(api, watcher::Config::default().any_semantic())
                    .default_backoff()
                    .touched_objects()
            );
            while let Some(item) = s.next().await {
                match item {
                    Ok(m) => {
                        for r in
                            policies_using(&p, &m.namespace().unwrap_or_default(), &m.name_any())
                        {
                            let _ = t.unbounded_send(r);
                        }
                    }
                    Err(e) => {
                        let error = errors::describe_watch(&e);
                        tracing::warn!(kind = "Secret", %error, "watch failed; retrying")
                    }
                }
            }
        });
    }

    // Discovery sources: any change that alters the facts re-evaluates every policy.
    let (changed, changes) = mpsc::unbounded::<()>();
    macro_rules! discovery_cache {
        ($k:ty, $api:expr, $cfg:expr, $modify:expr) => {{
            let (store, writer) = reflector::store::<$k>();
            let (t, _) = mpsc::unbounded::<ObjectRef<EgressProxyPolicy>>();
            let c = changed.clone();
            spawn_cache(
                watcher($api, $cfg).modify($modify),
                writer,
                move |_: &$k| {
                    let _ = c.unbounded_send(());
                    Vec::new()
                },
                t,
            );
            store
        }};
    }
    let nodes = discovery_cache!(
        Node,
        Api::<Node>::all(client.clone()),
        wc.clone(),
        objects::strip_node
    );
    let services = discovery_cache!(
        Service,
        Api::<Service>::namespaced(client.clone(), "default"),
        wc.clone().fields("metadata.name=kubernetes"),
        strip
    );
    let slices = discovery_cache!(
        EndpointSlice,
        Api::<EndpointSlice>::namespaced(client.clone(), "default"),
        wc.clone().labels("kubernetes.io/service-name=kubernetes"),
        strip
    );
    let service_cidrs = discovery_cache!(
        ServiceCIDR,
        Api::<ServiceCIDR>::all(client.clone()),
        wc.clone(),
        strip
    );
    // kubeadm-config, kubelet-config and coredns: one single-object watch (and cache) each.
    let system_config_maps: Vec<Store<ConfigMap>> = ["kubeadm-config", "kubelet-config", "coredns"]
        .iter()
        .map(|name| {
            discovery_cache!(
                ConfigMap,
                Api::<ConfigMap>::namespaced(client.clone(), "kube-system"),
                wc.clone().fields(&format!("metadata.name={name}")),
                strip
            )
        })
        .collect();
    drop(changed);

    let base_inputs = ClusterInputs {
        api_host: settings.api_host.clone(),
        resolv_conf: settings.resolv_conf.clone(),
        overrides: settings.overrides.clone(),
        ..Default::default()
    };
    let ctx = Arc::new(Ctx {
        instance: std::env::var("POD_NAME").unwrap_or_else(|_| REPORTER.into()),
        client: client.clone(),
        settings: settings.clone(),
        base_inputs,
        policies: policies.clone(),
        deployments,
        statefulsets,
        daemonsets,
        namespaces,
        secrets,
        config_maps,
        nodes,
        services,
        slices,
        service_cidrs,
        system_config_maps,
        failures: Mutex::default(),
        recent: Recent::default(),
    });

    // Start only once the caches hold the cluster, so the first reconcile never mistakes
    // an empty cache for an empty cluster.
    wait_ready(&ctx).await;
    let discovery_changes = watch_facts(ctx.clone(), changes);

    let policy_stream = watcher(scoped::<EgressProxyPolicy>(&client, &settings), wc)
        .modify(strip)
        .default_backoff()
        .reflect(policy_writer)
        .applied_objects();
    Controller::for_stream(policy_stream, policies)
        .with_config(ControllerConfig::default().concurrency(settings.workers))
        .reconcile_on(triggers)
        .reconcile_all_on(discovery_changes)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, action)) => tracing::debug!(policy = %obj, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
    Ok(())
}

async fn wait_ready(ctx: &Ctx) {
    let core = async {
        let _ = ctx.deployments.wait_until_ready().await;
        let _ = ctx.statefulsets.wait_until_ready().await;
        let _ = ctx.daemonsets.wait_until_ready().await;
        let _ = ctx.secrets.wait_until_ready().await;
        let _ = ctx.config_maps.wait_until_ready().await;
        if ctx.settings.namespaces.is_empty() {
            let _ = ctx.namespaces.wait_until_ready().await;
        }
    };
    core.await;
    let discovery = async {
        let _ = ctx.nodes.wait_until_ready().await;
        let _ = ctx.services.wait_until_ready().await;
        let _ = ctx.slices.wait_until_ready().await;
        let _ = ctx.service_cidrs.wait_until_ready().await;
        for s in &ctx.system_config_maps {
            let _ = s.wait_until_ready().await;
        }
    };
    if tokio::time::timeout(ctx.settings.discovery_wait, discovery)
        .await
        .is_err()
    {
        tracing::warn!(
            "some discovery sources could not be read in time (RBAC?); their facts are reported as not found"
        );
    }
}

/// Emits when the discovered cluster facts change (not on every Node heartbeat).
fn watch_facts(
    ctx: Arc<Ctx>,
    changes: mpsc::UnboundedReceiver<()>,
) -> impl Stream<Item = ()> + Send {
    let mut last = reconcile::cluster_inputs(&ctx);
    changes.ready_chunks(1024).filter_map(move |_| {
        let now = reconcile::cluster_inputs(&ctx);
        let changed = now != last;
        if changed {
            tracing::info!("cluster facts changed; re-evaluating every policy");
            last = now;
        }
        std::future::ready(changed.then_some(()))
    })
}

/// Objects that belong to one policy through the policy label.
trait OwnedByPolicy {
    fn policy_ref(&self) -> Option<ObjectRef<EgressProxyPolicy>>;
}

impl<K: Resource> OwnedByPolicy for K {
    fn policy_ref(&self) -> Option<ObjectRef<EgressProxyPolicy>> {
        let name = self.meta().labels.as_ref()?.get(POLICY_LABEL)?;
        let ns = self.meta().namespace.as_ref()?;
        Some(ObjectRef::new(name).within(ns))
    }
}

/// Policies whose credential slots name this Secret.
fn policies_using(
    store: &Store<EgressProxyPolicy>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<EgressProxyPolicy>> {
    store
        .state()
        .iter()
        .filter(|p| {
            let pns = p.namespace().unwrap_or_default();
            p.spec.proxy.credentials.iter().any(|c| {
                c.secret_ref.name == name
                    && c.secret_ref.namespace.as_deref().unwrap_or(&pns) == namespace
            })
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_remembered_until_the_cache_reaches_it() {
        let w: Writes<&str, u32> = Mutex::default();
        let rv = |s: &str| Some(s.to_owned());
        remember(&w, "k", rv("5"), rv("9"), 1);
        assert_eq!(
            recall(&w, &"k", rv("5").as_ref()),
            Some(1),
            "cache still before the write"
        );
        assert_eq!(
            recall(&w, &"k", rv("7").as_ref()),
            Some(1),
            "an in-between version"
        );
        assert_eq!(
            recall(&w, &"k", rv("9").as_ref()),
            None,
            "the cache shows the write"
        );
        assert_eq!(
            recall(&w, &"k", rv("5").as_ref()),
            None,
            "and the entry is gone"
        );
        // Versions that are not numbers: only the exact version before the write is stale.
        remember(&w, "k", rv("a"), rv("c"), 2);
        assert_eq!(recall(&w, &"k", rv("a").as_ref()), Some(2));
        assert_eq!(recall(&w, &"k", rv("b").as_ref()), None);
        // An object the cache did not have yet.
        remember(&w, "new", None, rv("3"), 3);
        assert_eq!(recall(&w, &"new", None), Some(3));
    }
}
