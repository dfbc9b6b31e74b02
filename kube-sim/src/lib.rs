//! kube-sim: an in-memory Kubernetes API server for integration tests and demos.
//!
//! Start it in-process with [`KubeSim::start`], or run the `kube-sim` binary.

pub(crate) mod accept;
pub(crate) mod admission;
pub(crate) mod api;
pub(crate) mod apply;
pub(crate) mod auth;
pub(crate) mod batch;
pub(crate) mod builtin_schemas;
pub(crate) mod controllers;
pub(crate) mod delete;
pub(crate) mod discovery;
pub(crate) mod error;
pub(crate) mod events;
pub mod fixtures;
pub mod hooks;
pub(crate) mod kinds;
pub mod kubeconfig;
pub(crate) mod limits;
pub(crate) mod list;
pub(crate) mod list_types;
pub(crate) mod load;
pub(crate) mod logs;
pub(crate) mod object;
pub(crate) mod openapi;
pub(crate) mod patch;
pub(crate) mod podlog;
pub(crate) mod protobuf;
pub(crate) mod resources;
pub(crate) mod reviews;
pub(crate) mod routing;
pub(crate) mod scale;
pub(crate) mod schema;
pub(crate) mod selectors;
pub(crate) mod server;
pub(crate) mod service_ip;
pub(crate) mod shared;
pub(crate) mod smd;
pub(crate) mod store;
pub(crate) mod strategic;
pub(crate) mod table;
pub(crate) mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;

pub use controllers::{READY_AFTER_ANNOTATION, ROLLOUT_ANNOTATION};
pub use error::ApiError;
pub use load::LoadError;
pub use patch::{PatchKind, apply_patch, strategic_merge_patch};
pub use service_ip::DEFAULT_SERVICE_RANGE;

use resources::{Registry, ResourceType};
use server::Shared;
use store::Store;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Number of changes kept for watches that resume from a resourceVersion.
    pub history_limit: usize,
    /// How often watches that allow bookmarks get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// YAML files or directories loaded at start-up.
    pub load: Vec<PathBuf>,
    /// Whether to create the ServiceCIDR `kubernetes` ([`DEFAULT_SERVICE_RANGE`]) at start,
    /// as a kubeadm API server does. `None` (the default): only when `load` yields no object,
    /// so a cluster loaded from files holds exactly the ServiceCIDRs they contain (none, if
    /// they have none). `Some(true)` creates it in any case (a loaded ServiceCIDR `kubernetes`
    /// replaces it), `Some(false)` never.
    pub seed_service_cidr: Option<bool>,
    /// Run the simulated workload controllers and kubelet.
    pub controllers: bool,
    /// How long a new Pod takes to become Ready (default: at once); a workload's
    /// `kube-sim.io/ready-after` annotation overrides it. Needs `controllers`.
    pub ready_after: Duration,
    /// Factor applied to a deleted Pod's grace period before it is removed; 0 (the default)
    /// removes deleted Pods at once. Needs `controllers`.
    pub grace_scale: f64,
    /// Images whose containers run as local processes, each mapped to the program that
    /// stands for the image's entrypoint. Only Pods with restartPolicy Never or OnFailure
    /// (Job Pods) are run; a container whose image is not here stays waiting with
    /// ErrImagePull. A relative path is taken from the server's working directory; a bare
    /// name is looked up in its `PATH`. Needs `controllers`.
    pub run_images: BTreeMap<String, PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(10),
            load: Vec::new(),
            seed_service_cidr: None,
            controllers: false,
            ready_after: Duration::ZERO,
            grace_scale: 0.0,
            run_images: BTreeMap::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Load(#[from] load::LoadError),
    #[error("seeding built-in objects: {0}")]
    Seed(ApiError),
}

/// Entry point for in-process use.
pub struct KubeSim;

