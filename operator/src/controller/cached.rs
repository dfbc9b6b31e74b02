//! The form the workload watches deliver and the caches hold: the lean object
//! ([`super::lean`]) stored compactly.
//!
//! k8s-openapi's structs are large even when empty (a `Container` is about 2 KiB, a
//! `Deployment` 2.4 KiB), and every map is a B-tree node of about 0.5 KiB, so a lean
//! Deployment with three containers still costs about 11 KiB as a struct. The watch
//! deserializes each object into a [`Cached`]: the metadata the watch reads (name,
//! namespace, resourceVersion) as a struct, and the operator's managedFields entries with the
//! rest of the lean object as compact JSON, deflated (700-900 bytes of JSON become about
//! 300). The cache keeps an [`Entry`] (`workload_store.rs`), which gives the lean object back
//! when the plan reads it. Each object is made lean as it is deserialized, so a list never
//! holds a page of whole objects.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::objects::Workload;

/// A workload kind the caches can hold compactly.
pub trait Compact: Workload + Serialize + DeserializeOwned {}

impl<K: Workload + Serialize + DeserializeOwned> Compact for K {}

/// A workload of kind `K` as its watch delivers it.
#[derive(Clone, Debug)]
pub struct Cached<K> {
    /// What the watch reads: name, namespace and resourceVersion. Labels and generation are
    /// in `packed` (a map is a B-tree node of about 0.5 KiB).
    metadata: ObjectMeta,
    /// The operator's managedFields entries and the lean object without metadata, as JSON,
    /// deflated ([`pack`]).
    packed: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Compact> Cached<K> {
    pub fn new(mut o: K) -> Cached<K> {
        o.lean();
        let m = o.meta_mut();
        let metadata = ObjectMeta {
            name: m.name.take(),
            namespace: m.namespace.take(),
            resource_version: m.resource_version.take(),
            ..Default::default()
        };
        let managed = m.managed_fields.take().map(|m| json(&m));
        Cached {
            metadata,
            packed: pack(managed.as_deref(), &json(&o)),
            kind: PhantomData,
        }
    }

    /// The lean object, as its cache entry gives it back.
    #[cfg(test)]
    pub fn object(&self) -> Option<K> {
        let (namespace, entry) = self.entry()?;
        entry.object(namespace)
    }

    /// What a workload cache keeps of it (copied: the watch event keeps its own), and its
    /// namespace.
    pub fn entry(&self) -> Option<(&str, Entry)> {
        let m = &self.metadata;
        let rv = m.resource_version.as_deref().unwrap_or_default();
        let entry = Entry::new(m.name.as_deref()?, rv, &self.packed);
        Some((m.namespace.as_deref()?, entry))
    }
}

/// What a workload cache keeps of one workload, in one allocation: its name and its
/// resourceVersion (each after its length in two bytes), then the operator's managedFields
/// entries with the rest of the lean object as deflated JSON ([`pack`]). Ordered, compared
/// and looked up by name (`Borrow<str>`): a namespace's entries are a set.
#[derive(Clone, Debug)]
pub struct Entry(Box<[u8]>);

impl Entry {
    fn new(name: &str, resource_version: &str, packed: &[u8]) -> Entry {
        let mut b = Vec::with_capacity(4 + name.len() + resource_version.len() + packed.len());
        for s in [name, resource_version] {
            // Names are at most 253 bytes; resourceVersions are short. Longer would be cut.
            let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
            b.extend_from_slice(&(s.len() as u16).to_le_bytes());
            b.extend_from_slice(s);
        }
        b.extend_from_slice(packed);
        Entry(b.into_boxed_slice())
    }

    /// The string at `at` and where the next part starts.
    fn part(&self, at: usize) -> (&str, usize) {
        let len = match self.0.get(at..at + 2) {
            Some(&[a, b]) => u16::from_le_bytes([a, b]) as usize,
            _ => 0,
        };
        let bytes = self.0.get(at + 2..at + 2 + len).unwrap_or_default();
        (std::str::from_utf8(bytes).unwrap_or_default(), at + 2 + len)
    }

    pub fn name(&self) -> &str {
        self.part(0).0
    }

    pub fn resource_version(&self) -> Option<&str> {
        let (rv, _) = self.part(self.part(0).1);
        (!rv.is_empty()).then_some(rv)
    }

