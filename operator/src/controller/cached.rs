//! The form the workload caches hold: the lean object ([`super::lean`]) stored compactly.
//!
//! k8s-openapi's structs are large even when empty (a `Container` is about 2 KiB, a
//! `Deployment` 2.4 KiB), so a lean Deployment with three containers still costs about
//! 11 KiB. A cached workload keeps its metadata, its pod template's labels, annotations and
//! containers (name and the operator's variables only), and the rest of the lean object (the
//! rollout fields of spec and status) as compact JSON; [`Cached::object`] gives the lean
//! object back when the plan reads it. Each object is made lean as it is deserialized, so a
//! list never holds a page of whole objects.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::objects::{Workload, WorkloadView};
use crate::api::WorkloadKind;

/// A workload kind whose objects have one pod template.
pub trait Pods: Workload + Serialize + DeserializeOwned {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec>;
}

impl Pods for Deployment {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.as_mut().map(|s| &mut s.template)
    }
}

impl Pods for StatefulSet {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.as_mut().map(|s| &mut s.template)
    }
}

impl Pods for DaemonSet {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.as_mut().map(|s| &mut s.template)
    }
}

impl Pods for CronJob {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        let job = self.spec.as_mut()?.job_template.spec.as_mut()?;
        Some(&mut job.template)
    }
}

/// A container as cached: its name and its entries of the operator's variables.
#[derive(Clone, Debug, PartialEq)]
struct Slim {
    name: String,
    env: Option<Vec<EnvVar>>,
}

impl Slim {
    fn of(c: Container) -> Slim {
        Slim {
            name: c.name,
            env: c.env,
        }
    }

    fn container(&self) -> Container {
        Container {
            name: self.name.clone(),
            env: self.env.clone(),
            ..Default::default()
        }
    }
}

/// The lean pod template, compactly.
#[derive(Clone, Debug, PartialEq)]
struct Template {
    /// Labels and annotations; `None`: the template had no metadata.
    metadata: Option<Labels>,
    /// `None`: the template had no spec.
    containers: Option<Box<[Slim]>>,
    init_containers: Option<Box<[Slim]>>,
}

type Labels = (
    Option<BTreeMap<String, String>>,
    Option<BTreeMap<String, String>>,
);

impl Template {
    fn take(t: &mut PodTemplateSpec) -> Template {
        let t = std::mem::take(t);
        let slim = |c: Vec<Container>| -> Box<[Slim]> { c.into_iter().map(Slim::of).collect() };
        let (containers, init_containers) = match t.spec {
            Some(s) => (Some(slim(s.containers)), s.init_containers.map(slim)),
            None => (None, None),
        };
        Template {
            metadata: t.metadata.map(|m| (m.labels, m.annotations)),
            containers,
            init_containers,
        }
    }

    fn expand(&self) -> PodTemplateSpec {
        let metadata = self
            .metadata
            .as_ref()
            .map(|(labels, annotations)| ObjectMeta {
                labels: labels.clone(),
                annotations: annotations.clone(),
                ..Default::default()
            });
        let all = |c: &[Slim]| c.iter().map(Slim::container).collect();
        let spec = self.containers.as_ref().map(|c| PodSpec {
            containers: all(c),
            init_containers: self.init_containers.as_deref().map(all),
            ..Default::default()
        });
        PodTemplateSpec { metadata, spec }
    }
}

/// A cached workload of kind `K`.
#[derive(Clone, Debug)]
pub struct Cached<K> {
    metadata: ObjectMeta,
    template: Option<Template>,
    /// The lean object without metadata and pod template, as JSON.
    rest: Box<str>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Pods> Cached<K> {
    pub fn new(mut o: K) -> Cached<K> {
        o.lean();
        let metadata = std::mem::take(o.meta_mut());
        let template = o.template_mut().map(Template::take);
        // Serializing a k8s-openapi object cannot fail; an empty rest reads back as None.
        let rest = serde_json::to_string(&o)
            .unwrap_or_default()
            .into_boxed_str();
        Cached {
            metadata,
            template,
            rest,
            kind: PhantomData,
        }
    }

    /// The lean object.
    pub fn object(&self) -> Option<K> {
        let mut o: K = serde_json::from_str(&self.rest).ok()?;
        *o.meta_mut() = self.metadata.clone();
        if let (Some(t), Some(slot)) = (&self.template, o.template_mut()) {
            *slot = t.expand();
        }
        Some(o)
    }
}

impl<'de, K: Pods> Deserialize<'de> for Cached<K> {
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

impl<K: Pods> Workload for Cached<K> {
    const KIND: WorkloadKind = K::KIND;

    fn view(&self) -> Option<WorkloadView> {
        self.object()?.view()
    }

    /// Lean already.
    fn lean(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::lean::tests::realistic;

    fn same<K: Pods + PartialEq + std::fmt::Debug>(kind: &str) {
        let full: K = serde_json::from_value(realistic(kind)).expect("object");
        let cached: Cached<K> = serde_json::from_value(realistic(kind)).expect("cached");
        let mut lean = full.clone();
        lean.lean();
        assert_eq!(cached.object().as_ref(), Some(&lean), "{kind}");
        assert_eq!(cached.view(), lean.view(), "{kind}");
        assert_eq!(cached.meta(), lean.meta());
        assert!(cached.rest.len() < 400, "{kind}: {}", cached.rest);
    }

    /// The cache gives back exactly the lean object, so the plan decides the same.
    #[test]
    fn a_cached_workload_is_the_lean_object() {
        same::<Deployment>("Deployment");
        same::<StatefulSet>("StatefulSet");
        same::<DaemonSet>("DaemonSet");
        same::<CronJob>("CronJob");
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
