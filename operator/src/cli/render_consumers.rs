//! `render systemd|env-file|shell|ci`: the other consumers of a policy's proxy settings, from
//! the policy's status in the cluster (`--policy`) or from entries given (`--no-proxy`).
//! The outputs themselves are built by [`crate::consumers`].
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{ArgGroup, Subcommand};
use kube::Api;

use super::explain::parse_dialect;
use super::render::{WidenArg, parse_entries};
use crate::api::EgressProxyPolicy;
use crate::consumers::{self, CiFormat, DEFAULT_ENV_FILE, Daemon, Facts};
use crate::noproxy::{Dialect, Rendered};

/// Arguments of `render`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "NO_PROXY comes from the same facts as the workloads': with --policy, the \
policy's status.discovered and spec.noProxy as the operator last computed them (checked \
against its status.noProxy); with --no-proxy, the entries given. Credentials are never \
printed: the outputs read them from a file or from the CI system's secrets. Rolling the \
outputs out: docs/consumers.md."
)]
pub struct RenderArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// A systemd drop-in that gives a node daemon (containerd, CRI-O, Docker, kubelet) the
    /// proxy: credentials through EnvironmentFile=, NO_PROXY in Go syntax.
    Systemd(SystemdArgs),
    /// The template of the credentials file the drop-ins and the shell snippet read (keys
    /// with placeholders, never values).
    EnvFile(EnvFileArgs),
    /// A shell snippet for an operator's terminal, to be sourced: exports NO_PROXY and reads
    /// the proxy URLs from the credentials file when sourced.
    Shell(ShellArgs),
    /// The env block of a CI job: NO_PROXY, and the proxy URLs as references to the CI
    /// system's secrets.
    Ci(CiArgs),
    /// The trust files (ca-bundle.crt, truststore.p12, wgetrc) written into a directory from
    /// CA files, and the variables that point one dialect's clients at them.
    Trust(super::render_trust::TrustArgs),
}

/// Where the NO_PROXY entries come from: a policy in the cluster, or the command line.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("source").required(true).args(["policy", "no_proxy"])))]
pub struct SourceArgs {
    /// The EgressProxyPolicy whose computed NO_PROXY to render (read from its status).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    policy: Option<String>,
    /// With --policy: the kubeconfig file. Default: $KUBECONFIG, then ~/.kube/config, then
    /// the in-cluster config.
    #[arg(long, conflicts_with = "no_proxy")]
    kubeconfig: Option<PathBuf>,
    /// With --policy: the kubeconfig context. Default: the current context.
    #[arg(long, conflicts_with = "no_proxy")]
    context: Option<String>,
    /// NO_PROXY entries instead of a policy (repeatable, comma-separated lists allowed), as
    /// in render-no-proxy: host, .domain, *.domain, *, :port, IPv4, IPv6, CIDR.
    #[arg(long = "no-proxy", value_name = "ENTRIES")]
    no_proxy: Vec<String>,
    /// With --no-proxy: `deny` leaves out an entry a dialect can only write more widely,
    /// `allow` writes it with a warning. With --policy, the policy's spec.noProxy.widen.
    #[arg(long, value_enum, conflicts_with = "policy")]
    widen: Option<WidenArg>,
}

/// `--proxy-env-file`.
#[derive(Debug, clap::Args)]
pub struct EnvFileArg {
    /// The file that holds HTTP_PROXY and HTTPS_PROXY with their credentials (absolute path).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_ENV_FILE)]
    proxy_env_file: String,
}

/// Arguments of `render systemd`.
#[derive(Debug, clap::Args)]
pub struct SystemdArgs {
    /// The daemon the drop-in is for (its unit: containerd, crio, docker, kubelet .service).
    #[arg(long, value_enum)]
    daemon: Daemon,
    #[command(flatten)]
    env_file: EnvFileArg,
    #[command(flatten)]
    source: SourceArgs,
}

