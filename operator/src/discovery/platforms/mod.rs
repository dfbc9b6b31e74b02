//! The discovery sources of distributions and network plugins, one file each: the objects a
//! source reads (which the controller watches, and the chart's RBAC must grant), how it reads
//! them into [`PlatformInputs`], and the Node annotations it reads. Pure: the controller
//! (`controller/platform.rs`) starts the watches these describe and hands the cached objects
//! back to [`DiscoverySource::read`].
//!
//! Each source also ranks its candidates for the facts among the built-in ones
//! (`candidate::rank`): where it stands is in its file too.
//!
//! A new source: a [`PlatformSource`] variant (its `--disable-discovery-source` name and
//! help), a file here implementing [`DiscoverySource`], its arm in [`source`] (the compiler
//! asks for it) and its field of [`PlatformInputs`]. `tests.rs` fails until the chart grants
//! each object it reads and names it.

mod calico;
mod cilium;
mod k3s;
mod kube_apiserver;
mod kube_dns;
mod openshift;
mod ovn_kubernetes;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::core::{ApiResource, DynamicObject};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::candidate::{Candidate, Domain, Ranked};
use super::{ClusterInputs, NamedValues, NodeInputs, PlatformInputs, PlatformSource};

/// The cached objects of one [`Object`], or `None` where it is not watched.
pub type Watched = Option<Vec<Arc<DynamicObject>>>;

/// One source of a distribution or network plugin.
pub trait DiscoverySource: Sync {
    /// The objects it reads, each watched as described (and granted by the chart's RBAC).
    fn objects(&self) -> &'static [Object];

    /// Read only where the cluster serves this resource (asked of API discovery): the
    /// distribution is not there otherwise.
    fn requires(&self) -> Option<&'static Object> {
        None
    }

    /// What the watched objects say: `watched[i]` holds the cached objects of
    /// `objects()[i]`, or `None` where that object is not watched (not served, not
    /// readable, or cluster-scoped in a namespaced install).
    fn read(&self, watched: &[Watched], into: &mut PlatformInputs);

    /// The Node annotations it reads (kept when Nodes are cached).
    fn node_annotations(&self) -> &'static [&'static str] {
        &[]
    }

    /// Reads its Node annotations into `node` (only while the source is switched on).
    fn read_node(&self, _annotations: &BTreeMap<String, String>, _node: &mut NodeInputs) {}

    /// Its candidates for the Service network, each with its rank (`candidate::rank`).
    fn service_network(&self, _inputs: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        Vec::new()
    }

    /// Its candidates for the Pod network, each with its rank (`candidate::rank`).
    fn pod_network(&self, _inputs: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        Vec::new()
    }

    /// Its cluster domain candidates, each with its rank (`candidate::rank`).
    fn cluster_domain(&self, _inputs: &ClusterInputs) -> Vec<Ranked<Domain>> {
        Vec::new()
    }

    /// The API server hosts it names, each with what named it (all sources add up).
    fn api_server(&self, _inputs: &ClusterInputs) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The registry: the one implementation of each source.
pub fn source(id: PlatformSource) -> &'static dyn DiscoverySource {
    match id {
        PlatformSource::Openshift => &openshift::Openshift,
        PlatformSource::OvnKubernetes => &ovn_kubernetes::OvnKubernetes,
        PlatformSource::Calico => &calico::Calico,
        PlatformSource::Cilium => &cilium::Cilium,
        PlatformSource::K3s => &k3s::K3s,
        PlatformSource::KubeApiserver => &kube_apiserver::KubeApiserver,
        PlatformSource::KubeDns => &kube_dns::KubeDns,
    }
}

/// Every source, in the order of `--disable-discovery-source`'s values.
pub fn all() -> impl Iterator<Item = PlatformSource> {
    <PlatformSource as clap::ValueEnum>::value_variants()
        .iter()
        .copied()
}

/// Every Node annotation some source reads.
pub fn node_annotations() -> impl Iterator<Item = &'static str> {
    all().flat_map(|id| source(id).node_annotations().iter().copied())
}

/// An object (or a set of them) a source reads.
#[derive(Debug, Clone, Copy)]
pub struct Object {
    /// API group (`""` for the core group), version, kind and resource (plural).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub resource: &'static str,
    /// `None`: cluster-scoped, not read by a namespaced install.
    pub namespace: Option<&'static str>,
    pub select: Select,
    pub when: When,
    /// Drops what is not read before the object is cached (its metadata is stripped too).
    pub keep: fn(&mut DynamicObject),
}

