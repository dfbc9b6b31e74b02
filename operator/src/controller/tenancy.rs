//! Caches that follow the policies rather than the cluster, so that the operator needs no
//! cluster-wide Secret or ConfigMap access (RBAC cannot limit a list or watch to metadata):
//!
//! - the managed Secrets and ConfigMaps of each namespace that has a policy: label-scoped
//!   watches in that namespace, allowed by the tenant role its admin bound there;
//! - each source Secret a policy reads: a watch of that one Secret by name, allowed by its
//!   owner's grant (a Role with `resourceNames`).
//!
//! A reconcile starts what it needs on first use; [`Tenancy::sweep`] stops what no policy
//! needs any more. A watch the API server refuses (403) is remembered as a denial, and a
//! change of access wakes the policies it concerns.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::task::{AbortHandle, JoinSet};

use super::errors;
use super::objects::strip;
use super::recent::Recent;
use super::watches::{
    self, Relist, Route, Source, SourceKind, cache_with, key_of, policies_using, policy_of, seen,
    touched, wake,
};
use crate::metrics::Metrics;

/// `(namespace, name)` of a managed object.
type Key = (String, String);

/// The last refusal of one watch: set on a 403, cleared by the next event.
#[derive(Default)]
struct Denial(Mutex<Option<String>>);

impl Denial {
    /// Records `why` (or clears it); true when that changes whether access is denied.
    fn set(&self, why: Option<String>) -> bool {
        let Ok(mut d) = self.0.lock() else {
            return false;
        };
        let changed = d.is_some() != why.is_some();
        *d = why;
        changed
    }

    fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|d| d.clone())
    }
}

/// The managed-object caches of one namespace.
#[derive(Clone)]
pub(crate) struct NamespaceCaches {
    pub(crate) secrets: Store<Secret>,
    pub(crate) config_maps: Store<ConfigMap>,
    denials: [Arc<Denial>; 2],
}

impl NamespaceCaches {
    /// Why the API server refuses the operator this namespace's managed objects, if it does.
    pub(crate) fn denied(&self) -> Option<String> {
        self.denials.iter().find_map(|d| d.get())
    }

    /// Waits up to `limit` for both caches to hold the namespace; false if they do not, or
    /// as soon as access is denied.
    pub(crate) async fn ready_within(&self, limit: Duration) -> bool {
        let both = async {
            let _ = self.secrets.wait_until_ready().await;
            let _ = self.config_maps.wait_until_ready().await;
        };
        let refused = async {
            // A refused cache never fills; its denial is set by the watch task.
            while self.denied().is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            r = tokio::time::timeout(limit, both) => r.is_ok(),
            _ = refused => false,
        }
    }
}

/// The caches that follow the policies, shared by every controller of one run.
pub(crate) struct Tenancy {
    client: Client,
    recent: Arc<Recent>,
    /// Every controller's policies and queue: a change wakes whichever holds the policy.
    routes: Vec<Route>,
    /// How often a source Secret's watch is re-established, so that a withdrawn grant
    /// (which ends no watch) is noticed.
    source_recheck: Duration,
    namespaces: Mutex<HashMap<String, (NamespaceCaches, [AbortHandle; 2])>>,
    sources: Mutex<HashMap<Source, AbortHandle>>,
    tasks: Mutex<JoinSet<()>>,
    metrics: Arc<Metrics>,
}

impl Tenancy {
    pub(crate) fn new(
        client: Client,
        recent: Arc<Recent>,
        routes: Vec<Route>,
        source_recheck: Duration,
        metrics: Arc<Metrics>,
    ) -> Tenancy {
        Tenancy {
            client,
            recent,
            routes,
            source_recheck,
            namespaces: Default::default(),
            sources: Default::default(),
            tasks: Default::default(),
            metrics,
        }
    }

