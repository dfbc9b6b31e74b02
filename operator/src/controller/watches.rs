//! The caches one controller reads and the triggers that wake its policies.
//!
//! Each cache is a kube-runtime reflector driven by its own task in the caller's `JoinSet`
//! (so the caches fill before the first reconcile, and stop with `run`), and every change it
//! applies, deletions included, is mapped to the policies it concerns. Hand-written rather
//! than kube-runtime's shared reflectors: in kube 5 those dispatch applied objects only, and
//! a Namespace leaving the opt-in selector, a deleted managed Secret or a removed Node must
//! wake the policies at once.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::{AbortHandle, JoinSet};

use super::cached::Cached;
use super::objects::{self, Workload, strip};
use super::platform::{self, PlatformCaches};
use super::recent::{Recent, Seen};
use super::tenancy::Tenancy;
use super::{Settings, errors};
use crate::api::EgressProxyPolicy;
use crate::credentials::{MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL};
use crate::discovery::{ClusterInputs, PlatformSource};
use crate::metrics::Metrics;

/// Sends a policy to the controller's queue.
pub(super) type Trigger = mpsc::UnboundedSender<ObjectRef<EgressProxyPolicy>>;

/// One controller's policies and its queue.
pub(super) type Route = (Store<EgressProxyPolicy>, Trigger);

/// Caches and clients shared by every reconcile of one controller.
pub struct Ctx {
    pub(crate) client: Client,
    pub(crate) settings: Settings,
    pub(crate) base_inputs: ClusterInputs,
    pub(crate) policies: Store<EgressProxyPolicy>,
    pub(crate) deployments: Store<Cached<Deployment>>,
    pub(crate) statefulsets: Store<Cached<StatefulSet>>,
    pub(crate) daemonsets: Store<Cached<DaemonSet>>,
    pub(crate) cronjobs: Store<Cached<CronJob>>,
    /// Admitted namespaces (label-selected watch); unused with an explicit list.
    pub(crate) namespaces: Option<Store<PartialObjectMeta<Namespace>>>,
    /// The managed Secrets and ConfigMaps of each namespace, and source Secret wake-ups.
    pub(crate) tenancy: Arc<Tenancy>,
    pub(crate) discovery: Discovery,
    pub(crate) recent: Arc<Recent>,
}

/// The cluster-scoped caches discovery reads, shared by every controller.
#[derive(Clone)]
pub(crate) struct Discovery {
    pub(crate) nodes: Store<Node>,
    pub(crate) services: Store<Service>,
    pub(crate) slices: Store<EndpointSlice>,
    pub(crate) service_cidrs: Store<ServiceCIDR>,
    /// kube-system ConfigMaps discovery reads, one single-object cache per name.
    pub(crate) config_maps: Vec<Store<ConfigMap>>,
    /// Distributions' and network plugins' sources.
    pub(crate) platform: PlatformCaches,
}

