//! LIST with selectors and `limit`/`continue` paging.

use base64::Engine;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{Target, output};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Key, Store};

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
    for (k, o) in store.range(&gr, ns, after.as_ref()) {
        if !p.matches(o) {
            continue;
        }
        if p.limit.is_some_and(|l| l > 0 && items.len() >= l) {
            more = true;
            remaining += 1;
            continue;
        }
        items.push(output(&t.rt, o));
        last_key = Some(k.clone());
    }
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if more && let Some(k) = last_key {
        meta["continue"] = json!(encode_continue(rv, &k));
        meta["remainingItemCount"] = json!(remaining);
    }
    Ok(json!({
        "kind": t.rt.list_kind(),
        "apiVersion": t.rt.api_version(),
        "metadata": meta,
        "items": items,
    }))
}