/// Arguments of `render env-file`.
#[derive(Debug, clap::Args)]
pub struct EnvFileArgs {
    #[command(flatten)]
    env_file: EnvFileArg,
}

/// Arguments of `render shell`.
#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// Dialect of NO_PROXY: the clients used in the terminal (curl, go, python-requests...).
    #[arg(long, default_value = "portable")]
    dialect: String,
    #[command(flatten)]
    env_file: EnvFileArg,
    #[command(flatten)]
    source: SourceArgs,
}

/// Arguments of `render ci`.
#[derive(Debug, clap::Args)]
pub struct CiArgs {
    /// The CI system.
    #[arg(long, value_enum)]
    format: CiFormat,
    /// Dialect of NO_PROXY: the clients the jobs use.
    #[arg(long, default_value = "portable")]
    dialect: String,
    #[command(flatten)]
    source: SourceArgs,
}

/// Runs `render`: the output on stdout; what NO_PROXY leaves out and warnings also on stderr.
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let (out, rendered): (String, Option<Rendered>) = match &args.what {
        // The file is checked before the cluster is asked.
        What::Systemd(a) => {
            consumers::check_env_file(&a.env_file.proxy_env_file)?;
            let facts = facts(&a.source)?;
            let (out, r) = consumers::systemd_dropin(a.daemon, &facts, &a.env_file.proxy_env_file)?;
            (out, Some(r))
        }
        What::EnvFile(a) => (
            consumers::env_file_template(&a.env_file.proxy_env_file)?,
            None,
        ),
        What::Shell(a) => {
            let dialect = variables_dialect(&a.dialect)?;
            consumers::check_env_file(&a.env_file.proxy_env_file)?;
            let facts = facts(&a.source)?;
            let (out, r) = consumers::shell_snippet(dialect, &facts, &a.env_file.proxy_env_file)?;
            (out, Some(r))
        }
        What::Ci(a) => {
            let dialect = variables_dialect(&a.dialect)?;
            let (out, r) = consumers::ci_env(a.format, dialect, &facts(&a.source)?);
            (out, Some(r))
        }
        // Files and variables, not NO_PROXY: printed by render_trust itself.
        What::Trust(a) => return super::render_trust::run(a),
    };
    print!("{out}");
    if let Some(r) = &rendered {
        for u in &r.uncovered {
            eprintln!("uncovered: {}: {}", u.entry, u.reason);
        }
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The facts from the command line, or from the policy in the cluster.
fn facts(source: &SourceArgs) -> anyhow::Result<Facts> {
    let Some(policy) = &source.policy else {
        return Ok(Facts {
            origin: "--no-proxy".to_owned(),
            set: parse_entries(&source.no_proxy)?,
            widen: source.widen.unwrap_or(WidenArg::Deny).into(),
        });
    };
    let (namespace, name) = policy
        .split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        .with_context(|| format!("--policy {policy:?}: expected NAMESPACE/NAME"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let p = rt.block_on(async {
        let config =
            super::run::client_config(source.kubeconfig.as_deref(), source.context.as_deref())
                .await?;
        let api: Api<EgressProxyPolicy> =
            Api::namespaced(kube::Client::try_from(config)?, namespace);
        let found = api
            .get_opt(name)
            .await
            .with_context(|| format!("reading EgressProxyPolicy {namespace}/{name}"))?;
        found.with_context(|| format!("EgressProxyPolicy {namespace}/{name} not found"))
    })?;
    consumers::policy_facts(&p)
}

/// `--dialect` of a consumer that reads the proxy variables: not `java`.
fn variables_dialect(name: &str) -> anyhow::Result<Dialect> {
    let dialect = parse_dialect(name)?;
    anyhow::ensure!(
        dialect != Dialect::Java,
        "--dialect java: the JVM reads no proxy variable; render the variables with \
         --dialect portable and take JAVA_TOOL_OPTIONS from the policy's status.javaOptions"
    );
    Ok(dialect)
}
