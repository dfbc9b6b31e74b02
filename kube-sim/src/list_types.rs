//! What server-side apply needs to know of a type, as structured-merge-diff sees it: how each
//! list merges (`x-kubernetes-list-type` / `-list-map-keys`; for built-ins without them, the
//! patch merge key as the one key where patchStrategy=merge; otherwise atomic), which maps are
//! atomic (`x-kubernetes-map-type`, `+structType=atomic`) and which map keys are named fields.
//!
//! Built-in kinds use the table below (upstream's markers, not the strategic-merge-patch keys
//! of `patch.rs`); custom resources use their CRD's schema; anything unknown is "deduced"
//! (maps merge key by key, lists are atomic).

use serde_json::Value;

/// A key field of an associative list and its default (`+default`), used when an item omits it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub name: String,
    pub default: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map(Vec<Key>),
}

/// Where a walk is in a type.
#[derive(Debug, Clone)]
pub(crate) enum Ty<'s> {
    /// A built-in kind at the field `field` of the object under the field `parent` (list items
    /// keep their list's position).
    Builtin { parent: String, field: String },
    /// A node of a CRD's openAPIV3Schema.
    Crd(&'s Value),
    /// No schema: maps merge key by key, lists are atomic.
    Deduced,
}

/// The types of one resource: a built-in kind, or a custom resource with its version's schema.
pub(crate) struct Types<'s> {
    pub kind: String,
    pub crd_schema: Option<&'s Value>,
    pub custom: bool,
}

impl<'s> Types<'s> {
    pub fn root(&self) -> Ty<'s> {
        match (self.custom, self.crd_schema) {
            (false, _) => builtin("", ""),
            (true, Some(s)) => Ty::Crd(s),
            (true, None) => Ty::Deduced,
        }
    }

    /// The type of the map entry `key` under `ty`, and whether it is a named field (a struct
    /// field, as opposed to an entry of a map with arbitrary keys).
    pub fn child(&self, ty: &Ty<'s>, key: &str) -> (Ty<'s>, bool) {
        match ty {
            Ty::Builtin { field, .. } => (builtin(field, key), !is_string_map(field)),
            Ty::Crd(node) => {
                let at_root = self.crd_schema.is_some_and(|r| std::ptr::eq(r, *node));
                if at_root && key == "metadata" {
                    return (builtin("", "metadata"), true);
                }
                if let Some(p) = node.get("properties").and_then(|p| p.get(key)) {
                    return (Ty::Crd(p), true);
                }
                match node.get("additionalProperties") {
                    Some(ap) if ap.is_object() => (Ty::Crd(ap), false),
                    _ => (Ty::Deduced, false),
                }
            }
            Ty::Deduced => (Ty::Deduced, false),
        }
    }

    /// The type of the items of the list `ty`.
    pub fn item(&self, ty: &Ty<'s>) -> Ty<'s> {
        match ty {
            Ty::Builtin { .. } => ty.clone(),
            Ty::Crd(node) => node.get("items").map_or(Ty::Deduced, Ty::Crd),
            Ty::Deduced => Ty::Deduced,
        }
    }

    pub fn list_type(&self, ty: &Ty<'s>) -> ListType {
        match ty {
            Ty::Builtin { parent, field } => builtin_list(&self.kind, parent, field),
            Ty::Crd(node) => crd_list(node),
            Ty::Deduced => ListType::Atomic,
        }
    }

    /// A field of a built-in kind holding a Go struct (not a map with arbitrary keys).
    pub fn builtin_struct(&self, ty: &Ty<'s>) -> bool {
        matches!(ty, Ty::Builtin { field, .. } if !is_string_map(field))
    }

    /// Maps replaced and owned as a whole.
    pub fn map_atomic(&self, ty: &Ty<'s>) -> bool {
        match ty {
            Ty::Builtin { parent, field } => builtin_atomic_map(parent, field),
            Ty::Crd(node) => {
                node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
            }
            Ty::Deduced => false,
        }
    }
}

fn builtin(parent: &str, field: &str) -> Ty<'static> {
    Ty::Builtin {
        parent: parent.to_string(),
        field: field.to_string(),
    }
}

fn key(name: &str) -> Key {
    Key {
        name: name.to_string(),
        default: None,
    }
}

fn keys(names: &[&str]) -> ListType {
    ListType::Map(names.iter().map(|n| key(n)).collect())
}

