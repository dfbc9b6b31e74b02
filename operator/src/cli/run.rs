//! `run`: the operator against a real cluster (kubeconfig or in-cluster config).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::admin::{Admin, MetricsAuth, Readiness};
use crate::controller::{self, Settings};
use crate::discovery::{Overrides, PlatformSource};
use crate::leader::elector::Elector;
use crate::leader::{Leadership, Timing};
use crate::metrics::Metrics;

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig file. Default: $KUBECONFIG (one path or several, merged), then
    /// ~/.kube/config, then the in-cluster config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context. Default: the current context.
    #[arg(long)]
    pub context: Option<String>,
    /// Label selector on Namespaces: the admin's opt-in. Policies in other namespaces are
    /// reported as NamespaceNotEnabled and change nothing.
    #[arg(long, default_value = controller::DEFAULT_NAMESPACE_SELECTOR)]
    pub namespace_selector: String,
    /// Act only in this namespace (repeatable), for a namespaced install: the list replaces
    /// the selector, and each namespace is watched on its own.
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// Cluster DNS domain, instead of discovering it.
    #[arg(long)]
    pub cluster_domain: Option<String>,
    /// Service network CIDR (repeatable), instead of discovering it.
    #[arg(long = "service-cidr", value_name = "CIDR")]
    pub service_cidrs: Vec<String>,
    /// Pod network CIDR (repeatable), instead of discovering it.
    #[arg(long = "pod-cidr", value_name = "CIDR")]
    pub pod_cidrs: Vec<String>,
    /// Do not read this discovery source (repeatable): its objects are not watched and its
    /// RBAC is not needed. Every source is read by default; a CRD that is not installed is
    /// skipped by itself.
    #[arg(long = "disable-discovery-source", value_enum, value_name = "SOURCE")]
    pub disabled_sources: Vec<PlatformSource>,
    /// Policies reconciled at the same time.
    #[arg(long, default_value_t = controller::DEFAULT_WORKERS)]
    pub workers: u16,
    /// `reportingInstance` of the operator's Events; in a cluster, set POD_NAME from the
    /// downward API.
    #[arg(long, env = "POD_NAME", default_value = controller::REPORTER)]
    pub instance: String,
    /// Seconds between re-establishing the watch of each source Secret. A grant withdrawn by
    /// deleting its Role ends no watch: the credential is revoked when the next is refused.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub source_recheck: u64,
    #[command(flatten)]
    pub election: ElectionArgs,
    /// Serve /healthz, /readyz and /metrics (OpenMetrics) on this address, e.g. 0.0.0.0:8080.
    #[arg(long, value_name = "ADDR")]
    pub admin_addr: Option<std::net::SocketAddr>,
    /// Who may read /metrics: `kubernetes` serves it only to a bearer token the API server
    /// accepts (TokenReview) whose user may `get` the non-resource URL /metrics
    /// (SubjectAccessReview); `none` serves it to anyone who reaches the port. /healthz and
    /// /readyz are always open.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = MetricsAuthMode::Kubernetes)]
    pub metrics_auth: MetricsAuthMode,
    /// The image of the probe Jobs that verify policies with `spec.verification` (the
    /// operator's own image: it runs `egress-proxy-operator probe`). Unset: such policies
    /// report VerificationFailed and switch nothing.
    #[arg(long, env = "PROBE_IMAGE", value_name = "IMAGE")]
    pub probe_image: Option<String>,
    /// A PEM file of root certificates written with the CAs of a policy's `spec.trust` under
    /// `roots: Keep`, instead of the Mozilla roots the operator ships (e.g. the roots of the
    /// cluster's base images, or an air-gapped set).
    #[arg(long, value_name = "FILE")]
    pub trust_roots: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub log: LogArgs,
}

/// `--metrics-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsAuthMode {
    /// TokenReview and SubjectAccessReview for `get /metrics`.
    Kubernetes,
    /// No check.
    None,
}

/// Leader election flags.
#[derive(Debug, clap::Args)]
pub struct ElectionArgs {
    /// Run as one of several replicas: only the holder of a Lease writes; the others keep
    /// their caches warm and take over when it stops renewing.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "egress-proxy-operator")]
    pub lease_name: String,
    /// Namespace of the Lease. Default: $POD_NAMESPACE, then the kubeconfig's or the Pod's
    /// namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Seconds a standby waits after the Lease last changed before taking it over.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    pub lease_duration: u64,
    /// Seconds the leader keeps writing without a successful renewal.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub renew_deadline: u64,
    /// Seconds between renewals (and between a standby's looks at the Lease).
    #[arg(long, value_name = "SECONDS", default_value_t = 2)]
    pub retry_period: u64,
}

impl ElectionArgs {
    /// The checked timing.
    pub fn timing(&self) -> anyhow::Result<Timing> {
        let s = std::time::Duration::from_secs;
        let t = Timing {
            lease_duration: s(self.lease_duration),
            renew_deadline: s(self.renew_deadline),
            retry_period: s(self.retry_period),
        };
        t.check()
            .map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
        Ok(t)
    }
}

/// Logging flags.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Log filter: a level (`info`, `debug`) or directives such as
    /// `egress_proxy_operator=debug,kube=warn`. kube-runtime's watcher logs a 403 with a
    /// dump of the API's reply; the operator logs each failed watch on one line itself.
    #[arg(
        long,
        env = "EPO_LOG",
        default_value = "info,kube_runtime::watcher=error"
    )]
    pub log_level: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Sets up `tracing` on stderr.
pub fn init_logs(log: &LogArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&log.log_level)
        .with_context(|| format!("invalid --log-level {:?}", log.log_level))?;
    // Colour only for a terminal: not in `kubectl logs` or a log collector.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let result = match log.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("setting up logs: {e}"))
}

