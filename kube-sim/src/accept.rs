//! Accept negotiation for the transforms the real server applies to responses:
//! `as=Table` and `as=PartialObjectMetadata` / `as=PartialObjectMetadataList` (metadata-only
//! responses, what kube-rs `Api<PartialObjectMeta<K>>` and client-go's metadata client ask for).

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};

/// What the client asked a resource response to be turned into. The `&str` is the
/// apiVersion of the result (`meta.k8s.io/v1` or `meta.k8s.io/v1beta1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object or list itself.
    Object,
    Table(&'static str),
    PartialObjectMetadata(&'static str),
    PartialObjectMetadataList(&'static str),
}

impl Output {
    /// The first alternative of an Accept header kube-sim can serve (as JSON), in the order
    /// given. `as=` needs `g=meta.k8s.io`; `v=` may be `v1`, `v1beta1` or (leniently) absent.
    /// Alternatives naming other media types (protobuf, YAML, CBOR) or unknown targets are
    /// skipped; when nothing fits the object itself is sent.
    pub fn negotiate(accept: &str) -> Output {
        for clause in accept.split(',') {
            let mut parts = clause.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
                continue;
            }
            let (mut target, mut group, mut version) = (None, None, None);
            for p in parts {
                match p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                    Some(("as", v)) => target = Some(v),
                    Some(("g", v)) => group = Some(v),
                    Some(("v", v)) => version = Some(v),
                    _ => {}
                }
            }
            let Some(target) = target else {
                return Output::Object;
            };
            let api = match (group, version) {
                (Some("meta.k8s.io"), Some("v1") | None) => "meta.k8s.io/v1",
                (Some("meta.k8s.io"), Some("v1beta1")) => "meta.k8s.io/v1beta1",
                _ => continue,
            };
            match target {
                "Table" => return Output::Table(api),
                "PartialObjectMetadata" => return Output::PartialObjectMetadata(api),
                "PartialObjectMetadataList" => return Output::PartialObjectMetadataList(api),
                _ => continue,
            }
        }
        Output::Object
    }

    /// A response body as metadata only, if that was asked for (anything else is returned
    /// unchanged; Tables are rendered elsewhere). `Status` bodies pass through; asking for the
    /// list form of a single object, or the other way round, is 406 as on the real server.
    pub fn metadata_only(self, v: Value) -> ApiResult<Value> {
        let is_status = v.get("kind").and_then(Value::as_str) == Some("Status");
        let is_list = v.get("items").is_some_and(Value::is_array)
            && v.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List"));
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
        match self {
            _ if is_status => Ok(v),
            Output::PartialObjectMetadata(_) if is_list => Err(not_acceptable(format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({kind})"
            ))),
            Output::PartialObjectMetadata(api) => Ok(partial_object_metadata(&v, api)),
            Output::PartialObjectMetadataList(_) if !is_list => Err(not_acceptable(format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({kind})"
            ))),
            Output::PartialObjectMetadataList(api) => {
                let items: Vec<Value> = v["items"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|o| partial_object_metadata(o, api))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": api,
                    "metadata": v.get("metadata").cloned().unwrap_or(json!({})),
                    "items": items,
                }))
            }
            Output::Object | Output::Table(_) => Ok(v),
        }
    }
}

/// An object reduced to its metadata (also the default object of a Table row).
pub fn partial_object_metadata(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

fn not_acceptable(msg: String) -> ApiError {
    ApiError::new(406, "NotAcceptable", msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(Output::negotiate(kubectl), Output::Table("meta.k8s.io/v1"));
        assert_eq!(Output::negotiate("application/json"), Output::Object);
        assert_eq!(Output::negotiate(""), Output::Object);
        assert_eq!(
            Output::negotiate("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Output::Table("meta.k8s.io/v1beta1")
        );
        // kube-rs
        assert_eq!(
            Output::negotiate("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Output::PartialObjectMetadata("meta.k8s.io/v1")
        );
        assert_eq!(
            Output::negotiate("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Output::PartialObjectMetadataList("meta.k8s.io/v1")
        );
        // client-go's metadata client: protobuf first, then JSON, then plain JSON.
        let client_go = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1, \
                         application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1, application/json";
        assert_eq!(
            Output::negotiate(client_go),
            Output::PartialObjectMetadataList("meta.k8s.io/v1beta1")
        );
        // Unknown targets and group-versions fall back to the next alternative.
        assert_eq!(
            Output::negotiate(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json"
            ),
            Output::Object
        );
        assert_eq!(
            Output::negotiate("application/json;as=Nope;g=meta.k8s.io;v=v1,*/*"),
            Output::Object
        );
        assert_eq!(
            Output::negotiate("application/json, application/json;as=Table;g=meta.k8s.io;v=v1"),
            Output::Object
        );
    }

    #[test]
    fn metadata_only_shapes() {
        let secret = json!({"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": "s", "labels": {"a": "b"}, "resourceVersion": "7"},
            "data": {"k": "c2VjcmV0"}});
        let list = json!({"kind": "SecretList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9", "continue": "x", "remainingItemCount": 2},
            "items": [secret.clone()]});
        let meta = Output::PartialObjectMetadata("meta.k8s.io/v1");
        let meta_list = Output::PartialObjectMetadataList("meta.k8s.io/v1beta1");

        let one = meta.metadata_only(secret.clone()).unwrap();
        assert_eq!(
            one,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "s", "labels": {"a": "b"}, "resourceVersion": "7"}})
        );
        let many = meta_list.metadata_only(list.clone()).unwrap();
        assert_eq!(many["kind"], "PartialObjectMetadataList");
        assert_eq!(many["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(many["metadata"], list["metadata"]);
        assert_eq!(many["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(many["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
        assert!(many["items"][0].get("data").is_none());

        assert_eq!(meta.metadata_only(list.clone()).unwrap_err().code, 406);
        assert_eq!(
            meta_list.metadata_only(secret.clone()).unwrap_err().code,
            406
        );
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
        assert_eq!(meta.metadata_only(status.clone()).unwrap(), status);
        assert_eq!(
            Output::Object.metadata_only(secret.clone()).unwrap(),
            secret
        );
    }
}
