//! `probe`: checks from this process's environment that each endpoint takes its path.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::api::ExpectedPath;
use crate::noproxy::{Env, Matcher};
use crate::probe::net::{Requester, Trust};
use crate::probe::{EndpointResult, check, termination_message};

/// Arguments of `probe`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Checks, with this process's own proxy variables (HTTP_PROXY, \
HTTPS_PROXY, NO_PROXY and their lowercase forms), that each endpoint takes the path given: \
the route is decided the way the dialect's client decides it (the model behind `explain`), \
then the request is made for real along that route.\n\n\
Direct: the client would not use the proxy and the target answers without it.\n\
Proxied: the request goes to the proxy with the credentials in the proxy URL and the target \
answers 2xx/3xx (401/407 from the proxy means it rejected the credentials; inside an open \
CONNECT tunnel the answer is the target's).\n\
Blocked: the proxy refuses it (403) and a direct connection does not get through either \
(one that does \"would leak direct\").\n\n\
Prints a JSON array, one object per endpoint (url, expect, got, ok, statusCode, viaProxy, \
dns, latencyMs, error), with credentials redacted, and writes it to --termination-log when \
that path is writable. Exits 0 only when every endpoint is ok."
)]
pub struct ProbeArgs {
    /// An endpoint and the path it must take (repeatable), e.g.
    /// `https://example.org/=Proxied`, `http://db.corp:8080/health=Direct`.
    #[arg(
        long = "endpoint",
        value_name = "URL=Direct|Proxied|Blocked",
        required = true
    )]
    pub endpoints: Vec<String>,
    /// The client dialect whose NO_PROXY rules decide the route (`portable`: every modelled
    /// client must agree).
    #[arg(long, default_value = "portable")]
    pub dialect: String,
    /// A PEM file of CA certificates to trust besides the system's (repeatable), e.g. the
    /// cluster CA from the `kube-root-ca.crt` ConfigMap for the Kubernetes Service.
    #[arg(long = "ca-file", value_name = "PATH")]
    pub ca_files: Vec<PathBuf>,
    /// CA certificates as PEM text, also trusted (probe Jobs set it from the namespace's
    /// `kube-root-ca.crt` ConfigMap). Empty: none.
    #[arg(
        long,
        env = "EGRESS_PROXY_PROBE_CA",
        value_name = "PEM",
        hide_env_values = true
    )]
    pub ca_pem: Option<String>,
    /// The CA certificates of a policy's `spec.trust` under test (PEM text): they, and with
    /// `--trust-roots keep` the Mozilla roots the operator ships, replace the system's roots,
    /// as a workload's `ca-bundle.crt` does. Probe Jobs set it.
    #[arg(
        long,
        env = "EGRESS_PROXY_PROBE_TRUST",
        value_name = "PEM",
        hide_env_values = true
    )]
    pub trust_pem: Option<String>,
    /// With --trust-pem: `keep` (the shipped roots too) or `replace` (the CAs only).
    #[arg(
        long,
        env = "EGRESS_PROXY_PROBE_TRUST_ROOTS",
        value_enum,
        default_value_t = TrustRootsArg::Keep
    )]
    pub trust_roots: TrustRootsArg,
    /// Seconds each connection and request may take.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// Where the results also go, as the container's termination message (shortened to fit
    /// 4096 bytes). Skipped with a note on stderr when it cannot be written.
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
}

/// `--trust-roots`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrustRootsArg {
    Keep,
    Replace,
}

/// The roots the probe checks servers with.
fn trust(args: &ProbeArgs) -> Trust {
    match args.trust_pem.as_deref().filter(|p| !p.trim().is_empty()) {
        None => Trust::System,
        Some(pem) => Trust::Bundle {
            pem: pem.to_owned(),
            keep: args.trust_roots == TrustRootsArg::Keep,
        },
    }
}

/// Parses `URL=Direct|Proxied|Blocked` (split at the last `=`: a query may contain one).
fn parse_endpoint(text: &str) -> anyhow::Result<(String, ExpectedPath)> {
    let (url, expect) = text
        .rsplit_once('=')
        .with_context(|| format!("--endpoint {text:?}: expected URL=Direct|Proxied|Blocked"))?;
    let expect = match expect {
        "Direct" => ExpectedPath::Direct,
        "Proxied" => ExpectedPath::Proxied,
        "Blocked" => ExpectedPath::Blocked,
        other => anyhow::bail!(
            "--endpoint {url}: unknown path {other:?}; expected Direct, Proxied or Blocked"
        ),
    };
    Ok((url.to_owned(), expect))
}

/// Runs `probe`.
pub fn run(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let endpoints = args
        .endpoints
        .iter()
        .map(|e| parse_endpoint(e))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dialect = super::explain::parse_dialect(&args.dialect)?;
    let matcher = Matcher::new(dialect, &Env::from_process());
    let timeout = Duration::from_secs(args.timeout.max(1));
    let requester = Requester::new(
        &args.ca_files,
        args.ca_pem.as_deref(),
        &trust(args),
        timeout,
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results: Vec<EndpointResult> = runtime.block_on(async {
        let mut out = Vec::with_capacity(endpoints.len());
        for (url, expect) in &endpoints {
            out.push(check(&requester, &matcher, url, *expect).await);
        }
        out
    });
    println!("{}", serde_json::to_string_pretty(&results)?);
    if let Err(e) = std::fs::write(&args.termination_log, termination_message(&results)) {
        eprintln!(
            "note: results not written to {}: {e}",
            args.termination_log.display()
        );
    }
    Ok(if results.iter().all(|r| r.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
