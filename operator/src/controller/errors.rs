//! Reconcile errors and their categories. A category is a small fixed set (a metric label,
//! a log field); messages are one line and never contain a Debug dump of an API `Status`.

use std::fmt;

use kube::runtime::watcher;

use crate::workloads::WorkloadId;

/// A reconcile that could not finish; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {object}: {}", describe(source))]
    Kube {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("no random source for the config-hash key")]
    Random,
    #[error("{} workload update(s) failed: {}", .0.len(), first(.0))]
    Workloads(Vec<(WorkloadId, String)>),
    #[error("removing finalizer from {0}: the finalizer list changed meanwhile")]
    FinalizerMoved(String),
    #[error("encoding {0}")]
    Encode(String),
    #[error("the caches of namespace {0} have not filled yet")]
    NotReady(String),
}

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// 409: someone else changed the object first; the retry resolves it.
    Conflict,
    /// 401/403: the operator's ServiceAccount may not do this.
    Forbidden,
    /// 400/422: the API server (or an admission webhook) rejected the write.
    Invalid,
    /// 404 on something the reconcile needed.
    NotFound,
    /// 429, 5xx, timeouts, connection errors.
    Unavailable,
    /// A bug or an environment problem (no random source).
    Internal,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Conflict => "conflict",
            Category::Forbidden => "forbidden",
            Category::Invalid => "invalid",
            Category::NotFound => "not-found",
            Category::Unavailable => "unavailable",
            Category::Internal => "internal",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// `Error::Kube` for `action` on `object`, as a `map_err` argument.
    pub fn kube(
        action: &'static str,
        object: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> Error {
        let object = object.into();
        move |source| Error::Kube {
            action,
            object,
            source,
        }
    }

    /// A write was held back because this instance stopped leading.
    pub fn not_leader(&self) -> bool {
        match self {
            Error::Kube { source, .. } => crate::client::is_not_leader(source),
            _ => false,
        }
    }

    pub fn category(&self) -> Category {
        match self {
            Error::Kube { source, .. } => category_of(source),
            Error::Random | Error::Encode(_) => Category::Internal,
            Error::NotReady(_) => Category::Unavailable,
            Error::FinalizerMoved(_) => Category::Conflict,
            // A failed workload write is reported in status; its own category is in the
            // message. Most are rejections of the patch.
            Error::Workloads(_) => Category::Invalid,
        }
    }
}

/// The category of a kube client error.
pub fn category_of(e: &kube::Error) -> Category {
    match e {
        kube::Error::Api(s) => match s.code {
            409 => Category::Conflict,
            401 | 403 => Category::Forbidden,
            400 | 422 => Category::Invalid,
            404 => Category::NotFound,
            _ => Category::Unavailable,
        },
        _ => Category::Unavailable,
    }
}

/// One line for a kube client error: the API's code, reason and message, or the client's own
/// message. (kube's `Display` of an API error appends the whole `Status` in Debug form.)
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

/// One line for a watch error, the same way.
pub fn describe_watch(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(e) => format!("listing failed: {}", describe(e)),
        watcher::Error::WatchStartFailed(e) => {
            format!("starting the watch failed: {}", describe(e))
        }
        watcher::Error::WatchFailed(e) => format!("the watch failed: {}", describe(e)),
        watcher::Error::WatchError(s) => {
            format!(
                "the API server ended the watch: {} {}: {}",
                s.code, s.reason, s.message
            )
        }
        watcher::Error::NoResourceVersion => e.to_string(),
    }
}

/// Whether a watch failed because the operator may not list or watch what it asked for.
pub fn watch_forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => category_of(e) == Category::Forbidden,
        watcher::Error::WatchError(s) => matches!(s.code, 401 | 403),
        watcher::Error::NoResourceVersion => false,
    }
}

fn first(failed: &[(WorkloadId, String)]) -> String {
    match failed {
        [] => String::new(),
        [(id, e)] => format!("{id}: {e}"),
        [(id, e), rest @ ..] => format!("{id}: {e} (and {} more)", rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: "Conflict".into(),
            message: "the object has been modified".into(),
            ..Default::default()
        }))
    }

    #[test]
    fn api_errors_are_one_line_without_a_status_dump() {
        let e = Error::kube("adding finalizer to", "EgressProxyPolicy a/b")(api(409));
        let s = e.to_string();
        assert_eq!(
            s,
            "adding finalizer to EgressProxyPolicy a/b: 409 Conflict: the object has been modified"
        );
        assert!(!s.contains("Status {"), "{s}");
        assert_eq!(e.category(), Category::Conflict);
    }

    #[test]
    fn categories_follow_the_status_code() {
        let c = |code| category_of(&api(code));
        assert_eq!(
            [
                c(409),
                c(403),
                c(401),
                c(422),
                c(400),
                c(404),
                c(500),
                c(429)
            ],
            [
                Category::Conflict,
                Category::Forbidden,
                Category::Forbidden,
                Category::Invalid,
                Category::Invalid,
                Category::NotFound,
                Category::Unavailable,
                Category::Unavailable,
            ]
        );
        let w = watcher::Error::WatchError(Box::new(Status {
            code: 410,
            reason: "Expired".into(),
            message: "too old".into(),
            ..Default::default()
        }));
        assert_eq!(
            describe_watch(&w),
            "the API server ended the watch: 410 Expired: too old"
        );
    }
}
