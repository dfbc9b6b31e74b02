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
        let (namespace, name, entry) = self.entry()?;
        entry.object(namespace, name)
    }

    /// What a workload cache keeps of it (copied: the watch event keeps its own), under its
    /// namespace and name.
    pub fn entry(&self) -> Option<(&str, &str, Entry)> {
        let m = &self.metadata;
        let entry = Entry {
            resource_version: m.resource_version.as_deref().map(Box::from),
            packed: self.packed.clone(),
        };
        Some((m.namespace.as_deref()?, m.name.as_deref()?, entry))
    }
}

/// What a workload cache keeps of one workload, filed under its namespace and name: its
/// resourceVersion, and the operator's managedFields entries with the rest of the lean
/// object, as deflated JSON. Two allocations (the watch's [`Cached`] also holds a whole
/// `ObjectMeta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    resource_version: Option<Box<str>>,
    packed: Box<[u8]>,
}

impl Entry {
    /// The lean object of workload `name` in `namespace`.
    pub fn object<K: Compact>(&self, namespace: &str, name: &str) -> Option<K> {
        let (managed, rest) = unpack(&self.packed)?;
        let mut o: K = serde_json::from_str(&rest).ok()?;
        let m = o.meta_mut();
        m.name = Some(name.to_owned());
        m.namespace = Some(namespace.to_owned());
        m.resource_version = self.resource_version.as_deref().map(str::to_owned);
        m.managed_fields = managed.map(|m| serde_json::from_str(&m).unwrap_or_default());
        Some(o)
    }

    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
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
