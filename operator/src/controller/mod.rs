//! The reconciler: `plan` decides (pure), `reconcile` reads the caches, applies the plan and
//! publishes status and Events, `watches` keeps the caches and wakes the policies a change
//! concerns, and `run` wires one controller per scope (the whole cluster, or each namespace
//! of a namespaced install).

mod cached;
mod cluster;
mod conditions;
mod ctx;
mod errors;
mod lean;
mod objects;
mod plan;
mod platform;
mod probe;
mod recent;
mod reconcile;
mod tenancy;
mod watches;
mod workload_caches;
mod workload_store;

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{FutureExt, Shared};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::task::JoinSet;

pub use crate::api::reasons::{READY, RECONCILING, STALLED, reason};
pub use crate::discovery::{Overrides, PlatformSource};
pub use ctx::Ctx;
pub use errors::{Category, Error, describe, describe_watch};

use crate::admin::Readiness;
use crate::api::EgressProxyPolicy;
use crate::discovery::ClusterInputs;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use objects::strip;
use recent::{Recent, Seen};

/// `reportingController` of the operator's Events.
pub const REPORTER: &str = "egress-proxy-operator";

/// The finalizer that lets the operator undo its changes when a policy is deleted.
pub const FINALIZER: &str = "egressproxy.io/cleanup";

/// The default admin opt-in: Namespaces with this label.
pub const DEFAULT_NAMESPACE_SELECTOR: &str = "egressproxy.io/enabled=true";

/// Policies reconciled at the same time, by default.
pub const DEFAULT_WORKERS: u16 = 16;

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Label selector on Namespaces: the admin's opt-in. Empty: every namespace.
    pub namespace_selector: String,
    /// Explicit namespaces (a namespaced install). When set, the selector is not used and
    /// each of these namespaces is watched on its own; nothing is watched cluster-wide but
    /// the discovery sources.
    pub namespaces: Vec<String>,
    /// Flags that win over discovery.
    pub overrides: Overrides,
    /// Host of the operator's own client URL (an API server address).
    pub api_host: Option<String>,
    /// The operator's `/etc/resolv.conf` when running in a Pod.
    pub resolv_conf: Option<String>,
    /// `reportingInstance` of the Events (the Pod name in a cluster).
    pub instance: String,
    /// Policies reconciled at the same time (per namespace of a namespaced install).
    pub workers: u16,
    /// How often a settled policy is re-evaluated even if nothing it watches changed.
    pub resync: Duration,
    /// How long start-up waits for the cluster-scoped discovery caches before going on
    /// without them (their facts are then reported as not found).
    pub discovery_wait: Duration,
    /// How often the watch of a source Secret is re-established. A grant withdrawn by
    /// deleting the owner's Role ends no watch; the next one is refused, and the credential
    /// is revoked then.
    pub source_recheck: Duration,
    /// Whether this instance may write (leader election); reconciles of a standby only keep
    /// its caches warm.
    pub leadership: Leadership,
    pub metrics: Arc<Metrics>,
    /// Set once every controller's caches have synced (`/readyz`).
    pub readiness: Arc<Readiness>,
    /// The image of probe Jobs (`spec.verification`): the operator's own.
    pub probe_image: Option<String>,
    /// The roots written with the CAs of `spec.trust` under `roots: Keep`.
    pub trust_roots: Arc<crate::trust::RootSet>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace_selector: DEFAULT_NAMESPACE_SELECTOR.into(),
            namespaces: Vec::new(),
            overrides: Overrides::default(),
            api_host: None,
            resolv_conf: None,
            instance: REPORTER.into(),
            workers: DEFAULT_WORKERS,
            resync: Duration::from_secs(600),
            discovery_wait: Duration::from_secs(15),
            source_recheck: Duration::from_secs(60),
            leadership: Leadership::always(),
            metrics: Arc::default(),
            readiness: Arc::default(),
            probe_image: None,
            trust_roots: Arc::new(crate::trust::RootSet::shipped()),
        }
    }
}

/// Errors that stop the operator.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "namespace selector {selector:?} is not valid: {}",
        errors::describe(source)
    )]
    Selector {
        selector: String,
        source: kube::Error,
    },
    #[error("reading EgressProxyPolicies (is the CRD installed?): {}", errors::describe(.0))]
    Crd(kube::Error),
}

