//! Command-line interface: `run`, `demo`, `crd`, `explain`, `render-no-proxy`, `render`,
//! `probe`.

mod demo;
mod explain;
mod explain_workload;
mod probe;
mod render;
mod render_consumers;
mod render_trust;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Kubernetes operator for clusters behind an outbound HTTP proxy.
#[derive(Debug, Parser)]
#[command(name = "egress-proxy-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against a cluster (kubeconfig or in-cluster config).
    Run(Box<run::RunArgs>),
    /// Run the operator against an in-memory cluster with example policies, print what it
    /// discovered and changed, and serve until Ctrl-C (explore it with kubectl).
    Demo(demo::DemoArgs),
    /// Print the EgressProxyPolicy CustomResourceDefinition as YAML.
    Crd,
    /// Show, per HTTP client, whether a URL would go direct or through the proxy (here, or
    /// in each container of a live workload with --workload).
    Explain(explain::ExplainArgs),
    /// Write NO_PROXY entries in the syntax of one HTTP client.
    RenderNoProxy(render::RenderArgs),
    /// Write the proxy settings for the other consumers: a systemd drop-in for containerd,
    /// CRI-O, Docker or the kubelet, a shell snippet, a CI job's env block.
    Render(render_consumers::RenderArgs),
    /// Check from this environment (a Pod's) that endpoints go direct, through the proxy, or
    /// are refused, as expected; print the results as JSON.
    Probe(probe::ProbeArgs),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run(args) => run::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Crd => print_crd(),
        Command::Explain(args) => explain::run(args),
        Command::RenderNoProxy(args) => render::run(args),
        Command::Render(args) => render_consumers::run(args),
        Command::Probe(args) => probe::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn print_crd() -> anyhow::Result<ExitCode> {
    print!("{}", crate::api::crd_yaml()?);
    Ok(ExitCode::SUCCESS)
}
