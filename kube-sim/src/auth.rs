//! Authentication (the admin token of the written kubeconfig, ServiceAccount tokens),
//! impersonation, and authorization against the stored RBAC objects: the decisions behind
//! every request and behind the access reviews (`reviews.rs`).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::kubeconfig::ADMIN_TOKEN;
use crate::object::Target;
use crate::resources::GroupResource;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    Admin,
    ServiceAccount {
        namespace: String,
        name: String,
    },
    /// A user named by impersonation or by a SubjectAccessReview, with its groups.
    Named {
        name: String,
        groups: Vec<String>,
    },
}

impl User {
    pub fn name(&self) -> String {
        match self {
            User::Admin => "kube-sim-admin".into(),
            User::ServiceAccount { namespace, name } => {
                format!("system:serviceaccount:{namespace}:{name}")
            }
            User::Named { name, .. } => name.clone(),
        }
    }

    pub(crate) fn groups(&self) -> Vec<String> {
        match self {
            User::Admin => vec!["system:masters".into(), "system:authenticated".into()],
            User::ServiceAccount { namespace, .. } => vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
            User::Named { groups, .. } => groups.clone(),
        }
    }

    /// `system:masters` bypasses authorization, as on a real server.
    fn is_admin(&self) -> bool {
        self.groups().iter().any(|g| g == "system:masters")
    }

