//! LIST with selectors and `limit`/`continue` paging.

use base64::Engine;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{Target, output};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Key, Store, Stored};

/// Query parameters shared by LIST and WATCH.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub watch: bool,
    pub allow_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout_seconds: Option<u64>,
    /// Injected fault: end the watch stream after this long.
    pub drop_after: Option<std::time::Duration>,
}

impl ListParams {
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// [`Self::matches`] on a stored object, decoding only what the selectors read.
    pub fn matches_stored(&self, obj: &Stored) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            true
        } else if self.fields.metadata_only() {
            self.matches(&obj.metadata_view())
        } else {
            self.matches(&obj.value())
        }
    }
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn encode_continue(rv: u64, key: &Key) -> String {
    B64.encode(format!("{rv}/{}/{}", key.0, key.1))
}

fn decode_continue(token: &str) -> ApiResult<Key> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = B64.decode(token.trim_end_matches('=')).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let mut parts = s.splitn(3, '/');
    let _rv = parts
        .next()
        .and_then(|r| r.parse::<u64>().ok())
        .ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?;
    let name = parts.next().ok_or_else(bad)?;
    Ok((ns.to_string(), name.to_string()))
}

pub fn list(store: &Store, t: &Target, p: &ListParams) -> ApiResult<Value> {
    let (items, meta) = select(store, t, p)?;
    let items: Vec<Value> = items.iter().map(|o| output(&t.rt, &o.value())).collect();
    Ok(json!({
        "kind": t.rt.list_kind(),
        "apiVersion": t.rt.api_version(),
        "metadata": meta,
        "items": items,
    }))
}

/// [`list`] with each item reduced to its metadata: all a PartialObjectMetadataList shows.
pub fn list_metadata(store: &Store, t: &Target, p: &ListParams) -> ApiResult<Value> {
    let (items, meta) = select(store, t, p)?;
    let items: Vec<Value> = items.iter().map(|o| o.metadata_view()).collect();
    Ok(json!({
        "kind": t.rt.list_kind(),
        "apiVersion": t.rt.api_version(),
        "metadata": meta,
        "items": items,
    }))
}

/// [`list`] encoded as JSON (byte for byte what encoding its value gives), with the items
/// stored at the requested version copied as stored rather than decoded and encoded again.
pub fn list_json(store: &Store, t: &Target, p: &ListParams) -> ApiResult<Vec<u8>> {
    let (items, meta) = select(store, t, p)?;
    let (api_version, kind) = (t.rt.api_version(), t.rt.kind.as_str());
    let size: usize = items.iter().map(|o| o.bytes().len() + 1).sum();
    let mut out = Vec::with_capacity(size + 256);
    let head = serde_json::to_string(&json!({ "apiVersion": api_version }))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    // Keys in the order a map encodes them: apiVersion, items, kind, metadata.
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if o.is_served_as(&api_version, kind) {
            out.extend_from_slice(o.bytes());
        } else {
            let v = output(&t.rt, &o.value());
            serde_json::to_writer(&mut out, &v).map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    let tail = json!({ "kind": t.rt.list_kind(), "metadata": meta }).to_string();
    out.extend_from_slice(b"],");
    out.extend_from_slice(&tail.as_bytes()[1..]);
    Ok(out)
}

/// The stored objects a LIST returns (selectors, `limit`, `continue`) and the list's metadata.
fn select<'a>(
    store: &'a Store,
    t: &'a Target,
    p: &'a ListParams,
) -> ApiResult<(Vec<&'a Stored>, Value)> {
    let gr = t.rt.group_resource();
    let ns = t
        .namespace
        .as_deref()
        .or_else(|| p.fields.pinned("metadata.namespace"));
    let after = p
        .continue_token
        .as_deref()
        .map(decode_continue)
        .transpose()?;
    let rv = store.current_rv();
    let mut items = Vec::new();
    let mut last_key = None;
    let mut more = false;
    let mut remaining = 0usize;
    for (k, o) in store.range_stored(&gr, ns, after.as_ref()) {
        if !p.matches_stored(o) {
            continue;
        }
        if p.limit.is_some_and(|l| l > 0 && items.len() >= l) {
            more = true;
            remaining += 1;
            continue;
        }
        items.push(o);
        last_key = Some(k.clone());
    }
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if more && let Some(k) = last_key {
        meta["continue"] = json!(encode_continue(rv, &k));
        meta["remainingItemCount"] = json!(remaining);
    }
    Ok((items, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn store_with_configmaps() -> (Store, Target) {
        let mut store = Store::new(100, Registry::with_builtins());
        let rt = store
            .registry
            .get("", "v1", "configmaps")
            .expect("configmaps");
        let gr = rt.group_resource();
        for (ns, name, api_version) in [("a", "x", "v1"), ("a", "y", "v0"), ("b", "z", "v1")] {
            let rv = store.next_rv();
            store.put(
                &gr,
                json!({"apiVersion": api_version, "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string(),
                                    "labels": {"app": name}},
                       "data": {"k": "v\n\"quoted\" é", "n": "1.50"}}),
            );
        }
        let t = Target {
            rt,
            namespace: None,
            name: None,
            subresource: None,
            manager: None,
            user: None,
        };
        (store, t)
    }

    #[test]
    fn encoded_lists_are_the_lists_encoded() {
        let (store, t) = store_with_configmaps();
        let cases = [
            ListParams::default(),
            ListParams {
                limit: Some(2),
                ..Default::default()
            },
            ListParams {
                labels: LabelSelector::parse("app in (x,y)").expect("selector"),
                ..Default::default()
            },
            ListParams {
                fields: FieldSelector::parse("metadata.namespace=b", "ConfigMap").expect("fields"),
                ..Default::default()
            },
            ListParams {
                labels: LabelSelector::parse("app=nothing").expect("selector"),
                ..Default::default()
            },
        ];
        for p in cases {
            let encoded = list_json(&store, &t, &p).expect("encoded");
            let value = list(&store, &t, &p).expect("list");
            assert_eq!(
                String::from_utf8(encoded).expect("utf-8"),
                value.to_string(),
                "{p:?}"
            );
        }
        // The item stored as v0 is served as v1.
        let all = list(&store, &t, &ListParams::default()).expect("list");
        assert_eq!(all["items"][1]["apiVersion"], "v1");
    }

    #[test]
    fn metadata_lists_keep_what_partial_metadata_shows() {
        let (store, t) = store_with_configmaps();
        let p = ListParams::default();
        let full = crate::accept::Output::PartialObjectMetadataList("meta.k8s.io/v1")
            .metadata_only(list(&store, &t, &p).expect("list"))
            .expect("full");
        let reduced = crate::accept::Output::PartialObjectMetadataList("meta.k8s.io/v1")
            .metadata_only(list_metadata(&store, &t, &p).expect("list"))
            .expect("reduced");
        assert_eq!(full, reduced);
        assert_eq!(full["items"][0]["metadata"]["name"], "x");
    }
}
