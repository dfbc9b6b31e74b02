//! In-memory object storage with a single resourceVersion counter and a bounded event history.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::resources::{GroupResource, Registry};

/// Object key inside one group/resource: (namespace, name); namespace is "" when cluster-scoped.
pub type Key = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A stored object: its JSON, encoded once and shared (cheap to clone) between the store,
/// the watch history and the responses. Decoded when a verb or controller needs the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored(Bytes);

impl Stored {
    /// Encode `obj` (exactly sized: the store keeps it for the object's life).
    pub fn encode(obj: &Value) -> Self {
        let encoded = serde_json::to_vec(obj).unwrap_or_default();
        Self(Bytes::from(encoded.into_boxed_slice()))
    }

    /// The object's JSON, as `serde_json` writes the decoded value.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// The object.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.0).unwrap_or_default()
    }

    /// `{"metadata": ...}` alone: enough for label and `metadata.*` field selectors.
    pub fn metadata_view(&self) -> Value {
        #[derive(serde::Deserialize)]
        struct Meta {
            metadata: Option<Value>,
        }
        let meta = serde_json::from_slice::<Meta>(&self.0)
            .ok()
            .and_then(|m| m.metadata);
        match meta {
            Some(m) => serde_json::json!({ "metadata": m }),
            None => serde_json::json!({}),
        }
    }

    /// Whether the object is stored as `api_version` `kind` (then its JSON is what a
    /// client of that version gets).
    pub fn is_served_as(&self, api_version: &str, kind: &str) -> bool {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Head {
            api_version: Option<String>,
            kind: Option<String>,
        }
        serde_json::from_slice::<Head>(&self.0).is_ok_and(|h| {
            h.api_version.as_deref() == Some(api_version) && h.kind.as_deref() == Some(kind)
        })
    }

    /// The uids in `metadata.ownerReferences`, read without decoding the rest.
    fn owner_uids(&self) -> Vec<String> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            owner_references: Option<Vec<Value>>,
        }
        #[derive(serde::Deserialize)]
        struct Obj {
            metadata: Option<Meta>,
        }
        let refs = serde_json::from_slice::<Obj>(&self.0)
            .ok()
            .and_then(|o| o.metadata?.owner_references)
            .unwrap_or_default();
        refs.iter()
            .filter_map(|r| r.get("uid")?.as_str().map(str::to_string))
            .collect()
    }
}

/// One change, as recorded in history and sent to watchers.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub kind: EventType,
    pub gr: GroupResource,
    pub namespace: String,
    pub name: String,
    pub object: Stored,
    /// The previous state for MODIFIED (used to turn selector transitions into ADDED/DELETED)
    /// and DELETED (what a list at an earlier version shows); shares its JSON with the
    /// previous change.
    pub old: Option<Stored>,
    /// The object's JSON at another apiVersion than stored, encoded once for all plain
    /// watchers of that version.
    pub wire: std::sync::OnceLock<(String, Bytes)>,
}

/// What the broadcast channel carries.
#[derive(Debug, Clone)]
pub enum Broadcast {
    Change(Arc<Change>),
    /// Every open watch ends with a 410 Expired error.
    Expire,
}

pub struct Store {
    rv: u64,
    objects: BTreeMap<GroupResource, BTreeMap<Key, Stored>>,
    uids: HashMap<String, (GroupResource, Key)>,
    /// Owner uid -> objects whose ownerReferences name it.
    dependents: HashMap<String, BTreeSet<(GroupResource, Key)>>,
    /// Objects removed since the last garbage-collection pass.
    pub removed: Vec<Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Changes with rv <= compacted are no longer in history.
    compacted: u64,
    tx: broadcast::Sender<Broadcast>,
    pub registry: Registry,
    pub next_cluster_ip: u32,
    /// Updates and patches that changed nothing (not stored, no event).
    pub noop_writes: u64,
    /// ServiceAccount tokens: token -> (namespace, name).
    pub tokens: HashMap<String, (String, String)>,
    /// Deleted Pods stay Terminating for their grace period (the simulated kubelet removes
    /// them); otherwise they go at once.
    pub graceful_pods: bool,
}

pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

