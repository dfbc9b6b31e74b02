//! Authentication (the admin token of the written kubeconfig, ServiceAccount tokens) and
//! authorization of ServiceAccounts and anonymous users against the stored RBAC objects.

use serde_json::Value;

use crate::error::ApiError;
use crate::kubeconfig::ADMIN_TOKEN;
use crate::object::Target;
use crate::resources::GroupResource;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    Admin,
    ServiceAccount { namespace: String, name: String },
}

impl User {
    pub fn name(&self) -> String {
        match self {
            User::Admin => "kube-sim-admin".into(),
            User::ServiceAccount { namespace, name } => {
                format!("system:serviceaccount:{namespace}:{name}")
            }
        }
    }

    fn groups(&self) -> Vec<String> {
        match self {
            User::Admin => vec!["system:masters".into(), "system:authenticated".into()],
            User::ServiceAccount { namespace, .. } => vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

/// Who sent a request, from its `Authorization` header; unknown tokens are 401.
/// Requests without credentials are the admin: kubectl sends no bearer token over plain
/// HTTP, so the kubeconfig user arrives without one.
pub fn authenticate(store: &Store, header: Option<&str>) -> Result<User, ApiError> {
    let Some(h) = header else {
        return Ok(User::Admin);
    };
    let token = h
        .strip_prefix("Bearer ")
        .or_else(|| h.strip_prefix("bearer "))
        .unwrap_or_default()
        .trim();
    if token == ADMIN_TOKEN {
        return Ok(User::Admin);
    }
    match store.tokens.get(token) {
        Some((namespace, name)) => Ok(User::ServiceAccount {
            namespace: namespace.clone(),
            name: name.clone(),
        }),
        None => Err(ApiError::new(401, "Unauthorized", "Unauthorized")),
    }
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn rule_allows(rule: &Value, verb: &str, group: &str, resource: &str, name: Option<&str>) -> bool {
    let any = |list: &[&str], want: &str| list.iter().any(|x| *x == "*" || *x == want);
    let resources = strs(rule.get("resources"));
    let (base, sub) = match resource.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (resource, None),
    };
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == resource
            || sub.is_some_and(|s| *r == format!("{base}/*") || *r == format!("*/{s}"))
    });
    let names = strs(rule.get("resourceNames"));
    let name_ok = names.is_empty() || name.is_some_and(|n| names.contains(&n));
    any(&strs(rule.get("verbs")), verb)
        && any(&strs(rule.get("apiGroups")), group)
        && resource_ok
        && name_ok
}

fn subject_matches(subject: &Value, user: &User) -> bool {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    match s("kind") {
        "ServiceAccount" => {
            matches!(user, User::ServiceAccount { namespace, name } if s("name") == name && s("namespace") == namespace)
        }
        "User" => s("name") == user.name(),
        "Group" => user.groups().iter().any(|g| g == s("name")),
        _ => false,
    }
}

fn rbac(resource: &str) -> GroupResource {
    GroupResource {
        group: "rbac.authorization.k8s.io".into(),
        resource: resource.into(),
    }
}

/// Rules granted by one binding's roleRef (`ns` is the binding's namespace, "" for cluster).
fn role_rules(store: &Store, binding: &Value, ns: &str) -> Vec<Value> {
    let kind = binding
        .pointer("/roleRef/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let role = match kind {
        "ClusterRole" => store.get(&rbac("clusterroles"), &(String::new(), name)),
        "Role" if !ns.is_empty() => store.get(&rbac("roles"), &(ns.to_string(), name)),
        _ => None,
    };
    role.and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Allow or answer 403 Forbidden, as the real RBAC authorizer does.
pub fn authorize(store: &Store, user: &User, verb: &str, t: &Target) -> Result<(), ApiError> {
    if *user == User::Admin {
        return Ok(());
    }
    let resource = match &t.subresource {
        Some(s) => format!("{}/{s}", t.rt.plural),
        None => t.rt.plural.clone(),
    };
    let group = t.rt.group.as_str();
    let name = t.name.as_deref();
    let ns = if t.rt.namespaced {
        t.namespace.clone()
    } else {
        None
    };
    // The namespace object itself is checked against bindings in that namespace too.
    let ns = ns.or_else(|| {
        (t.rt.kind == "Namespace")
            .then(|| name.map(str::to_string))
            .flatten()
    });
    let allowed = |rules: Vec<Value>| {
        rules
            .iter()
            .any(|r| rule_allows(r, verb, group, &resource, name))
    };
    let bound = |b: &Value| {
        b.get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|ss| ss.iter().any(|s| subject_matches(s, user)))
    };
    for (_, b) in store.range(&rbac("clusterrolebindings"), None, None) {
        if bound(b) && allowed(role_rules(store, b, "")) {
            return Ok(());
        }
    }
    if let Some(ns) = ns.as_deref() {
        for (_, b) in store.range(&rbac("rolebindings"), Some(ns), None) {
            if bound(b) && allowed(role_rules(store, b, ns)) {
                return Ok(());
            }
        }
    }
    let what = match name {
        Some(n) => format!("{} \"{n}\" is forbidden", gr_name(t)),
        None => format!("{} is forbidden", gr_name(t)),
    };
    let scope = match (&t.namespace, t.rt.namespaced) {
        (Some(ns), true) => format!(" in the namespace \"{ns}\""),
        _ => " at the cluster scope".into(),
    };
    let res_desc = match &t.subresource {
        Some(s) => format!("resource \"{}/{s}\"", t.rt.plural),
        None => format!("resource \"{}\"", t.rt.plural),
    };
    Err(ApiError::new(
        403,
        "Forbidden",
        format!(
            "{what}: User \"{}\" cannot {verb} {res_desc} in API group \"{group}\"{scope}",
            user.name()
        ),
    ))
}

fn gr_name(t: &Target) -> String {
    if t.rt.group.is_empty() {
        t.rt.plural.clone()
    } else {
        format!("{}.{}", t.rt.plural, t.rt.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules() {
        let r = json!({"apiGroups": [""], "resources": ["pods", "deployments/scale"], "verbs": ["get", "list"]});
        assert!(rule_allows(&r, "get", "", "pods", Some("a")));
        assert!(!rule_allows(&r, "delete", "", "pods", Some("a")));
        assert!(!rule_allows(&r, "get", "apps", "pods", None));
        assert!(!rule_allows(&r, "get", "", "pods/status", Some("a")));
        let named = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"], "resourceNames": ["x"]});
        assert!(rule_allows(
            &named,
            "patch",
            "apps",
            "deployments/status",
            Some("x")
        ));
        assert!(!rule_allows(
            &named,
            "patch",
            "apps",
            "deployments/status",
            Some("y")
        ));
        assert!(!rule_allows(
            &named,
            "list",
            "apps",
            "deployments/status",
            None
        ));
    }
}
