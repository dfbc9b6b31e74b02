//! What this operator wrote, remembered until its caches show the write: a reconcile that
//! runs in between must neither write the same thing again nor mint a new hash key.
//!
//! resourceVersions are opaque, so they are only compared for equality: a write is forgotten
//! when the cache applies the watch event that carries the version the server returned for
//! it, or when the object is deleted. A watch that re-lists can skip that version: a re-list
//! that started after the write (the write is in it) forgets it too. [`LIFETIME`] is a last
//! resort, far beyond any healthy cache's lag; expired writes are dropped on a policy's
//! watch event at most every [`PRUNE_EVERY`] (status writes make such events while anything
//! is written), so an object deleted while its watch was down leaves nothing behind.
//!
//! It also keeps each policy's count of consecutive failed reconciles (the backoff), until
//! the policy reconciles, is deleted, or a re-list no longer shows it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;

use super::plan::{ConfigMapData, HOLD, Marker};
use crate::api::{CredentialSlotStatus, EgressProxyPolicyStatus, WorkloadKind};
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

/// How often expired writes are looked for.
pub(crate) const PRUNE_EVERY: Duration = Duration::from_secs(60);

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

    /// Drops the writes remembered for [`LIFETIME`] or longer.
    fn prune(&self, now: Instant) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|_, w| now.duration_since(w.at) < LIFETIME);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
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

/// The writes of one operator instance, by kind, and the policies' failure counts.
#[derive(Default)]
pub(crate) struct Recent {
    secrets: Writes<Key, BTreeMap<String, ByteString>>,
    config_maps: Writes<Key, ConfigMapData>,
    workloads: Writes<WorkloadId, Marker>,
    statuses: Writes<Key, EgressProxyPolicyStatus>,
    failures: Mutex<HashMap<Key, u32>>,
    /// Statuses that only tell that workloads roll, waiting, per policy.
    rolling: Mutex<HashMap<Key, Hold>>,
    pruned: Mutex<Option<Instant>>,
}

/// A status held back: until when, and the credential slots' record it carries (read as
/// the previous one, so a change in place is told once).
struct Hold {
    until: Instant,
    credentials: Option<Vec<CredentialSlotStatus>>,
}

/// How many entries [`Recent`] holds: writes of each kind and failure counts.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub writes: usize,
    /// Failure counts and rolling holds.
    pub per_policy: usize,
}

/// What a watch event tells [`Recent`]: the cache now holds `key` at `version`, or it is gone.
pub(crate) enum Seen<'a> {
    Applied(Option<&'a String>),
    Deleted,
}

impl Recent {
    /// Counts one more failed reconcile of a policy; the count so far.
    pub(crate) fn failed(&self, key: Key) -> u32 {
        self.failures.lock().map_or(1, |mut f| {
            let n = f.entry(key).or_insert(0);
            *n += 1;
            *n
        })
    }