/// Runs the operator until `shutdown` resolves. Every watch task is owned here and stops
/// when this returns.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    preflight(&client, &settings).await?;
    let scopes: Vec<Option<String>> = if settings.namespaces.is_empty() {
        vec![None]
    } else {
        settings.namespaces.iter().cloned().map(Some).collect()
    };
    // Per scope: its caches, and its policy cache's first list (the stream the controller
    // itself drives).
    settings.readiness.expect(2 * scopes.len());
    let mut tasks = JoinSet::new();
    let (changed, changes): (Vec<_>, Vec<_>) =
        scopes.iter().map(|_| mpsc::unbounded::<()>()).unzip();
    let disabled = &settings.overrides.disabled_sources;
    let wide = settings.namespaces.is_empty();
    let discovery = ctx::discovery(
        &mut tasks,
        &settings.metrics,
        &client,
        &changed,
        (disabled, wide),
    )
    .await;
    drop(changed);
    let parts: Vec<Parts> = scopes.into_iter().zip(changes).map(Parts::new).collect();
    // A source Secret in one listed namespace may serve policies of another.
    let routes: Vec<watches::Route> = parts
        .iter()
        .map(|p| (p.policies.clone(), p.trigger.clone()))
        .collect();
    let shutdown = shutdown.boxed().shared();
    let recent = Arc::new(Recent::default());
    let tenancy = Arc::new(tenancy::Tenancy::new(
        client.clone(),
        recent.clone(),
        routes,
        settings.source_recheck,
        settings.metrics.clone(),
    ));
    let shared = Common {
        client: &client,
        settings: &settings,
        discovery: &discovery,
        recent: &recent,
        tenancy: &tenancy,
    };
    let controllers: Vec<_> = parts
        .into_iter()
        .map(|p| shared.controller(&mut tasks, p, shutdown.clone()))
        .collect();
    futures::future::join_all(controllers).await;
    tenancy.shutdown().await;
    tasks.shutdown().await;
    Ok(())
}

/// Fails fast on a bad selector, a missing CRD or an unreadable namespace instead of
/// retrying forever.
async fn preflight(client: &Client, settings: &Settings) -> Result<(), RunError> {
    let lp = kube::api::ListParams::default().limit(1);
    let apis: Vec<Api<EgressProxyPolicy>> = if settings.namespaces.is_empty() {
        vec![Api::all(client.clone())]
    } else {
        let ns = settings.namespaces.iter();
        ns.map(|ns| Api::namespaced(client.clone(), ns)).collect()
    };
    for policies in apis {
        policies.list_metadata(&lp).await.map_err(RunError::Crd)?;
    }
    if settings.namespaces.is_empty() {
        Api::<Namespace>::all(client.clone())
            .list_metadata(&lp.clone().labels(&settings.namespace_selector))
            .await
            .map_err(|source| RunError::Selector {
                selector: settings.namespace_selector.clone(),
                source,
            })?;
    }
    Ok(())
}

type Stop = Shared<futures::future::BoxFuture<'static, ()>>;

/// What every controller shares.
struct Common<'a> {
    client: &'a Client,
    settings: &'a Settings,
    discovery: &'a ctx::Discovery,
    recent: &'a Arc<Recent>,
    tenancy: &'a Arc<tenancy::Tenancy>,
}

/// One scope's policy cache and queue, made before any watch so that every scope's source
/// Secret watch can wake the policies of every other.
struct Parts {
    scope: Option<String>,
    policies: reflector::Store<EgressProxyPolicy>,
    writer: reflector::store::Writer<EgressProxyPolicy>,
    trigger: watches::Trigger,
    triggers: mpsc::UnboundedReceiver<ObjectRef<EgressProxyPolicy>>,
    changes: mpsc::UnboundedReceiver<()>,
}

impl Parts {
    fn new((scope, changes): (Option<String>, mpsc::UnboundedReceiver<()>)) -> Parts {
        let (trigger, triggers) = mpsc::unbounded();
        let (policies, writer) = reflector::store();
        Parts {
            scope,
            policies,
            writer,
            trigger,
            triggers,
            changes,
        }
    }
}