/// Which objects of the resource are watched.
#[derive(Debug, Clone, Copy)]
pub enum Select {
    All,
    /// One object, by name (the RBAC rule can name it).
    Name(&'static str),
    /// One watch per label selector (`key=value`), merged: a selector cannot OR two keys.
    Labels(&'static [&'static str]),
}

/// When the object is watched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    Always,
    /// Only where API discovery says the cluster serves the resource (a CRD).
    Served,
    /// Only where a `get` of it succeeds at start-up: its Role may be missing (the chart
    /// renders it only where it can tell the namespace exists).
    Readable,
}

impl Object {
    /// The resource, as `kube` addresses it dynamically.
    pub fn api_resource(&self) -> ApiResource {
        let api_version = match self.group {
            "" => self.version.to_owned(),
            g => format!("{g}/{}", self.version),
        };
        ApiResource {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            api_version,
            kind: self.kind.to_owned(),
            plural: self.resource.to_owned(),
        }
    }
}

/// What every cached object loses: managed fields and the last applied configuration.
pub fn strip_meta(o: &mut DynamicObject) {
    o.metadata.managed_fields = None;
    if let Some(a) = o.metadata.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Keeps the whole object (small, cluster-wide configs and CRDs).
fn keep_all(_: &mut DynamicObject) {}

/// Keeps a ConfigMap's `data` only.
fn keep_data(o: &mut DynamicObject) {
    if let Value::Object(m) = &mut o.data {
        m.retain(|k, _| k == "data");
    }
}

/// Keeps each container's name, command and args of the Pod spec at `path`, nothing else.
fn keep_commands(o: &mut DynamicObject, path: &[&str]) {
    let mut kept = serde_json::Map::new();
    let containers = path.iter().try_fold(&o.data, |v, k| v.get(k));
    let containers = containers.and_then(|c| c.get("containers")?.as_array());
    let slim: Vec<Value> = containers
        .into_iter()
        .flatten()
        .map(|c| {
            let mut m = serde_json::Map::new();
            for k in ["name", "command", "args"] {
                if let Some(v) = c.get(k) {
                    m.insert(k.to_owned(), v.clone());
                }
            }
            Value::Object(m)
        })
        .collect();
    let mut at = &mut kept;
    for k in path {
        at = at
            .entry(k.to_string())
            .or_insert_with(|| Value::Object(Default::default()))
            .as_object_mut()
            .expect("just inserted an object");
    }
    at.insert("containers".to_owned(), Value::Array(slim));
    o.data = Value::Object(kept);
}

/// The object as the typed `T` reads it (fields `T` lacks are ignored).
fn typed<T: DeserializeOwned>(o: &DynamicObject) -> Option<T> {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

fn name_of(o: &DynamicObject) -> &str {
    o.metadata.name.as_deref().unwrap_or_default()
}

/// The object of `watched` named `name`, if it is watched and there.
fn find<'a>(watched: Option<&'a Vec<Arc<DynamicObject>>>, name: &str) -> Option<&'a DynamicObject> {
    watched?.iter().map(|o| &**o).find(|o| name_of(o) == name)
}

/// A ConfigMap's `data`.
fn config_map_data(o: &DynamicObject) -> Option<BTreeMap<String, String>> {
    serde_json::from_value(o.data.get("data")?.clone()).ok()
}

/// Every container's command then args, in order.
fn pod_command(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Vec<String> {
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    containers
        .iter()
        .flat_map(|c| {
            let cmd = c.command.iter().flatten();
            cmd.chain(c.args.iter().flatten()).cloned()
        })
        .collect()
}

/// Each object's name and its non-empty values, sorted by name.
fn named<T>(objects: &[(String, T)], values: impl Fn(&T) -> Vec<String>) -> Vec<NamedValues> {
    let mut out: Vec<NamedValues> = objects
        .iter()
        .map(|(name, o)| NamedValues {
            name: name.clone(),
            values: values(o).into_iter().filter(|v| !v.is_empty()).collect(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The objects of `watched` as `T` (`.spec` of a CRD, or the whole object), with their names.
fn all_typed<T: DeserializeOwned>(
    watched: &[Arc<DynamicObject>],
    field: Option<&str>,
) -> Vec<(String, T)> {
    watched
        .iter()
        .filter_map(|o| {
            let t = match field {
                Some(f) => serde_json::from_value(o.data.get(f)?.clone()).ok()?,
                None => typed(o)?,
            };
            Some((name_of(o).to_owned(), t))
        })
        .collect()
}
