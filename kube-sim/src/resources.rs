//! Resource types served by the simulator: built-in kinds and CRD-defined ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// One served resource of one group/version.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status: bool,
    pub scale: bool,
    /// Scale subresource paths: spec replicas, status replicas, label selector (JSON pointers).
    pub scale_paths: Option<ScalePaths>,
    /// Strategic merge patch is supported (built-in kinds only).
    pub strategic: bool,
    /// Defined by a CRD (name of the CRD).
    pub crd: Option<String>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The storage key: objects are shared across versions of a group/resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    /// An access review or a TokenReview: created and answered, never stored.
    pub fn is_review(&self) -> bool {
        self.group == "authorization.k8s.io" || self.group == "authentication.k8s.io"
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.is_review() {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// `.spec.replicas` -> `/spec/replicas`
fn json_path_to_pointer(p: &str) -> String {
    p.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, s| format!("{acc}/{s}"))
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

/// All resource types known to the server, keyed by (group, version, plural).
#[derive(Debug, Default, Clone)]
pub struct Registry {
    types: BTreeMap<(String, String, String), Arc<ResourceType>>,
    /// Preferred version per group, in registration order of groups.
    group_order: Vec<String>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut r = Self::default();
        for t in builtin_types() {
            r.insert(t);
        }
        r
    }

    pub fn insert(&mut self, t: ResourceType) {
        if !self.group_order.contains(&t.group) {
            self.group_order.push(t.group.clone());
        }
        self.types.insert(
            (t.group.clone(), t.version.clone(), t.plural.clone()),
            Arc::new(t),
        );
    }

    /// Remove all types defined by the named CRD.
    pub fn remove_crd(&mut self, crd: &str) {
        self.types.retain(|_, t| t.crd.as_deref() != Some(crd));
        let groups: Vec<String> = self.types.values().map(|t| t.group.clone()).collect();
        self.group_order.retain(|g| groups.contains(g));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Find the type for an object's apiVersion and kind.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = split_api_version(api_version);
        self.types
            .values()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    pub fn group_has_version(&self, group: &str, version: &str) -> bool {
        self.types
            .keys()
            .any(|(g, v, _)| g == group && v == version)
    }

    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Groups (excluding core) with their versions, preferred version first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for g in self.group_order.iter().filter(|g| !g.is_empty()) {
            let mut versions: Vec<String> = Vec::new();
            for (gg, v, _) in self.types.keys() {
                if gg == g && !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            out.push((g.clone(), versions));
        }
        out
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stability, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stability, major, minor)
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

struct B {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    scale: bool,
}

#[rustfmt::skip]
const BUILTINS: &[B] = &[
    B { group: "", version: "v1", plural: "namespaces", kind: "Namespace", namespaced: false, short: &["ns"], status: true, scale: false },
    B { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true, short: &[], status: false, scale: false },
    B { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true, short: &["cm"], status: false, scale: false },
    B { group: "", version: "v1", plural: "services", kind: "Service", namespaced: true, short: &["svc"], status: true, scale: false },
    B { group: "", version: "v1", plural: "endpoints", kind: "Endpoints", namespaced: true, short: &["ep"], status: false, scale: false },
    B { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false, short: &["no"], status: true, scale: false },
    B { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true, short: &["po"], status: true, scale: false },
    B { group: "", version: "v1", plural: "events", kind: "Event", namespaced: true, short: &["ev"], status: false, scale: false },
    B { group: "", version: "v1", plural: "serviceaccounts", kind: "ServiceAccount", namespaced: true, short: &["sa"], status: false, scale: false },
    B { group: "apps", version: "v1", plural: "deployments", kind: "Deployment", namespaced: true, short: &["deploy"], status: true, scale: true },
    B { group: "apps", version: "v1", plural: "replicasets", kind: "ReplicaSet", namespaced: true, short: &["rs"], status: true, scale: true },
    B { group: "apps", version: "v1", plural: "statefulsets", kind: "StatefulSet", namespaced: true, short: &["sts"], status: true, scale: true },
    B { group: "apps", version: "v1", plural: "daemonsets", kind: "DaemonSet", namespaced: true, short: &["ds"], status: true, scale: false },
    B { group: "apps", version: "v1", plural: "controllerrevisions", kind: "ControllerRevision", namespaced: true, short: &[], status: false, scale: false },
    B { group: "batch", version: "v1", plural: "jobs", kind: "Job", namespaced: true, short: &[], status: true, scale: false },
    B { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true, short: &["cj"], status: true, scale: false },
    B { group: "discovery.k8s.io", version: "v1", plural: "endpointslices", kind: "EndpointSlice", namespaced: true, short: &[], status: false, scale: false },
    B { group: "events.k8s.io", version: "v1", plural: "events", kind: "Event", namespaced: true, short: &["ev"], status: false, scale: false },
    B { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease", namespaced: true, short: &[], status: false, scale: false },
    B { group: "networking.k8s.io", version: "v1", plural: "servicecidrs", kind: "ServiceCIDR", namespaced: false, short: &[], status: true, scale: false },
    B { group: "networking.k8s.io", version: "v1", plural: "networkpolicies", kind: "NetworkPolicy", namespaced: true, short: &["netpol"], status: false, scale: false },
    B { group: "policy", version: "v1", plural: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, short: &["pdb"], status: true, scale: false },
    B { group: "admissionregistration.k8s.io", version: "v1", plural: "validatingadmissionpolicies", kind: "ValidatingAdmissionPolicy", namespaced: false, short: &[], status: true, scale: false },
    B { group: "admissionregistration.k8s.io", version: "v1", plural: "validatingadmissionpolicybindings", kind: "ValidatingAdmissionPolicyBinding", namespaced: false, short: &[], status: false, scale: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", plural: "roles", kind: "Role", namespaced: true, short: &[], status: false, scale: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", plural: "clusterroles", kind: "ClusterRole", namespaced: false, short: &[], status: false, scale: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", plural: "rolebindings", kind: "RoleBinding", namespaced: true, short: &[], status: false, scale: false },
    B { group: "rbac.authorization.k8s.io", version: "v1", plural: "clusterrolebindings", kind: "ClusterRoleBinding", namespaced: false, short: &[], status: false, scale: false },
    B { group: "authorization.k8s.io", version: "v1", plural: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview", namespaced: false, short: &[], status: false, scale: false },
    B { group: "authorization.k8s.io", version: "v1", plural: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview", namespaced: false, short: &[], status: false, scale: false },
    B { group: "authorization.k8s.io", version: "v1", plural: "subjectaccessreviews", kind: "SubjectAccessReview", namespaced: false, short: &[], status: false, scale: false },
    B { group: "authorization.k8s.io", version: "v1", plural: "localsubjectaccessreviews", kind: "LocalSubjectAccessReview", namespaced: true, short: &[], status: false, scale: false },
    B { group: "authentication.k8s.io", version: "v1", plural: "tokenreviews", kind: "TokenReview", namespaced: false, short: &[], status: false, scale: false },
    B { group: "apiextensions.k8s.io", version: "v1", plural: "customresourcedefinitions", kind: "CustomResourceDefinition", namespaced: false, short: &["crd", "crds"], status: true, scale: false },
];

fn builtin_types() -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .map(|b| ResourceType {
            group: b.group.into(),
            version: b.version.into(),
            plural: b.plural.into(),
            singular: b.kind.to_lowercase(),
            kind: b.kind.into(),
            namespaced: b.namespaced,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
            categories: if matches!(
                b.plural,
                "pods"
                    | "services"
                    | "deployments"
                    | "replicasets"
                    | "statefulsets"
                    | "daemonsets"
                    | "jobs"
            ) {
                vec!["all".into()]
            } else {
                vec![]
            },
            status: b.status,
            scale: b.scale,
            scale_paths: b.scale.then(|| ScalePaths {
                spec_replicas: "/spec/replicas".into(),
                status_replicas: "/status/replicas".into(),
                label_selector: None,
            }),
            strategic: true,
            crd: None,
        })
        .collect()
}

/// Resource types defined by a CustomResourceDefinition object (one per served version).
pub fn types_from_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or("metadata.name is required")?;
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name must be spec.names.plural+\".\"+spec.group: \"{plural}.{group}\""
        ));
    }
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or("Namespaced");
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => return Err(format!("spec.scope: Unsupported value: \"{other}\"")),
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    if versions.is_empty() {
        return Err("spec.versions must have at least one version".into());
    }
    let mut out = Vec::new();
    for v in versions {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name is required")?;
        if !v.get("served").and_then(Value::as_bool).unwrap_or(false) {
            continue;
        }
        out.push(ResourceType {
            group: group.into(),
            version: vname.into(),
            plural: plural.into(),
            singular: singular.clone(),
            kind: kind.into(),
            namespaced,
            short_names: strs(names.get("shortNames")),
            categories: strs(names.get("categories")),
            status: v.pointer("/subresources/status").is_some(),
            scale: v.pointer("/subresources/scale").is_some(),
            scale_paths: v.pointer("/subresources/scale").map(|s| {
                let p = |k: &str| s.get(k).and_then(Value::as_str).map(json_path_to_pointer);
                ScalePaths {
                    spec_replicas: p("specReplicasPath").unwrap_or_else(|| "/spec/replicas".into()),
                    status_replicas: p("statusReplicasPath")
                        .unwrap_or_else(|| "/status/replicas".into()),
                    label_selector: p("labelSelectorPath"),
                }
            }),
            strategic: false,
            crd: Some(name.into()),
        });
    }
    Ok(out)
}