    /// The user a request impersonates: a ServiceAccount user without groups gets its
    /// ServiceAccount groups, and every impersonated user is `system:authenticated`.
    fn impersonated(name: &str, mut groups: Vec<String>) -> User {
        if groups.is_empty()
            && let Some((ns, _)) = name
                .strip_prefix("system:serviceaccount:")
                .and_then(|r| r.split_once(':'))
        {
            groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        User::Named {
            name: name.into(),
            groups,
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
            user.name() == format!("system:serviceaccount:{}:{}", s("namespace"), s("name"))
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

/// What a request asks to do, as an authorizer sees it.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    /// The resource, with `/subresource` when there is one.
    pub resource: String,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

fn binding_desc(kind: &str, b: &Value) -> String {
    let s = |p: &str| b.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let ns = s("/metadata/namespace");
    let name = if ns.is_empty() {
        format!("\"{}\"", s("/metadata/name"))
    } else {
        format!("\"{}/{ns}\"", s("/metadata/name"))
    };
    format!(
        "{kind} {name} of {} \"{}\"",
        s("/roleRef/kind"),
        s("/roleRef/name")
    )
}

/// How the real authorizer names a binding's subject.
fn subject_desc(subject: &Value) -> String {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    match s("kind") {
        "ServiceAccount" => format!("ServiceAccount \"{}/{}\"", s("name"), s("namespace")),
        kind => format!("{kind} \"{}\"", s("name")),
    }
}

/// The RBAC bindings (ClusterRoleBindings, then RoleBindings in `ns`) that bind `user`: how
/// the real authorizer describes each one and its subject, and its rules.
fn bound_rules(store: &Store, user: &User, ns: Option<&str>) -> Vec<(String, Vec<Value>)> {
    let subject = |b: &Value| {
        b.get("subjects")
            .and_then(Value::as_array)?
            .iter()
            .find(|s| subject_matches(s, user))
            .map(subject_desc)
    };
    let mut out = Vec::new();
    for (_, b) in store.range(&rbac("clusterrolebindings"), None, None) {
        if let Some(who) = subject(&b) {
            let desc = format!("{} to {who}", binding_desc("ClusterRoleBinding", &b));
            out.push((desc, role_rules(store, &b, "")));
        }
    }
    if let Some(ns) = ns {
        for (_, b) in store.range(&rbac("rolebindings"), Some(ns), None) {
            if let Some(who) = subject(&b) {
                let desc = format!("{} to {who}", binding_desc("RoleBinding", &b));
                out.push((desc, role_rules(store, &b, ns)));
            }
        }
    }
    out
}

/// Why `user` may do `a`, or None: the real RBAC authorizer's decision and reason.
pub fn decide(store: &Store, user: &User, a: &Attributes) -> Option<String> {
    if user.is_admin() {
        return Some("kube-sim: system:masters may do anything".into());
    }
    if a.group == "authorization.k8s.io"
        && a.resource.starts_with("selfsubject")
        && a.verb == "create"
    {
        return Some(
            "kube-sim: every authenticated user may review itself (system:basic-user)".into(),
        );
    }
    let name = a.name.as_deref();
    bound_rules(store, user, a.namespace.as_deref())
        .into_iter()
        .find(|(_, rules)| {
            rules
                .iter()
                .any(|r| rule_allows(r, &a.verb, &a.group, &a.resource, name))
        })
        .map(|(desc, _)| format!("RBAC: allowed by {desc}"))
}

/// URLs every user may GET (the real server's system:discovery and
/// system:public-info-viewer bindings).
pub const OPEN_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

fn url_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

/// Why `user` may `verb` a non-resource URL, or None.
pub fn decide_url(store: &Store, user: &User, verb: &str, path: &str) -> Option<String> {
    if user.is_admin() {
        return Some("kube-sim: system:masters may do anything".into());
    }
    if verb == "get" && OPEN_URLS.iter().any(|u| url_matches(u, path)) {
        return Some("kube-sim: discovery is open to every user".into());
    }
    bound_rules(store, user, None)
        .into_iter()
        .find(|(_, rules)| {
            rules.iter().any(|r| {
                strs(r.get("verbs")).iter().any(|v| *v == "*" || *v == verb)
                    && strs(r.get("nonResourceURLs"))
                        .iter()
                        .any(|u| url_matches(u, path))
            })
        })
        .map(|(desc, _)| format!("RBAC: allowed by {desc}"))
}

/// What `user` may do in `ns` (a SelfSubjectRulesReview's status).
pub fn rules_of(store: &Store, user: &User, ns: &str) -> Value {
    if user.is_admin() {
        return json!({
            "resourceRules": [{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }],
            "nonResourceRules": [{ "verbs": ["*"], "nonResourceURLs": ["*"] }],
            "incomplete": false,
        });
    }
    let mut resource = vec![
        json!({ "verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] }),
    ];
    let mut non_resource = vec![json!({ "verbs": ["get"], "nonResourceURLs": OPEN_URLS })];
    let ns = (!ns.is_empty()).then_some(ns);
    for rule in bound_rules(store, user, ns)
        .into_iter()
        .flat_map(|(_, r)| r)
    {
        let keep = |k: &str| {
            rule.get(k)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        };
        let mut out = serde_json::Map::new();
        for k in [
            "verbs",
            "apiGroups",
            "resources",
            "resourceNames",
            "nonResourceURLs",
        ] {
            if let Some(v) = keep(k) {
                out.insert(k.into(), v.clone());
            }
        }
        if out.contains_key("nonResourceURLs") {
            non_resource.push(Value::Object(out));
        } else {
            resource.push(Value::Object(out));
        }
    }
    json!({ "resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false })
}

/// The user a request acts as: `Impersonate-User` and `Impersonate-Group` headers, allowed
/// only to a requester with the `impersonate` verb on those users, ServiceAccounts and groups.
pub fn impersonate(
    store: &Store,
    requester: User,
    user: Option<&str>,
    groups: Vec<String>,
) -> Result<User, ApiError> {
    let Some(name) = user else {
        if groups.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups without a user",
        ));
    };
    let mut checks = vec![match name
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, sa)) => ("serviceaccounts", sa.to_string(), Some(ns.to_string())),
        None => ("users", name.to_string(), None),
    }];
    checks.extend(groups.iter().map(|g| ("groups", g.clone(), None)));
    for (resource, target, namespace) in checks {
        let a = Attributes {
            verb: "impersonate".into(),
            group: String::new(),
            resource: resource.into(),
            name: Some(target.clone()),
            namespace: namespace.clone(),
        };
        if decide(store, &requester, &a).is_none() {
            let scope = match &namespace {
                Some(ns) => format!(" in the namespace \"{ns}\""),
                None => " at the cluster scope".into(),
            };
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{resource} \"{target}\" is forbidden: User \"{}\" cannot impersonate resource \"{resource}\" in API group \"\"{scope}",
                    requester.name()
                ),
            ));
        }
    }
    Ok(User::impersonated(name, groups))
}

/// Allow or answer 403 Forbidden, as the real RBAC authorizer does.
pub fn authorize(store: &Store, user: &User, verb: &str, t: &Target) -> Result<(), ApiError> {
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
    let a = Attributes {
        verb: verb.into(),
        group: group.into(),
        resource,
        name: name.map(str::to_string),
        namespace: ns,
    };
    if decide(store, user, &a).is_some() {
        return Ok(());
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
