//! The admin endpoint (`run --admin-addr`): `/healthz` (the process serves), `/readyz` (the
//! caches have synced and the election's state is known, so a standby is ready too) and
//! `/metrics` (OpenMetrics text), which `--metrics-auth kubernetes` serves only to bearer tokens
//! allowed to `get /metrics` (`auth`). The probes' paths stay open for the kubelet.

mod auth;

pub use auth::Access;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::leader::Leadership;
use crate::metrics::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether every controller's caches have synced.
#[derive(Debug, Default)]
pub struct Readiness {
    started: AtomicBool,
    pending: AtomicUsize,
}

impl Readiness {
    /// `scopes` controllers are starting.
    pub(crate) fn expect(&self, scopes: usize) {
        self.pending.store(scopes, Ordering::SeqCst);
        self.started.store(true, Ordering::SeqCst);
    }

    /// One controller's caches synced.
    pub(crate) fn synced(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    pub fn ready(&self) -> bool {
        self.started.load(Ordering::SeqCst) && self.pending.load(Ordering::SeqCst) == 0
    }
}

/// Who may read `/metrics`.
#[derive(Clone)]
pub enum MetricsAuth {
    /// Anyone who reaches the port.
    None,
    /// Bearer tokens the API server accepts (TokenReview) whose user may `get /metrics`
    /// (SubjectAccessReview).
    Kubernetes(Arc<auth::Reviewer>),
}

impl MetricsAuth {
    /// Reviews with `client`, which must not be leader-gated.
    pub fn kubernetes(client: kube::Client) -> MetricsAuth {
        MetricsAuth::Kubernetes(Arc::new(auth::Reviewer::new(client)))
    }
}

/// What the endpoint reports on.
#[derive(Clone)]
pub struct Admin {
    pub metrics: Arc<Metrics>,
    pub leadership: Leadership,
    pub readiness: Arc<Readiness>,
    pub metrics_auth: MetricsAuth,
}

impl Admin {
    /// Serves on `listener` until `stop` resolves.
    pub async fn serve(self, listener: TcpListener, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            let (stream, _) = tokio::select! {
                _ = &mut stop => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors, say: do not spin.
                        tracing::warn!(error = %e, "admin endpoint: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let admin = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let admin = admin.clone();
                    async move { Ok::<_, Infallible>(admin.answer(&req).await) }
                });
                // A client that never finishes its request headers is dropped.
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "admin endpoint: connection failed");
                }
            });
        }
    }

    async fn answer(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET only\n".into(),
            );
        }
        match req.uri().path() {
            "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
            "/readyz" => self.readyz(),
            "/metrics" => match self.authorize(req.headers()).await {
                Some(refused) => refused,
                None => {
                    let body = self.metrics.encode(self.leadership.is_leader());
                    reply(StatusCode::OK, OPENMETRICS, body)
                }
            },
            _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        }
    }

    /// The answer refusing a `/metrics` request, or `None` to serve it.
    async fn authorize(&self, headers: &http::HeaderMap) -> Option<Response<Full<Bytes>>> {
        let MetricsAuth::Kubernetes(reviewer) = &self.metrics_auth else {
            return None;
        };
        let text = "text/plain";
        match reviewer.check(headers).await {
            Ok(Access::Allowed) => None,
            Ok(Access::Unauthenticated) => {
                let body = "Unauthorized: a bearer token the API server accepts is required\n";
                let mut r = reply(StatusCode::UNAUTHORIZED, text, body.into());
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer realm=\"egress-proxy-operator\""),
                );
                Some(r)
            }
            Ok(Access::Forbidden) => {
                let body = "Forbidden: the token's user may not get /metrics\n";
                Some(reply(StatusCode::FORBIDDEN, text, body.into()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "admin endpoint: could not authorize a /metrics request");
                let body = "the token could not be reviewed; see the operator's log\n";
                Some(reply(StatusCode::SERVICE_UNAVAILABLE, text, body.into()))
            }
        }
    }

    fn readyz(&self) -> Response<Full<Bytes>> {
        let mut missing = Vec::new();
        if !self.readiness.ready() {
            missing.push("caches not synced");
        }
        if !self.leadership.known() {
            missing.push("leader election state not known");
        }
        if missing.is_empty() {
            let role = if self.leadership.is_leader() {
                "leader"
            } else {
                "standby"
            };
            reply(StatusCode::OK, "text/plain", format!("ok ({role})\n"))
        } else {
            reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{}\n", missing.join("; ")),
            )
        }
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}
