//! Patch metadata of the built-in types: which lists merge (and by which key), which maps
//! are replaced. Taken from the `patchStrategy` / `patchMergeKey` struct tags of k8s.io/api.
//! Types not listed here merge their maps and replace their lists.

/// A node in the type tree: the Go type name, or "" when kube-sim does not track it.
pub(crate) type Ty = &'static str;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// No tag: maps merge, lists are replaced.
    Default,
    /// `patchStrategy:"merge"`: lists merge (by the merge key, or as sets of scalars).
    Merge,
    /// `patchStrategy:"replace"`: the value is replaced.
    Replace,
}

/// What a field's struct tags say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// The field's type (for a list: its items' type).
    pub ty: Ty,
    pub strategy: Strategy,
    /// The merge key ("" for none).
    pub key: &'static str,
}

use Strategy::{Default as D, Merge as M, Replace as R};

/// (owner type, field, field type, strategy, merge key).
const FIELDS: &[(Ty, &str, Ty, Strategy, &str)] = &[
    ("ObjectMeta", "finalizers", "", M, ""),
    ("ObjectMeta", "ownerReferences", "", M, "uid"),
    ("Deployment", "spec", "WorkloadSpec", D, ""),
    ("ReplicaSet", "spec", "WorkloadSpec", D, ""),
    ("StatefulSet", "spec", "WorkloadSpec", D, ""),
    ("DaemonSet", "spec", "WorkloadSpec", D, ""),
    ("ReplicationController", "spec", "WorkloadSpec", D, ""),
    ("PodTemplate", "template", "PodTemplateSpec", D, ""),
    ("WorkloadSpec", "template", "PodTemplateSpec", D, ""),
    ("Job", "spec", "JobSpec", D, ""),
    ("JobSpec", "template", "PodTemplateSpec", D, ""),
    ("CronJob", "spec", "CronJobSpec", D, ""),
    ("CronJobSpec", "jobTemplate", "JobTemplateSpec", D, ""),
    ("JobTemplateSpec", "metadata", "ObjectMeta", D, ""),
    ("JobTemplateSpec", "spec", "JobSpec", D, ""),
    ("PodTemplateSpec", "metadata", "ObjectMeta", D, ""),
    ("PodTemplateSpec", "spec", "PodSpec", D, ""),
    ("Pod", "spec", "PodSpec", D, ""),
    ("PodSpec", "containers", "Container", M, "name"),
    ("PodSpec", "initContainers", "Container", M, "name"),
    ("PodSpec", "ephemeralContainers", "Container", M, "name"),
    ("PodSpec", "volumes", "", M, "name"),
    ("PodSpec", "imagePullSecrets", "", M, "name"),
    ("PodSpec", "schedulingGates", "", M, "name"),
    ("PodSpec", "resourceClaims", "", M, "name"),
    ("PodSpec", "hostAliases", "", M, "ip"),
    ("PodSpec", "topologySpreadConstraints", "", M, "topologyKey"),
    ("Container", "ports", "", M, "containerPort"),
    ("Container", "env", "", M, "name"),
    ("Container", "volumeMounts", "", M, "mountPath"),
    ("Container", "volumeDevices", "", M, "devicePath"),
    ("Pod", "status", "PodStatus", D, ""),
    ("PodStatus", "conditions", "", M, "type"),
    ("PodStatus", "hostIPs", "", M, "ip"),
    ("PodStatus", "podIPs", "", M, "ip"),
    ("PodStatus", "resourceClaimStatuses", "", M, "name"),
    ("Deployment", "status", "Conditions", D, ""),
    ("ReplicaSet", "status", "Conditions", D, ""),
    ("StatefulSet", "status", "Conditions", D, ""),
    ("DaemonSet", "status", "Conditions", D, ""),
    ("ReplicationController", "status", "Conditions", D, ""),
    ("Job", "status", "Conditions", D, ""),
    ("Namespace", "status", "Conditions", D, ""),
    ("Service", "status", "Conditions", D, ""),
    ("PersistentVolumeClaim", "status", "Conditions", D, ""),
    ("PodDisruptionBudget", "status", "Conditions", D, ""),
    ("ServiceCIDR", "status", "Conditions", D, ""),
    ("Conditions", "conditions", "", M, "type"),
    ("Node", "spec", "NodeSpec", D, ""),
    ("NodeSpec", "podCIDRs", "", M, ""),
    ("Node", "status", "NodeStatus", D, ""),
    ("NodeStatus", "conditions", "", M, "type"),
    ("NodeStatus", "addresses", "", M, "type"),
    ("Service", "spec", "ServiceSpec", D, ""),
    ("ServiceSpec", "ports", "", M, "port"),
    ("ServiceAccount", "secrets", "", M, "name"),
    (
        "PodDisruptionBudget",
        "spec",
        "PodDisruptionBudgetSpec",
        D,
        "",
    ),
    ("PodDisruptionBudgetSpec", "selector", "", R, ""),
    (
        "ValidatingAdmissionPolicy",
        "spec",
        "ValidatingAdmissionPolicySpec",
        D,
        "",
    ),
    (
        "ValidatingAdmissionPolicySpec",
        "matchConditions",
        "",
        M,
        "name",
    ),
    ("ValidatingAdmissionPolicySpec", "variables", "", M, "name"),
];

/// Kinds with a type of their own in [`FIELDS`]; every other kind only has `metadata`.
const ROOTS: &[Ty] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "PodTemplate",
    "Job",
    "CronJob",
    "Pod",
    "Namespace",
    "Service",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "ServiceCIDR",
    "Node",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
];

/// The top-level type of an object of `kind`.
pub(crate) fn root(kind: Option<&str>) -> Ty {
    let known = kind.and_then(|k| ROOTS.iter().find(|r| **r == k));
    known.copied().unwrap_or("Object")
}

/// The tags of field `name` of type `ty`.
pub(crate) fn field(ty: Ty, name: &str) -> Field {
    let found = FIELDS.iter().find(|(o, f, ..)| *o == ty && *f == name);
    if let Some((_, _, t, strategy, key)) = found {
        return Field {
            ty: t,
            strategy: *strategy,
            key,
        };
    }
    let is_root = ty == "Object" || ROOTS.contains(&ty);
    let ty = if is_root && name == "metadata" {
        "ObjectMeta"
    } else {
        ""
    };
    Field {
        ty,
        strategy: Strategy::Default,
        key: "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_differ_by_owner() {
        assert_eq!(field("Container", "ports").key, "containerPort");
        assert_eq!(field("ServiceSpec", "ports").key, "port");
        assert_eq!(field("", "ports").strategy, Strategy::Default);
        assert_eq!(field(root(Some("ConfigMap")), "metadata").ty, "ObjectMeta");
        assert_eq!(field(root(Some("Pod")), "spec").ty, "PodSpec");
        assert_eq!(field("PodSpec", "tolerations").strategy, Strategy::Default);
    }
}
