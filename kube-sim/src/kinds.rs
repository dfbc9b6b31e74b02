//! Kind-specific behavior: names, Secrets, Namespaces, Services, CRDs and custom resources.

use base64::Engine;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{meta_str, now};
use crate::resources::{GroupResource, ResourceType, types_from_crd};
use crate::store::{Key, Store};

pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

pub(crate) fn validate_name(rt: &ResourceType, name: &str) -> Result<(), String> {
    let ok = match rt.kind.as_str() {
        "Namespace" => is_dns_label(name),
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
            !name.is_empty()
                && name != "."
                && name != ".."
                && !name.contains('/')
                && !name.contains('%')
        }
        _ => is_dns_subdomain(name),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

/// Kind-specific normalization on every write.
pub(crate) fn normalize(
    store: &mut Store,
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Secret") => {
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                if !obj.get("data").is_some_and(Value::is_object) {
                    obj["data"] = json!({});
                }
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
            // The token controller fills in legacy ServiceAccount token Secrets.
            let sa = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .and_then(Value::as_str)
                .map(str::to_string);
            if obj.get("type") == Some(&json!("kubernetes.io/service-account-token"))
                && obj.pointer("/data/token").is_none()
                && let Some(sa) = sa
            {
                let ns = obj
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let token = store.issue_token(&ns, &sa);
                if !obj.get("data").is_some_and(Value::is_object) {
                    obj["data"] = json!({});
                }
                obj["data"]["token"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(token));
                obj["data"]["namespace"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(&ns));
            }
        }
        ("apps", kind @ ("Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")) => {
            if let Some(r) = obj.pointer("/spec/replicas")
                && !r
                    .as_i64()
                    .is_some_and(|n| (0..=i64::from(i32::MAX)).contains(&n))
            {
                let name = meta_str(obj, "name").unwrap_or_default().to_string();
                return Err(ApiError::invalid(
                    kind,
                    &name,
                    &[(
                        "spec.replicas",
                        format!("Invalid value: {r}: must be greater than or equal to 0"),
                    )],
                ));
            }
            apps_defaults(kind, obj)
        }
        ("batch", "Job") => crate::batch::normalize_job(obj, old)?,
        ("batch", "CronJob") => crate::batch::normalize_cron_job(obj)?,
        ("", "Namespace") => {
            if obj.pointer("/status/phase").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if obj.pointer("/spec/finalizers").is_none() && old.is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        ("", "Service") => {
            let ty = obj
                .pointer("/spec/type")
                .and_then(Value::as_str)
                .unwrap_or("ClusterIP")
                .to_string();
            if !obj.get("spec").is_some_and(Value::is_object) {
                obj["spec"] = json!({});
            }
            obj["spec"]["type"] = json!(ty);
            let old_ip = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
            let has_ip = obj
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
            if !has_ip && ty != "ExternalName" {
                let ip = match old_ip {
                    Some(ip) => ip,
                    None => json!(crate::service_ip::allocate(store)?),
                };
                obj["spec"]["clusterIP"] = ip.clone();
                obj["spec"]["clusterIPs"] = json!([ip]);
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            types_from_crd(obj).map_err(|e| {
                ApiError::invalid(
                    "CustomResourceDefinition",
                    meta_str(obj, "name").unwrap_or_default(),
                    &[("spec", e)],
                )
            })?;
            let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
            let mut accepted = names.clone();
            if accepted.get("singular").is_none() {
                let k = names
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_lowercase();
                accepted["singular"] = json!(k);
            }
            if accepted.get("listKind").is_none() {
                let k = names
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                accepted["listKind"] = json!(format!("{k}List"));
            }
            let stored: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            let ts = old
                .and_then(|o| {
                    o.pointer("/status/conditions/0/lastTransitionTime")
                        .cloned()
                })
                .unwrap_or_else(|| json!(now()));
            obj["status"] = json!({
                "acceptedNames": accepted,
                "storedVersions": stored,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": ts},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": ts},
                ],
            });
        }
        _ => {}
    }
    Ok(())
}

/// Prune, default and validate a custom resource against its CRD's schema.
pub(crate) fn validate_custom(
    store: &Store,
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    let Some(crd_name) = &rt.crd else {
        return Ok(());
    };
    let gr = GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    let Some(crd) = store.get(&gr, &(String::new(), crd_name.clone())) else {
        return Ok(());
    };
    let Some(schema) = crate::schema::version_schema(&crd, &rt.version) else {
        return Ok(());
    };
    let mut causes = Vec::new();
    crate::schema::apply(schema, obj, "", &mut causes);
    if causes.is_empty() {
        // x-kubernetes-validations (CEL), on the pruned and defaulted object; on an update,
        // transition rules compare with the stored object (`oldSelf`).
        if let Err(errors) = kube_cel::validate(schema, obj, old) {
            causes.extend(errors.iter().map(|e| {
                (
                    e.field_path.clone(),
                    format!("Invalid value: \"object\": {}", e.message),
                )
            }));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let causes: Vec<(&str, String)> = causes
        .iter()
        .map(|(f, m)| (f.as_str(), m.clone()))
        .collect();
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    Err(ApiError::invalid(
        &format!("{}.{}", rt.kind, rt.group),
        &name,
        &causes,
    ))
}

/// After a CRD is stored or removed, refresh the served types.
pub(crate) fn sync_crd(store: &mut Store, rt: &ResourceType, obj: &Value, removed: bool) {
    if rt.kind != "CustomResourceDefinition" || rt.group != "apiextensions.k8s.io" {
        return;
    }
    let Some(name) = meta_str(obj, "name") else {
        return;
    };
    let old_types: Vec<_> = store
        .registry
        .groups()
        .into_iter()
        .flat_map(|(g, vs)| vs.into_iter().map(move |v| (g.clone(), v)))
        .flat_map(|(g, v)| store.registry.in_group_version(&g, &v))
        .filter(|t| t.crd.as_deref() == Some(name))
        .collect();
    store.registry.remove_crd(name);
    if removed {
        // Deleting a CRD deletes all of its objects.
        if let Some(t) = old_types.first() {
            let gr = t.group_resource();
            let keys: Vec<Key> = store
                .range_stored(&gr, None, None)
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                store.remove(&gr, &k);
            }
        }
        return;
    }
    if let Ok(types) = types_from_crd(obj) {
        for t in types {
            store.registry.insert(t);
        }
    }
}

/// The defaults the real server fills in for apps/v1 workloads (the ones clients read back).
fn apps_defaults(kind: &str, obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let mut default = |k: &str, v: Value| {
        spec.entry(k.to_string()).or_insert(v);
    };
    match kind {
        "Deployment" => {
            default("replicas", json!(1));
            default("revisionHistoryLimit", json!(10));
            default("progressDeadlineSeconds", json!(600));
            default(
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
        }
        "StatefulSet" => {
            default("replicas", json!(1));
            default("revisionHistoryLimit", json!(10));
            default("podManagementPolicy", json!("OrderedReady"));
            default(
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
        }
        "DaemonSet" => {
            default("revisionHistoryLimit", json!(10));
            default(
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
        }
        _ => default("replicas", json!(1)),
    }
}
