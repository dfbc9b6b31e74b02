//! `render-no-proxy`: NO_PROXY entries written in the syntax of one HTTP client.
use std::process::ExitCode;

use super::explain::{Output, parse_dialect};
use crate::noproxy::{IntentSet, Widen, render_with};

/// Arguments of `render-no-proxy`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Client dialect to write for, e.g. portable, go, curl, python-requests.
    #[arg(long)]
    pub dialect: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// `deny`: an entry the dialect can only write more widely (a `*.domain` whose spelling
    /// also sends `domain` itself direct) is left out and reported uncovered. `allow`: it is
    /// written, with a warning naming the extra hosts (`spec.noProxy.widen`).
    #[arg(long, value_enum, default_value_t = WidenArg::Deny)]
    pub widen: WidenArg,
    /// Entries: `host`, `.domain`, `*.domain`, `*`, any of these with `:port`, IPv4, IPv6
    /// (`::1`, `[::1]`, `[::1]:443`), CIDR (`10.0.0.0/8`, `fd00::/8`). One argument may hold
    /// several entries separated by commas (blanks around them are ignored, as are empty
    /// pieces such as a trailing comma).
    #[arg(required = true, value_name = "ENTRY")]
    pub entries: Vec<String>,
}

/// `--widen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WidenArg {
    Deny,
    Allow,
}

impl From<WidenArg> for Widen {
    fn from(w: WidenArg) -> Widen {
        match w {
            WidenArg::Deny => Widen::Deny,
            WidenArg::Allow => Widen::Allow,
        }
    }
}

/// NO_PROXY entries given as arguments (each may hold a comma-separated list); a blank
/// argument or a malformed entry is an error naming it.
pub(super) fn parse_entries(entries: &[String]) -> anyhow::Result<IntentSet> {
    if let Some(blank) = entries.iter().find(|e| e.trim().is_empty()) {
        anyhow::bail!("invalid NO_PROXY entry {blank:?}: empty entry");
    }
    Ok(IntentSet::parse(entries.iter().map(String::as_str))?)
}

/// Runs `render-no-proxy`: prints the value (text) or value, uncovered and warnings (JSON).
/// Malformed entries are an error naming the entry.
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let dialect = parse_dialect(&args.dialect)?;
    let set = parse_entries(&args.entries)?;
    let out = render_with(dialect, &set, args.widen.into());
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Output::Text => {
            println!("{}", out.value);
            for u in &out.uncovered {
                eprintln!("uncovered: {}: {}", u.entry, u.reason);
            }
            for w in &out.warnings {
                eprintln!("warning: {w}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dialect: &str, entries: &[&str]) -> RenderArgs {
        RenderArgs {
            dialect: dialect.to_owned(),
            output: Output::Json,
            widen: WidenArg::Deny,
            entries: entries.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn malformed_entry_is_an_error_naming_it() {
        let err = run(&args("go", &["a.example,10.0.0.0/33"])).unwrap_err();
        assert!(err.to_string().contains("\"10.0.0.0/33\""), "{err}");
        let err = run(&args("klingon", &["a"])).unwrap_err();
        assert!(err.to_string().contains("unknown dialect"), "{err}");
        assert!(run(&args("go", &["a.example, 10.0.0.0/8,", ".b"])).is_ok());
        assert!(run(&args("go", &["a b"])).is_err());
        assert!(run(&args("go", &[" "])).is_err());
    }
}
