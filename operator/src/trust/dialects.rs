//! Which variables point each dialect's clients at the trust files, and whether each
//! replaces the client's own roots or adds to them, as measured against the real clients by
//! the conformance run (tests/conformance, `--trust-observe`): a row changes only with it.
//! Each dialect's file (`noproxy/dialects/<client>.rs`, `Client::trust_variables`) names
//! its row; [`super::variables`] reads it.

/// What a variable's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// The PEM bundle's path.
    Bundle,
    /// The trust directory's path.
    Dir,
    /// The wgetrc's path.
    Wgetrc,
}

/// What the client does with the certificates the variable names (under `roots: Keep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// They are the client's only roots.
    Replaces,
    /// They are trusted besides the client's own roots; with `roots: Replace` the dialect's
    /// other variables (or the wgetrc's `ca_directory`) take those away.
    Adds,
    /// They are trusted besides the client's own roots, and no variable takes those away:
    /// `roots: Replace` cannot be delivered.
    AlwaysAdds,
}

/// When the variable is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// Only with roots: Replace (e.g. SSL_CERT_DIR, to hide the system's directory).
    Replace,
}

/// One trust variable of a dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustVar {
    pub name: &'static str,
    pub value: Value,
    pub effect: Effect,
    pub when: When,
}

const fn var(name: &'static str, value: Value, effect: Effect, when: When) -> TrustVar {
    TrustVar {
        name,
        value,
        effect,
        when,
    }
}

use Effect::{Adds, AlwaysAdds, Replaces};
use Value::{Bundle, Dir, Wgetrc};
use When::{Always, Replace};

/// curl (Debian's, OpenSSL): the CA file replaces the built-in file, but curl keeps its
/// compiled-in CA path `/etc/ssl/certs`, and no variable changes that: the file adds. curl
/// reads neither SSL_CERT_FILE nor SSL_CERT_DIR itself.
pub(crate) const CURL: &[TrustVar] = &[var("CURL_CA_BUNDLE", Bundle, AlwaysAdds, Always)];
/// GNU Wget (GnuTLS) reads no CA variable, only `ca_certificate` from its wgetrc, and also
/// loads the system trust, so the file adds; with Replace the wgetrc's `ca_directory` points
/// at the trust directory, which hides the system's.
pub(crate) const WGET: &[TrustVar] = &[var("WGETRC", Wgetrc, Adds, Always)];
/// Go, CPython's ssl, Ruby's OpenSSL: SSL_CERT_FILE replaces the default file, but the
/// default directory (/etc/ssl/certs) is still read, so the file adds; Replace points
/// SSL_CERT_DIR away. httpx and reqwest (rustls-native-certs) read the same two variables
/// and drop their own roots for them.
pub(crate) const SSL_CERT: &[TrustVar] = &[
    var("SSL_CERT_FILE", Bundle, Replaces, Always),
    var("SSL_CERT_DIR", Dir, Replaces, Replace),
];
/// requests uses certifi unless REQUESTS_CA_BUNDLE names a file.
pub(crate) const REQUESTS: &[TrustVar] = &[var("REQUESTS_CA_BUNDLE", Bundle, Replaces, Always)];
/// Node.js reads NODE_EXTRA_CA_CERTS once at start and adds it to its built-in roots.
pub(crate) const NODE: &[TrustVar] = &[var("NODE_EXTRA_CA_CERTS", Bundle, AlwaysAdds, Always)];
/// `portable` and `java` (for the other programs of a JVM's container): every variable.
pub(crate) const ALL: &[TrustVar] = &[
    var("CURL_CA_BUNDLE", Bundle, AlwaysAdds, Always),
    var("NODE_EXTRA_CA_CERTS", Bundle, AlwaysAdds, Always),
    var("REQUESTS_CA_BUNDLE", Bundle, Replaces, Always),
    var("SSL_CERT_FILE", Bundle, Replaces, Always),
    var("SSL_CERT_DIR", Dir, Replaces, Replace),
    var("WGETRC", Wgetrc, Adds, Always),
];
