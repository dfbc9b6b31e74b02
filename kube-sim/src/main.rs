//! `kube-sim --kubeconfig PATH [--listen ADDR] [--load PATH]... [--seed-service-cidr[=BOOL]] [--controllers [--run-image IMAGE=PATH]...]`

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// In-memory Kubernetes API server (plain HTTP) for tests and demos.
#[derive(Debug, Parser)]
#[command(name = "kube-sim", version)]
struct Args {
    /// Where to write the kubeconfig, once the server is ready.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Listen address; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// YAML file or directory to load at start-up (repeatable; CRDs are applied first).
    #[arg(long)]
    load: Vec<PathBuf>,
    /// Create the ServiceCIDR `kubernetes` (10.96.0.0/12) at start: `true` (the flag alone) or
    /// `false`. Default: only when --load yields no object, so a loaded cluster holds exactly
    /// the ServiceCIDRs of its files.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    seed_service_cidr: Option<bool>,
    /// Run the simulated workload controllers and kubelet.
    #[arg(long)]
    controllers: bool,
    /// With --controllers: seconds a new Pod takes to become Ready (default 0).
    #[arg(long, default_value_t = 0.0)]
    ready_after: f64,
    /// With --controllers: factor applied to a deleted Pod's grace period before it is
    /// removed (0 removes it at once; 1 is a real cluster's timing).
    #[arg(long, default_value_t = 0.0)]
    grace_scale: f64,
    /// With --controllers: run containers of this image as the local program PATH, which
    /// stands for the image's entrypoint (repeatable). Only Pods with restartPolicy Never or
    /// OnFailure (Job Pods) are run; unmapped images are never run.
    #[arg(long = "run-image", value_name = "IMAGE=PATH", value_parser = image_mapping)]
    run_image: Vec<(String, PathBuf)>,
}

fn image_mapping(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((image, path)) if !image.is_empty() && !path.is_empty() => {
            Ok((image.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("{s:?} is not IMAGE=PATH")),
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kube-sim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "kube_sim=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = kube_sim::Config {
        listen: args.listen,
        load: args.load,
        seed_service_cidr: args.seed_service_cidr,
        controllers: args.controllers,
        ready_after: std::time::Duration::try_from_secs_f64(args.ready_after)?,
        grace_scale: args.grace_scale,
        run_images: args.run_image.into_iter().collect(),
        ..Default::default()
    };
    let handle = kube_sim::KubeSim::start(config).await?;
    handle.write_kubeconfig(&args.kubeconfig)?;
    tracing::info!(url = %handle.base_url(), kubeconfig = %args.kubeconfig.display(), "ready");
    // SIGINT or SIGTERM stop the server, and with it every process it runs.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    handle.shutdown();
    Ok(())
}
