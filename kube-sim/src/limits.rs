//! Size limits the real API server enforces: request bodies (3 MiB), annotations (256 KiB),
//! Secret and ConfigMap data (1 MiB) and stored objects (etcd's 1.5 MiB request limit).

use base64::Engine;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceType;

/// The largest request body the server reads (kube-apiserver's MaxRequestBodyBytes).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
const MAX_DATA_BYTES: usize = 1024 * 1024;
/// etcd's default `--max-request-bytes`; kube-sim measures the JSON encoding.
const MAX_STORED_BYTES: usize = 3 * 512 * 1024;

/// The error for a body over `MAX_BODY_BYTES`.
pub fn body_too_large() -> ApiError {
    ApiError::new(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
    )
}

fn too_long(kind: &str, obj: &Value, field: &str, limit: usize) -> ApiError {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut e = ApiError::invalid(
        kind,
        name,
        &[(field, format!("Too long: must have at most {limit} bytes"))],
    );
    if let Some(c) = e
        .details
        .as_mut()
        .and_then(|d| d.pointer_mut("/causes/0/reason"))
    {
        *c = Value::from("FieldValueTooLong");
    }
    e
}

/// Bytes of a Secret's (decoded) or ConfigMap's values.
fn data_bytes(rt: &ResourceType, obj: &Value) -> usize {
    let values = |key: &str| {
        obj.get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    let decoded = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_or(s.len(), |b| b.len())
    };
    match rt.kind.as_str() {
        "Secret" => values("data").into_iter().map(decoded).sum(),
        _ => {
            let text: usize = values("data").into_iter().map(str::len).sum();
            text + values("binaryData").into_iter().map(decoded).sum::<usize>()
        }
    }
}

/// Check a normalized object before it is stored.
pub fn check(rt: &ResourceType, obj: &Value) -> ApiResult<()> {
    let annotations: usize = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if annotations > MAX_ANNOTATIONS_BYTES {
        let field = "metadata.annotations";
        return Err(too_long(&rt.kind, obj, field, MAX_ANNOTATIONS_BYTES));
    }
    let core = rt.group.is_empty() && matches!(rt.kind.as_str(), "Secret" | "ConfigMap");
    if core && data_bytes(rt, obj) > MAX_DATA_BYTES {
        return Err(too_long(&rt.kind, obj, "data", MAX_DATA_BYTES));
    }
    if obj.to_string().len() > MAX_STORED_BYTES {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            "etcdserver: request is too large",
        ));
    }
    Ok(())
}