    /// A policy reconciled: its backoff starts over.
    pub(crate) fn succeeded(&self, key: &Key) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }

    /// How long `status` of `key`, which only tells that workloads roll, waits, if it
    /// does: the first of a rollout waits [`HOLD`], and after one is written the next waits
    /// [`HOLD`] from then.
    pub(crate) fn hold_rolling(
        &self,
        key: &Key,
        status: &EgressProxyPolicyStatus,
        now: Instant,
    ) -> Option<Duration> {
        let mut m = self.rolling.lock().ok()?;
        let hold = m.entry(key.clone()).or_insert(Hold {
            until: now + HOLD,
            credentials: None,
        });
        let wait = (now < hold.until).then(|| hold.until - now)?;
        hold.credentials = Some(status.credentials.clone());
        Some(wait)
    }

    /// The credential slots' record of a held status of `key`.
    pub(crate) fn held_credentials(&self, key: &Key) -> Option<Vec<CredentialSlotStatus>> {
        self.rolling.lock().ok()?.get(key)?.credentials.clone()
    }

    /// A status of `key` was written at `now`; `rolling`: it told that workloads roll.
    pub(crate) fn wrote_rolling(&self, key: &Key, rolling: bool, now: Instant) {
        if let Ok(mut m) = self.rolling.lock() {
            if rolling {
                let until = now + HOLD;
                m.insert(
                    key.clone(),
                    Hold {
                        until,
                        credentials: None,
                    },
                );
            } else {
                m.remove(key);
            }
        }
    }

    /// After a re-list of the policies of `scope` (a namespace, or all): forgets the failure
    /// counts and status writes of those it no longer shows (deleted while the watch was
    /// down, so no delete event came).
    pub(crate) fn keep_policies(&self, scope: Option<&str>, listed: impl Fn(&Key) -> bool) {
        let gone = |k: &Key| scope.is_none_or(|s| s == k.0) && !listed(k);
        if let Ok(mut f) = self.failures.lock() {
            f.retain(|k, _| !gone(k));
        }
        if let Ok(mut m) = self.statuses.0.lock() {
            m.retain(|k, _| !gone(k));
        }
        if let Ok(mut m) = self.rolling.lock() {
            m.retain(|k, _| !gone(k));
        }
    }

    /// Drops expired writes when [`PRUNE_EVERY`] has passed since the last time.
    pub(crate) fn prune(&self, now: Instant) {
        let due = self.pruned.lock().is_ok_and(|mut last| {
            let due = last.is_none_or(|t| now.duration_since(t) >= PRUNE_EVERY);
            if due {
                *last = Some(now);
            }
            due
        });
        if due {
            self.secrets.prune(now);
            self.config_maps.prune(now);
            self.workloads.prune(now);
            self.statuses.prune(now);
        }
    }

    /// What is held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> Held {
        Held {
            writes: self.secrets.len()
                + self.config_maps.len()
                + self.workloads.len()
                + self.statuses.len(),
            per_policy: self.failures.lock().map_or(0, |f| f.len())
                + self.rolling.lock().map_or(0, |f| f.len()),
        }
    }

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
    pub(crate) fn config_map(&self, key: &Key) -> Option<ConfigMapData> {
        self.config_maps.recall(key, Instant::now())
    }

    pub(crate) fn wrote_config_map(
        &self,
        key: Key,
        cached: Option<&String>,
        after: Option<String>,
        data: ConfigMapData,
    ) {
        self.config_maps.remember(key, cached, after, data);
    }

    /// Forgets the managed objects of a policy once they are deleted.
    pub(crate) fn forget_managed(&self, key: &Key) {
        self.secrets.forget(key);
        self.config_maps.forget(key);
    }

    /// The remembered workload writes of one namespace.
    pub(crate) fn workloads_in(&self, namespace: &str) -> BTreeMap<WorkloadId, Marker> {
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
        what: Marker,
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
        if matches!(seen, Seen::Deleted) {
            self.succeeded(key);
            self.wrote_rolling(key, false, Instant::now());
        }
        see(&self.statuses, key, seen);
        self.prune(Instant::now());
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

    fn workload(i: usize) -> WorkloadId {
        WorkloadId {
            kind: WorkloadKind::Deployment,
            namespace: format!("ns-{}", i % 100),
            name: format!("w-{i}"),
        }
    }

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_owned(), name.to_owned())
    }

    /// 10,000 objects created, written, failed and deleted: nothing is left behind.
    #[test]
    fn create_delete_cycles_leave_nothing_behind() {
        let r = Recent::default();
        for i in 0..10_000 {
            let id = workload(i);
            r.wrote_workload(id.clone(), None, rv("2"), Marker::Hash("h".into()));
            let k = key(&id.namespace, &id.name);
            r.wrote_status(k.clone(), None, rv("3"), EgressProxyPolicyStatus::default());
            assert_eq!(r.failed(k.clone()), 1);
            assert!(
                r.hold_rolling(&k, &Default::default(), Instant::now())
                    .is_some()
            );
            r.saw_workload(&id, Seen::Deleted);
            r.saw_policy(&k, Seen::Deleted);
        }
        assert_eq!(
            r.held(),
            Held {
                writes: 0,
                per_policy: 0
            }
        );
    }

    /// Objects deleted while the watch was down send no delete event: expired writes go at
    /// the next prune, failure counts and status writes when a re-list no longer shows them.
    #[test]
    fn what_no_delete_event_ends_is_pruned() {
        let r = Recent::default();
        for i in 0..1_000 {
            r.wrote_workload(workload(i), None, rv("2"), Marker::Hash("h".into()));
        }
        r.failed(key("a", "gone"));
        r.failed(key("a", "kept"));
        r.failed(key("b", "other-scope"));
        r.hold_rolling(&key("a", "gone"), &Default::default(), Instant::now());
        r.wrote_status(key("a", "gone"), None, rv("3"), Default::default());
        let now = Instant::now();
        let second = Duration::from_secs(1);
        r.prune(now + LIFETIME - second);
        assert_eq!(r.held().writes, 1_001, "nothing has expired yet");
        r.prune(now + LIFETIME + second);
        assert_eq!(r.held().writes, 1_001, "pruned at most every PRUNE_EVERY");
        r.prune(now + LIFETIME + PRUNE_EVERY);
        assert_eq!(r.held().writes, 0);
        r.keep_policies(Some("a"), |k| k.1 == "kept");
        assert_eq!(r.held().per_policy, 2, "a/kept and b/other-scope stay");
        r.keep_policies(None, |_| false);
        assert_eq!(
            r.held(),
            Held {
                writes: 0,
                per_policy: 0
            }
        );
        // A success ends a count as well.
        r.failed(key("a", "x"));
        r.succeeded(&key("a", "x"));
        assert_eq!(r.held().per_policy, 0);
    }

    #[test]
    fn a_rolling_status_waits_hold_and_then_at_most_once_per_hold() {
        let r = Recent::default();
        let k = key("a", "p");
        let t = Instant::now();
        let second = Duration::from_secs(1);
        let status = EgressProxyPolicyStatus {
            credentials: vec![CredentialSlotStatus {
                name: "main".into(),
                fingerprint: Some("f2".into()),
                state: crate::api::SlotState::InUse,
                message: None,
            }],
            ..Default::default()
        };
        let hold = |at| r.hold_rolling(&k, &status, at);
        assert_eq!(hold(t), Some(HOLD), "the rollout starts");
        assert_eq!(r.held_credentials(&k), Some(status.credentials.clone()));
        assert_eq!(hold(t + second), Some(HOLD - second));
        assert_eq!(hold(t + HOLD), None, "still rolling: written");
        r.wrote_rolling(&k, true, t + HOLD);
        assert_eq!(r.held_credentials(&k), None, "written");
        assert_eq!(hold(t + HOLD + second), Some(HOLD - second));
        r.wrote_rolling(&k, false, t + HOLD + second);
        assert_eq!(r.held().per_policy, 0, "done rolling");
        assert_eq!(hold(t + 2 * HOLD), Some(HOLD), "the next rollout");
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
