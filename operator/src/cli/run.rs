//! `run`: the operator against a real cluster (kubeconfig or in-cluster config).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::controller::{self, Settings};
use crate::discovery::Overrides;

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
    pub log: LogArgs,
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
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
    })
}

/// Runs `run` until SIGINT or SIGTERM.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.log)?;
    let overrides = overrides(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let opts = KubeConfigOptions {
            context: args.context.clone(),
            ..Default::default()
        };
        let config = match (&args.kubeconfig, &args.context) {
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
        };
        let api_host = config.cluster_url.host().map(|h| h.trim_matches(['[', ']']).to_owned());
        let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let resolv_conf = if in_cluster { std::fs::read_to_string("/etc/resolv.conf").ok() } else { None };
        let client = kube::Client::try_from(config)?;
        let settings = Settings {
            namespace_selector: args.namespace_selector.clone(),
            namespaces: args.namespaces.clone(),
            overrides,
            api_host,
            resolv_conf,
            instance: args.instance.clone(),
            workers: args.workers.max(1),
            source_recheck: std::time::Duration::from_secs(args.source_recheck.max(1)),
            ..Settings::default()
        };
        tracing::info!(selector = %settings.namespace_selector, namespaces = ?settings.namespaces, "starting");
        controller::run(client, settings, shutdown_signal()).await?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
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
