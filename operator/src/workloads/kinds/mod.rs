//! Everything that differs between the workload kinds, one file per kind: its k8s-openapi
//! type (names, group, version, plural), its spellings on the command line, where its pod
//! template sits, what of it the caches keep and how its rollout is read. The rest of the
//! operator is generic over [`Kind`] and reaches a kind through [`visit`], the one `match`
//! over [`WorkloadKind`]. A new kind: its variant in `api/spec.rs`, a file here implementing
//! [`Kind`], its arm in [`visit`] and entry in [`ALL`] (the compiler and `tests.rs` list what
//! is missing), and its RBAC and admission rules in the chart (`tests.rs` checks them).

mod cronjob;
mod daemonset;
mod deployment;
mod statefulset;
#[cfg(test)]
mod tests;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::WorkloadKind;

/// A workload kind the operator injects into, implemented on its k8s-openapi type.
pub trait Kind:
    k8s_openapi::Resource<Scope = NamespaceResourceScope>
    + kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Its variant.
    const VARIANT: WorkloadKind;
    /// Its short names on the command line (`kubectl`'s), besides its kind and plural.
    const SHORT_NAMES: &'static [&'static str];
    /// Where the pod template sits in the object: `spec.template` is `["spec", "template"]`.
    const TEMPLATE: &'static [&'static str];
    /// Whether the operator starts without being able to list it (a kind that came after
    /// installs whose Roles predate it): it waits `discovery_wait` for its cache, then goes
    /// on, and policies change none of it until it can.
    const MAY_BE_UNREADABLE: bool;
    /// The pod template, at [`Kind::TEMPLATE`]; `None` without a spec.
    fn pod_template(&self) -> Option<&PodTemplateSpec>;
    fn pod_template_mut(&mut self) -> Option<&mut PodTemplateSpec>;
    /// Where its rollout of the current template stands; `None` without a spec.
    fn rollout(&self) -> Option<Rollout>;
    /// Drops the spec and status fields [`Kind::rollout`] does not read, for the caches
    /// (metadata and the pod template are made lean by the caller).
    fn drop_unread(&mut self);
}

/// Code generic over [`Kind`], called for the kind a [`WorkloadKind`] names.
pub trait Visit {
    type Out;
    fn visit<K: Kind>(self) -> Self::Out;
}

/// Calls `v` with the kind `kind` names: the one place that maps the enum to the types.
pub fn visit<V: Visit>(kind: WorkloadKind, v: V) -> V::Out {
    match kind {
        WorkloadKind::Deployment => v.visit::<Deployment>(),
        WorkloadKind::StatefulSet => v.visit::<StatefulSet>(),
        WorkloadKind::DaemonSet => v.visit::<DaemonSet>(),
        WorkloadKind::CronJob => v.visit::<CronJob>(),
    }
}

/// Every kind, in the order of the enum (`tests.rs` checks it against the CRD schema).
pub const ALL: [WorkloadKind; 4] = [
    WorkloadKind::Deployment,
    WorkloadKind::StatefulSet,
    WorkloadKind::DaemonSet,
    WorkloadKind::CronJob,
];

/// A kind's names and constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// As written in `kind:`.
    pub kind: &'static str,
    pub api_version: &'static str,
    /// Its API group (`apps`, `batch`).
    pub group: &'static str,
    pub version: &'static str,
    /// Its resource (`deployments`).
    pub plural: &'static str,
    pub short_names: &'static [&'static str],
    pub template: &'static [&'static str],
    pub may_be_unreadable: bool,
}

struct InfoOf;

impl Visit for InfoOf {
    type Out = Info;
    fn visit<K: Kind>(self) -> Info {
        Info {
            kind: <K as k8s_openapi::Resource>::KIND,
            api_version: <K as k8s_openapi::Resource>::API_VERSION,
            group: <K as k8s_openapi::Resource>::GROUP,
            version: <K as k8s_openapi::Resource>::VERSION,
            plural: <K as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            short_names: K::SHORT_NAMES,
            template: K::TEMPLATE,
            may_be_unreadable: K::MAY_BE_UNREADABLE,
        }
    }
}

pub fn info(kind: WorkloadKind) -> Info {
    visit(kind, InfoOf)
}

/// The kind as written in `kind:`.
pub fn kind_name(kind: WorkloadKind) -> &'static str {
    info(kind).kind
}

/// The kind's `apiVersion`.
pub fn api_version(kind: WorkloadKind) -> &'static str {
    info(kind).api_version
}

/// `template` at the kind's place of the pod template: `{"spec": {"template": template}}`,
/// or for a CronJob `{"spec": {"jobTemplate": {"spec": {"template": template}}}}`.
pub fn at_template(kind: WorkloadKind, template: Value) -> Value {
    let path = info(kind).template;
    path.iter()
        .rev()
        .fold(template, |v, key| json!({ *key: v }))
}

/// Where the pod template's fields sit in managedFields: `/f:spec/f:template`.
pub fn template_fields(kind: WorkloadKind) -> String {
    info(kind)
        .template
        .iter()
        .map(|k| format!("/f:{k}"))
        .collect()
}

/// Where a workload's rollout of its current template stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Its controller has not yet seen the latest spec.
    NotStarted,
    /// Replicas are being replaced.
    Rolling,
    /// Every replica runs the latest template and is available.
    RolledOut,
    /// A Deployment past its progress deadline.
    Stalled,
    /// An `OnDelete` StatefulSet or DaemonSet: its Pods take the new template only when
    /// someone deletes them.
    WaitingForManualRestart,
    /// A paused Deployment.
    Paused,
}

impl Rollout {
    /// A rollout that cannot finish by itself: it does not hold a `maxConcurrent` slot.
    pub fn stuck(self) -> bool {
        matches!(
            self,
            Rollout::Stalled | Rollout::WaitingForManualRestart | Rollout::Paused
        )
    }

    /// What status shows after a workload that is not up to date.
    pub fn note(self) -> &'static str {
        match self {
            Rollout::Stalled => " (rollout not progressing: progress deadline exceeded)",
            Rollout::WaitingForManualRestart => " (OnDelete: waits for its Pods to be deleted)",
            Rollout::Paused => " (Deployment paused)",
            Rollout::NotStarted | Rollout::Rolling | Rollout::RolledOut => "",
        }
    }
}

/// Whether the workload's controller has seen its latest spec.
fn observed<K: kube::Resource>(o: &K, observed: Option<i64>) -> bool {
    observed.unwrap_or(0) >= o.meta().generation.unwrap_or(0)
}

fn on_delete(strategy: Option<&str>) -> bool {
    strategy == Some("OnDelete")
}
