//! `explain`: per HTTP client, whether a URL goes direct or through the proxy, and why.
use std::process::ExitCode;

use anyhow::Context;

use crate::noproxy::{Decision, Dialect, Env, Explanation, explain, explain_all};

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
pub struct ExplainArgs {
    /// Client dialect to simulate (`all` for every one), e.g. go, curl, python-requests.
    #[arg(long, default_value = "all")]
    pub dialect: String,
    /// A variable of the simulated environment (repeatable). When at least one is given the
    /// environment is exactly these; otherwise this process's own environment is used.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
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
    let env = if args.env.is_empty() {
        Env::from_process()
    } else {
        env_from_pairs(&args.env)?
    };
    let all = args.dialect == "all";
    let results: Vec<Explanation> = if all {
        explain_all(&env, &args.url)?
    } else {
        vec![explain(parse_dialect(&args.dialect)?, &env, &args.url)?]
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

fn text(results: &[Explanation]) -> String {
    let mut out = String::new();
    if let Some(first) = results.first() {
        out.push_str(&format!("URL: {}\n", first.url));
    }
    let width = results
        .iter()
        .map(|r| r.dialect.name().len())
        .max()
        .unwrap_or(0);
    for r in results {
        let what = match (r.decision, &r.proxy) {
            (Decision::Proxy, Some(p)) => format!("proxy   via {p}"),
            (Decision::Proxy, None) => "proxy".to_owned(),
            (Decision::Direct, _) => "direct".to_owned(),
            (Decision::Error, _) => "ERROR".to_owned(),
        };
        out.push_str(&format!("{:width$}  {what}\n", r.dialect.name()));
        out.push_str(&format!("{:width$}    {}\n", "", r.reason));
    }
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
