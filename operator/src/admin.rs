//! The admin endpoint (`run --admin-addr`): `/healthz` (the process serves), `/readyz` (the
//! caches have synced and the election's state is known, so a standby is ready too) and
//! `/metrics` (OpenMetrics text).

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

/// What the endpoint reports on.
#[derive(Clone)]
pub struct Admin {
    pub metrics: Arc<Metrics>,
    pub leadership: Leadership,
    pub readiness: Arc<Readiness>,
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
                    std::future::ready(Ok::<_, Infallible>(admin.answer(&req)))
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

    fn answer(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
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
            "/metrics" => {
                let body = self.metrics.encode(self.leadership.is_leader());
                reply(StatusCode::OK, OPENMETRICS, body)
            }
            _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
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