impl Ctx {
    /// Whether the admin admitted this namespace.
    pub(crate) fn admitted(&self, namespace: &str) -> bool {
        match &self.namespaces {
            Some(store) => store.get(&ObjectRef::new(namespace)).is_some(),
            None => self.settings.namespaces.iter().any(|n| n == namespace),
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

    /// Waits until the caches hold the cluster, so the first reconcile never mistakes an
    /// empty cache for an empty cluster. Discovery caches get `discovery_wait`: without them
    /// (RBAC) their facts are reported as not found.
    pub(crate) async fn wait_ready(&self) {
        let _ = self.deployments.wait_until_ready().await;
        let _ = self.statefulsets.wait_until_ready().await;
        let _ = self.daemonsets.wait_until_ready().await;
        // CronJobs came later: a namespaced install whose Roles predate them must still start.
        let cronjobs = self.cronjobs.wait_until_ready();
        if tokio::time::timeout(self.settings.discovery_wait, cronjobs)
            .await
            .is_err()
        {
            tracing::warn!(
                "CronJobs could not be listed in time (RBAC: batch cronjobs get, list, watch, patch?); policies change no CronJob until they can"
            );
        }
        if let Some(ns) = &self.namespaces {
            let _ = ns.wait_until_ready().await;
        }
        let d = &self.discovery;
        let discovery = async {
            let _ = d.nodes.wait_until_ready().await;
            let _ = d.services.wait_until_ready().await;
            let _ = d.slices.wait_until_ready().await;
            let _ = d.service_cidrs.wait_until_ready().await;
            for s in &d.config_maps {
                let _ = s.wait_until_ready().await;
            }
            d.platform.wait_ready().await;
        };
        if tokio::time::timeout(self.settings.discovery_wait, discovery)
            .await
            .is_err()
        {
            tracing::warn!(
                "some discovery sources could not be read in time (RBAC?); their facts are reported as not found"
            );
        }
    }
}

/// A watch config that tolerates a lagging API server cache.
pub(super) fn config() -> watcher::Config {
    watcher::Config::default().any_semantic()
}

/// Workloads are listed in pages of this many: a page of real Deployments is about 1 MB of
/// JSON, read whole before its objects are made lean, and what a peak takes the allocator
/// keeps.
const WORKLOAD_PAGE: u32 = 100;

/// The workload caches' config: paged lists. A list at any resourceVersion is served from the
/// API server's watch cache, which ignores `limit`: 10,000 workloads would be one body of
/// 100 MB or more.
fn workload_config() -> watcher::Config {
    watcher::Config::default().page_size(WORKLOAD_PAGE)
}

/// Drives one reflector in `tasks`; `on_event` sees every watch event once the cache has
/// applied it.
pub(super) fn cache<K>(
    tasks: &mut JoinSet<()>,
    metrics: &Arc<Metrics>,
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    modify: fn(&mut K),
    on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let on_error = |kind: &str, e: &watcher::Error| {
        let error = errors::describe_watch(e);
        tracing::warn!(kind = %kind, %error, "watch failed; retrying");
    };
    cache_with((tasks, metrics), events, modify, on_event, on_error).0
}

/// [`cache`] with a handler for watch errors (before the retry); also returns the task's
/// abort handle. Every watch error is counted as a restart.
pub(super) fn cache_with<K>(
    (tasks, metrics): (&mut JoinSet<()>, &Arc<Metrics>),
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    modify: fn(&mut K),
    mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
    mut on_error: impl FnMut(&str, &watcher::Error) + Send + 'static,
) -> (Store<K>, AbortHandle)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let kind = K::kind(&()).to_string();
    let stream = events.modify(modify).default_backoff().reflect(writer);
    let metrics = metrics.clone();
    let handle = tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(e) => {
                    if let Some((o, deleted)) = touched(&e) {
                        metrics.applied(o, deleted);
                    }
                    on_event(&e)
                }
                Err(e) => {
                    metrics.watch_restarted(&kind);
                    on_error(&kind, &e)
                }
            }
        }
    });
    (store, handle)
}