    /// The managed-object caches of `ns`, started on first use.
    pub(crate) fn managed(&self, ns: &str) -> NamespaceCaches {
        let mut namespaces = self.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((m, _)) = namespaces.get(ns) {
            return m.clone();
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let denials = [Arc::new(Denial::default()), Arc::new(Denial::default())];
        let (secrets, s) = self.managed_cache::<Secret>(&mut tasks, ns, &denials[0]);
        let (config_maps, c) = self.managed_cache::<ConfigMap>(&mut tasks, ns, &denials[1]);
        let m = NamespaceCaches {
            secrets,
            config_maps,
            denials,
        };
        namespaces.insert(ns.to_owned(), (m.clone(), [s, c]));
        m
    }

    /// One label-scoped cache of managed objects in `ns`; a change wakes the policy an
    /// object belongs to, a change of access every policy of the namespace.
    fn managed_cache<K: Remembered>(
        &self,
        tasks: &mut JoinSet<()>,
        ns: &str,
        denial: &Arc<Denial>,
    ) -> (Store<K>, AbortHandle) {
        let api = Api::<K>::namespaced(self.client.clone(), ns);
        let events = watcher::watcher(api, watches::managed());
        let (recent, routes) = (self.recent.clone(), self.routes.clone());
        let (granted, refused) = (denial.clone(), denial.clone());
        let (routes_e, ns_e) = (routes.clone(), ns.to_owned());
        let mut relist = Relist::default();
        let on_event = move |e: &watcher::Event<K>| {
            // `Init` comes before the LIST, also before one that will be refused: only what
            // follows it proves access.
            if !matches!(e, watcher::Event::Init) && granted.set(None) {
                wake_namespace(&routes_e, &ns_e);
            }
            if let Some(since) = relist.done(e) {
                K::relisted(&recent, &ns_e, since);
            }
            if let Some((o, deleted)) = touched(e) {
                K::saw(&recent, &key_of(o), seen(o, deleted));
                for (_, t) in &routes_e {
                    wake(t, policy_of(o));
                }
            }
        };
        let ns = ns.to_owned();
        let on_error = move |kind: &str, e: &watcher::Error| {
            let error = errors::describe_watch(e);
            if !errors::watch_forbidden(e) {
                tracing::warn!(%kind, namespace = %ns, %error, "watch failed; retrying");
            } else if refused.set(Some(error.clone())) {
                tracing::info!(%kind, namespace = %ns, %error, "not allowed in this namespace");
                wake_namespace(&routes, &ns);
            }
        };
        cache_with((tasks, &self.metrics), events, K::keep, on_event, on_error)
    }

    /// Watches the source object `ns/name` of `kind` (metadata only, by name) unless it
    /// already is: a change, or a refusal, wakes the policies that read it.
    pub(crate) fn watch_source(&self, kind: SourceKind, ns: &str, name: &str) {
        let key: Source = (kind, ns.to_owned(), name.to_owned());
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if sources.contains_key(&key) {
            return;
        }
        let handle = match kind {
            SourceKind::Secret => self.source_cache::<Secret>(key.clone()),
            SourceKind::ConfigMap => self.source_cache::<ConfigMap>(key.clone()),
        };
        sources.insert(key, handle);
    }

    /// The by-name metadata cache of one source object.
    fn source_cache<K: Remembered>(&self, key: Source) -> AbortHandle {
        let (kind, ns, name) = &key;
        let api = Api::<PartialObjectMeta<K>>::namespaced(self.client.clone(), ns);
        let config = watches::by_name(name).timeout(self.source_recheck.as_secs().max(1) as u32);
        let events = watcher::watcher(api, config);
        let (routes, routes_e) = (self.routes.clone(), self.routes.clone());
        let denial = Arc::new(Denial::default());
        let granted = denial.clone();
        let kind = *kind;
        let on_event = move |e: &watcher::Event<PartialObjectMeta<K>>| {
            if !matches!(e, watcher::Event::Init) {
                granted.set(None);
            }
            if let Some((m, _)) = touched(e) {
                let (ns, name) = key_of(m);
                wake_users(&routes_e, &(kind, ns, name));
            }
        };
        let on_error = move |kind: &str, e: &watcher::Error| {
            if errors::watch_forbidden(e) {
                // Refused: a withdrawn grant. The users re-read it and revoke.
                if denial.set(Some(errors::describe_watch(e))) {
                    wake_users(&routes, &key);
                }
            } else {
                let error = errors::describe_watch(e);
                tracing::warn!(%kind, %error, "watch failed; retrying");
            }
        };
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let (_, handle) = cache_with(
            (&mut tasks, &self.metrics),
            events,
            strip,
            on_event,
            on_error,
        );
        handle
    }

    /// Stops the caches no policy needs: namespaces without policies, sources none reads.
    pub(crate) fn sweep(&self) {
        let mut used_ns = BTreeSet::new();
        let mut used_sources = BTreeSet::new();
        for (store, _) in &self.routes {
            for p in store.state() {
                used_sources.extend(watches::sources_of(&p));
                used_ns.insert(p.namespace().unwrap_or_default());
            }
        }
        let mut namespaces = self.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        namespaces.retain(|ns, (_, handles)| {
            let keep = used_ns.contains(ns);
            if !keep {
                handles.iter().for_each(AbortHandle::abort);
            }
            keep
        });
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        sources.retain(|key, handle| {
            let keep = used_sources.contains(key);
            if !keep {
                handle.abort();
            }
            keep
        });
    }

    /// Stops every cache; returns when their tasks have ended.
    pub(crate) async fn shutdown(&self) {
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        tasks.shutdown().await;
    }
}

fn wake_namespace(routes: &[Route], ns: &str) {
    for (p, t) in routes {
        wake(t, watches::policies_in(p, ns));
    }
}

fn wake_users(routes: &[Route], source: &Source) {
    for (p, t) in routes {
        wake(t, policies_using(p, source));
    }
}

/// A managed kind and how [`Recent`] hears about its cache.
trait Remembered:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    fn relisted(recent: &Recent, ns: &str, since: std::time::Instant);
    fn saw(recent: &Recent, key: &Key, seen: super::recent::Seen);
    /// What the cache keeps of an object.
    fn keep(o: &mut Self) {
        strip(o);
    }
}

impl Remembered for Secret {
    fn relisted(recent: &Recent, ns: &str, since: std::time::Instant) {
        recent.relisted_secrets(ns, since);
    }
    fn saw(recent: &Recent, key: &Key, seen: super::recent::Seen) {
        recent.saw_secret(key, seen);
    }
}

impl Remembered for ConfigMap {
    fn relisted(recent: &Recent, ns: &str, since: std::time::Instant) {
        recent.relisted_config_maps(ns, since);
    }
    fn saw(recent: &Recent, key: &Key, seen: super::recent::Seen) {
        recent.saw_config_map(key, seen);
    }
    fn keep(o: &mut Self) {
        super::lean::managed_config_map(o);
    }
}
