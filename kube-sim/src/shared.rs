//! The state every request handler and controller shares: the store, the server's address
//! and limits, the hooks and the container logs; and the response body type. Below both the
//! HTTP layer and the controllers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;

use crate::store::Store;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Shared server state.
pub struct Shared {
    pub store: Arc<Mutex<Store>>,
    pub addr: SocketAddr,
    pub bookmark_interval: Duration,
    pub max_body_bytes: usize,
    pub hooks: Mutex<crate::hooks::Hooks>,
    /// Output of the containers kube-sim runs (`pods/log`).
    pub logs: crate::logs::Logs,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        match self.store.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    pub fn hooks(&self) -> MutexGuard<'_, crate::hooks::Hooks> {
        match self.hooks.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}