/// The objects an event touches, with whether they were deleted.
pub(super) fn touched<K>(e: &watcher::Event<K>) -> Option<(&K, bool)> {
    match e {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some((o, false)),
        watcher::Event::Delete(o) => Some((o, true)),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

pub(super) fn key_of<K: Resource>(o: &K) -> (String, String) {
    (o.namespace().unwrap_or_default(), o.name_any())
}

/// When the list behind a re-list started: set at `Init`, handed out at `InitDone`.
#[derive(Default)]
pub(super) struct Relist(Option<Instant>);

impl Relist {
    /// The start of the list that `e` completes, if it completes one.
    pub(super) fn done<K>(&mut self, e: &watcher::Event<K>) -> Option<Instant> {
        match e {
            // The watcher sends its LIST after it hands out `Init`.
            watcher::Event::Init => {
                self.0 = Some(Instant::now());
                None
            }
            watcher::Event::InitDone => self.0.take(),
            _ => None,
        }
    }
}

pub(super) fn seen<K: Resource>(o: &K, deleted: bool) -> Seen<'_> {
    if deleted {
        Seen::Deleted
    } else {
        Seen::Applied(o.meta().resource_version.as_ref())
    }
}

/// The namespaced API of `K` in this controller's scope.
fn scoped<K>(client: &Client, scope: &Option<String>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Everything one controller needs besides its policy watch.
pub(super) struct Wiring<'a> {
    pub tasks: &'a mut JoinSet<()>,
    pub client: &'a Client,
    pub scope: &'a Option<String>,
    pub trigger: &'a Trigger,
    pub recent: &'a Arc<Recent>,
    pub policies: &'a Store<EgressProxyPolicy>,
    pub metrics: &'a Arc<Metrics>,
}

impl Wiring<'_> {
    /// A workload cache; a change wakes the policies of its namespace.
    pub fn workloads<K>(&mut self) -> Store<K>
    where
        K: Workload
            + Resource<Scope = NamespaceResourceScope>
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let (p, t, recent) = (
            self.policies.clone(),
            self.trigger.clone(),
            self.recent.clone(),
        );
        let events = watcher(scoped::<K>(self.client, self.scope), workload_config());
        let mut relist = Relist::default();
        cache(self.tasks, self.metrics, events, K::lean, move |e| {
            if let Some(since) = relist.done(e) {
                recent.relisted_workloads(K::KIND, since);
            }
            if let Some((o, deleted)) = touched(e) {
                if let Some(id) = objects::id_of(o, K::KIND) {
                    recent.saw_workload(&id, seen(o, deleted));
                }
                wake(&t, policies_in(&p, &o.namespace().unwrap_or_default()));
            }
        })
    }

    /// The admitted Namespaces (label-selected); entering or leaving wakes their policies.
    pub fn namespaces(&mut self, selector: &str) -> Store<PartialObjectMeta<Namespace>> {
        let (p, t) = (self.policies.clone(), self.trigger.clone());
        let api = Api::<PartialObjectMeta<Namespace>>::all(self.client.clone());
        let events = watcher(api, config().labels(selector));
        cache(self.tasks, self.metrics, events, strip, move |e| {
            if let Some((n, _)) = touched(e) {
                wake(&t, policies_in(&p, &n.name_any()));
            }
        })
    }
}

/// An empty cache that is ready at once: for what a namespaced install does not read.
pub(super) fn not_read<K>() -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, mut writer) = reflector::store::<K>();
    writer.apply_watcher_event(&watcher::Event::InitDone);
    store
}

/// Starts the discovery caches; every change is announced on each of `changed` (one per
/// controller), which compares the facts before waking anything. Without `cluster_wide` (a
/// namespaced install, whose Roles hold in its namespaces only) no cluster-scoped object is
/// watched: Nodes and ServiceCIDRs stay empty, and discovery says they were not read.
pub(super) async fn discovery(
    tasks: &mut JoinSet<()>,
    metrics: &Arc<Metrics>,
    client: &Client,
    changed: &[mpsc::UnboundedSender<()>],
    (disabled, cluster_wide): (&BTreeSet<PlatformSource>, bool),
) -> Discovery {
    let platform = platform::start(platform::Start {
        tasks,
        metrics,
        client,
        changed,
        disabled,
        cluster_wide,
    })
    .await;
    if !cluster_wide {
        tracing::info!(
            "namespaced install: Nodes, ServiceCIDRs and the platforms' cluster configs are not read"
        );
    }
    let c = client.clone();
    let kubernetes = Api::<Service>::namespaced(c.clone(), "default");
    let slices = Api::<EndpointSlice>::namespaced(c.clone(), "default");
    let slice_config = config().labels("kubernetes.io/service-name=kubernetes");
    let kube_system = Api::<ConfigMap>::namespaced(c.clone(), "kube-system");
    Discovery {
        nodes: match cluster_wide {
            true => cache(
                tasks,
                metrics,
                watcher(Api::<Node>::all(c.clone()), config()),
                objects::strip_node,
                ping(changed),
            ),
            false => not_read(),
        },
        services: cache(
            tasks,
            metrics,
            watcher(kubernetes, by_name("kubernetes")),
            strip,
            ping(changed),
        ),
        slices: cache(
            tasks,
            metrics,
            watcher(slices, slice_config),
            strip,
            ping(changed),
        ),
        service_cidrs: match cluster_wide {
            true => cache(
                tasks,
                metrics,
                watcher(Api::<ServiceCIDR>::all(c), config()),
                strip,
                ping(changed),
            ),
            false => not_read(),
        },
        config_maps: ["kubeadm-config", "kubelet-config", "coredns"]
            .iter()
            .map(|n| {
                let events = watcher(kube_system.clone(), by_name(n));
                cache(tasks, metrics, events, strip, ping(changed))
            })
            .collect(),
        platform,
    }
}

