//! Trust for TLS-inspecting proxies (spec.trust): the CA sources checked, the bundle each
//! client reads (PEM file, PKCS12 truststore for the JDK, a wgetrc) and the variables that
//! point the clients at it. Pure: no I/O; the CLI `render trust` is the edge.

mod bundle;
mod certs;
pub(crate) mod dialects;
mod pkcs12;
mod roots;

pub use bundle::{Bundle, build, pem_of};
pub use certs::{Certificate, expiring, parse_source};
pub use dialects::{Effect, TrustVar, Value, When};
pub use pkcs12::truststore;
pub use roots::{RootSet, Roots, SHIPPED_ROOTS_VERSION};

use k8s_openapi::jiff::Timestamp;

use crate::noproxy::Dialect;

/// The trust variables of a dialect, in the order they are written (its row of
/// `dialects.rs`).
pub fn variables(dialect: Dialect) -> &'static [TrustVar] {
    crate::noproxy::dialects::client(dialect).trust_variables()
}

/// The dialects whose clients can drop their own roots (`roots: Replace`): none of their
/// trust variables only adds.
pub fn replaceable() -> impl Iterator<Item = Dialect> {
    Dialect::ALL
        .into_iter()
        .filter(|d| variables(*d).iter().all(|v| v.effect != Effect::AlwaysAdds))
}

/// Their names, comma-separated, in [`Dialect::ALL`] order: for the messages.
pub fn replaceable_names() -> String {
    replaceable()
        .map(Dialect::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the trust files are mounted in each selected container.
pub const TRUST_DIR: &str = "/etc/egress-proxy/trust";
/// The name of the pod volume that mounts them.
pub const VOLUME: &str = "egress-proxy-trust";
/// The ConfigMap key (and file name) of the PEM bundle.
pub const BUNDLE_KEY: &str = "ca-bundle.crt";
/// The ConfigMap binaryData key (and file name) of the JDK's PKCS12 truststore.
pub const TRUSTSTORE_KEY: &str = "truststore.p12";
/// The ConfigMap key (and file name) of the wgetrc that names the bundle.
pub const WGETRC_KEY: &str = "wgetrc";

/// Why a CA source, a root set or a bundle was refused. Messages name the source and the
/// PEM block (counting from 1) and never contain a byte of the input; only what was
/// parsed from a certificate (its subject, its dates) may appear, as in status.trust.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// No `-----BEGIN ...-----` block at all.
    #[error("{label}: not PEM (no -----BEGIN block)")]
    NotPem { label: String },
    /// A block whose framing or base64 is broken.
    #[error("{label}: malformed PEM (a block's framing or base64 is broken)")]
    MalformedPem { label: String },
    /// PEM blocks, but none of them a CERTIFICATE.
    #[error("{label}: no CERTIFICATE block")]
    NoCertificate { label: String },
    /// A private key of any kind: the source must hold CA certificates only.
    #[error(
        "{label}: block {index} is a private key; a trust source must hold CA certificates \
         only (remove the key, and treat it as disclosed)"
    )]
    PrivateKey { label: String, index: usize },
    /// A block that is neither a certificate nor a key (`kind` is a fixed name, never the
    /// block's own label).
    #[error("{label}: block {index} is {kind}, not a CERTIFICATE")]
    UnexpectedBlock {
        label: String,
        index: usize,
        kind: &'static str,
    },
    /// A CERTIFICATE block that is not a valid X.509 certificate.
    #[error("{label}: certificate {index} does not parse as X.509")]
    BadCertificate { label: String, index: usize },
    /// basicConstraints missing or CA:FALSE.
    #[error(
        "{label}: certificate {index} ({subject}) is not a CA certificate (basicConstraints \
         CA:TRUE missing)"
    )]
    NotCa {
        label: String,
        index: usize,
        subject: String,
    },
    /// notAfter is in the past.
    #[error("{label}: certificate {index} ({subject}) expired at {not_after}")]
    Expired {
        label: String,
        index: usize,
        subject: String,
        not_after: Timestamp,
    },
    /// notBefore is in the future.
    #[error("{label}: certificate {index} ({subject}) is not valid before {not_before}")]
    NotYetValid {
        label: String,
        index: usize,
        subject: String,
        not_before: Timestamp,
    },
    /// No CA source at all.
    #[error("no CA source: a bundle needs at least one CA certificate")]
    NoSources,
    /// Replace with a dialect one of whose variables only adds (NODE_EXTRA_CA_CERTS: Node's
    /// built-in roots; CURL_CA_BUNDLE: curl's compiled-in CA path).
    #[error(
        "roots: Replace is not possible with dialect {}: its clients read {variable}, which \
         only adds to their own roots and cannot remove them; use roots: Keep, or a dialect \
         whose clients can drop their roots ({})",
        dialect.name(),
        replaceable_names()
    )]
    ReplaceUnsupported {
        dialect: Dialect,
        variable: &'static str,
    },
}

#[cfg(test)]
mod tests;

/// Certificates the tests of other modules make.
#[cfg(test)]
pub(crate) mod testing {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, date_time_ymd};

    /// A self-signed CA certificate (PEM) with the common name `cn`, valid from `from` to
    /// `until` (year, month, day).
    pub(crate) fn ca_pem(cn: &str, from: (i32, u8, u8), until: (i32, u8, u8)) -> String {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = date_time_ymd(from.0, from.1, from.2);
        params.not_after = date_time_ymd(until.0, until.1, until.2);
        let key = KeyPair::generate().expect("key");
        params.self_signed(&key).expect("certificate").pem()
    }
}