impl KubeSim {
    /// Start serving; the returned handle stops the server when dropped.
    pub async fn start(config: Config) -> Result<KubeSimHandle, StartError> {
        let mut store = Store::new(config.history_limit, Registry::with_builtins());
        store.graceful_pods = config.controllers && config.grace_scale > 0.0;
        let loaded = seed_and_load(&mut store, &config)?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            store: Arc::new(Mutex::new(store)),
            addr,
            bookmark_interval: config.bookmark_interval,
            max_body_bytes: limits::MAX_BODY_BYTES,
            hooks: Mutex::new(hooks::Hooks::default()),
            logs: logs::Logs::default(),
        });
        let (stop_tx, stop_rx) = tokio_watch::channel(false);
        if config.controllers {
            let s = shared.clone();
            let pacing = controllers::Pacing {
                ready_after: config.ready_after,
                grace_scale: config.grace_scale,
            };
            let mut stop = stop_rx.clone();
            let images = local_programs(&config.run_images);
            tokio::spawn(async move {
                tokio::select! {
                    _ = controllers::run(s, pacing, images) => {}
                    _ = stop.changed() => {}
                }
            });
        }
        tokio::spawn(accept_loop(listener, shared.clone(), stop_rx));
        tracing::info!(%addr, loaded, "kube-sim serving");
        Ok(KubeSimHandle {
            shared,
            stop: stop_tx,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio_watch::Receiver<bool>,
) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.changed() => return,
        };
        let (stream, peer) = match conn {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| server::handle(shared.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended");
                },
                _ = stop.changed() => {}
            }
        });
    }
}

/// Mapped programs with relative paths made absolute: processes start in their Pod's
/// directory, where a relative path would mean something else.
fn local_programs(images: &BTreeMap<String, PathBuf>) -> BTreeMap<String, PathBuf> {
    images
        .iter()
        .map(|(image, path)| {
            let relative = path.is_relative() && path.components().count() > 1;
            let path = match relative.then(|| std::path::absolute(path)) {
                Some(Ok(abs)) => abs,
                _ => path.clone(),
            };
            (image.clone(), path)
        })
        .collect()
}

/// What every API server creates (the default namespaces, the `kubernetes` Service), the
/// default ServiceCIDR when `config` asks for it, and the loaded objects. ServiceCIDRs are in
/// place before any Service, so the `kubernetes` Service gets the first address of a loaded
/// range, as on a real cluster. Returns how many objects were loaded.
fn seed_and_load(store: &mut Store, config: &Config) -> Result<usize, StartError> {
    seed_namespaces(store).map_err(StartError::Seed)?;
    let docs = load::read_documents(&config.load)?;
    if config.seed_service_cidr.unwrap_or(docs.is_empty()) {
        seed_service_cidr(store).map_err(StartError::Seed)?;
    }
    let (early, rest) = docs
        .into_iter()
        .partition(|(_, v)| load::precedes_services(v));
    let mut loaded = load::apply_documents(store, early)?;
    seed_kubernetes_service(store).map_err(StartError::Seed)?;
    loaded += load::apply_documents(store, rest)?;
    Ok(loaded)
}

fn builtin(
    store: &Store,
    group: &str,
    version: &str,
    plural: &str,
) -> Result<ResourceType, ApiError> {
    store
        .registry
        .get(group, version, plural)
        .map(|rt| (*rt).clone())
        .ok_or_else(|| ApiError::internal(format!("missing built-in {plural}")))
}

/// The namespaces every API server creates.
fn seed_namespaces(store: &mut Store) -> Result<(), ApiError> {
    let ns = builtin(store, "", "v1", "namespaces")?;
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        api::seed(store, &ns, json!({"metadata": {"name": n}}))?;
    }
    Ok(())
}

/// The ServiceCIDR a kubeadm API server creates from its default Service range.
fn seed_service_cidr(store: &mut Store) -> Result<(), ApiError> {
    let cidr = builtin(store, "networking.k8s.io", "v1", "servicecidrs")?;
    api::seed(
        store,
        &cidr,
        json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": [DEFAULT_SERVICE_RANGE]},
               "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "", "message": "",
                                          "lastTransitionTime": object::now()}]}}),
    )?;
    Ok(())
}

