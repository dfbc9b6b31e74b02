//! The trust stage (`spec.trust`): from the CA sources as the executor read them to the
//! bundle, the managed ConfigMap's trust keys, what each workload gets and the status.
//! A source that cannot be used blocks the policy: nothing is written, and workloads keep
//! the bundle they run (a CA is no credential: withdrawing it would only break TLS).

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Blocker, ConfigMapData, Inputs};
use crate::api::reasons::reason;
use crate::api::{TrustStatus, TrustedCertificate};
use crate::trust::{
    self, BUNDLE_KEY, Bundle, Certificate, Roots, TRUST_DIR, TRUSTSTORE_KEY, TrustError, WGETRC_KEY,
};

/// The largest `ca-bundle.crt` written: the admission policy's PEM check costs about two CEL
/// units a byte, and an expression may cost at most 1,000,000 (Mozilla's roots are 180 KB).
pub const MAX_BUNDLE: usize = 400 * 1024;

/// The most PEM the probe Job gets as its trust variable: one variable may hold 128 KiB
/// (Linux `MAX_ARG_STRLEN`), and the proxy variables and NO_PROXY need room too.
pub const MAX_PROBE_TRUST: usize = 96 * 1024;

/// One CA source as the executor read it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRead {
    /// How messages name it: `ConfigMap ns/name key k`.
    pub shown: String,
    pub certs: Result<Vec<Certificate>, SourceProblem>,
}

/// Why a CA source gave no certificates.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SourceProblem {
    /// Missing object or key, or another namespace's object without a grant.
    #[error(
        "{shown} is not available to namespace {namespace}: it does not exist, lacks the key, \
         or (in another namespace) does not list {namespace} in its annotation \
         egressproxy.io/allowed-namespaces"
    )]
    NotAvailable { shown: String, namespace: String },
    /// Not PEM, a private key, not a CA, expired.
    #[error(transparent)]
    Invalid(#[from] TrustError),
}

/// What the trust stage gives the rest of the plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Trusted {
    pub bundle: Bundle,
    /// The source certificates, with the source each came from.
    pub certs: Vec<(String, Certificate)>,
    pub roots: Roots,
    /// The root set's name (written with `Keep`).
    pub root_set: String,
    /// The variables the containers get, in order.
    pub vars: Vec<String>,
    /// The managed ConfigMap's keys mounted as files.
    pub files: Vec<String>,
    /// The CA sources as PEM, each certificate once: what the probe checks with.
    pub sources_pem: String,
    /// Source certificates expiring within `expiryWarningDays`, as sentences.
    pub expiring: Vec<String>,
}

