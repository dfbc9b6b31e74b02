//! Plain views of the workloads the reconciler reads: template, labels, what the operator owns
//! of them, rollout state; and the Jobs. No I/O. (The discovery inputs: `cluster.rs`.)

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::{Resource, ResourceExt};

pub use super::lean::strip;
use crate::api::WorkloadKind;
pub use crate::workloads::kinds::Rollout;
use crate::workloads::kinds::{Kind, template_fields};
use crate::workloads::{CONFIG_HASH, WorkloadId, by_reference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What the reconciler needs to know about one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadView {
    pub id: WorkloadId,
    pub labels: BTreeMap<String, String>,
    pub template: PodTemplateSpec,
    /// The cached object's resourceVersion.
    pub resource_version: Option<String>,
    pub rollout: Rollout,
    /// What the operator's field manager owns in the template; `None` when the object
    /// carries no managedFields at all (then every entry that names a managed object counts).
    pub owned: Option<Owned>,
}

/// The parts of a pod template the operator's field manager owns, from `managedFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    /// The config-hash annotation.
    pub hash: bool,
    /// `(container, variable)` of the env entries, containers and init containers alike.
    pub entries: BTreeSet<(String, String)>,
}

impl WorkloadView {
    /// The template with only what the operator owns among its proxy entries and the
    /// config-hash annotation: what a release may take away. A team's own annotation or
    /// entry that only looks like the operator's stays out of every release.
    pub fn ours_only(&self) -> Cow<'_, PodTemplateSpec> {
        let Some(owned) = &self.owned else {
            return Cow::Borrowed(&self.template);
        };
        let mut t = self.template.clone();
        if !owned.hash
            && let Some(a) = t.metadata.as_mut().and_then(|m| m.annotations.as_mut())
        {
            a.remove(CONFIG_HASH);
        }
        if let Some(spec) = t.spec.as_mut() {
            let lists = spec.containers.iter_mut();
            for c in lists.chain(spec.init_containers.iter_mut().flatten()) {
                let name = c.name.clone();
                if let Some(env) = c.env.as_mut() {
                    env.retain(|e| {
                        !by_reference(&e.name)
                            || owned.entries.contains(&(name.clone(), e.name.clone()))
                    });
                }
            }
        }
        Cow::Owned(t)
    }
}

/// What the operator's own managedFields entries (kept by [`super::lean::strip_workload`]) own.
fn owned(meta: &ObjectMeta, kind: WorkloadKind) -> Option<Owned> {
    let entries = meta.managed_fields.as_ref()?;
    let mut owned = Owned::default();
    let path = template_fields(kind);
    for f in entries.iter().filter_map(|e| e.fields_v1.as_ref()) {
        let Some(tpl) = f.0.pointer(&path) else {
            continue;
        };
        let annotations = tpl.pointer("/f:metadata/f:annotations");
        owned.hash |= annotations.is_some_and(|a| a.get(format!("f:{CONFIG_HASH}")).is_some());
        for list in ["f:containers", "f:initContainers"] {
            let containers = tpl.get("f:spec").and_then(|s| s.get(list));
            for (key, c) in containers.and_then(|c| c.as_object()).into_iter().flatten() {
                let Some(container) = keyed_name(key) else {
                    continue;
                };
                let env = c.get("f:env").and_then(|e| e.as_object());
                for var in env
                    .into_iter()
                    .flat_map(|e| e.keys())
                    .filter_map(|k| keyed_name(k))
                {
                    owned.entries.insert((container.clone(), var));
                }
            }
        }
    }
    Some(owned)
}

/// The name in a managedFields list key `k:{"name":"..."}`.
fn keyed_name(key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(key.strip_prefix("k:")?).ok()?;
    v.get("name")?.as_str().map(str::to_owned)
}

/// A workload kind ([`Kind`]) or its cached form: what the reconciler reads of it.
pub trait Workload: Resource<DynamicType = ()> + Clone {
    fn view(&self) -> Option<WorkloadView>;
    /// Drops what [`Workload::view`] does not read (see [`super::lean`]): for the caches.
    fn lean(&mut self);
}

