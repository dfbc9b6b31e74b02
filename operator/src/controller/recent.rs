//! What this operator wrote, remembered until its caches show the write: a reconcile that
//! runs in between must neither write the same thing again nor mint a new hash key.
//!
//! resourceVersions are opaque, so they are only compared for equality: a write is forgotten
//! when the cache applies the watch event that carries the version the server returned for
//! it, or when the object is deleted. A watch that re-lists can skip that version: a re-list
//! that started after the write (the write is in it) forgets it too. [`LIFETIME`] is a last
//! resort, far beyond any healthy cache's lag.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;

use crate::api::{EgressProxyPolicyStatus, WorkloadKind};
use crate::workloads::WorkloadId;

/// How long a write is remembered at most.
pub(crate) const LIFETIME: Duration = Duration::from_secs(600);

/// Namespace and name.
pub(crate) type Key = (String, String);

/// One remembered write: the resourceVersion the server returned, when, and what.
struct Written<V> {
    after: Option<String>,
    at: Instant,
    value: V,
}

/// How many of the latest (object, version) pairs a cache applied are kept: a write's reply
/// can arrive after the cache has already applied its version (and a newer one).
const SEEN: usize = 1024;

struct Writes<K, V>(Mutex<HashMap<K, Written<V>>>, Mutex<VecDeque<(K, String)>>);

impl<K, V> Default for Writes<K, V> {
    fn default() -> Self {
        Writes(Mutex::new(HashMap::new()), Mutex::new(VecDeque::new()))
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Writes<K, V> {
    fn recall(&self, key: &K, now: Instant) -> Option<V> {
        let mut m = self.0.lock().ok()?;
        let w = m.get(key)?;
        if now.duration_since(w.at) < LIFETIME {
            return Some(w.value.clone());
        }
        m.remove(key);
        None
    }

    /// Remembers a write, unless the cache already holds (or held) the version it produced;
    /// either way it supersedes what was remembered of `key` before.
    fn remember(&self, key: K, cached: Option<&String>, after: Option<String>, value: V) {
        let Ok(mut m) = self.0.lock() else {
            return;
        };
        let applied = after.as_ref().is_some_and(|a| {
            cached == Some(a)
                || self
                    .1
                    .lock()
                    .is_ok_and(|seen| seen.iter().any(|(k, v)| *k == key && v == a))
        });
        if applied {
            m.remove(&key);
        } else {
            let at = Instant::now();
            m.insert(key, Written { after, at, value });
        }
    }

    /// The cache applied `key` at `version`.
    fn saw(&self, key: &K, version: Option<&String>) {
        if let (Some(v), Ok(mut seen)) = (version, self.1.lock()) {
            if seen.len() == SEEN {
                seen.pop_front();
            }
            seen.push_back((key.clone(), v.clone()));
        }
        if let Ok(mut m) = self.0.lock()
            && m.get(key).is_some_and(|w| w.after.as_ref() == version)
        {
            m.remove(key);
        }
    }

    fn forget(&self, key: &K) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(key);
        }
    }

    /// A re-list that started at `since` finished: the writes made before it are in it.
    fn relisted(&self, since: Instant, of_kind: impl Fn(&K) -> bool) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|k, w| !(of_kind(k) && w.at < since));
        }
    }
}

/// The writes of one operator instance, by kind.
#[derive(Default)]
pub(crate) struct Recent {
    secrets: Writes<Key, BTreeMap<String, ByteString>>,
    config_maps: Writes<Key, BTreeMap<String, String>>,
    workloads: Writes<WorkloadId, String>,
    statuses: Writes<Key, EgressProxyPolicyStatus>,
}

/// What a watch event tells [`Recent`]: the cache now holds `key` at `version`, or it is gone.
pub(crate) enum Seen<'a> {
    Applied(Option<&'a String>),
    Deleted,
}

impl Recent {
    /// The managed Secret's data as last written, while the cache has not shown that write.
    pub(crate) fn secret(&self, key: &Key) -> Option<BTreeMap<String, ByteString>> {
        self.secrets.recall(key, Instant::now())
    }

    pub(crate) fn wrote_secret(
        &self,
        key: Key,
        cached: Option<&String>,
        after: Option<String>,
        data: BTreeMap<String, ByteString>,
    ) {
        self.secrets.remember(key, cached, after, data);
    }

    /// The managed ConfigMap's data, the same way.
    pub(crate) fn config_map(&self, key: &Key) -> Option<BTreeMap<String, String>> {
        self.config_maps.recall(key, Instant::now())
    }

    pub(crate) fn wrote_config_map(
        &self,
        key: Key,
        cached: Option<&String>,
        after: Option<String>,
        data: BTreeMap<String, String>,
    ) {
        self.config_maps.remember(key, cached, after, data);
    }

    /// Forgets the managed objects of a policy once they are deleted.
    pub(crate) fn forget_managed(&self, key: &Key) {
        self.secrets.forget(key);
        self.config_maps.forget(key);
    }

    /// The remembered workload writes of one namespace.
    pub(crate) fn workloads_in(&self, namespace: &str) -> BTreeMap<WorkloadId, String> {
        let now = Instant::now();
        let Ok(m) = self.workloads.0.lock() else {
            return BTreeMap::new();
        };
        m.iter()
            .filter(|(id, w)| id.namespace == namespace && now.duration_since(w.at) < LIFETIME)
            .map(|(id, w)| (id.clone(), w.value.clone()))
            .collect()
    }

