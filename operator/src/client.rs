//! The operator's API client: every write request is counted by resource, verb and outcome,
//! and, under leader election, refused before it is sent unless this instance leads at that
//! instant. The gate sits at the transport so no write path (status, Events, finalizers,
//! cleanup) can bypass it.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request, Response};
use kube::client::{Body, ClientBuilder};
use tower::{BoxError, Layer, Service};

use crate::leader::Leadership;
use crate::metrics::{Metrics, Write};

/// A write was not sent: this instance does not lead.
#[derive(Debug, thiserror::Error)]
#[error("not sent, or not answered in time: this instance is not the leader")]
pub struct NotLeader;

/// Whether a kube client error is [`NotLeader`].
pub fn is_not_leader(e: &kube::Error) -> bool {
    match e {
        kube::Error::Service(s) => s.downcast_ref::<NotLeader>().is_some(),
        _ => false,
    }
}

/// Builds the client: `gate` holds writes back from a non-leader (`None`: never, as for the
/// elector's own client).
pub fn build(
    config: kube::Config,
    metrics: Arc<Metrics>,
    gate: Option<Leadership>,
) -> kube::Result<kube::Client> {
    let layer = WriteLayer { metrics, gate };
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

#[derive(Clone)]
struct WriteLayer {
    metrics: Arc<Metrics>,
    gate: Option<Leadership>,
}

impl<S> Layer<S> for WriteLayer {
    type Service = WriteService<S>;
    fn layer(&self, inner: S) -> WriteService<S> {
        WriteService {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct WriteService<S> {
    inner: S,
    layer: WriteLayer,
}

impl<S, B> Service<Request<Body>> for WriteService<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let Some((resource, verb)) = classify(req.method(), req.uri().path()) else {
            return Box::pin(self.inner.call(req));
        };
        let metrics = self.layer.metrics.clone();
        let count = move |outcome| {
            metrics.wrote(&Write {
                resource,
                verb,
                outcome,
            })
        };
        let gate = self.layer.gate.as_ref();
        if gate.is_some_and(|g| !g.is_leader()) {
            count("refused");
            return Box::pin(std::future::ready(Err(NotLeader.into())));
        }
        // A write is not waited for past the end of the term it was sent in (the server
        // may still apply one it already received; a standby takes over only after the
        // lease duration, which is longer).
        let term = gate.and_then(Leadership::remaining);
        let call = self.inner.call(req);
        Box::pin(async move {
            let res = match term {
                Some(left) => tokio::time::timeout(left, call)
                    .await
                    .unwrap_or_else(|_| Err(NotLeader.into())),
                None => call.await,
            };
            count(match &res {
                Ok(r) if r.status().is_success() => "2xx",
                Ok(r) if r.status().is_client_error() => "4xx",
                Ok(_) => "5xx",
                Err(_) => "failed",
            });
            res
        })
    }
}

/// The resource and verb of a write request; `None` for reads.
pub(crate) fn classify(method: &Method, path: &str) -> Option<(String, &'static str)> {
    let verb = match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => return None,
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..).unwrap_or_default(),
        Some(&"apis") => parts.get(3..).unwrap_or_default(),
        _ => &[],
    };
    // `namespaces/<ns>/<resource>...`, but `namespaces` and `namespaces/<ns>` themselves.
    let rest = match rest {
        ["namespaces", _, _, ..] => &rest[2..],
        _ => rest,
    };
    let resource = match rest {
        [r] => (*r).to_owned(),
        [r, _] => (*r).to_owned(),
        [r, _, sub, ..] => format!("{r}/{sub}"),
        [] => "other".to_owned(),
    };
    let verb = if verb == "delete" && rest.len() == 1 {
        "deletecollection"
    } else {
        verb
    };
    Some((resource, verb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_classified_by_resource_and_verb() {
        let c = |m: Method, p: &str| classify(&m, p).map(|(r, v)| (r, v.to_owned()));
        let w = |r: &str, v: &str| Some((r.to_owned(), v.to_owned()));
        assert_eq!(c(Method::GET, "/api/v1/namespaces/a/secrets"), None);
        assert_eq!(
            c(Method::POST, "/api/v1/namespaces/a/secrets"),
            w("secrets", "create")
        );
        assert_eq!(
            c(Method::PATCH, "/apis/apps/v1/namespaces/a/deployments/web"),
            w("deployments", "patch")
        );
        assert_eq!(
            c(
                Method::PATCH,
                "/apis/egressproxy.io/v1alpha1/namespaces/a/egressproxypolicies/p/status"
            ),
            w("egressproxypolicies/status", "patch")
        );
        assert_eq!(
            c(Method::POST, "/apis/events.k8s.io/v1/namespaces/a/events"),
            w("events", "create")
        );
        assert_eq!(
            c(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/s/leases/l"
            ),
            w("leases", "update")
        );
        assert_eq!(
            c(Method::DELETE, "/api/v1/namespaces/a/configmaps/x"),
            w("configmaps", "delete")
        );
        assert_eq!(
            c(Method::DELETE, "/api/v1/namespaces/a/configmaps"),
            w("configmaps", "deletecollection")
        );
        // Namespaces themselves, and cluster-scoped kinds.
        assert_eq!(
            c(Method::POST, "/api/v1/namespaces"),
            w("namespaces", "create")
        );
        assert_eq!(
            c(Method::PATCH, "/api/v1/namespaces/a"),
            w("namespaces", "patch")
        );
        assert_eq!(
            c(Method::PATCH, "/api/v1/nodes/n1/status"),
            w("nodes/status", "patch")
        );
        assert_eq!(c(Method::POST, "/version"), w("other", "create"));
        // Every write is one, whatever its path.
        assert_eq!(c(Method::POST, "/apis/g"), w("other", "create"));
    }
}