pub(crate) fn id_of<K: Resource>(o: &K, kind: WorkloadKind) -> Option<WorkloadId> {
    Some(WorkloadId {
        kind,
        namespace: o.meta().namespace.clone()?,
        name: o.meta().name.clone()?,
    })
}

impl<K: Kind> Workload for K {
    fn lean(&mut self) {
        super::lean::workload(self);
    }

    fn view(&self) -> Option<WorkloadView> {
        let template = self.pod_template()?.clone();
        Some(WorkloadView {
            id: id_of(self, K::VARIANT)?,
            labels: self.labels().clone(),
            template,
            resource_version: self.meta().resource_version.clone(),
            rollout: self.rollout()?,
            owned: owned(self.meta(), K::VARIANT),
        })
    }
}

/// What the reconciler needs to know about one Job of the namespace: a Job's template
/// cannot change, so a running one keeps the configuration it started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The CronJob that started it (its controller ownerReference).
    pub cron_job: Option<String>,
    /// Its template's config-hash annotation.
    pub hash: Option<String>,
    /// Not finished: no `Complete` or `Failed` condition is true.
    pub running: bool,
}

impl JobView {
    pub fn of(job: &Job) -> JobView {
        let owner = job.metadata.owner_references.iter().flatten();
        let cron_job = owner
            .filter(|o| o.kind == "CronJob" && o.controller == Some(true))
            .map(|o| o.name.clone())
            .next();
        let template = job.spec.as_ref().map(|s| &s.template);
        let hash = template
            .and_then(|t| t.metadata.as_ref()?.annotations.as_ref()?.get(CONFIG_HASH))
            .cloned();
        let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
        let finished = conditions
            .into_iter()
            .flatten()
            .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True");
        JobView {
            name: job.name_any(),
            labels: job.labels().clone(),
            cron_job,
            hash,
            running: !finished,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::controller::lean::{owned_fields, strip_workload};
    use crate::workloads::FIELD_MANAGER;

    /// A Deployment whose template the operator and its team both wrote.
    pub(crate) fn deployment() -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "api", "namespace": "team-a", "managedFields": [
                {"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {
                    "f:metadata": {"f:annotations": {"f:egressproxy.io/config-hash": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {"f:env": {
                        "k:{\"name\":\"NO_PROXY\"}": {".": {}}}}}}}}}},
                {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {
                    "f:containers": {"k:{\"name\":\"app\"}": {"f:env": {
                        "k:{\"name\":\"HTTPS_PROXY\"}": {".": {}, "f:name": {}}}}},
                    "f:initContainers": {"k:{\"name\":\"init\"}": {"f:env": {
                        "k:{\"name\":\"http_proxy\"}": {".": {}}}}}}}}}},
                {"manager": FIELD_MANAGER, "operation": "Update", "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}
            ]},
            "spec": {"selector": {}, "template": {
                "metadata": {"annotations": {"egressproxy.io/config-hash": "teams-own", "x": "y"}},
                "spec": {
                    "containers": [{"name": "app", "env": [
                        {"name": "HTTPS_PROXY", "value": "ours"},
                        {"name": "NO_PROXY", "value": "theirs"},
                        {"name": "LOG", "value": "1"}]}],
                    "initContainers": [{"name": "init", "env": [
                        {"name": "http_proxy", "value": "ours"}]}]}}}
        }))
        .expect("deployment")
    }

    #[test]
    fn only_the_operators_own_managed_fields_are_kept_and_read() {
        let mut d = deployment();
        strip_workload(&mut d);
        let kept = d.metadata.managed_fields.as_ref().expect("kept");
        assert_eq!(kept.len(), 1, "the operator's entry of the object itself");
        let v = d.view().expect("view");
        let owned = v.owned.clone().expect("owned");
        assert!(!owned.hash, "the team's annotation");
        let entries: Vec<(&str, &str)> = owned
            .entries
            .iter()
            .map(|(c, e)| (c.as_str(), e.as_str()))
            .collect();
        assert_eq!(entries, [("app", "HTTPS_PROXY"), ("init", "http_proxy")]);
        let t = v.ours_only();
        let annotations = t.metadata.as_ref().and_then(|m| m.annotations.clone());
        assert_eq!(
            annotations,
            Some(BTreeMap::from([("x".to_owned(), "y".to_owned())]))
        );
        let spec = t.spec.as_ref().expect("spec");
        let names = |c: &k8s_openapi::api::core::v1::Container| -> Vec<String> {
            c.env.iter().flatten().map(|e| e.name.clone()).collect()
        };
        assert_eq!(names(&spec.containers[0]), ["HTTPS_PROXY", "LOG"]);
        let init = spec.init_containers.as_ref().expect("init");
        assert_eq!(names(&init[0]), ["http_proxy"]);
    }

    /// What the operator's apply owns, as the API server records it.
    fn applied_fields(template: &str) -> Value {
        let entry = |var: &str| {
            let key = format!("k:{{\"name\":\"{var}\"}}");
            let from = json!({".": {}, "f:secretKeyRef": {".": {}, "f:key": {}, "f:name": {}}});
            (key, json!({".": {}, "f:name": {}, "f:valueFrom": from}))
        };
        let env: Map<String, Value> = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]
            .map(entry)
            .into_iter()
            .collect();
        let tpl = json!({
            "f:metadata": {"f:annotations": {
                format!("f:{CONFIG_HASH}"): {}, "f:egressproxy.io/credential-slot": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:env": env}},
                "f:initContainers": {"k:{\"name\":\"init\"}": {".": {}, "f:name": {}}}}});
        template
            .rsplit('/')
            .filter(|s| !s.is_empty())
            .fold(tpl, |v, key| json!({ key: v }))
    }

    /// The cached entry is a fraction of the recorded one and owns the same.
    #[test]
    fn the_operators_fields_are_kept_as_far_as_they_are_read() {
        for kind in [WorkloadKind::Deployment, WorkloadKind::CronJob] {
            let full = applied_fields(&template_fields(kind));
            let kept = owned_fields(&full);
            let meta = |f: &Value| ObjectMeta {
                managed_fields: Some(vec![ManagedFieldsEntry {
                    fields_v1: Some(FieldsV1(f.clone())),
                    ..Default::default()
                }]),
                ..Default::default()
            };
            let before = owned(&meta(&full), kind).expect("owned");
            assert!(before.hash, "{kind:?}");
            assert_eq!(before.entries.len(), 3, "{kind:?}");
            assert_eq!(owned(&meta(&kept), kind), Some(before), "{kind:?}");
            let size = |v: &Value| v.to_string().len();
            assert!(size(&kept) * 2 < size(&full), "{kind:?}: {kept}");
        }
        assert_eq!(owned_fields(&json!({"f:status": {}})), json!({}));
    }

    #[test]
    fn without_managed_fields_everything_counts() {
        let mut d = deployment();
        d.metadata.managed_fields = None;
        strip_workload(&mut d);
        let v = d.view().expect("view");
        assert_eq!(v.owned, None);
        assert_eq!(*v.ours_only(), v.template);
        // managedFields with nothing of ours: nothing counts.
        let mut d = deployment();
        d.metadata
            .managed_fields
            .as_mut()
            .expect("fields")
            .remove(1);
        strip_workload(&mut d);
        let v = d.view().expect("view");
        assert_eq!(v.owned, Some(Owned::default()));
        let t = v.ours_only();
        let env = t.spec.as_ref().expect("spec").containers[0].env.clone();
        let names: Vec<String> = env.into_iter().flatten().map(|e| e.name).collect();
        assert_eq!(names, ["LOG"], "no proxy entry is ours");
    }
}
