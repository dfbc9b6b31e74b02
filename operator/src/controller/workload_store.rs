//! The cache of one workload kind: its [`Entry`]s by namespace and name, filled from the
//! kind's watch by a [`StoreWriter`].
//!
//! Hand-written rather than kube-runtime's reflector `Store`: that keys every object by an
//! `ObjectRef` (its name, namespace, resourceVersion and uid copied again) and keeps a whole
//! `ObjectMeta` beside it, about 0.6 KiB per workload before the lean object, and reading
//! one namespace walks every workload of the cluster. Here a workload costs its entry (one
//! allocation) and its slot in its namespace's set, and a reconcile reads its namespace only.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock};

use futures::future::BoxFuture;
use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::watch;

use super::cached::{Cached, Compact, Entry};
use super::objects::{Workload, WorkloadView};
use super::workload_caches::WorkloadCache;

/// The entries of each namespace (a set ordered by name).
type Namespaces = BTreeMap<Box<str>, BTreeSet<Entry>>;

/// The read side, shared by every reconcile.
pub(crate) struct WorkloadStore<K> {
    namespaces: Arc<RwLock<Namespaces>>,
    ready: watch::Receiver<bool>,
    kind: PhantomData<fn() -> K>,
}

/// The write side, driven by the kind's watch.
pub(crate) struct StoreWriter<K> {
    namespaces: Arc<RwLock<Namespaces>>,
    /// The list under way: it replaces the entries when it is complete.
    relist: Option<Namespaces>,
    ready: watch::Sender<bool>,
    kind: PhantomData<fn() -> K>,
}

/// An empty store and its writer.
pub(crate) fn store<K>() -> (WorkloadStore<K>, StoreWriter<K>) {
    let namespaces = Arc::new(RwLock::new(Namespaces::new()));
    let (tx, rx) = watch::channel(false);
    let reader = WorkloadStore {
        namespaces: namespaces.clone(),
        ready: rx,
        kind: PhantomData,
    };
    let writer = StoreWriter {
        namespaces,
        relist: None,
        ready: tx,
        kind: PhantomData,
    };
    (reader, writer)
}

fn insert(into: &mut Namespaces, o: &Cached<impl Compact>) {
    if let Some((namespace, entry)) = o.entry() {
        let names = match into.get_mut(namespace) {
            Some(names) => names,
            None => into.entry(namespace.into()).or_default(),
        };
        names.replace(entry);
    }
}

