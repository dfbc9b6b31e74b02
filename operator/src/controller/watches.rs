//! The watch toolkit: how one cache is driven and which policies a change wakes. A leaf:
//! the context that holds the caches (`ctx.rs`), the per-namespace caches (`tenancy.rs`) and
//! the platforms' caches (`platform.rs`) are built with it.
//!
//! Each cache is a kube-runtime reflector driven by its own task in the caller's `JoinSet`
//! (so the caches fill before the first reconcile, and stop with `run`), and every change it
//! applies, deletions included, is mapped to the policies it concerns. Hand-written rather
//! than kube-runtime's shared reflectors: in kube 5 those dispatch applied objects only, and
//! a Namespace leaving the opt-in selector, a deleted managed Secret or a removed Node must
//! wake the policies at once.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::{AbortHandle, JoinSet};

use super::errors;
use super::recent::Seen;
use crate::api::EgressProxyPolicy;
use crate::credentials::{MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL};
use crate::metrics::Metrics;

/// Sends a policy to the controller's queue.
pub(super) type Trigger = mpsc::UnboundedSender<ObjectRef<EgressProxyPolicy>>;

/// One controller's policies and its queue.
pub(super) type Route = (Store<EgressProxyPolicy>, Trigger);

/// A watch config that tolerates a lagging API server cache.
pub(super) fn config() -> watcher::Config {
    watcher::Config::default().any_semantic()
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
    cache_with((tasks, metrics), events, modify, on_event, log_error).0
}

/// Logs a watch error; the watch retries.
pub(super) fn log_error(kind: &str, e: &watcher::Error) {
    let error = errors::describe_watch(e);
    tracing::warn!(kind = %kind, %error, "watch failed; retrying");
}

/// [`cache`] with a handler for watch errors (before the retry); also returns the task's
/// abort handle. Every watch error is counted as a restart.
pub(super) fn cache_with<K>(
    (tasks, metrics): (&mut JoinSet<()>, &Arc<Metrics>),
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    modify: fn(&mut K),
    mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
    on_error: impl FnMut(&str, &watcher::Error) + Send + 'static,
) -> (Store<K>, AbortHandle)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, mut writer) = reflector::store::<K>();
    let apply = move |e: &watcher::Event<K>| {
        writer.apply_watcher_event(e);
        on_event(e)
    };
    let handle = drive((tasks, metrics), events.modify(modify), apply, on_error);
    (store, handle)
}

/// Drives one watch in `tasks` with the default backoff: `apply` sees every event (then the
/// metrics count it); `on_error` every error, before the retry, each counted as a restart.
pub(super) fn drive<K>(
    (tasks, metrics): (&mut JoinSet<()>, &Arc<Metrics>),
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    mut apply: impl FnMut(&watcher::Event<K>) + Send + 'static,
    mut on_error: impl FnMut(&str, &watcher::Error) + Send + 'static,
) -> AbortHandle
where
    K: Resource<DynamicType = ()> + Send + 'static,
{
    let kind = K::kind(&()).to_string();
    let stream = events.default_backoff();
    let metrics = metrics.clone();
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(e) => {
                    apply(&e);
                    if let Some((o, deleted)) = touched(&e) {
                        metrics.applied(o, deleted);
                    }
                }
                Err(e) => {
                    metrics.watch_restarted(&kind);
                    on_error(&kind, &e)
                }
            }
        }
    })
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