pub fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Store {
    pub fn new(history_limit: usize, registry: Registry) -> Self {
        let (tx, _) = broadcast::channel(history_limit.max(1024));
        Self {
            rv: 1,
            objects: BTreeMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            removed: Vec::new(),
            history: VecDeque::new(),
            history_limit,
            compacted: 0,
            tx,
            registry,
            next_cluster_ip: 1,
            noop_writes: 0,
            tokens: HashMap::new(),
            graceful_pods: false,
        }
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn compacted_rv(&self) -> u64 {
        self.compacted
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Broadcast> {
        self.tx.subscribe()
    }

    /// Issue a bearer token for a ServiceAccount.
    pub fn issue_token(&mut self, namespace: &str, name: &str) -> String {
        let token = format!(
            "kube-sim-sa.{namespace}.{name}.{}",
            uuid::Uuid::new_v4().simple()
        );
        self.tokens
            .insert(token.clone(), (namespace.to_string(), name.to_string()));
        token
    }

    /// Allocate the next resourceVersion.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The object, decoded.
    pub fn get(&self, gr: &GroupResource, key: &Key) -> Option<Arc<Value>> {
        self.get_stored(gr, key).map(|o| Arc::new(o.value()))
    }

    pub fn get_stored(&self, gr: &GroupResource, key: &Key) -> Option<&Stored> {
        self.objects.get(gr).and_then(|m| m.get(key))
    }

    pub fn contains(&self, gr: &GroupResource, key: &Key) -> bool {
        self.get_stored(gr, key).is_some()
    }

    pub fn by_uid(&self, uid: &str) -> Option<Arc<Value>> {
        let (gr, key) = self.uids.get(uid)?;
        self.get(gr, key)
    }

    pub fn uid_location(&self, uid: &str) -> Option<(GroupResource, Key)> {
        self.uids.get(uid).cloned()
    }

    pub fn uid_exists(&self, uid: &str) -> bool {
        self.uids.contains_key(uid)
    }

    /// Objects of one group/resource in key order, from `start` (exclusive) on, decoded.
    pub fn range<'a>(
        &'a self,
        gr: &GroupResource,
        namespace: Option<&'a str>,
        after: Option<&'a Key>,
    ) -> impl Iterator<Item = (&'a Key, Value)> + 'a {
        self.range_stored(gr, namespace, after)
            .map(|(k, o)| (k, o.value()))
    }

    /// Objects of one group/resource in key order, from `start` (exclusive) on, as stored.
    pub fn range_stored<'a, 'b>(
        &'a self,
        gr: &GroupResource,
        namespace: Option<&'b str>,
        after: Option<&Key>,
    ) -> impl Iterator<Item = (&'a Key, &'a Stored)> + use<'a, 'b> {
        use std::ops::Bound;
        let lower = match (after, namespace) {
            (Some(k), Some(ns)) if k.0.as_str() < ns => {
                Bound::Included((ns.to_string(), String::new()))
            }
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        self.objects
            .get(gr)
            .into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| namespace.is_none_or(|ns| k.0.as_str() <= ns))
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.0 == ns))
    }

    /// All group/resources with stored objects.
    pub fn group_resources(&self) -> Vec<GroupResource> {
        self.objects.keys().cloned().collect()
    }

    pub fn count(&self, gr: &GroupResource, namespace: Option<&str>) -> usize {
        self.range_stored(gr, namespace, None).count()
    }

    /// Store `obj` (its resourceVersion already set to a fresh rv) and emit an event. An
    /// events.k8s.io Event is also stored as its core/v1 view.
    pub fn put(&mut self, gr: &GroupResource, obj: Value) -> Arc<Value> {
        let stored = self.put_one(gr, obj, true);
        if crate::events::is_events_k8s_io(gr) {
            let rv = self.next_rv();
            let core = crate::events::core_view(&stored, rv);
            self.put_one(&crate::events::core_events(), core, false);
        }
        stored
    }

    fn put_one(&mut self, gr: &GroupResource, obj: Value, index_uid: bool) -> Arc<Value> {
        let key = key_of(&obj);
        let rv = rv_of(&obj);
        let obj = Arc::new(obj);
        if let Some(uid) = uid_of(&obj).filter(|_| index_uid) {
            self.uids.insert(uid.to_string(), (gr.clone(), key.clone()));
        }
        let stored = Stored::encode(&obj);
        let old = self
            .objects
            .entry(gr.clone())
            .or_default()
            .insert(key.clone(), stored.clone());
        if let Some(o) = &old {
            self.unindex_owners(gr, &key, &o.owner_uids());
        }
        for owner in owner_uids(&obj) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert((gr.clone(), key.clone()));
        }
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(Change {
            rv,
            kind,
            gr: gr.clone(),
            namespace: key.0,
            name: key.1,
            object: stored,
            old,
            wire: Default::default(),
        });
        obj
    }

    /// Remove an object and emit DELETED with a fresh resourceVersion (an events.k8s.io
    /// Event's core/v1 view goes with it).
    pub fn remove(&mut self, gr: &GroupResource, key: &Key) -> Option<Arc<Value>> {
        let last = self.remove_one(gr, key)?;
        if crate::events::is_events_k8s_io(gr) {
            self.remove_one(&crate::events::core_events(), key);
        }
        Some(last)
    }

    fn remove_one(&mut self, gr: &GroupResource, key: &Key) -> Option<Arc<Value>> {
        let stored = self.objects.get_mut(gr)?.remove(key)?;
        let old = Arc::new(stored.value());
        if let Some(uid) = uid_of(&old) {
            self.uids.remove(uid);
        }
        self.unindex_owners(gr, key, &owner_uids(&old));
        self.removed.push(old.clone());
        let rv = self.next_rv();
        let mut last = (*old).clone();
        if let Some(m) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let last = Arc::new(last);
        self.emit(Change {
            rv,
            kind: EventType::Deleted,
            gr: gr.clone(),
            namespace: key.0.clone(),
            name: key.1.clone(),
            object: Stored::encode(&last),
            old: Some(stored),
            wire: Default::default(),
        });
        Some(last)
    }

    fn unindex_owners(&mut self, gr: &GroupResource, key: &Key, owners: &[String]) {
        for owner in owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(&(gr.clone(), key.clone()));
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }

    /// Objects whose ownerReferences name `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<(GroupResource, Key)> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn emit(&mut self, change: Change) {
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(c) = self.history.pop_front() {
                self.compacted = c.rv;
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(Broadcast::Change(change));
    }

    /// Changes after `rv`, or None when some of them were compacted away.
    pub fn changes_since(&self, rv: u64) -> Option<Vec<Arc<Change>>> {
        if rv < self.compacted {
            return None;
        }
        let start = self.history.partition_point(|c| c.rv <= rv);
        Some(self.history.range(start..).cloned().collect())
    }

    /// What changed in `gr` after `rv`: each object's state at `rv` by key (`None`: it did
    /// not exist then), or None when some of those changes were compacted away. With the
    /// objects stored now, that is `gr` as a list at `rv` shows it.
    pub fn states_at(&self, gr: &GroupResource, rv: u64) -> Option<BTreeMap<Key, Option<Stored>>> {
        if rv < self.compacted {
            return None;
        }
        let start = self.history.partition_point(|c| c.rv <= rv);
        let mut out = BTreeMap::new();
        for c in self.history.range(start..).filter(|c| c.gr == *gr) {
            let then = match c.kind {
                EventType::Added => None,
                _ => c.old.clone(),
            };
            // The first change after `rv` holds the state at `rv`.
            out.entry((c.namespace.clone(), c.name.clone()))
                .or_insert(then);
        }
        Some(out)
    }

    /// Drop all history: watches from any older resourceVersion get 410.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// End every open watch with 410 Expired.
    pub fn expire_watches(&mut self) {
        let _ = self.tx.send(Broadcast::Expire);
    }
}