    pub(crate) fn wrote_workload(
        &self,
        id: WorkloadId,
        cached: Option<&String>,
        after: Option<String>,
        what: String,
    ) {
        self.workloads.remember(id, cached, after, what);
    }

    /// The policy's status as last written.
    pub(crate) fn status(&self, key: &Key) -> Option<EgressProxyPolicyStatus> {
        self.statuses.recall(key, Instant::now())
    }

    pub(crate) fn wrote_status(
        &self,
        key: Key,
        cached: Option<&String>,
        after: Option<String>,
        status: EgressProxyPolicyStatus,
    ) {
        self.statuses.remember(key, cached, after, status);
    }

    pub(crate) fn saw_secret(&self, key: &Key, seen: Seen) {
        see(&self.secrets, key, seen);
    }

    pub(crate) fn saw_config_map(&self, key: &Key, seen: Seen) {
        see(&self.config_maps, key, seen);
    }

    pub(crate) fn saw_workload(&self, id: &WorkloadId, seen: Seen) {
        see(&self.workloads, id, seen);
    }

    /// The cache of one workload kind was re-listed by a list that started at `since`.
    pub(crate) fn relisted_workloads(&self, kind: WorkloadKind, since: Instant) {
        self.workloads.relisted(since, |id| id.kind == kind);
    }

    /// The managed Secrets of `ns` were re-listed by a list that started at `since`.
    pub(crate) fn relisted_secrets(&self, ns: &str, since: Instant) {
        self.secrets.relisted(since, |k| k.0 == ns);
    }

    pub(crate) fn relisted_config_maps(&self, ns: &str, since: Instant) {
        self.config_maps.relisted(since, |k| k.0 == ns);
    }

    pub(crate) fn relisted_policies(&self, since: Instant) {
        self.statuses.relisted(since, |_| true);
    }

    pub(crate) fn saw_policy(&self, key: &Key, seen: Seen) {
        see(&self.statuses, key, seen);
    }
}

fn see<K: Eq + Hash + Clone, V: Clone>(w: &Writes<K, V>, key: &K, seen: Seen) {
    match seen {
        Seen::Applied(version) => w.saw(key, version),
        Seen::Deleted => w.forget(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rv(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn a_write_is_remembered_until_the_cache_applies_its_version() {
        let w: Writes<&str, u32> = Writes::default();
        let now = Instant::now();
        w.remember("k", rv("5").as_ref(), rv("9"), 1);
        assert_eq!(
            w.recall(&"k", now),
            Some(1),
            "cache still at the old version"
        );
        w.saw(&"k", rv("7").as_ref());
        assert_eq!(
            w.recall(&"k", now),
            Some(1),
            "an event from before the write"
        );
        w.saw(&"k", rv("9").as_ref());
        assert_eq!(w.recall(&"k", now), None, "the cache shows the write");
    }

    #[test]
    fn versions_are_compared_for_equality_only() {
        let w: Writes<&str, u32> = Writes::default();
        let now = Instant::now();
        // Not numbers, and "10" sorts before "9" as text: neither matters.
        w.remember("k", rv("b").as_ref(), rv("10"), 2);
        w.saw(&"k", rv("9").as_ref());
        assert_eq!(w.recall(&"k", now), Some(2));
        w.saw(&"k", rv("10").as_ref());
        assert_eq!(w.recall(&"k", now), None);
    }

    #[test]
    fn a_write_the_cache_already_shows_is_not_remembered() {
        let w: Writes<&str, u32> = Writes::default();
        w.remember("k", rv("9").as_ref(), rv("9"), 3);
        assert_eq!(w.recall(&"k", Instant::now()), None);
    }

    #[test]
    fn a_write_whose_reply_comes_after_the_cache_moved_past_it_is_not_remembered() {
        let w: Writes<&str, u32> = Writes::default();
        w.remember("k", rv("1").as_ref(), rv("2"), 1);
        // The next write's version is applied, then a newer one, before its reply is read.
        w.saw(&"k", rv("4").as_ref());
        w.saw(&"k", rv("5").as_ref());
        w.remember("k", rv("5").as_ref(), rv("4"), 2);
        assert_eq!(
            w.recall(&"k", Instant::now()),
            None,
            "neither the new write nor the one it superseded"
        );
    }

    #[test]
    fn a_relist_that_started_after_the_write_ends_it() {
        let w: Writes<&str, u32> = Writes::default();
        let before = Instant::now();
        w.remember("k", None, rv("3"), 5);
        w.relisted(before, |_| true);
        assert_eq!(
            w.recall(&"k", Instant::now()),
            Some(5),
            "listed before the write"
        );
        w.relisted(Instant::now(), |_| true);
        assert_eq!(
            w.recall(&"k", Instant::now()),
            None,
            "the list holds the write"
        );
    }

    #[test]
    fn deletion_and_age_end_a_memory() {
        let w: Writes<&str, u32> = Writes::default();
        w.remember("k", None, rv("3"), 4);
        let later = Instant::now() + LIFETIME;
        assert_eq!(w.recall(&"k", later), None, "expired");
        w.remember("k", None, rv("3"), 4);
        see(&w, &"k", Seen::Deleted);
        assert_eq!(w.recall(&"k", Instant::now()), None, "deleted");
    }
}
