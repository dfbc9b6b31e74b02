//! PATCH bodies: JSON merge patch, JSON patch and strategic merge patch.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

pub fn apply_patch(kind: PatchKind, doc: &Value, body: &[u8]) -> ApiResult<Value> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Merge => {
            let p: Value = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut out, &p);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &p.0).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchKind::Strategic => {
            out = strategic_merge_patch(&out, &parse_json(body)?)?;
            // The API server decodes the result into the typed object: nulls left by the
            // merge (in list items the server did not have) are not stored.
            crate::object::drop_nulls(&mut out);
        }
        PatchKind::Apply => {
            return Err(ApiError::unsupported_media_type(
                "server-side apply (application/apply-patch+yaml) is not implemented by kube-sim yet",
            ));
        }
    }
    if !out.is_object() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "the patched object must be a JSON object",
        ));
    }
    Ok(out)
}

/// Strategic merge patch exactly as apimachinery's `strategicpatch` (and `kubectl patch
/// --local`) computes it, before the server's typed decode; `doc`'s `kind` selects the
/// patch metadata. Checked against kubectl by `tests/it/strategic_upstream.rs`.
pub fn strategic_merge_patch(doc: &Value, patch: &Value) -> ApiResult<Value> {
    let Value::Object(p) = patch else {
        return Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        ));
    };
    crate::strategic::apply(doc, p.clone())
}

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in patch body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(doc: Value, p: Value) -> Value {
        apply_patch(PatchKind::Strategic, &doc, p.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let doc = json!({"kind": "Pod", "spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}});
        let out = smp(
            doc,
            json!({"spec": {"containers": [
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ]}}),
        );
        // Upstream order: items the server lacked come before its own (mergeSortedSlice).
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0]["image"], "a:1");
        assert_eq!(
            cs[0]["env"],
            json!([{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}])
        );
        assert_eq!(cs[1]["name"], "c");
        assert_eq!(cs[2]["name"], "b");
    }

    #[test]
    fn strategic_directives() {
        let doc = json!({"kind": "Pod", "spec": {"containers": [{"name": "a"}, {"name": "b"}], "tolerations": [{"key": "x"}]},
            "metadata": {"finalizers": ["f1"]}});
        let out = smp(
            doc,
            json!({
                "spec": {"containers": [{"name": "a", "$patch": "delete"}], "tolerations": [{"key": "y"}]},
                "metadata": {"finalizers": ["f2"], "labels": {"a": "b"}}
            }),
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["f2", "f1"]));
        let out = smp(
            out,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": null}}),
        );
        assert_eq!(out["metadata"], json!({"finalizers": ["f2"]}));
        // Unknown directives are refused where the map exists (upstream ignores them elsewhere).
        let bad = json!({"metadata": {"$patch": "remove"}}).to_string();
        assert_eq!(
            apply_patch(PatchKind::Strategic, &out, bad.as_bytes())
                .unwrap_err()
                .code,
            422
        );
    }

    #[test]
    fn merge_and_json_patch() {
        let doc = json!({"a": {"b": 1, "c": 2}});
        let out = apply_patch(PatchKind::Merge, &doc, br#"{"a":{"b":null,"d":3}}"#).unwrap();
        assert_eq!(out, json!({"a": {"c": 2, "d": 3}}));
        let out = apply_patch(
            PatchKind::Json,
            &doc,
            br#"[{"op":"replace","path":"/a/b","value":5}]"#,
        )
        .unwrap();
        assert_eq!(out["a"]["b"], 5);
        let err = apply_patch(
            PatchKind::Json,
            &doc,
            br#"[{"op":"test","path":"/a/b","value":9}]"#,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            apply_patch(PatchKind::Merge, &doc, b"{").unwrap_err().code,
            400
        );
        let to_array = br#"[{"op":"replace","path":"","value":[1]}]"#;
        assert_eq!(
            apply_patch(PatchKind::Json, &doc, to_array)
                .unwrap_err()
                .code,
            422
        );
    }
}