    /// The lean object of this workload in `namespace`.
    pub fn object<K: Compact>(&self, namespace: &str) -> Option<K> {
        let (_, at) = self.part(self.part(0).1);
        let (managed, rest) = unpack(self.0.get(at..)?)?;
        let mut o: K = serde_json::from_str(&rest).ok()?;
        let m = o.meta_mut();
        m.name = Some(self.name().to_owned());
        m.namespace = Some(namespace.to_owned());
        m.resource_version = self.resource_version().map(str::to_owned);
        m.managed_fields = managed.map(|m| serde_json::from_str(&m).unwrap_or_default());
        Some(o)
    }
}

impl std::borrow::Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.name()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

/// The fastest deflate level: lean JSON shrinks to about 40 %, about 10 µs per workload.
const LEVEL: u8 = 1;

/// `managed`, a newline, `rest` (compact JSON has no raw newline), deflated. Without
/// managedFields the part before the newline is empty.
fn pack(managed: Option<&str>, rest: &str) -> Box<[u8]> {
    let raw = format!("{}\n{rest}", managed.unwrap_or_default());
    miniz_oxide::deflate::compress_to_vec(raw.as_bytes(), LEVEL).into_boxed_slice()
}

/// What [`pack`] packed: `None` when it does not inflate (it always does).
fn unpack(packed: &[u8]) -> Option<(Option<String>, String)> {
    let raw = miniz_oxide::inflate::decompress_to_vec(packed).ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (managed, rest) = raw.split_once('\n')?;
    let managed = (!managed.is_empty()).then(|| managed.to_owned());
    Some((managed, rest.to_owned()))
}

/// Serializing a k8s-openapi object cannot fail; an empty string would read back as `None`.
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

impl<'de, K: Compact> Deserialize<'de> for Cached<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(d).map(Cached::new)
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Cached<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    use k8s_openapi::api::batch::v1::CronJob;

    use super::*;
    use crate::controller::lean::tests::realistic;

    fn same<K: Compact + PartialEq + std::fmt::Debug>(kind: &str) {
        let full: K = serde_json::from_value(realistic(kind)).expect("object");
        let cached: Cached<K> = serde_json::from_value(realistic(kind)).expect("cached");
        let mut lean = full.clone();
        lean.lean();
        assert_eq!(cached.object().as_ref(), Some(&lean), "{kind}");
        assert_eq!(
            cached.object().and_then(|o| o.view()),
            lean.view(),
            "{kind}"
        );
        let m = cached.meta();
        assert_eq!(m.name, lean.meta().name);
        assert_eq!(m.namespace, lean.meta().namespace);
        assert_eq!(m.resource_version, lean.meta().resource_version);
        assert_eq!((&m.labels, m.generation), (&None, None), "in the JSON");
        // Labels, four containers, their proxy entries, the rollout fields: a few hundred
        // bytes of the whole object, deflated to less than half.
        let (managed, rest) = unpack(&cached.packed).expect("unpack");
        assert_eq!(managed, None);
        assert!(rest.len() < 800, "{kind}: {rest}");
        assert!(
            cached.packed.len() * 2 < rest.len(),
            "{kind}: {}",
            cached.packed.len()
        );
    }

    /// An entry reads back its name and resourceVersion, and sorts and is found by name.
    #[test]
    fn an_entry_is_its_name_and_version() {
        let a = Entry::new("a", "41", b"x");
        let b = Entry::new("b", "", b"");
        assert_eq!((a.name(), a.resource_version()), ("a", Some("41")));
        assert_eq!((b.name(), b.resource_version()), ("b", None));
        let set = std::collections::BTreeSet::from([b.clone(), a.clone()]);
        assert_eq!(set.iter().map(Entry::name).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(set.get("b").map(Entry::name), Some("b"));
        assert_eq!(Entry::new("a", "42", b"y"), a, "the same workload");
        let long = "n".repeat(253);
        assert_eq!(Entry::new(&long, "7", b"").name(), long);
    }

    /// The cache gives back exactly the lean object, so the plan decides the same.
    #[test]
    fn a_cached_workload_is_the_lean_object() {
        same::<Deployment>("Deployment");
        same::<StatefulSet>("StatefulSet");
        same::<DaemonSet>("DaemonSet");
        same::<CronJob>("CronJob");
    }

    /// The operator's managedFields entries are kept aside and come back whole.
    #[test]
    fn the_operators_managed_fields_come_back() {
        let d = crate::controller::objects::tests::deployment();
        let mut lean = d.clone();
        lean.lean();
        let cached = Cached::new(d);
        assert_eq!(cached.meta().managed_fields, None);
        assert_eq!(cached.object().as_ref(), Some(&lean));
        let view = cached.object().and_then(|o| o.view()).expect("view");
        assert_eq!(Some(&view), lean.view().as_ref());
        assert_eq!(view.owned.expect("owned").entries.len(), 2);
    }

    /// What has no pod template spec stays without one.
    #[test]
    fn a_template_without_spec_stays_without() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "a"}}}}
        }))
        .expect("object");
        let mut lean = d.clone();
        lean.lean();
        assert_eq!(Cached::new(d).object(), Some(lean));
    }
}
