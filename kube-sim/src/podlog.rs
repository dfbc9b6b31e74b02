//! `GET .../pods/NAME/log`: the output of containers kube-sim runs, with `container`,
//! `tailLines`, `limitBytes` and `follow`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use serde_json::Value;

use crate::api;
use crate::error::{ApiError, ApiResult};
use crate::logs::{Output, read as read_output, tail_lines};
use crate::object::Target;
use crate::shared::{Body, Shared};

fn number(q: &HashMap<String, String>, k: &str) -> ApiResult<Option<usize>> {
    q.get(k)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<i64>()
                .map(|n| n.max(0) as usize)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}")))
        })
        .transpose()
}

/// The container a log request is for: the named one, or the only one.
fn container(pod: &Value, q: &HashMap<String, String>) -> ApiResult<String> {
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let names: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if names.contains(&c.as_str()) => Ok(c.clone()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {pod_name}"
        ))),
        None if names.len() == 1 => Ok(names[0].to_string()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {pod_name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

/// A container that has not started: the API server's error naming why.
fn waiting(pod: &Value, container: &str) -> Option<ApiError> {
    let reason = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(container))?
        .pointer("/state/waiting/reason")?
        .as_str()?
        .to_string();
    let pod_name = pod.pointer("/metadata/name").and_then(Value::as_str)?;
    Some(ApiError::bad_request(format!(
        "container \"{container}\" in pod \"{pod_name}\" is waiting to start: {reason}"
    )))
}

fn text(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

pub(crate) fn get(
    shared: &Arc<Shared>,
    t: &Target,
    q: &HashMap<String, String>,
) -> ApiResult<Response<Body>> {
    let pod_target = Target {
        subresource: None,
        ..t.clone()
    };
    let pod = api::get(&shared.lock(), &pod_target)?;
    let name = container(&pod, q)?;
    if q.get("previous").is_some_and(|v| v == "true") {
        let pod_name = t.name.as_deref().unwrap_or_default();
        return Err(ApiError::bad_request(format!(
            "previous terminated container \"{name}\" in pod \"{pod_name}\" not found"
        )));
    }
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(out) = shared.logs.get(uid, &name) else {
        if let Some(e) = waiting(&pod, &name) {
            return Err(e);
        }
        // A Pod kube-sim does not run has no output.
        return Ok(text(
            Full::new(Bytes::new())
                .map_err(|e| match e {})
                .boxed_unsync(),
        ));
    };
    let tail = number(q, "tailLines")?;
    let limit = number(q, "limitBytes")?;
    let (first, offset) = {
        let o = read_output(&out);
        let mut b = match tail {
            Some(n) => tail_lines(&o.bytes, n).to_vec(),
            None => o.bytes.clone(),
        };
        if let Some(l) = limit {
            b.truncate(l);
        }
        (b, o.dropped + o.bytes.len())
    };
    if q.get("follow").is_none_or(|v| v != "true") {
        return Ok(text(
            Full::new(Bytes::from(first))
                .map_err(|e| match e {})
                .boxed_unsync(),
        ));
    }
    Ok(text(follow(out, first, offset)))
}

/// The output so far, then new output as it comes, until the container ends.
fn follow(out: Arc<Mutex<Output>>, first: Vec<u8>, offset: usize) -> Body {
    let rest = futures::stream::unfold((out, offset), |(out, offset)| async move {
        loop {
            let (chunk, open, end) = {
                let o = read_output(&out);
                let start = offset.saturating_sub(o.dropped).min(o.bytes.len());
                (o.bytes[start..].to_vec(), o.open, o.dropped + o.bytes.len())
            };
            if !chunk.is_empty() {
                return Some((Bytes::from(chunk), (out, end)));
            }
            if !open {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let stream = futures::stream::once(async move { Bytes::from(first) })
        .chain(rest)
        .map(|b| Ok::<_, Infallible>(Frame::data(b)));
    BodyExt::boxed_unsync(StreamBody::new(stream))
}