/// The `kubernetes` Service every API server has; its ClusterIP is the first address of the
/// Service range (see [`DEFAULT_SERVICE_RANGE`] for a cluster without a ServiceCIDR).
fn seed_kubernetes_service(store: &mut Store) -> Result<(), ApiError> {
    let svc = builtin(store, "", "v1", "services")?;
    api::seed(
        store,
        &svc,
        json!({"metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
               "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}),
    )?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("server URL: {0}")]
    Url(#[from] http::uri::InvalidUri),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("auth info: {0}")]
    AuthInfo(#[from] serde_json::Error),
}

/// The path load errors name for objects not read from a file.
const INLINE: &str = "<inline>";

/// A running server.
pub struct KubeSimHandle {
    shared: Arc<Shared>,
    stop: tokio_watch::Sender<bool>,
}

impl KubeSimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.base_url())
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        kubeconfig::write(path, &self.base_url())
    }

    /// A kube client for this server.
    pub fn client(&self) -> Result<kube::Client, ClientError> {
        self.client_with_token(kubeconfig::ADMIN_TOKEN)
    }

    /// A kube client authenticating with `token` (e.g. from [`Self::service_account_token`]).
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, ClientError> {
        let url = self.base_url().parse::<http::Uri>()?;
        let mut config = kube::Config::new(url);
        config.default_namespace = "default".into();
        config.auth_info = serde_json::from_value(json!({ "token": token }))?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Create or replace objects from YAML text (multi-document).
    pub fn apply_yaml(&self, yaml: &str) -> Result<usize, load::LoadError> {
        let docs = serde_yaml_ng::Deserializer::from_str(yaml).map(|doc| {
            <Value as serde::Deserialize>::deserialize(doc).map_err(|source| {
                load::LoadError::Yaml {
                    path: PathBuf::from(INLINE),
                    source,
                }
            })
        });
        let docs = load::Encoded::new(docs)?;
        load::apply_encoded(&mut self.shared.lock(), Path::new(INLINE), docs)
    }

    /// Create or replace objects given as values, as [`Self::apply_yaml`] does (CRDs first,
    /// then Namespaces, then the rest in order; nulls skipped): no YAML to parse for large
    /// fixtures.
    pub fn load_values(
        &self,
        values: impl IntoIterator<Item = Value>,
    ) -> Result<usize, load::LoadError> {
        let docs = load::Encoded::new(values.into_iter().map(Ok::<_, load::LoadError>))?;
        load::apply_encoded(&mut self.shared.lock(), Path::new(INLINE), docs)
    }

    /// Drop the event history: watches resuming from an older resourceVersion get 410 Expired.
    pub fn compact(&self) {
        self.shared.lock().compact();
    }

    /// End every open watch with a 410 Expired error (after compacting history).
    pub fn expire_watches(&self) {
        let mut s = self.shared.lock();
        s.compact();
        s.expire_watches();
    }

    /// Inject a fault for matching requests.
    pub fn inject_fault(&self, rule: hooks::FaultRule) {
        self.shared.hooks().rules.push(rule);
    }

    pub fn clear_faults(&self) {
        self.shared.hooks().rules.clear();
    }

    /// Answer every resource request with 503 (Retry-After: 1) for this long.
    pub fn api_down_for(&self, d: Duration) {
        self.shared.hooks().down_until = Some(std::time::Instant::now() + d);
    }

    /// Request counts since start (or the last reset).
    pub fn request_counts(&self) -> hooks::RequestCounts {
        let mut c = self.shared.hooks().counts.clone();
        c.noop_writes = self.shared.lock().noop_writes;
        c
    }

    pub fn reset_request_counts(&self) {
        self.shared.hooks().counts = hooks::RequestCounts::default();
        self.shared.lock().noop_writes = 0;
    }

    /// A bearer token for the ServiceAccount `namespace/name`; requests with it are
    /// authorized against the stored RBAC objects.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.shared.lock().issue_token(namespace, name)
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().current_rv()
    }

    /// Stop accepting connections and close open ones.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for KubeSimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}
