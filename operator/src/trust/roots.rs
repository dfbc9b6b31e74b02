//! The roots a bundle keeps: Mozilla's as shipped in `webpki-root-certs`, or a PEM file.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TrustError;
use super::certs::{Certificate, Checks, check_der, parse_pem};

/// The version of `webpki-root-certs` in Cargo.lock (the crate exports none; a test
/// compares this to Cargo.lock).
pub const SHIPPED_ROOTS_VERSION: &str = "1.0.11";

/// What happens to the roots the clients already trust.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Roots {
    /// The CA sources are added to the public roots: the bundle holds the CA sources and
    /// then the operator's root set (Mozilla's roots, named with their version in
    /// status.trust.roots), so direct HTTPS to public sites keeps working for clients whose
    /// variable replaces their own roots. The default.
    #[default]
    Keep,
    /// Only the CA sources are trusted: every other server certificate fails, even a
    /// public site's. Refused for dialects whose clients only add to their roots: node-*
    /// (NODE_EXTRA_CA_CERTS), curl (its CA path stays), portable and java (which include
    /// both).
    Replace,
}

/// A named set of root certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSet {
    /// Shown in status.trust.roots.set, e.g. `webpki-root-certs 1.0.11 (Mozilla)`.
    pub name: String,
    pub certs: Vec<Certificate>,
}

impl RootSet {
    /// Mozilla's roots as shipped in the `webpki-root-certs` crate this binary was built
    /// with (parsed once; each is a CA certificate, as a test checks).
    pub fn shipped() -> RootSet {
        static SHIPPED: OnceLock<RootSet> = OnceLock::new();
        SHIPPED
            .get_or_init(|| {
                let checks = Checks {
                    ca: true,
                    valid_at: None,
                };
                let certs = webpki_root_certs::TLS_SERVER_ROOT_CERTS
                    .iter()
                    .enumerate()
                    .filter_map(|(i, der)| check_der("webpki-root-certs", i + 1, der, checks).ok())
                    .collect();
                RootSet {
                    name: format!("webpki-root-certs {SHIPPED_ROOTS_VERSION} (Mozilla)"),
                    certs,
                }
            })
            .clone()
    }

    /// A root set from a PEM file (`--trust-roots FILE`): the same checks as a CA source
    /// (certificates only, no key, each a CA) except validity: a root set may carry roots
    /// that expired or are not yet valid, as Mozilla's and the distributions' do; the
    /// clients skip those themselves.
    pub fn from_pem(name: &str, pem: &[u8]) -> Result<RootSet, TrustError> {
        let checks = Checks {
            ca: true,
            valid_at: None,
        };
        Ok(RootSet {
            name: name.to_owned(),
            certs: parse_pem(name, pem, checks)?,
        })
    }
}