/// Checks the override flags before anything starts.
pub fn overrides(args: &RunArgs) -> anyhow::Result<Overrides> {
    for c in args.service_cidrs.iter().chain(&args.pod_cidrs) {
        c.parse::<ipnet::IpNet>()
            .with_context(|| format!("{c:?} is not a CIDR (e.g. 10.43.0.0/16)"))?;
    }
    if let Some(d) = &args.cluster_domain {
        let ok = !d.is_empty()
            && d.len() <= 253
            && d.trim_end_matches('.').split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        anyhow::ensure!(
            ok,
            "--cluster-domain {d:?} is not a DNS domain (e.g. cluster.local)"
        );
    }
    Ok(Overrides {
        cluster_domain: args
            .cluster_domain
            .as_ref()
            .map(|d| d.trim_end_matches('.').to_lowercase()),
        service_cidrs: args.service_cidrs.clone(),
        pod_cidrs: args.pod_cidrs.clone(),
        disabled_sources: args.disabled_sources.iter().copied().collect(),
    })
}

/// Runs `run` until SIGINT or SIGTERM.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.log)?;
    let overrides = overrides(args)?;
    let elect = args.election.leader_elect;
    let timing = if elect {
        args.election.timing()?
    } else {
        Timing::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let config = client_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let api_host = config.cluster_url.host().map(|h| h.trim_matches(['[', ']']).to_owned());
        let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let resolv_conf = if in_cluster { std::fs::read_to_string("/etc/resolv.conf").ok() } else { None };
        let leadership = if elect { Leadership::elected() } else { Leadership::always() };
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::default());
        let gate = elect.then(|| leadership.clone());
        let client = crate::client::build(config.clone(), metrics.clone(), gate)?;
        if let Some(addr) = args.admin_addr {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--admin-addr {addr}"))?;
            let metrics_auth = match args.metrics_auth {
                // Its own client: reviews are creates every replica makes, not writes to gate.
                MetricsAuthMode::Kubernetes => MetricsAuth::kubernetes(kube::Client::try_from(config.clone())?),
                MetricsAuthMode::None => MetricsAuth::None,
            };
            tracing::info!(%addr, metrics_auth = ?args.metrics_auth, "admin endpoint: /healthz /readyz /metrics");
            let admin = Admin { metrics: metrics.clone(), leadership: leadership.clone(), readiness: readiness.clone(), metrics_auth };
            tokio::spawn(admin.serve(listener, std::future::pending()));
        }
        let (stop_elector, elector) = if elect {
            let lease_client = crate::client::build(config.clone(), metrics.clone(), None)?;
            let ns = args.election.lease_namespace.clone().unwrap_or(config.default_namespace.clone());
            let elector = Elector {
                api: kube::Api::namespaced(lease_client, &ns),
                name: args.election.lease_name.clone(),
                me: identity(&args.instance)?,
                timing,
                leadership: leadership.clone(),
            };
            tracing::info!(lease = %format!("{ns}/{}", elector.name), identity = %elector.me, "leader election: standing");
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            (Some(tx), Some(tokio::spawn(elector.run(async { let _ = rx.await; }))))
        } else {
            (None, None)
        };
        let settings = Settings {
            namespace_selector: args.namespace_selector.clone(),
            namespaces: args.namespaces.clone(),
            overrides,
            api_host,
            resolv_conf,
            instance: args.instance.clone(),
            workers: args.workers.max(1),
            source_recheck: std::time::Duration::from_secs(args.source_recheck.max(1)),
            leadership,
            metrics,
            readiness,
            probe_image: args.probe_image.clone().filter(|i| !i.is_empty()),
            trust_roots: trust_roots(args.trust_roots.as_deref())?,
            ..Settings::default()
        };
        tracing::info!(selector = %settings.namespace_selector, namespaces = ?settings.namespaces, "starting");
        let result = controller::run(client, settings, shutdown_signal()).await;
        // Only once nothing reconciles any more: release the Lease so a standby takes over.
        drop(stop_elector);
        if let Some(e) = elector {
            let _ = e.await;
        }
        result?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

/// `--trust-roots`: the file's roots, checked; else the shipped ones.
fn trust_roots(file: Option<&Path>) -> anyhow::Result<std::sync::Arc<crate::trust::RootSet>> {
    let Some(file) = file else {
        return Ok(std::sync::Arc::new(crate::trust::RootSet::shipped()));
    };
    let pem =
        std::fs::read(file).with_context(|| format!("reading --trust-roots {}", file.display()))?;
    let name = format!("file {}", file.display());
    Ok(std::sync::Arc::new(crate::trust::RootSet::from_pem(
        &name, &pem,
    )?))
}

/// The client configuration: `--kubeconfig`, `--context`, or inferred (also for
/// `explain --workload`).
pub(crate) async fn client_config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    Ok(match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &opts).await?
        }
        // A context only makes sense in a kubeconfig: $KUBECONFIG or ~/.kube/config.
        (None, Some(_)) => kube::Config::from_kubeconfig(&opts)
            .await
            .context("reading the kubeconfig for --context")?,
        (None, None) => kube::Config::infer()
            .await
            .context("no kubeconfig and not in a cluster")?,
    })
}

/// The election identity: the instance name and a random suffix, unique per process (a
/// restarted Pod of the same name must not inherit its predecessor's term).
fn identity(instance: &str) -> anyhow::Result<String> {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 4];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| anyhow::anyhow!("no random source for the election identity"))?;
    Ok(format!("{instance}_{:08x}", u32::from_be_bytes(b)))
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
