//! LIST with selectors and `limit`/`continue` paging.

use std::collections::BTreeMap;

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

/// The version the first page was served at, and the last key it returned.
fn decode_continue(token: &str) -> ApiResult<(u64, Key)> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = B64.decode(token.trim_end_matches('=')).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let mut parts = s.splitn(3, '/');
    let rv = parts
        .next()
        .and_then(|r| r.parse::<u64>().ok())
        .filter(|r| *r > 0)
        .ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?;
    let name = parts.next().ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
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
/// Every page is served at the version of the first (as etcd serves a continued list), so
/// the pages together are one consistent snapshot and a watch from the list's version
/// misses nothing; a continue token older than the history answers 410 Expired.
fn select(store: &Store, t: &Target, p: &ListParams) -> ApiResult<(Vec<Stored>, Value)> {
    let gr = t.rt.group_resource();
    let ns = t
        .namespace
        .as_deref()
        .or_else(|| p.fields.pinned("metadata.namespace"));
    let (rv, after) = match p.continue_token.as_deref().map(decode_continue) {
        Some(r) => {
            let (rv, k) = r?;
            (rv.min(store.current_rv()), Some(k))
        }
        None => (store.current_rv(), None),
    };
    let then = store.states_at(&gr, rv).ok_or_else(|| {
        ApiError::expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter.",
        )
    })?;
    let mut items = Vec::new();
    let mut last_key = None;
    let mut more = false;
    let mut remaining = 0usize;
    for (k, o) in at_version(
        store.range_stored(&gr, ns, after.as_ref()),
        &then,
        (ns, &after),
    ) {
        if !p.matches_stored(o) {
            continue;
        }
        if p.limit.is_some_and(|l| l > 0 && items.len() >= l) {
            more = true;
            remaining += 1;
            continue;
        }
        items.push(o.clone());
        last_key = Some(k.clone());
    }
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if more && let Some(k) = last_key {
        meta["continue"] = json!(encode_continue(rv, &k));
        meta["remainingItemCount"] = json!(remaining);
    }
    Ok((items, meta))
}

/// The objects stored now (`current`, in key order) as they were at an earlier version:
/// those changed since replaced by their state then (`then`, from [`Store::states_at`]),
/// in key order, within namespace `ns` and after the key `after`.
fn at_version<'a>(
    current: impl Iterator<Item = (&'a Key, &'a Stored)> + 'a,
    then: &'a BTreeMap<Key, Option<Stored>>,
    (ns, after): (Option<&'a str>, &'a Option<Key>),
) -> impl Iterator<Item = (&'a Key, &'a Stored)> + 'a {
    let mut now = current.filter(|(k, _)| !then.contains_key(*k)).peekable();
    let mut earlier = then
        .iter()
        .filter(move |(k, _)| after.as_ref().is_none_or(|a| *k > a))
        .filter(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
        .filter_map(|(k, o)| Some((k, o.as_ref()?)))
        .peekable();
    std::iter::from_fn(move || match (now.peek(), earlier.peek()) {
        (Some((a, _)), Some((b, _))) if a < b => now.next(),
        (Some(_), None) => now.next(),
        _ => earlier.next(),
    })
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

    fn put_configmap(store: &mut Store, t: &Target, (ns, name, k): (&str, &str, &str)) {
        let rv = store.next_rv();
        store.put(
            &t.rt.group_resource(),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string()},
                   "data": {"k": k}}),
        );
    }

    /// Every page of a list `limit` 1 from `token` on: (namespace/name, data.k) and the
    /// version each page carries.
    fn rest(store: &Store, t: &Target, mut token: String) -> (Vec<(String, String)>, Vec<String>) {
        let (mut items, mut versions) = (Vec::new(), Vec::new());
        while !token.is_empty() {
            let p = ListParams {
                limit: Some(1),
                continue_token: Some(token),
                ..Default::default()
            };
            let page = list(store, t, &p).expect("page");
            for i in page["items"].as_array().expect("items") {
                let m = &i["metadata"];
                items.push((
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap_or_default(),
                        m["name"].as_str().unwrap_or_default()
                    ),
                    i["data"]["k"].as_str().unwrap_or_default().to_string(),
                ));
            }
            versions.push(
                page["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            token = page["metadata"]["continue"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        (items, versions)
    }

    #[test]
    fn continued_pages_show_the_first_pages_version() {
        let (mut store, t) = store_with_configmaps();
        let p = ListParams {
            limit: Some(1),
            ..Default::default()
        };
        let first = list(&store, &t, &p).expect("first page");
        assert_eq!(first["items"][0]["metadata"]["name"], "x");
        let at = first["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .to_string();
        let token = first["metadata"]["continue"]
            .as_str()
            .expect("more")
            .to_string();
        // Between the pages: the listed a/x and the unlisted a/y change, b/z goes, c/w comes.
        put_configmap(&mut store, &t, ("a", "x", "new"));
        put_configmap(&mut store, &t, ("a", "y", "new"));
        put_configmap(&mut store, &t, ("c", "w", "new"));
        store.remove(&t.rt.group_resource(), &("b".into(), "z".into()));
        let (items, versions) = rest(&store, &t, token);
        let old = "v\n\"quoted\" é".to_string();
        assert_eq!(
            items,
            [("a/y".to_string(), old.clone()), ("b/z".to_string(), old)]
        );
        assert_eq!(versions, [at.clone(), at]);
        // A new list shows the objects as they are now.
        let now = list(&store, &t, &ListParams::default()).expect("list");
        let names: Vec<_> = now["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap_or_default(),
                    i["data"]["k"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(names, [("x", "new"), ("y", "new"), ("w", "new")]);
    }

    #[test]
    fn a_continue_older_than_the_history_is_expired() {
        let (mut store, t) = store_with_configmaps();
        let p = ListParams {
            limit: Some(1),
            ..Default::default()
        };
        let first = list(&store, &t, &p).expect("first page");
        let token = first["metadata"]["continue"]
            .as_str()
            .expect("more")
            .to_string();
        put_configmap(&mut store, &t, ("a", "y", "new"));
        store.compact();
        let p = ListParams {
            limit: Some(1),
            continue_token: Some(token),
            ..Default::default()
        };
        let e = list(&store, &t, &p).expect_err("expired");
        assert_eq!((e.code, e.reason), (410, "Expired"), "{e:?}");
        assert!(
            e.message.contains("continue parameter is too old"),
            "{}",
            e.message
        );
    }
}
