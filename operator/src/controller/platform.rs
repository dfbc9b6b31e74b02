//! Discovery sources of distributions and network plugins: the watches each registered
//! source (`discovery/platforms/`) describes, started when the source is switched on and its
//! objects are served and readable, and their caches read back through the source.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::task::JoinSet;

use super::watches::{by_name, config, ping, touched};
use crate::discovery::platforms::{self, Object, Select, When};
use crate::discovery::{PlatformInputs, PlatformSource};
use crate::metrics::Metrics;

/// The caches of the platform sources that are switched on: per source, per object it
/// reads, `None` where that object is not watched, else one cache per watch.
#[derive(Clone, Default)]
pub(crate) struct PlatformCaches {
    sources: Vec<(PlatformSource, Vec<ObjectCaches>)>,
}

/// The caches of one object a source reads (one per watch), or `None` where it is not read.
type ObjectCaches = Option<Vec<Store<DynamicObject>>>;

/// Whether the cluster serves `o`'s resource, asked of API discovery (readable by every
/// authenticated user): a list would answer 403 before 404 where RBAC names the objects, as
/// for OpenShift's configs. A discovery error counts as not served, and says so.
async fn served(client: &Client, o: &Object) -> bool {
    let group_version = o.api_resource().api_version;
    match client.list_api_group_resources(&group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == o.resource),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            let error = super::errors::describe(&e);
            tracing::info!(%group_version, %error, "discovery source not read: API discovery failed");
            false
        }
    }
}

/// Whether the operator may read the object `o` names: where the chart could not tell that
/// a namespace exists (OpenShift's `openshift-dns` under `helm template`), its Role may be
/// missing, and a watch would then be refused for ever.
async fn readable(client: &Client, o: &Object) -> bool {
    let (Some(ns), Select::Name(name)) = (o.namespace, &o.select) else {
        return true;
    };
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &o.api_resource());
    match api.get_opt(name).await {
        Ok(_) => true,
        Err(e) => {
            let error = super::errors::describe(&e);
            tracing::info!(object = %format!("{} {ns}/{name}", o.kind), %error, "discovery source not read");
            false
        }
    }
}

/// The pieces [`start`] needs from the caller.
pub(crate) struct Start<'a> {
    pub tasks: &'a mut JoinSet<()>,
    pub metrics: &'a Arc<Metrics>,
    pub client: &'a Client,
    pub changed: &'a [mpsc::UnboundedSender<()>],
    pub disabled: &'a BTreeSet<PlatformSource>,
    /// False for a namespaced install: cluster-scoped objects are not read.
    pub cluster_wide: bool,
}

/// Starts the caches of each registered source that is switched on (and, where it requires
/// one, whose resource is served). A CRD installed later is read after the operator restarts.
pub(crate) async fn start(mut s: Start<'_>) -> PlatformCaches {
    let mut out = PlatformCaches::default();
    for id in platforms::all().filter(|id| !s.disabled.contains(id)) {
        let source = platforms::source(id);
        if let Some(gate) = source.requires()
            && !served(s.client, gate).await
        {
            continue;
        }
        let mut objects = Vec::new();
        for o in source.objects() {
            objects.push(watch(&mut s, o).await);
        }
        out.sources.push((id, objects));
    }
    out
}

/// The caches of one object, or `None` where it is not read.
async fn watch(s: &mut Start<'_>, o: &'static Object) -> ObjectCaches {
    // A namespaced install has no right to cluster-scoped objects: not read.
    if o.namespace.is_none() && !s.cluster_wide {
        return None;
    }
    let ok = match o.when {
        When::Always => true,
        When::Served => served(s.client, o).await,
        When::Readable => readable(s.client, o).await,
    };
    if !ok {
        return None;
    }
    let ar = o.api_resource();
    let api = match o.namespace {
        Some(ns) => Api::<DynamicObject>::namespaced_with(s.client.clone(), ns, &ar),
        None => Api::<DynamicObject>::all_with(s.client.clone(), &ar),
    };
    let configs = match &o.select {
        Select::All => vec![config()],
        Select::Name(name) => vec![by_name(name)],
        Select::Labels(labels) => labels.iter().map(|l| config().labels(l)).collect(),
    };
    let caches = configs
        .into_iter()
        .map(|cfg| cache(s, o, watcher(api.clone(), cfg)))
        .collect();
    Some(caches)
}

/// Drives one reflector of dynamic objects in `tasks` (as `watches::cache` does typed ones):
/// each change is recorded, announced on `changed`, and a watch error counted and retried.
fn cache(
    s: &mut Start<'_>,
    o: &'static Object,
    events: impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>
    + Send
    + 'static,
) -> Store<DynamicObject> {
    let writer = reflector::store::Writer::new(o.api_resource());
    let store = writer.as_reader();
    let keep = move |d: &mut DynamicObject| {
        platforms::strip_meta(d);
        (o.keep)(d)
    };
    let stream = events.modify(keep).default_backoff().reflect(writer);
    let (metrics, mut changed) = (s.metrics.clone(), ping(s.changed));
    s.tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(e) => {
                    if let (Some((d, deleted)), Some(a)) = (touched(&e), metrics.activity()) {
                        let (ns, name) =
                            (d.metadata.namespace.as_deref(), d.metadata.name.as_deref());
                        let rv = d.metadata.resource_version.as_deref();
                        a.applied(
                            o.kind,
                            ns.unwrap_or_default(),
                            name.unwrap_or_default(),
                            rv,
                            deleted,
                        );
                    }
                    changed(&e)
                }
                Err(e) => {
                    metrics.watch_restarted(o.kind);
                    let error = super::errors::describe_watch(&e);
                    tracing::warn!(kind = %o.kind, %error, "watch failed; retrying");
                }
            }
        }
    });
    store
}

impl PlatformCaches {
    /// Every store, for waiting until each has listed once.
    pub(crate) async fn wait_ready(&self) {
        for (_, objects) in &self.sources {
            for s in objects.iter().flatten().flatten() {
                let _ = s.wait_until_ready().await;
            }
        }
    }

    /// What the caches hold, as discovery inputs: each source reads its own objects.
    pub(crate) fn inputs(&self) -> PlatformInputs {
        let mut out = PlatformInputs::default();
        for (id, objects) in &self.sources {
            let watched: Vec<platforms::Watched> = objects
                .iter()
                .map(|stores| stores.as_ref().map(|s| merged(s)))
                .collect();
            platforms::source(*id).read(&watched, &mut out);
        }
        out
    }
}

/// The objects of every watch of one object, each once (a Pod may carry two watched labels),
/// sorted by namespace and name.
fn merged(stores: &[Store<DynamicObject>]) -> Vec<Arc<DynamicObject>> {
    let mut all: Vec<Arc<DynamicObject>> = stores.iter().flat_map(|s| s.state()).collect();
    let key = |o: &Arc<DynamicObject>| (o.metadata.namespace.clone(), o.metadata.name.clone());
    all.sort_by_key(key);
    all.dedup_by_key(|o| key(o));
    all
}
