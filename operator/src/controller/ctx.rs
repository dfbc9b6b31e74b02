//! What every reconcile of one controller reads: the shared context ([`Ctx`]) with its
//! caches, the wiring that starts a controller's caches, and the cluster-scoped discovery
//! caches. The watch toolkit they are built with is in `watches.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::channel::mpsc;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::task::JoinSet;

use super::Settings;
use super::cached::Cached;
use super::objects::{self, strip};
use super::platform::{self, PlatformCaches};
use super::recent::Recent;
use super::tenancy::Tenancy;
use super::watches::{
    Relist, Trigger, by_name, cache, config, drive, log_error, ping, policies_in, seen, touched,
    wake,
};
use super::workload_caches::{WorkloadCache, WorkloadCaches};
use super::workload_store::{self, WorkloadStore};
use crate::api::EgressProxyPolicy;
use crate::discovery::{ClusterInputs, PlatformSource};
use crate::metrics::Metrics;
use crate::workloads::kinds::{self, Kind, Visit};

/// Caches and clients shared by every reconcile of one controller.
pub struct Ctx {
    pub(crate) client: Client,
    pub(crate) settings: Settings,
    pub(crate) base_inputs: ClusterInputs,
    pub(crate) policies: Store<EgressProxyPolicy>,
    /// One cache per workload kind.
    pub(crate) workloads: WorkloadCaches,
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
        self.workloads
            .wait_ready(self.settings.discovery_wait)
            .await;
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
    fn workloads<K: Kind>(&mut self) -> WorkloadStore<K> {
        let (p, t, recent) = (
            self.policies.clone(),
            self.trigger.clone(),
            self.recent.clone(),
        );
        let events = watcher(
            scoped::<Cached<K>>(self.client, self.scope),
            workload_config(),
        );
        let (store, mut writer) = workload_store::store::<K>();
        let mut relist = Relist::default();
        let apply = move |e: &watcher::Event<Cached<K>>| {
            writer.apply(e);
            if let Some(since) = relist.done(e) {
                recent.relisted_workloads(K::VARIANT, since);
            }
            if let Some((o, deleted)) = touched(e) {
                if let Some(id) = objects::id_of(o, K::VARIANT) {
                    recent.saw_workload(&id, seen(o, deleted));
                }
                wake(&t, policies_in(&p, &o.namespace().unwrap_or_default()));
            }
        };
        drive((self.tasks, self.metrics), events, apply, log_error);
        store
    }

    /// One cache per workload kind.
    pub fn workload_caches(&mut self) -> WorkloadCaches {
        struct Start<'w, 'a>(&'w mut Wiring<'a>);
        impl Visit for Start<'_, '_> {
            type Out = Box<dyn WorkloadCache>;
            fn visit<K: Kind>(self) -> Box<dyn WorkloadCache> {
                Box::new(self.0.workloads::<K>())
            }
        }
        let mut caches = BTreeMap::new();
        for kind in kinds::ALL {
            caches.insert(kind, kinds::visit(kind, Start(self)));
        }
        WorkloadCaches::new(caches)
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
                super::cluster::strip_node,
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