pub fn key_of(obj: &Value) -> Key {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("/metadata/namespace"), s("/metadata/name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gr() -> GroupResource {
        GroupResource {
            group: String::new(),
            resource: "configmaps".into(),
        }
    }

    fn put(s: &mut Store, ns: &str, name: &str) -> u64 {
        let rv = s.next_rv();
        s.put(&gr(), json!({"metadata": {"namespace": ns, "name": name, "resourceVersion": rv.to_string(), "uid": format!("{ns}/{name}")}}));
        rv
    }

    #[test]
    fn history_is_bounded_and_compaction_expires_old_versions() {
        let mut s = Store::new(3, Registry::default());
        let first = put(&mut s, "a", "1");
        for i in 2..=5 {
            put(&mut s, "a", &i.to_string());
        }
        // Only the last three changes are kept.
        assert!(s.changes_since(first).is_none());
        let recent = s.changes_since(s.current_rv() - 2).expect("recent history");
        assert_eq!(recent.len(), 2);
        s.compact();
        assert!(s.changes_since(s.current_rv() - 1).is_none());
        assert_eq!(s.changes_since(s.current_rv()).map(|c| c.len()), Some(0));
    }

    #[test]
    fn namespace_ranges_and_paging_keys() {
        let mut s = Store::new(100, Registry::default());
        for (ns, n) in [("a", "x"), ("b", "x"), ("b", "y"), ("c", "x")] {
            put(&mut s, ns, n);
        }
        let names = |ns: Option<&str>, after: Option<&Key>| -> Vec<String> {
            s.range(&gr(), ns, after)
                .map(|(k, _)| format!("{}/{}", k.0, k.1))
                .collect()
        };
        assert_eq!(names(Some("b"), None), ["b/x", "b/y"]);
        assert_eq!(names(Some("b"), Some(&("b".into(), "x".into()))), ["b/y"]);
        assert_eq!(
            names(Some("b"), Some(&("a".into(), "x".into()))),
            ["b/x", "b/y"]
        );
        assert_eq!(names(None, Some(&("b".into(), "y".into()))), ["c/x"]);
        assert_eq!(s.count(&gr(), Some("z")), 0);
    }

    #[test]
    fn removal_emits_deleted_with_new_version_and_unindexes() {
        let mut s = Store::new(100, Registry::default());
        let mut rx = s.subscribe();
        put(&mut s, "a", "x");
        let before = s.current_rv();
        let gone = s.remove(&gr(), &("a".into(), "x".into())).expect("removed");
        assert_eq!(rv_of(&gone), before + 1);
        assert!(!s.uid_exists("a/x"));
        let kinds: Vec<EventType> = std::iter::from_fn(|| match rx.try_recv() {
            Ok(Broadcast::Change(c)) => Some(c.kind),
            _ => None,
        })
        .collect();
        assert_eq!(kinds, [EventType::Added, EventType::Deleted]);
    }
    #[test]
    fn stored_objects_decode_to_what_was_stored() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "r", "labels": {"a": "b"},
                         "ownerReferences": [{"uid": "u1"}, {"name": "no-uid"}, {"uid": "u2"}]},
            "spec": {"replicas": 2, "ratio": 0.5, "big": u64::MAX, "s": "é\n\"x\""}});
        let s = Stored::encode(&obj);
        assert_eq!(s.value(), obj);
        assert_eq!(s.bytes().as_ref(), obj.to_string().as_bytes());
        assert_eq!(s.owner_uids(), ["u1", "u2"]);
        assert_eq!(owner_uids(&obj), ["u1", "u2"]);
        assert_eq!(
            s.metadata_view(),
            json!({"metadata": obj["metadata"].clone()})
        );
        assert!(s.is_served_as("apps/v1", "ReplicaSet"));
        assert!(!s.is_served_as("apps/v1beta2", "ReplicaSet"));
        assert!(!s.is_served_as("apps/v1", "Deployment"));
        let odd = Stored::encode(&json!({"metadata": {"ownerReferences": "none"}}));
        assert!(odd.owner_uids().is_empty());
        assert_eq!(Stored::encode(&json!({})).metadata_view(), json!({}));
    }

    #[test]
    fn history_shares_the_stored_json() {
        let mut s = Store::new(100, Registry::default());
        put(&mut s, "a", "x");
        put(&mut s, "a", "x");
        let changes = s.changes_since(0).expect("history");
        let [first, second] = &changes[..] else {
            panic!("two changes: {changes:?}")
        };
        let old = second.old.as_ref().expect("old state");
        assert_eq!(old.bytes().as_ptr(), first.object.bytes().as_ptr());
        let stored = s
            .get_stored(&gr(), &("a".into(), "x".into()))
            .expect("stored");
        assert_eq!(stored.bytes().as_ptr(), second.object.bytes().as_ptr());
        assert!(first.old.is_none());
    }
}