impl<K: Compact> StoreWriter<K> {
    /// Applies one watch event, as kube-runtime's reflector does: a list replaces the
    /// entries once it is complete, and the first complete list makes the store ready.
    pub(crate) fn apply(&mut self, e: &watcher::Event<Cached<K>>) {
        match e {
            watcher::Event::Apply(o) => insert(&mut self.write(), o),
            watcher::Event::Delete(o) => {
                let m = o.meta();
                if let (Some(namespace), Some(name)) = (&m.namespace, &m.name) {
                    let mut all = self.write();
                    let names = all.get_mut(namespace.as_str());
                    if names.is_some_and(|n| n.remove(name.as_str()) && n.is_empty()) {
                        all.remove(namespace.as_str());
                    }
                }
            }
            watcher::Event::Init => self.relist = Some(Namespaces::new()),
            watcher::Event::InitApply(o) => insert(self.relist.get_or_insert_default(), o),
            watcher::Event::InitDone => {
                *self.write() = self.relist.take().unwrap_or_default();
                self.ready.send_replace(true);
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Namespaces> {
        // A panic under the lock leaves whole entries: the map is still consistent.
        self.namespaces
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Compact> WorkloadStore<K> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Namespaces> {
        self.namespaces
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The lean objects of `namespace`, by name. The entries are copied out, so the watch
    /// does not wait while they are inflated and parsed.
    pub(crate) fn objects(&self, namespace: &str) -> Vec<K> {
        let entries: Vec<Entry> = match self.read().get(namespace) {
            Some(names) => names.iter().cloned().collect(),
            None => return Vec::new(),
        };
        entries
            .iter()
            .filter_map(|e| e.object::<K>(namespace))
            .collect()
    }

    /// How many workloads it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.read().values().map(BTreeSet::len).sum()
    }
}

impl<K: Compact> WorkloadCache for WorkloadStore<K> {
    fn views(&self, namespace: &str) -> Vec<WorkloadView> {
        self.objects(namespace)
            .iter()
            .filter_map(Workload::view)
            .collect()
    }

    fn version(&self, namespace: &str, name: &str) -> Option<String> {
        let all = self.read();
        let entry = all.get(namespace)?.get(name)?;
        entry.resource_version().map(str::to_owned)
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        let mut ready = self.ready.clone();
        Box::pin(async move {
            // An error: the writer is gone, and with it the watch; nothing to wait for.
            let _ = ready.wait_for(|r| *r).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    use super::*;

    fn cached(namespace: &str, name: &str, rv: &str, image: &str) -> Cached<Deployment> {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv,
                         "labels": {"app": name}},
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "main", "image": image}]}}}
        }))
        .expect("deployment")
    }

    fn names(s: &WorkloadStore<Deployment>, namespace: &str) -> Vec<(String, String)> {
        s.objects(namespace)
            .into_iter()
            .map(|d| {
                let m = d.metadata;
                (
                    m.name.unwrap_or_default(),
                    m.resource_version.unwrap_or_default(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// A list fills the store only when complete; applies and deletes change one entry; a
    /// namespace whose last workload left is gone.
    #[test]
    fn events_fill_and_change_the_store() {
        let (s, mut w) = store::<Deployment>();
        w.apply(&watcher::Event::Init);
        w.apply(&watcher::Event::InitApply(cached("a", "x", "1", "i:1")));
        w.apply(&watcher::Event::InitApply(cached("b", "y", "2", "i:1")));
        assert_eq!(s.len(), 0, "not before the list is complete");
        assert!(!*s.ready.borrow());
        w.apply(&watcher::Event::InitDone);
        assert!(*s.ready.borrow());
        assert_eq!(names(&s, "a"), pairs(&[("x", "1")]));
        w.apply(&watcher::Event::Apply(cached("a", "z", "3", "i:1")));
        w.apply(&watcher::Event::Apply(cached("a", "x", "4", "i:2")));
        assert_eq!(names(&s, "a"), pairs(&[("x", "4"), ("z", "3")]));
        assert_eq!(s.version("a", "x").as_deref(), Some("4"));
        w.apply(&watcher::Event::Delete(cached("b", "y", "5", "i:1")));
        assert_eq!(names(&s, "b"), pairs(&[]));
        assert_eq!(s.read().len(), 1, "namespace b is gone");
        assert_eq!(s.version("b", "y"), None);
    }

    /// A re-list replaces everything: what it no longer holds is gone.
    #[test]
    fn a_relist_replaces_the_entries() {
        let (s, mut w) = store::<Deployment>();
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(cached("a", "x", "1", "i:1")),
            watcher::Event::InitDone,
            watcher::Event::Init,
            watcher::Event::InitApply(cached("a", "y", "2", "i:1")),
        ] {
            w.apply(&e);
        }
        assert_eq!(
            names(&s, "a"),
            pairs(&[("x", "1")]),
            "the old list until done"
        );
        w.apply(&watcher::Event::InitDone);
        assert_eq!(names(&s, "a"), pairs(&[("y", "2")]));
    }

    /// The store gives back what the watch's object gives back, and the views of one
    /// namespace only.
    #[test]
    fn the_store_gives_back_the_lean_object() {
        let (s, mut w) = store::<Deployment>();
        let x = cached("a", "x", "1", "i:1");
        w.apply(&watcher::Event::Apply(x.clone()));
        w.apply(&watcher::Event::Apply(cached("b", "y", "1", "i:1")));
        assert_eq!(s.objects("a"), vec![x.object().expect("object")]);
        assert_eq!(
            s.views("a"),
            vec![x.object().and_then(|o| o.view()).expect("view")]
        );
        assert_eq!(s.views("c"), vec![]);
    }
}
