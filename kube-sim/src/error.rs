//! API errors rendered as `Status` objects.

use serde_json::{Value, json};

/// An error answered to the client as a `Status` body with a real code and reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Sent as `Retry-After` and `details.retryAfterSeconds`.
    pub retry_after_seconds: Option<u64>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after_seconds: None,
        }
    }

    fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": resource });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    fn qualified(group: &str, resource: &str) -> String {
        if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        }
    }

    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let gr = Self::qualified(group, resource);
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found"))
            .with_details(group, resource, name)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let gr = Self::qualified(group, resource);
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(group, resource, name)
    }

    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let gr = Self::qualified(group, resource);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(group, resource, name)
    }

    pub fn invalid(kind: &str, name: &str, causes: &[(&str, String)]) -> Self {
        let msg = causes
            .iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {msg}"),
        );
        e.details = Some(json!({
            "name": name,
            "kind": kind,
            "causes": causes.iter().map(|(f, m)| json!({
                "reason": "FieldValueInvalid", "message": m, "field": f
            })).collect::<Vec<_>>(),
        }));
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(501, "NotImplemented", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(r) = self.retry_after_seconds {
            s["details"]["retryAfterSeconds"] = json!(r);
        }
        s
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A `Status` object reporting success (used by some deletes).
pub fn success_status(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut d = json!({ "name": name, "kind": resource, "uid": uid });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d })
}
