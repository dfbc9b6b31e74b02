//! `render trust`: the trust files and variables a workload of one dialect gets, from CA
//! files (the same checks and the same bundle as the operator's, via [`crate::trust`]).
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::explain::{Output, parse_dialect};
use crate::trust::{
    self, BUNDLE_KEY, Bundle, Certificate, RootSet, Roots, TRUSTSTORE_KEY, WGETRC_KEY,
};

/// Days before a certificate's notAfter from which `render trust` warns (stderr), as the
/// policy's default expiryWarningDays.
const WARNING_DAYS: u32 = 30;

/// Arguments of `render trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Dialect of the clients (as spec.dialect): which variables point them at the files.
    #[arg(long)]
    pub dialect: String,
    /// A PEM file of CA certificates to trust (repeatable; their order is the bundle's).
    #[arg(long = "ca", value_name = "FILE", required = true)]
    pub ca: Vec<PathBuf>,
    /// `keep`: the CAs are added to the root set; `replace`: only the CAs are trusted
    /// (refused for dialects with Node.js clients).
    #[arg(long, value_enum, default_value_t = RootsArg::Keep)]
    pub roots: RootsArg,
    /// A PEM file of roots to keep instead of the shipped Mozilla roots (as the operator's
    /// --trust-roots).
    #[arg(long, value_name = "FILE")]
    pub root_set: Option<PathBuf>,
    /// The directory to write ca-bundle.crt, truststore.p12 (java) and wgetrc into (created
    /// if missing); the variables point into it (made absolute).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Output format: `NAME=VALUE` lines, or JSON.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// `--roots`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RootsArg {
    Keep,
    Replace,
}

impl From<RootsArg> for Roots {
    fn from(r: RootsArg) -> Roots {
        match r {
            RootsArg::Keep => Roots::Keep,
            RootsArg::Replace => Roots::Replace,
        }
    }
}