/// Announces a discovery change to every controller.
pub(super) fn ping<E>(changed: &[mpsc::UnboundedSender<()>]) -> impl FnMut(&E) + Send + 'static {
    let changed = changed.to_vec();
    move |_| {
        for c in &changed {
            let _ = c.unbounded_send(());
        }
    }
}

/// A watch config for one object, by name.
pub(super) fn by_name(name: &str) -> watcher::Config {
    config().fields(&format!("metadata.name={name}"))
}

/// The managed-object watch config (label-scoped).
pub(super) fn managed() -> watcher::Config {
    config().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
}

pub(super) fn wake(
    trigger: &Trigger,
    policies: impl IntoIterator<Item = ObjectRef<EgressProxyPolicy>>,
) {
    for p in policies {
        let _ = trigger.unbounded_send(p);
    }
}

/// Policies of one namespace.
pub(super) fn policies_in(
    store: &Store<EgressProxyPolicy>,
    ns: &str,
) -> Vec<ObjectRef<EgressProxyPolicy>> {
    store
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(ns))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// The policy a managed object belongs to, by its policy label.
pub(super) fn policy_of<K: Resource>(o: &K) -> Option<ObjectRef<EgressProxyPolicy>> {
    let name = o.meta().labels.as_ref()?.get(POLICY_LABEL)?;
    let ns = o.meta().namespace.as_ref()?;
    Some(ObjectRef::new(name).within(ns))
}

/// Policies whose credential slots name this Secret (`namespace`, `name`).
pub(super) fn policies_using(
    store: &Store<EgressProxyPolicy>,
    source: &Source,
) -> Vec<ObjectRef<EgressProxyPolicy>> {
    store
        .state()
        .iter()
        .filter(|p| sources_of(p).contains(source))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// The kind of an object a policy reads its inputs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SourceKind {
    Secret,
    ConfigMap,
}

/// `(kind, namespace, name)` of a source object.
pub(crate) type Source = (SourceKind, String, String);

/// The objects a policy reads: its credential Secrets and its trust sources.
pub(super) fn sources_of(p: &EgressProxyPolicy) -> Vec<Source> {
    let pns = p.namespace().unwrap_or_default();
    let at = |ns: &Option<String>| ns.clone().unwrap_or_else(|| pns.clone());
    let mut out: Vec<Source> = p
        .spec
        .proxy
        .credentials
        .iter()
        .map(|c| {
            (
                SourceKind::Secret,
                at(&c.secret_ref.namespace),
                c.secret_ref.name.clone(),
            )
        })
        .collect();
    for s in p.spec.trust.iter().flat_map(|t| &t.sources) {
        if let Some(r) = &s.config_map {
            out.push((SourceKind::ConfigMap, at(&r.namespace), r.name.clone()));
        }
        if let Some(r) = &s.secret {
            out.push((SourceKind::Secret, at(&r.namespace), r.name.clone()));
        }
    }
    out
}