impl Common<'_> {
    /// Starts the caches of one scope (a namespace, or the cluster) and returns its
    /// controller, which runs until `stop`.
    fn controller(
        &self,
        tasks: &mut JoinSet<()>,
        parts: Parts,
        stop: Stop,
    ) -> impl Future<Output = ()> + Send + use<> {
        let Parts {
            scope,
            policies,
            writer: policy_writer,
            trigger,
            triggers,
            changes,
        } = parts;
        let mut w = ctx::Wiring {
            tasks,
            client: self.client,
            scope: &scope,
            trigger: &trigger,
            recent: self.recent,
            policies: &policies,
            metrics: &self.settings.metrics,
        };
        let workloads = w.workload_caches();
        let namespaces = scope
            .is_none()
            .then(|| w.namespaces(&self.settings.namespace_selector));
        let ctx = Arc::new(Ctx {
            client: self.client.clone(),
            settings: self.settings.clone(),
            base_inputs: ClusterInputs {
                api_host: self.settings.api_host.clone(),
                resolv_conf: self.settings.resolv_conf.clone(),
                overrides: self.settings.overrides.clone(),
                namespaced_only: !self.settings.namespaces.is_empty(),
                ..Default::default()
            },
            policies,
            workloads,
            namespaces,
            tenancy: self.tenancy.clone(),
            discovery: self.discovery.clone(),
            recent: self.recent.clone(),
        });
        let policy_stream = self.policy_stream(&scope, policy_writer);
        drive(ctx, policy_stream, triggers, changes, stop)
    }

    /// The scope's policy watch, feeding the policy cache: it also marks writes seen, the
    /// first full list as synced (`/readyz`), and lets the tenancy sweep unused caches.
    fn policy_stream(
        &self,
        scope: &Option<String>,
        policy_writer: reflector::store::Writer<EgressProxyPolicy>,
    ) -> impl Stream<Item = Result<EgressProxyPolicy, watcher::Error>> + Send + use<> {
        let api: Api<EgressProxyPolicy> = match scope {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let (recent, tenancy) = (self.recent.clone(), self.tenancy.clone());
        let metrics = self.settings.metrics.clone();
        let readiness = self.settings.readiness.clone();
        let watched = scope.clone();
        let mut listed = false;
        let mut relist = watches::Relist::default();
        let cached = policy_writer.as_reader();
        watcher(api, watcher::Config::default().any_semantic())
            .modify(strip)
            .default_backoff()
            .reflect(policy_writer)
            .inspect(move |e| {
                if let Ok(e) = e {
                    saw_policy(&recent, (&metrics, watched.as_deref()), &mut relist, e);
                    // Not Store::wait_until_ready: its waiter is single, and the controller
                    // waits on it too.
                    if matches!(e, watcher::Event::InitDone) {
                        recent.keep_policies(watched.as_deref(), |(ns, name)| {
                            cached.get(&ObjectRef::new(name).within(ns)).is_some()
                        });
                        if !std::mem::replace(&mut listed, true) {
                            readiness.synced();
                        }
                    }
                    if matches!(e, watcher::Event::Apply(_) | watcher::Event::Delete(_)) {
                        tenancy.sweep();
                    }
                }
            })
            .applied_objects()
    }
}

/// Waits for the caches, then runs the controller until `stop`.
async fn drive(
    ctx: Arc<Ctx>,
    policy_stream: impl Stream<Item = Result<EgressProxyPolicy, watcher::Error>> + Send + 'static,
    triggers: mpsc::UnboundedReceiver<ObjectRef<EgressProxyPolicy>>,
    changes: mpsc::UnboundedReceiver<()>,
    stop: Stop,
) {
    // A scope whose caches never fill (RBAC) must not keep a shutdown waiting.
    tokio::select! {
        _ = ctx.wait_ready() => {}
        _ = stop.clone() => return,
    }
    ctx.settings.readiness.synced();
    let facts = facts_changed(ctx.clone(), changes);
    let everything = futures::stream::select(facts, became_leader(&ctx.settings.leadership));
    Controller::for_stream(policy_stream, ctx.policies.clone())
        .with_config(ControllerConfig::default().concurrency(ctx.settings.workers))
        .reconcile_on(triggers)
        .reconcile_all_on(everything)
        .graceful_shutdown_on(stop)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, action)) => tracing::debug!(policy = %obj, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
}

/// Tells [`Recent`] what the policy cache applied.
fn saw_policy(
    recent: &Recent,
    (metrics, scope): (&Metrics, Option<&str>),
    relist: &mut watches::Relist,
    e: &watcher::Event<EgressProxyPolicy>,
) {
    use kube::ResourceExt;
    if let Some(since) = relist.done(e) {
        recent.relisted_policies(since);
    }
    let (p, seen) = match e {
        watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
            (p, Seen::Applied(p.metadata.resource_version.as_ref()))
        }
        watcher::Event::Delete(p) => (p, Seen::Deleted),
        watcher::Event::Init => return metrics.relisting(scope),
        watcher::Event::InitDone => return metrics.relisted(scope),
    };
    let key = (p.namespace().unwrap_or_default(), p.name_any());
    metrics.applied(p, matches!(seen, Seen::Deleted));
    let kept = matches!(seen, Seen::Applied(_)).then_some(p);
    metrics.saw_policy(&key.0, &key.1, kept);
    recent.saw_policy(&key, seen);
}

/// Emits each time this instance becomes the leader: a new leader looks at every policy,
/// since a standby's reconciles only kept its caches warm.
fn became_leader(leadership: &Leadership) -> impl Stream<Item = ()> + Send + use<> {
    let flips = leadership.subscribe();
    futures::stream::unfold(flips, |mut flips| async move {
        loop {
            flips.changed().await.ok()?;
            if *flips.borrow_and_update() {
                return Some(((), flips));
            }
        }
    })
}

/// Emits when the discovered cluster facts change (not on every Node heartbeat).
fn facts_changed(
    ctx: Arc<Ctx>,
    changes: mpsc::UnboundedReceiver<()>,
) -> impl Stream<Item = ()> + Send {
    let mut last = reconcile::cluster_inputs(&ctx);
    changes.ready_chunks(1024).filter_map(move |_| {
        let now = reconcile::cluster_inputs(&ctx);
        let changed = now != last;
        if changed {
            tracing::info!("cluster facts changed; re-evaluating every policy");
            last = now;
        }
        std::future::ready(changed.then_some(()))
    })
}
