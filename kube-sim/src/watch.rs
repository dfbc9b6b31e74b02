//! WATCH streams: initial state, history replay, live fan-out, bookmarks and 410 Expired.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::error::ApiError;
use crate::list::ListParams;
use crate::object::{Target, output};
use crate::store::{Broadcast, Change, EventType, Store, Stored};

/// How objects (bookmarks included) are rendered on the stream: as-is (None) or transformed
/// (one-row Tables, PartialObjectMetadata). ERROR events are never transformed.
pub type Render = Option<Arc<dyn Fn(Value) -> Value + Send + Sync>>;

fn render_obj(render: &Render, v: Value) -> Value {
    match render {
        Some(f) => f(v),
        None => v,
    }
}

/// An event line from an already-encoded object.
fn line_raw(event_type: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event_type.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn line(event_type: &str, object: &Value) -> Bytes {
    let mut s = json!({ "type": event_type, "object": object }).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn expired_line(msg: &str) -> Bytes {
    line("ERROR", &ApiError::expired(msg).to_status())
}

/// Decide what one change looks like to this watcher.
fn translate(t: &Target, p: &ListParams, render: &Render, c: &Change) -> Option<Bytes> {
    if c.gr != t.rt.group_resource() {
        return None;
    }
    if let Some(ns) = &t.namespace
        && *ns != c.namespace
    {
        return None;
    }
    let now = p.matches_stored(&c.object);
    let ty = match c.kind {
        EventType::Modified => {
            let before = c.old.as_ref().is_some_and(|o| p.matches_stored(o));
            match (before, now) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                (false, false) => return None,
            }
        }
        other if now => other.as_str(),
        _ => return None,
    };
    if render.is_some() {
        return Some(line(
            ty,
            &render_obj(render, output(&t.rt, &c.object.value())),
        ));
    }
    // Plain watchers of the stored version send the stored JSON; those of another version
    // share one encoding of the object.
    let api_version = t.rt.api_version();
    if c.object.is_served_as(&api_version, &t.rt.kind) {
        return Some(line_raw(ty, c.object.bytes()));
    }
    let (v, bytes) = c.wire.get_or_init(|| {
        let encoded = serde_json::to_vec(&output(&t.rt, &c.object.value())).unwrap_or_default();
        (api_version.clone(), Bytes::from(encoded))
    });
    if *v == api_version {
        Some(line_raw(ty, bytes))
    } else {
        Some(line(ty, &output(&t.rt, &c.object.value())))
    }
}

/// The ADDED line of a stored object for a watch's initial state.
fn added(t: &Target, render: &Render, o: &Stored) -> Bytes {
    if render.is_none() && o.is_served_as(&t.rt.api_version(), &t.rt.kind) {
        return line_raw("ADDED", o.bytes());
    }
    line("ADDED", &render_obj(render, output(&t.rt, &o.value())))
}

fn bookmark(t: &Target, render: &Render, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if initial_end {
        meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    let object = json!({ "kind": t.rt.kind, "apiVersion": t.rt.api_version(), "metadata": meta });
    line("BOOKMARK", &render_obj(render, object))
}

/// Start a watch; returns the channel the response body reads from.
pub fn start(
    store: &Arc<Mutex<Store>>,
    t: Target,
    p: ListParams,
    bookmark_interval: Duration,
    render: Render,
) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut initial = Vec::new();
    let (sub, mut last_rv) = {
        let guard = match store.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let sub = guard.subscribe();
        let current = guard.current_rv();
        let rv: Option<u64> = p
            .resource_version
            .as_deref()
            .filter(|r| !r.is_empty())
            .and_then(|r| r.parse().ok());
        let from_state = p.send_initial_events || rv.is_none_or(|r| r == 0);
        if from_state {
            let ns = t
                .namespace
                .as_deref()
                .or_else(|| p.fields.pinned("metadata.namespace"));
            for (_, o) in guard.range_stored(&t.rt.group_resource(), ns, None) {
                if p.matches_stored(o) {
                    initial.push(added(&t, &render, o));
                }
            }
            if p.send_initial_events && p.allow_bookmarks {
                initial.push(bookmark(&t, &render, current, true));
            }
        } else if let Some(r) = rv {
            match guard.changes_since(r) {
                Some(changes) => {
                    initial.extend(changes.iter().filter_map(|c| translate(&t, &p, &render, c)))
                }
                None => {
                    let msg = format!(
                        "too old resource version: {r} ({})",
                        guard.compacted_rv() + 1
                    );
                    initial.push(expired_line(&msg));
                    drop(guard);
                    tokio::spawn(async move {
                        for b in initial {
                            let _ = tx.send(b).await;
                        }
                    });
                    return rx;
                }
            }
        }
        (sub, current)
    };
    let mut timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1800));
    if let Some(d) = p.drop_after {
        timeout = timeout.min(d);
    }
    tokio::spawn(async move {
        for b in initial {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let mut sub: broadcast::Receiver<Broadcast> = sub;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if p.allow_bookmarks => {
                    if tx.send(bookmark(&t, &render, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                msg = sub.recv() => match msg {
                    Ok(Broadcast::Change(c)) => {
                        last_rv = last_rv.max(c.rv);
                        if let Some(b) = translate(&t, &p, &render, &c)
                            && tx.send(b).await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(Broadcast::Expire) => {
                        let _ = tx.send(expired_line("too old resource version: watch expired by the simulator")).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(expired_line("too old resource version: watcher fell behind")).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    rx
}