/// The bundle the policy's workloads get, `None` without `spec.trust`; a source that
/// cannot be used, or a bundle the dialect cannot take, blocks the policy.
pub(super) fn stage(i: &Inputs) -> Result<Option<Trusted>, Blocker> {
    let Some(spec) = i.policy.spec.trust.as_ref() else {
        return Ok(None);
    };
    let Some(reads) = i.trust else {
        return Err(blocker(
            reason::TRUST_SOURCE_NOT_AVAILABLE,
            "the trust sources were not read".into(),
        ));
    };
    let mut certs = Vec::new();
    for r in reads {
        match &r.certs {
            Ok(c) => certs.extend(c.iter().map(|c| (r.shown.clone(), c.clone()))),
            Err(e @ SourceProblem::NotAvailable { .. }) => {
                return Err(blocker(reason::TRUST_SOURCE_NOT_AVAILABLE, e.to_string()));
            }
            Err(e @ SourceProblem::Invalid(_)) => {
                return Err(blocker(reason::TRUST_INVALID, e.to_string()));
            }
        }
    }
    let dialect = i.policy.spec.no_proxy.dialect;
    let only: Vec<Certificate> = certs.iter().map(|(_, c)| c.clone()).collect();
    let bundle = trust::build(dialect, &only, spec.roots, i.root_set, TRUST_DIR)
        .map_err(|e| blocker(reason::TRUST_INVALID, e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    let distinct = only.iter().filter(|c| seen.insert(c.sha256.as_str()));
    let sources_pem = trust::pem_of(distinct);
    if sources_pem.len() > MAX_PROBE_TRUST && i.policy.spec.verification.is_some() {
        let message = format!(
            "the trust sources hold {} bytes of certificates, more than a probe Job's \
             environment carries ({MAX_PROBE_TRUST}): verify with fewer CA sources (the \
             proxy's CA, not a whole root store)",
            sources_pem.len()
        );
        return Err(blocker(reason::TRUST_INVALID, message));
    }
    if bundle.pem.len() > MAX_BUNDLE {
        let message = format!(
            "the trust bundle is {} bytes, more than {MAX_BUNDLE}: the admission policy checks \
             it with CEL, whose cost limit a larger one passes; use fewer CA sources or a \
             smaller root set (--trust-roots)",
            bundle.pem.len()
        );
        return Err(blocker(reason::TRUST_INVALID, message));
    }
    let mut files = vec![BUNDLE_KEY.to_owned()];
    files.extend(
        bundle
            .truststore
            .as_ref()
            .map(|_| TRUSTSTORE_KEY.to_owned()),
    );
    files.extend(bundle.wgetrc.as_ref().map(|_| WGETRC_KEY.to_owned()));
    let now = k8s_openapi::jiff::Timestamp::from_second(i.unix_now as i64).unwrap_or_default();
    let expiring = trust::expiring(&only, now, spec.expiry_warning_days)
        .into_iter()
        .map(|c| {
            let source = certs.iter().find(|(_, s)| s.sha256 == c.sha256);
            let from = source.map(|(s, _)| s.as_str()).unwrap_or_default();
            format!(
                "{from}: certificate {} expires at {} (within {} days)",
                c.subject, c.not_after, spec.expiry_warning_days
            )
        })
        .collect();
    Ok(Some(Trusted {
        vars: bundle.vars.iter().map(|(n, _)| n.clone()).collect(),
        root_set: i.root_set.name.clone(),
        roots: spec.roots,
        bundle,
        certs,
        files,
        sources_pem,
        expiring,
    }))
}

fn blocker(reason: &'static str, message: String) -> Blocker {
    Blocker {
        reason,
        message,
        withdrawn: false,
    }
}

impl Trusted {
    /// What the configuration hash covers of trust: the bundle, the variables and files.
    pub fn hashed(&self) -> String {
        format!(
            "\ntrust:{}:{}:{}",
            self.bundle.id,
            self.vars.join(","),
            self.files.join(",")
        )
    }

    /// The managed ConfigMap's trust keys, added to `data`.
    pub fn add_to(&self, data: &mut ConfigMapData) {
        for (name, value) in &self.bundle.vars {
            data.data.insert(name.clone(), value.clone());
        }
        data.data
            .insert(BUNDLE_KEY.to_owned(), self.bundle.pem.clone());
        if let Some(w) = &self.bundle.wgetrc {
            data.data.insert(WGETRC_KEY.to_owned(), w.clone());
        }
        if let Some(t) = &self.bundle.truststore {
            data.binary
                .insert(TRUSTSTORE_KEY.to_owned(), ByteString(t.clone()));
        }
    }

    /// `status.trust`, given which managed workloads run this bundle (`pending`: the others).
    pub fn status(&self, up_to_date: i32, pending: Vec<String>) -> TrustStatus {
        let keep = self.roots == Roots::Keep;
        TrustStatus {
            bundle: self.bundle.id.clone(),
            roots: format!("{:?}", self.roots),
            root_set: keep.then(|| self.root_set.clone()),
            root_count: keep.then_some(self.bundle.root_count as u32),
            certificates: self
                .certs
                .iter()
                .map(|(source, c)| TrustedCertificate {
                    source: source.clone(),
                    subject: c.subject.clone(),
                    sha256: c.sha256.clone(),
                    not_after: Time(c.not_after),
                })
                .collect(),
            up_to_date,
            pending,
        }
    }
}