/// Runs `render trust`: writes the files, prints the variables (stdout) and the
/// certificates that expire soon (stderr).
pub fn run(args: &TrustArgs) -> anyhow::Result<ExitCode> {
    let now = Timestamp::now();
    let (out, warnings) = render(args, now)?;
    print!("{out}");
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks the files, builds the bundle, writes it into `--dir`; returns stdout and the
/// warnings.
fn render(args: &TrustArgs, now: Timestamp) -> anyhow::Result<(String, Vec<String>)> {
    let dialect = parse_dialect(&args.dialect)?;
    // The variables name absolute paths: a relative one would depend on the client's cwd.
    let dir_path =
        std::path::absolute(&args.dir).with_context(|| format!("--dir {}", args.dir.display()))?;
    let dir = dir_path
        .to_str()
        .with_context(|| format!("--dir {}: not UTF-8", args.dir.display()))?;
    let mut sources = Vec::new();
    for path in &args.ca {
        let label = format!("file {}", path.display());
        sources.extend(trust::parse_source(&label, &read(path)?, now)?);
    }
    let root_set = match &args.root_set {
        Some(path) => RootSet::from_pem(&format!("file {}", path.display()), &read(path)?)?,
        None => RootSet::shipped(),
    };
    let roots = Roots::from(args.roots);
    let bundle = trust::build(dialect, &sources, roots, &root_set, dir)?;
    write_files(&dir_path, &bundle)?;
    let unique = dedup(&sources);
    let warnings = trust::expiring(&sources, now, WARNING_DAYS)
        .into_iter()
        .map(|c| format!("{} ({}) expires at {}", c.subject, c.sha256, c.not_after))
        .collect();
    let vars = printed_vars(&bundle);
    let out = match args.output {
        Output::Text => vars.iter().map(|(n, v)| format!("{n}={v}\n")).collect(),
        Output::Json => {
            let certificates: Vec<_> = unique
                .iter()
                .map(|c| json!({"subject": c.subject, "sha256": c.sha256, "notAfter": c.not_after.to_string()}))
                .collect();
            let value = json!({
                "bundle": bundle.id,
                "vars": vars.into_iter().collect::<BTreeMap<_, _>>(),
                "certificates": certificates,
                "roots": {"mode": roots, "set": root_set.name, "count": bundle.root_count},
            });
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    Ok((out, warnings))
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The variables, and for java JAVA_TOOL_OPTIONS with the truststore properties.
fn printed_vars(bundle: &Bundle) -> Vec<(String, String)> {
    let mut vars = bundle.vars.clone();
    if let Some(options) = &bundle.java_options {
        vars.push(("JAVA_TOOL_OPTIONS".to_owned(), options.clone()));
    }
    vars
}

/// The source certificates once each, in order (as in the bundle).
fn dedup(certs: &[Certificate]) -> Vec<&Certificate> {
    let mut seen = HashSet::new();
    certs.iter().filter(|c| seen.insert(&c.sha256)).collect()
}

fn write_files(dir: &Path, bundle: &Bundle) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |key: &str, bytes: &[u8]| {
        let path = dir.join(key);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    write(BUNDLE_KEY, bundle.pem.as_bytes())?;
    if let Some(p12) = &bundle.truststore {
        write(TRUSTSTORE_KEY, p12)?;
    }
    if let Some(wgetrc) = &bundle.wgetrc {
        write(WGETRC_KEY, wgetrc.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temp dir.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("render-trust-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn ca_pem(cn: &str) -> String {
        crate::trust::testing::ca_pem(cn, (2025, 1, 1), (2026, 6, 20))
    }

    fn args(dialect: &str, tmp: &Path, output: Output) -> TrustArgs {
        let ca = tmp.join("corp.pem");
        std::fs::write(&ca, ca_pem("Corp CA")).unwrap();
        let roots = tmp.join("roots.pem");
        std::fs::write(&roots, ca_pem("Root")).unwrap();
        TrustArgs {
            dialect: dialect.to_owned(),
            ca: vec![ca],
            roots: RootsArg::Keep,
            root_set: Some(roots),
            dir: tmp.join("out"),
            output,
        }
    }

    fn now() -> Timestamp {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn java_text_writes_the_files_and_prints_the_variables() {
        let tmp = temp_dir("java");
        let a = args("java", &tmp, Output::Text);
        let (out, warnings) = render(&a, now()).unwrap();
        let d = a.dir.to_str().unwrap();
        assert_eq!(
            out,
            format!(
                "CURL_CA_BUNDLE={d}/ca-bundle.crt\nNODE_EXTRA_CA_CERTS={d}/ca-bundle.crt\n\
                 REQUESTS_CA_BUNDLE={d}/ca-bundle.crt\nSSL_CERT_FILE={d}/ca-bundle.crt\n\
                 WGETRC={d}/wgetrc\nJAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore={d}/truststore.p12 \
                 -Djavax.net.ssl.trustStoreType=PKCS12\n"
            )
        );
        let bundle = std::fs::read_to_string(a.dir.join("ca-bundle.crt")).unwrap();
        let corp = std::fs::read_to_string(&a.ca[0]).unwrap();
        let root = std::fs::read_to_string(a.root_set.as_ref().unwrap()).unwrap();
        assert_eq!(bundle, format!("{corp}{root}"));
        let wgetrc = std::fs::read_to_string(a.dir.join("wgetrc")).unwrap();
        assert_eq!(wgetrc, format!("ca_certificate = {d}/ca-bundle.crt\n"));
        assert!(a.dir.join("truststore.p12").exists());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("CN=Corp CA ("), "{warnings:?}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn json_names_the_bundle_certificates_and_roots() {
        let tmp = temp_dir("json");
        let a = args("curl", &tmp, Output::Json);
        let (out, _) = render(&a, now()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let bundle = std::fs::read(a.dir.join("ca-bundle.crt")).unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, &bundle);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let id = &hex[..16];
        let corp = trust::parse_source("x", &std::fs::read(&a.ca[0]).unwrap(), now()).unwrap();
        let d = a.dir.to_str().unwrap();
        let set = format!("file {}", a.root_set.as_ref().unwrap().display());
        assert_eq!(
            v,
            json!({
                "bundle": id,
                "vars": {"CURL_CA_BUNDLE": format!("{d}/ca-bundle.crt")},
                "certificates": [{"subject": "CN=Corp CA", "sha256": corp[0].sha256, "notAfter": "2026-06-20T00:00:00Z"}],
                "roots": {"mode": "Keep", "set": set, "count": 1},
            })
        );
        assert!(!a.dir.join("truststore.p12").exists());
        assert!(!a.dir.join("wgetrc").exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let tmp = temp_dir("errors");
        let mut a = args("node-undici", &tmp, Output::Text);
        a.roots = RootsArg::Replace;
        let err = render(&a, now()).unwrap_err().to_string();
        assert!(
            err.contains("Replace is not possible with dialect node-undici"),
            "{err}"
        );
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        std::fs::write(&a.ca[0], &key).unwrap();
        a.roots = RootsArg::Keep;
        let err = format!("{:#}", render(&a, now()).unwrap_err());
        let file = a.ca[0].display();
        assert_eq!(
            err,
            format!(
                "file {file}: block 1 is a private key; a trust source must hold CA \
                 certificates only (remove the key, and treat it as disclosed)"
            )
        );
        a.ca[0] = tmp.join("missing.pem");
        let err = format!("{:#}", render(&a, now()).unwrap_err());
        assert!(
            err.starts_with(&format!("reading {}", a.ca[0].display())),
            "{err}"
        );
        assert!(!a.dir.exists(), "nothing written on error");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
