//! CA sources: PEM text checked block by block into certificates.
//!
//! Every block must be a CERTIFICATE. A private key anywhere is refused before anything
//! else is parsed; any other block type (a CSR, a CRL, a public key, OpenSSL's `TRUSTED
//! CERTIFICATE`) is an error too, not skipped: a source is expected to hold exactly the CA
//! certificates to trust, and a stray block usually means the wrong key was picked.
//! Text outside the blocks (comments, as in ca-certificates bundles) is ignored.

use k8s_openapi::jiff::Timestamp;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::TrustError;

/// One checked certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// The subject, RFC 4514-like, as x509-parser prints it (`CN=Corp CA, O=Corp`).
    pub subject: String,
    /// SHA-256 of the DER, lowercase hex without colons.
    pub sha256: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Which checks a certificate must pass besides parsing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Checks {
    /// The CA flag (basicConstraints CA:TRUE).
    pub ca: bool,
    /// Validity at this instant.
    pub valid_at: Option<Timestamp>,
}

/// The certificates of a CA source (in order, duplicates kept), each a CA certificate valid
/// at `now`. `label` names the source in errors (e.g. `configMap ns/name key ca.crt`).
pub fn parse_source(
    label: &str,
    pem: &[u8],
    now: Timestamp,
) -> Result<Vec<Certificate>, TrustError> {
    let checks = Checks {
        ca: true,
        valid_at: Some(now),
    };
    parse_pem(label, pem, checks)
}

/// The certificates among `certs` whose notAfter is within `days` days of `now` (or past).
pub fn expiring(certs: &[Certificate], now: Timestamp, days: u32) -> Vec<&Certificate> {
    let horizon = now.as_second().saturating_add(86_400 * i64::from(days));
    certs
        .iter()
        .filter(|c| c.not_after.as_second() <= horizon)
        .collect()
}

/// PEM text to checked certificates.
pub(super) fn parse_pem(
    label: &str,
    pem: &[u8],
    checks: Checks,
) -> Result<Vec<Certificate>, TrustError> {
    let labels = block_labels(pem);
    if let Some(i) = labels.iter().position(|l| is_private_key(l)) {
        return Err(TrustError::PrivateKey {
            label: label.to_owned(),
            index: i + 1,
        });
    }
    if labels.is_empty() {
        return Err(TrustError::NotPem {
            label: label.to_owned(),
        });
    }
    let blocks = pem::parse_many(pem).map_err(|_| TrustError::MalformedPem {
        label: label.to_owned(),
    })?;
    if blocks.len() != labels.len() {
        return Err(TrustError::MalformedPem {
            label: label.to_owned(),
        });
    }
    if !blocks.iter().any(|b| b.tag() == "CERTIFICATE") {
        return Err(TrustError::NoCertificate {
            label: label.to_owned(),
        });
    }
    let mut certs = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        if block.tag() != "CERTIFICATE" {
            return Err(TrustError::UnexpectedBlock {
                label: label.to_owned(),
                index: i + 1,
                kind: block_kind(block.tag()),
            });
        }
        certs.push(check_der(label, i + 1, block.contents(), checks)?);
    }
    Ok(certs)
}

/// One DER certificate checked; `index` counts from 1.
pub(super) fn check_der(
    label: &str,
    index: usize,
    der: &[u8],
    checks: Checks,
) -> Result<Certificate, TrustError> {
    let bad = || TrustError::BadCertificate {
        label: label.to_owned(),
        index,
    };
    let (rest, x509) = X509Certificate::from_der(der).map_err(|_| bad())?;
    if !rest.is_empty() {
        return Err(bad());
    }
    let time = |t: &x509_parser::time::ASN1Time| Timestamp::from_second(t.timestamp());
    let not_before = time(&x509.validity().not_before).map_err(|_| bad())?;
    let not_after = time(&x509.validity().not_after).map_err(|_| bad())?;
    let subject = x509.subject().to_string();
    let is_ca = matches!(x509.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
    if checks.ca && !is_ca {
        return Err(TrustError::NotCa {
            label: label.to_owned(),
            index,
            subject,
        });
    }
    if let Some(now) = checks.valid_at {
        if not_after < now {
            return Err(TrustError::Expired {
                label: label.to_owned(),
                index,
                subject,
                not_after,
            });
        }
        if not_before > now {
            return Err(TrustError::NotYetValid {
                label: label.to_owned(),
                index,
                subject,
                not_before,
            });
        }
    }
    Ok(Certificate {
        sha256: sha256_hex(der),
        der: der.to_vec(),
        subject,
        not_before,
        not_after,
    })
}

/// The label of each `-----BEGIN <label>-----` line, in order, framing unchecked: a key is
/// found even in a block too broken to parse.
fn block_labels(pem: &[u8]) -> Vec<&[u8]> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let mut labels = Vec::new();
    let mut rest = pem;
    while let Some(at) = find(rest, BEGIN) {
        rest = &rest[at + BEGIN.len()..];
        let end = find(rest, b"-----").unwrap_or(rest.len());
        labels.push(&rest[..end]);
        rest = &rest[end..];
    }
    labels
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`,
/// `OPENSSH PRIVATE KEY`...
fn is_private_key(label: &[u8]) -> bool {
    find(label, b"PRIVATE KEY").is_some()
}

/// A fixed name for a non-certificate block type: the block's own label is input and
/// never printed.
fn block_kind(tag: &str) -> &'static str {
    match tag {
        "CERTIFICATE REQUEST" | "NEW CERTIFICATE REQUEST" => "a certificate request (CSR)",
        "X509 CRL" => "a certificate revocation list",
        "PUBLIC KEY" | "RSA PUBLIC KEY" => "a public key",
        "TRUSTED CERTIFICATE" => "an OpenSSL TRUSTED CERTIFICATE (convert it to CERTIFICATE)",
        "PKCS7" | "CMS" => "a PKCS#7/CMS structure",
        _ => "a block of another type",
    }
}

/// SHA-256, lowercase hex.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
