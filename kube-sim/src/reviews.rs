//! `authorization.k8s.io/v1` reviews, answered from the stored RBAC objects and never stored:
//! SelfSubjectAccessReview and SelfSubjectRulesReview (about the requester, impersonation
//! included), SubjectAccessReview and LocalSubjectAccessReview (about any user and groups);
//! and `authentication.k8s.io/v1` TokenReview, answered from the issued tokens.

use serde_json::{Value, json};

use crate::auth::{self, Attributes, User};
use crate::error::{ApiError, ApiResult};
use crate::object::Target;
use crate::store::Store;

fn str_at(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        &format!("{kind}.authorization.k8s.io"),
        "",
        &[(field, message.into())],
    )
}

/// Allowed or not, and why, for a review's spec on behalf of `user`.
fn access(store: &Store, kind: &str, user: &User, spec: &Value) -> ApiResult<Value> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let url = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let reason = match (resource, url) {
        (Some(r), None) => {
            let opt = |p: &str| Some(str_at(r, p)).filter(|s| !s.is_empty());
            let mut resource = str_at(r, "/resource");
            if let Some(sub) = opt("/subresource") {
                resource = format!("{resource}/{sub}");
            }
            let a = Attributes {
                verb: str_at(r, "/verb"),
                group: str_at(r, "/group"),
                resource,
                name: opt("/name"),
                namespace: opt("/namespace"),
            };
            auth::decide(store, user, &a)
        }
        (None, Some(u)) => auth::decide_url(store, user, &str_at(u, "/verb"), &str_at(u, "/path")),
        _ => {
            let m = "exactly one of nonResourceAttributes or resourceAttributes must be specified";
            return Err(invalid(kind, "spec.resourceAttributes", m));
        }
    };
    Ok(match reason {
        Some(r) => json!({ "allowed": true, "reason": r }),
        None => json!({ "allowed": false }),
    })
}

/// The user a SubjectAccessReview asks about.
fn subject(kind: &str, spec: &Value) -> ApiResult<User> {
    let name = str_at(spec, "/user");
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect();
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            kind,
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    Ok(User::Named { name, groups })
}

/// A TokenReview's status: the user of a token this server issued (the admin token or a
/// ServiceAccount's), or not authenticated, as a real server answers (no error text for an
/// unknown token). ServiceAccount users carry the account's uid when it exists.
fn token_status(store: &Store, spec: &Value) -> ApiResult<Value> {
    let token = str_at(spec, "/token");
    if token.is_empty() {
        let m = "Required value: token must be set";
        return Err(ApiError::invalid(
            "TokenReview.authentication.k8s.io",
            "",
            &[("spec.token", m.into())],
        ));
    }
    let user = match auth::authenticate(store, Some(&format!("Bearer {token}"))) {
        Ok(user) => user,
        Err(_) => return Ok(json!({ "authenticated": false, "user": {} })),
    };
    let mut info = json!({ "username": user.name(), "groups": user.groups() });
    if let User::ServiceAccount { namespace, name } = &user {
        let gr = crate::resources::GroupResource {
            group: String::new(),
            resource: "serviceaccounts".into(),
        };
        let sa = store.get(&gr, &(namespace.clone(), name.clone()));
        if let Some(uid) = sa.and_then(|o| o.pointer("/metadata/uid").cloned()) {
            info["uid"] = uid;
        }
    }
    let audiences = spec.get("audiences").cloned().unwrap_or(json!([]));
    Ok(json!({ "authenticated": true, "user": info, "audiences": audiences }))
}

/// Answer a review POSTed to `t` by `user`.
pub fn answer(store: &Store, user: &User, t: &Target, mut body: Value) -> ApiResult<Value> {
    let kind = t.rt.kind.as_str();
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let status = match kind {
        "SelfSubjectAccessReview" => access(store, kind, user, &spec)?,
        "SubjectAccessReview" => access(store, kind, &subject(kind, &spec)?, &spec)?,
        "LocalSubjectAccessReview" => {
            let ns = t.namespace.clone().unwrap_or_default();
            if str_at(&spec, "/resourceAttributes/namespace") != ns {
                let m = format!("must match metadata.namespace {ns:?}");
                return Err(invalid(kind, "spec.resourceAttributes.namespace", &m));
            }
            access(store, kind, &subject(kind, &spec)?, &spec)?
        }
        "SelfSubjectRulesReview" => auth::rules_of(store, user, &str_at(&spec, "/namespace")),
        "TokenReview" => token_status(store, &spec)?,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "{kind} cannot be created"
            )));
        }
    };
    body["apiVersion"] = json!(format!("{}/{}", t.rt.group, t.rt.version));
    body["kind"] = json!(kind);
    body["metadata"] = json!({ "creationTimestamp": null });
    body["status"] = status;
    Ok(body)
}