/// `protocol` defaults to TCP in container and service ports (`+default="TCP"`).
fn port_keys(port: &str) -> ListType {
    ListType::Map(vec![
        key(port),
        Key {
            name: "protocol".into(),
            default: Some(Value::String("TCP".into())),
        },
    ])
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The list types of the built-in kinds (upstream `+listType`/`+listMapKey`, else
/// `+patchMergeKey` with `+patchStrategy=merge`, else atomic).
fn builtin_list(kind: &str, parent: &str, field: &str) -> ListType {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        | "webhooks" => keys(&["name"]),
        "claims" if parent == "resources" => keys(&["name"]),
        "volumeMounts" => keys(&["mountPath"]),
        "volumeDevices" => keys(&["devicePath"]),
        "ports" if CONTAINER_LISTS.contains(&parent) => port_keys("containerPort"),
        "ports" if kind == "Service" && parent == "spec" => port_keys("port"),
        "conditions" if kind == "Job" => ListType::Atomic,
        "conditions" => keys(&["type"]),
        "addresses" if kind == "Node" => keys(&["type"]),
        "ownerReferences" => keys(&["uid"]),
        "hostAliases" => keys(&["ip"]),
        "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
        "finalizers" if parent == "metadata" => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// `+structType=atomic` / `+mapType=atomic` maps of the built-in kinds.
fn builtin_atomic_map(parent: &str, field: &str) -> bool {
    matches!(
        field,
        "selector"
            | "labelSelector"
            | "podSelector"
            | "namespaceSelector"
            | "nodeSelector"
            | "secretKeyRef"
            | "configMapKeyRef"
            | "fieldRef"
            | "resourceFieldRef"
    ) || (parent == "nodeAffinity" && field == "requiredDuringSchedulingIgnoredDuringExecution")
}

/// Maps with arbitrary keys (their entries are not named fields).
fn is_string_map(field: &str) -> bool {
    matches!(
        field,
        "labels"
            | "annotations"
            | "data"
            | "binaryData"
            | "stringData"
            | "matchLabels"
            | "nodeSelector"
            | "limits"
            | "requests"
            | "capacity"
            | "allocatable"
            | "parameters"
    )
}

fn crd_list(node: &Value) -> ListType {
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => {
            let props = node.pointer("/items/properties");
            let names = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            ListType::Map(
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|n| Key {
                        name: n.to_string(),
                        default: props.and_then(|p| p.get(n)?.get("default")).cloned(),
                    })
                    .collect(),
            )
        }
        _ => ListType::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn types(kind: &str) -> Types<'static> {
        Types {
            kind: kind.into(),
            crd_schema: None,
            custom: false,
        }
    }

    fn at<'s>(t: &Types<'s>, path: &[&str]) -> Ty<'s> {
        let mut ty = t.root();
        for p in path {
            ty = match *p {
                "[]" => t.item(&ty),
                k => t.child(&ty, k).0,
            };
        }
        ty
    }

    #[test]
    fn container_ports_keyed_by_port_and_protocol() {
        let t = types("Deployment");
        let ports = at(
            &t,
            &["spec", "template", "spec", "containers", "[]", "ports"],
        );
        let ListType::Map(k) = t.list_type(&ports) else {
            panic!("ports must be a map list");
        };
        assert_eq!(k[0].name, "containerPort");
        assert_eq!(k[1].default, Some(json!("TCP")));
        let args = at(
            &t,
            &["spec", "template", "spec", "containers", "[]", "args"],
        );
        assert_eq!(t.list_type(&args), ListType::Atomic);
        assert!(t.map_atomic(&at(&t, &["spec", "selector"])));
        let versions = at(&types("CustomResourceDefinition"), &["spec", "versions"]);
        assert_eq!(types("x").list_type(&versions), ListType::Atomic);
    }

    #[test]
    fn crd_schemas_give_list_and_map_types() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "zone"],
                "items": {"type": "object", "properties": {"zone": {"type": "string", "default": "a"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set"},
            "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "extra": {"type": "object", "additionalProperties": {"type": "object"}}}}}});
        let t = Types {
            kind: "Widget".into(),
            crd_schema: Some(&schema),
            custom: true,
        };
        let ListType::Map(k) = t.list_type(&at(&t, &["spec", "items"])) else {
            panic!("items must be a map list");
        };
        assert_eq!(
            (k[1].name.as_str(), k[1].default.clone()),
            ("zone", Some(json!("a")))
        );
        assert_eq!(t.list_type(&at(&t, &["spec", "tags"])), ListType::Set);
        assert!(t.map_atomic(&at(&t, &["spec", "sel"])));
        let extra = at(&t, &["spec", "extra"]);
        assert!(!t.child(&extra, "anything").1);
        assert!(matches!(at(&t, &["metadata"]), Ty::Builtin { .. }));
    }
}
