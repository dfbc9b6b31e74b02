//! One controller's workload caches, one per kind ([`kinds::ALL`]), behind one handle: the
//! reconciler reads every kind the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;

use super::objects::WorkloadView;
use crate::api::WorkloadKind;
use crate::workloads::WorkloadId;
use crate::workloads::kinds;

/// The cache of one kind.
pub(crate) trait WorkloadCache: Send + Sync {
    /// The views of the namespace's workloads.
    fn views(&self, namespace: &str) -> Vec<WorkloadView>;
    /// The resourceVersion the cache holds of one workload.
    fn version(&self, namespace: &str, name: &str) -> Option<String>;
    /// Done when the cache holds its first full list.
    fn ready(&self) -> BoxFuture<'_, ()>;
}

/// Every kind's cache.
pub(crate) struct WorkloadCaches(BTreeMap<WorkloadKind, Box<dyn WorkloadCache>>);

impl WorkloadCaches {
    pub(crate) fn new(caches: BTreeMap<WorkloadKind, Box<dyn WorkloadCache>>) -> WorkloadCaches {
        WorkloadCaches(caches)
    }

    /// Every workload of the namespace, sorted by id.
    pub(crate) fn views(&self, namespace: &str) -> Vec<WorkloadView> {
        let mut v: Vec<WorkloadView> = self.0.values().flat_map(|c| c.views(namespace)).collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// The resourceVersion the workload's cache holds now.
    pub(crate) fn version(&self, id: &WorkloadId) -> Option<String> {
        self.0.get(&id.kind)?.version(&id.namespace, &id.name)
    }

    /// Waits until every cache holds its first list; a kind that may be unreadable
    /// ([`Kind::MAY_BE_UNREADABLE`]) gets `wait`, then a warning.
    pub(crate) async fn wait_ready(&self, wait: Duration) {
        let optional = |k: &WorkloadKind| kinds::info(*k).may_be_unreadable;
        for (_, cache) in self.0.iter().filter(|(k, _)| !optional(k)) {
            cache.ready().await;
        }
        for (kind, cache) in self.0.iter().filter(|(k, _)| optional(k)) {
            if tokio::time::timeout(wait, cache.ready()).await.is_err() {
                let i = kinds::info(*kind);
                tracing::warn!(
                    "{}s could not be listed in time (RBAC: {} {} get, list, watch, patch?); policies change no {} until they can",
                    i.kind,
                    i.group,
                    i.plural,
                    i.kind
                );
            }
        }
    }
}
