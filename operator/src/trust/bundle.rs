//! The files and variables of a policy's trust: built from checked certificates only.

use std::collections::HashSet;

use super::certs::{Certificate, sha256_hex};
use super::dialects::{Effect, Value, When};
use super::{
    BUNDLE_KEY, RootSet, Roots, TRUSTSTORE_KEY, TrustError, WGETRC_KEY, truststore, variables,
};
use crate::noproxy::Dialect;

/// What a workload of one dialect is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// `ca-bundle.crt`: the CA sources in order (a certificate seen before, by SHA-256,
    /// dropped), then with Keep the root set's certificates not already in; certificates
    /// only, LF line endings, no comments.
    pub pem: String,
    /// `truststore.p12` (java only): the same certificates, in the same order.
    pub truststore: Option<Vec<u8>>,
    /// `wgetrc`, when the dialect's variables include WGETRC.
    pub wgetrc: Option<String>,
    /// First 16 hex digits of the SHA-256 of `pem`.
    pub id: String,
    /// (name, value), in the dialect's fixed order.
    pub vars: Vec<(String, String)>,
    /// java only: the truststore system properties, for JAVA_TOOL_OPTIONS.
    pub java_options: Option<String>,
    /// How many of the root set's certificates are in the bundle (0 with Replace).
    pub root_count: usize,
}

/// The bundle for `dialect`, its files to be found in the directory `dir`.
pub fn build(
    dialect: Dialect,
    sources: &[Certificate],
    roots: Roots,
    root_set: &RootSet,
    dir: &str,
) -> Result<Bundle, TrustError> {
    if sources.is_empty() {
        return Err(TrustError::NoSources);
    }
    let vars = variables(dialect);
    let adds = vars.iter().find(|v| v.effect == Effect::AlwaysAdds);
    if let Some(v) = adds.filter(|_| roots == Roots::Replace) {
        let variable = v.name;
        return Err(TrustError::ReplaceUnsupported { dialect, variable });
    }
    let mut seen = HashSet::new();
    let mut chosen: Vec<&Certificate> = sources
        .iter()
        .filter(|c| seen.insert(c.sha256.as_str()))
        .collect();
    let source_count = chosen.len();
    let extra = match roots {
        Roots::Keep => root_set.certs.as_slice(),
        Roots::Replace => &[],
    };
    chosen.extend(extra.iter().filter(|c| seen.insert(c.sha256.as_str())));
    let pem: String = chosen.iter().map(|c| pem_block(&c.der)).collect();
    let dir = dir.trim_end_matches('/');
    let path = |key: &str| format!("{dir}/{key}");
    let vars: Vec<(String, String)> = vars
        .iter()
        .filter(|v| v.when == When::Always || roots == Roots::Replace)
        .map(|v| {
            let value = match v.value {
                Value::Bundle => path(BUNDLE_KEY),
                Value::Dir => dir.to_owned(),
                Value::Wgetrc => path(WGETRC_KEY),
            };
            (v.name.to_owned(), value)
        })
        .collect();
    let java = dialect == Dialect::Java;
    Ok(Bundle {
        id: sha256_hex(pem.as_bytes())[..16].to_owned(),
        truststore: java.then(|| truststore(chosen.iter().copied())),
        wgetrc: vars
            .iter()
            .any(|(n, _)| n == "WGETRC")
            .then(|| wgetrc(&path(BUNDLE_KEY), dir, roots)),
        java_options: java.then(|| {
            format!(
                "-Djavax.net.ssl.trustStore={} -Djavax.net.ssl.trustStoreType=PKCS12",
                path(TRUSTSTORE_KEY)
            )
        }),
        root_count: chosen.len() - source_count,
        pem,
        vars,
    })
}

/// The wgetrc: the bundle, and with Replace the trust directory as `ca_directory` instead of
/// the system's (GnuTLS wget adds `ca_certificate` to the system trust otherwise).
fn wgetrc(bundle: &str, dir: &str, roots: Roots) -> String {
    match roots {
        Roots::Keep => format!("ca_certificate = {bundle}\n"),
        Roots::Replace => format!("ca_certificate = {bundle}\nca_directory = {dir}\n"),
    }
}

/// The certificates as PEM, in order, as in `ca-bundle.crt`.
pub fn pem_of<'a>(certs: impl IntoIterator<Item = &'a Certificate>) -> String {
    certs.into_iter().map(|c| pem_block(&c.der)).collect()
}

/// One CERTIFICATE block, 64-column base64, LF.
fn pem_block(der: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der), config)
}
