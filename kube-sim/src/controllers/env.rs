//! A container's environment and command line as the kubelet makes them: `envFrom`, `env`
//! (values, Secret and ConfigMap keys, the downward API) and `$(VAR)` expansion.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;

use super::{gr, str_at};
use crate::store::Store;

/// The address a local process is reached at (it shares the host's network).
pub(super) const LOCAL_IP: &str = "127.0.0.1";

/// Kubernetes `$(VAR)` expansion: `$$` is a literal `$`, an undefined or unterminated
/// reference is kept as written.
pub(super) fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.is_empty() {
            out.push('$');
            rest = after;
            break;
        }
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match vars.get(name) {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&format!("$({name})")),
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Secrets and ConfigMaps of the Pod's namespace, fetched once per container.
struct Sources<'a> {
    store: &'a Store,
    ns: String,
}

impl Sources<'_> {
    /// The object's string data, or the kubelet's error when it is missing.
    fn data(&self, secret: bool, name: &str) -> Option<BTreeMap<String, String>> {
        let plural = if secret { "secrets" } else { "configmaps" };
        let obj = self
            .store
            .get(&gr("", plural), &(self.ns.clone(), name.to_string()))?;
        let data = obj.get("data").and_then(Value::as_object);
        let decode = |v: &Value| {
            let s = v.as_str().unwrap_or_default();
            if secret {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .unwrap_or_default();
                String::from_utf8_lossy(&bytes).into_owned()
            } else {
                s.to_string()
            }
        };
        Some(
            data.into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), decode(v)))
                .collect(),
        )
    }
}

fn not_found(secret: bool, name: &str) -> String {
    let kind = if secret { "secret" } else { "configmap" };
    format!("{kind} \"{name}\" not found")
}

fn optional(r: &Value) -> bool {
    r.get("optional").and_then(Value::as_bool) == Some(true)
}

/// `envFrom` into `vars`.
fn env_from(src: &Sources, c: &Value, vars: &mut BTreeMap<String, String>) -> Result<(), String> {
    for from in c
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = from
            .get("prefix")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (secret, r) = match (from.get("secretRef"), from.get("configMapRef")) {
            (Some(r), _) => (true, r),
            (None, Some(r)) => (false, r),
            (None, None) => continue,
        };
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        match src.data(secret, name) {
            Some(data) => {
                for (k, v) in data {
                    vars.insert(format!("{prefix}{k}"), v);
                }
            }
            None if optional(r) => {}
            None => return Err(not_found(secret, name)),
        }
    }
    Ok(())
}

/// A `secretKeyRef` or `configMapKeyRef`; None when it is optional and missing.
fn key_ref(src: &Sources, secret: bool, r: &Value) -> Result<Option<String>, String> {
    let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
    let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
    let Some(data) = src.data(secret, name) else {
        return if optional(r) {
            Ok(None)
        } else {
            Err(not_found(secret, name))
        };
    };
    match data.get(key) {
        Some(v) => Ok(Some(v.clone())),
        None if optional(r) => Ok(None),
        None => {
            let kind = if secret { "Secret" } else { "ConfigMap" };
            Err(format!(
                "couldn't find key {key} in {kind} {}/{name}",
                src.ns
            ))
        }
    }
}

/// A downward API `fieldRef`.
fn field_ref(pod: &Value, path: &str) -> Result<String, String> {
    let subscript = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_suffix("']")
            .map(str::to_string)
    };
    if let Some(k) = subscript("metadata.labels['") {
        return Ok(str_at(
            pod,
            &format!("/metadata/labels/{}", pointer_escape(&k)),
        ));
    }
    if let Some(k) = subscript("metadata.annotations['") {
        let p = format!("/metadata/annotations/{}", pointer_escape(&k));
        return Ok(str_at(pod, &p));
    }
    Ok(match path {
        "metadata.name" => str_at(pod, "/metadata/name"),
        "metadata.namespace" => str_at(pod, "/metadata/namespace"),
        "metadata.uid" => str_at(pod, "/metadata/uid"),
        "spec.nodeName" => str_at(pod, "/spec/nodeName"),
        "spec.serviceAccountName" => match str_at(pod, "/spec/serviceAccountName") {
            s if s.is_empty() => "default".into(),
            s => s,
        },
        "status.hostIP" | "status.podIP" | "status.hostIPs" | "status.podIPs" => LOCAL_IP.into(),
        other => return Err(format!("unsupported fieldRef path {other:?}")),
    })
}

fn pointer_escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// The variables a container declares (`envFrom`, then `env` in order), as the kubelet
/// resolves them; Err is the kubelet's CreateContainerConfigError message.
pub(super) fn container_vars(
    store: &Store,
    pod: &Value,
    c: &Value,
) -> Result<BTreeMap<String, String>, String> {
    let src = Sources {
        store,
        ns: super::namespace(pod),
    };
    let mut vars = BTreeMap::new();
    env_from(&src, c, &mut vars)?;
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
        let value = e.get("value").and_then(Value::as_str).unwrap_or_default();
        let from = e.get("valueFrom");
        let resolved = if !value.is_empty() || from.is_none() {
            Some(expand(value, &vars))
        } else if let Some(r) = from.and_then(|f| f.get("secretKeyRef")) {
            key_ref(&src, true, r)?
        } else if let Some(r) = from.and_then(|f| f.get("configMapKeyRef")) {
            key_ref(&src, false, r)?
        } else if let Some(r) = from.and_then(|f| f.get("fieldRef")) {
            let path = r
                .get("fieldPath")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Some(field_ref(pod, path)?)
        } else {
            return Err(format!("kube-sim does not resolve env {name}'s valueFrom"));
        };
        if let Some(v) = resolved {
            vars.insert(name.to_string(), v);
        }
    }
    Ok(vars)
}

/// The arguments the image's program gets: `command[1..]` (its first element stands for the
/// program the image is mapped to) followed by `args`, both `$(VAR)`-expanded.
pub(super) fn argv(c: &Value, vars: &BTreeMap<String, String>) -> Vec<String> {
    let list = |k: &str| -> Vec<String> {
        c.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| expand(s, vars))
            .collect()
    };
    let command = list("command");
    command.into_iter().skip(1).chain(list("args")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let v = vars(&[("A", "1"), ("B", "two")]);
        assert_eq!(expand("$(A)-$(B)", &v), "1-two");
        assert_eq!(expand("$$(A)", &v), "$(A)");
        assert_eq!(expand("$(MISSING)", &v), "$(MISSING)");
        assert_eq!(expand("$(A", &v), "$(A");
        assert_eq!(expand("cost $5 $", &v), "cost $5 $");
        assert_eq!(expand("$$$(A)", &v), "$1");
        assert_eq!(expand("", &v), "");
    }

    #[test]
    fn command_tail_then_args() {
        let c = serde_json::json!({"command": ["prog", "-x", "$(A)"], "args": ["y", "$$(A)"]});
        assert_eq!(argv(&c, &vars(&[("A", "1")])), ["-x", "1", "y", "$(A)"]);
        let c = serde_json::json!({"args": ["-c", "echo"]});
        assert_eq!(argv(&c, &vars(&[])), ["-c", "echo"]);
    }
}
