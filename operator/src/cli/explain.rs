//! `explain`: per HTTP client, whether a URL goes direct or through the proxy, and why.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::explain_workload::{
    DialectFlag, decisions, parse_workload, read, report, text as workload_text,
};
use crate::noproxy::{Dialect, Env, Explanation, Target, explain, explain_all};

/// Output format of `explain` and `render-no-proxy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Human-readable.
    #[default]
    Text,
    /// JSON (stable field names).
    Json,
}

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With --workload, the environment is that of each container of the \
live workload: its proxy variables resolved as the kubelet would (value with $(VAR) \
expansion, secretKeyRef, configMapKeyRef, envFrom), credentials redacted, and the dialect \
that of the EgressProxyPolicy that manages it unless --dialect is given."
)]
pub struct ExplainArgs {
    /// Client dialect to simulate (`all` for every one), e.g. go, curl, python-requests.
    /// Default: `all`; with --workload, the dialect of the policy that manages the workload.
    #[arg(long)]
    pub dialect: Option<String>,
    /// A variable of the simulated environment (repeatable). When at least one is given the
    /// environment is exactly these; otherwise this process's own environment is used.
    #[arg(long = "env", value_name = "NAME=VALUE", conflicts_with = "workload")]
    pub env: Vec<String>,
    /// Explain for each container of a live workload (Deployment, StatefulSet, DaemonSet,
    /// CronJob; KIND also deploy, sts, ds, cj), with the proxy variables it starts with.
    #[arg(long, value_name = "NAMESPACE/KIND/NAME")]
    pub workload: Option<String>,
    /// With --workload: the kubeconfig file. Default: $KUBECONFIG, then ~/.kube/config, then
    /// the in-cluster config.
    #[arg(long, requires = "workload")]
    pub kubeconfig: Option<PathBuf>,
    /// With --workload: the kubeconfig context. Default: the current context.
    #[arg(long, requires = "workload")]
    pub context: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The http:// or https:// URL to explain.
    pub url: String,
}

/// Parses `NAME=VALUE` pairs into an environment.
pub(crate) fn env_from_pairs(pairs: &[String]) -> anyhow::Result<Env> {
    let mut env = Env::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .with_context(|| format!("--env {p:?}: expected NAME=VALUE"))?;
        anyhow::ensure!(!k.is_empty(), "--env {p:?}: empty variable name");
        env.set(k, v);
    }
    Ok(env)
}

/// Parses a dialect name, listing the valid ones on error.
pub(crate) fn parse_dialect(name: &str) -> anyhow::Result<Dialect> {
    Dialect::from_name(name).with_context(|| {
        let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
        format!(
            "unknown dialect {name:?}; expected one of: {}",
            names.join(", ")
        )
    })
}

/// Runs `explain`.
pub fn run(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    if let Some(w) = &args.workload {
        return run_workload(args, w);
    }
    let env = if args.env.is_empty() {
        Env::from_process()
    } else {
        env_from_pairs(&args.env)?
    };
    let dialect = args.dialect.as_deref().unwrap_or("all");
    let all = dialect == "all";
    let results: Vec<Explanation> = if all {
        explain_all(&env, &args.url)?
    } else {
        vec![explain(parse_dialect(dialect)?, &env, &args.url)?]
    };
    match args.output {
        Output::Json if all => println!("{}", serde_json::to_string_pretty(&results)?),
        Output::Json => {
            for r in &results {
                println!("{}", serde_json::to_string_pretty(r)?);
            }
        }
        Output::Text => print!("{}", text(&results)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `explain --workload`: everything given is checked before the cluster is asked.
fn run_workload(args: &ExplainArgs, workload: &str) -> anyhow::Result<ExitCode> {
    let w = parse_workload(workload)?;
    let flag = match args.dialect.as_deref() {
        None => None,
        Some("all") => Some(DialectFlag::All),
        Some(name) => Some(DialectFlag::One(parse_dialect(name)?)),
    };
    let target = Target::parse(&args.url)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let live = rt.block_on(async {
        let config =
            super::run::client_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let client = kube::Client::try_from(config)?;
        read(client, &w).await
    })?;
    let r = report(&live, flag, &target, &args.url);
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&r)?),
        Output::Text => print!("{}", workload_text(&r)),
    }
    Ok(ExitCode::SUCCESS)
}

fn text(results: &[Explanation]) -> String {
    let mut out = String::new();
    if let Some(first) = results.first() {
        out.push_str(&format!("URL: {}\n", first.url));
    }
    out.push_str(&decisions(results, ""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_pairs() {
        let e = env_from_pairs(&["NO_PROXY=a=b".into(), "X=".into()]).unwrap();
        assert_eq!(e.get("NO_PROXY"), Some("a=b"));
        assert_eq!(e.get("X"), Some(""));
        assert!(env_from_pairs(&["NOEQUALS".into()]).is_err());
        assert!(
            parse_dialect("nope")
                .unwrap_err()
                .to_string()
                .contains("python-httpx")
        );
    }

    #[test]
    fn text_lists_every_dialect() {
        let e = env_from_pairs(&[
            "HTTP_PROXY=http://u:pw@p:1".into(),
            "http_proxy=http://u:pw@p:1".into(),
        ])
        .unwrap();
        let t = text(&explain_all(&e, "http://x/").unwrap());
        for d in Dialect::ALL {
            assert!(t.contains(d.name()));
        }
        assert!(t.contains("http://u:***@p:1"));
        assert!(!t.contains("pw"));
    }
}
