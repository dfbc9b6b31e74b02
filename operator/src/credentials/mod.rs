//! Proxy credentials: the source Secret a policy names, the grant that lets a policy use a
//! Secret of another namespace, validation of the proxy URLs it holds, and the names of the
//! objects the operator manages. Pure: no I/O.
//!
//! Credential values never leave this module in an error message or in `Debug`/`Display`
//! output: errors describe what is wrong without quoting the value, and [`ProxyUrls`] prints
//! redacted URLs (`http://user:***@proxy:3128`).

mod proxy_url;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::ByteString;

use crate::api::reasons::reason;
use crate::noproxy::redact_proxy;

/// Annotation on a source Secret that lets policies of other namespaces use it:
/// `"team-a,team-b"` or `"*"`.
pub const ALLOWED_NAMESPACES: &str = "egressproxy.io/allowed-namespaces";
/// Label key marking the objects the operator manages.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "egress-proxy-operator";
/// Label key naming the policy a managed object belongs to.
pub const POLICY_LABEL: &str = "egressproxy.io/policy";

/// Key of the source Secret holding the HTTP proxy URL.
pub const HTTP_PROXY_KEY: &str = "httpProxy";
/// Key of the source Secret holding the HTTPS proxy URL.
pub const HTTPS_PROXY_KEY: &str = "httpsProxy";

const NAME_PREFIX: &str = "egress-proxy-";
const MAX_NAME: usize = 253;
/// Hex characters of the hash that keeps a shortened name unique.
const NAME_HASH_HEX: usize = 10;

/// Name of the managed Secret and ConfigMap of a policy: `egress-proxy-<policy>`.
///
/// A result longer than 253 characters is cut and ends with `-` plus 10 hex characters of
/// the SHA-256 of the policy name, so it stays a unique, valid DNS subdomain.
pub fn managed_name(policy: &str) -> String {
    let full = format!("{NAME_PREFIX}{policy}");
    if full.len() <= MAX_NAME {
        return full;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, policy.as_bytes());
    let mut suffix = hex(digest.as_ref());
    suffix.truncate(NAME_HASH_HEX);
    let keep = MAX_NAME - NAME_HASH_HEX - 1;
    // Cut on a char boundary (names are ASCII, but never panic) and never leave `.`/`-`
    // before the `-hash` suffix: `a.-b` or `a--b` after a dot is not a valid subdomain.
    let mut cut = keep.min(full.len());
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = full[..cut].trim_end_matches(['-', '.']);
    format!("{head}-{suffix}")
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Ok when the Secret may be used by a policy of `policy_namespace`: it is in that namespace,
/// or its annotation [`ALLOWED_NAMESPACES`] lists that namespace (comma-separated, blanks
/// ignored) or contains the entry `*`.
pub fn check_grant(
    secret_namespace: &str,
    secret_name: &str,
    annotations: Option<&BTreeMap<String, String>>,
    policy_namespace: &str,
) -> Result<(), CredentialError> {
    if secret_namespace == policy_namespace {
        return Ok(());
    }
    let granted = annotations
        .and_then(|a| a.get(ALLOWED_NAMESPACES))
        .is_some_and(|list| {
            list.split(',')
                .map(str::trim)
                .any(|ns| ns == "*" || ns == policy_namespace)
        });
    if granted {
        Ok(())
    } else {
        Err(CredentialError::NotAvailable {
            secret: format!("{secret_namespace}/{secret_name}"),
            namespace: policy_namespace.to_owned(),
        })
    }
}

/// The proxy URLs of a credential slot, as written in the source Secret (trimmed).
/// `Debug` and `Display` show them redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrls {
    pub http_proxy: String,
    pub https_proxy: String,
}

impl ProxyUrls {
    /// `http_proxy` with the password replaced by `***`.
    pub fn http_proxy_redacted(&self) -> String {
        redact_proxy(&self.http_proxy)
    }

    /// `https_proxy` with the password replaced by `***`.
    pub fn https_proxy_redacted(&self) -> String {
        redact_proxy(&self.https_proxy)
    }
}

impl fmt::Debug for ProxyUrls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyUrls")
            .field("http_proxy", &self.http_proxy_redacted())
            .field("https_proxy", &self.https_proxy_redacted())
            .finish()
    }
}

impl fmt::Display for ProxyUrls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "httpProxy={} httpsProxy={}",
            self.http_proxy_redacted(),
            self.https_proxy_redacted()
        )
    }
}

/// Reads and validates the keys `httpProxy` and `httpsProxy` of a source Secret.
///
/// `secret` is `namespace/name`, used in messages. Each value is trimmed of surrounding
/// whitespace first (a trailing newline from `echo` is the usual mistake, and would
/// otherwise end up in every container's environment); whitespace inside a URL is an
/// error. The user info of the trimmed value is percent-encoded beyond unreserved characters
/// (see [`proxy_url::encode_userinfo`]); the rest is used as written. Each URL must be
/// `http://` or `https://`, with a host, an optional port 1-65535, optional well-formed
/// (percent-encoded) `user:password@`, and no path beyond `/`, no query, no fragment.
pub fn parse_source(
    secret: &str,
    data: Option<&BTreeMap<String, ByteString>>,
) -> Result<ProxyUrls, CredentialError> {
    let read = |key: &str| -> Result<String, CredentialError> {
        let raw = data
            .and_then(|d| d.get(key))
            .ok_or_else(|| CredentialError::MissingKey {
                secret: secret.to_owned(),
                key: key.to_owned(),
            })?;
        let text = std::str::from_utf8(&raw.0).map_err(|_| CredentialError::NotUtf8 {
            secret: secret.to_owned(),
            key: key.to_owned(),
        })?;
        let value = text.trim();
        proxy_url::validate(value).map_err(|reason| CredentialError::InvalidProxyUrl {
            secret: secret.to_owned(),
            key: key.to_owned(),
            reason: reason.to_owned(),
        })?;
        Ok(proxy_url::encode_userinfo(value))
    };
    Ok(ProxyUrls {
        http_proxy: read(HTTP_PROXY_KEY)?,
        https_proxy: read(HTTPS_PROXY_KEY)?,
    })
}

/// A source Secret's `httpProxy` and `httpsProxy` bytes, each length-prefixed (a missing key
/// is distinct from an empty one): what a slot's fingerprint is computed over. It holds the
/// credential: never log it.
pub fn content(data: Option<&BTreeMap<String, ByteString>>) -> Vec<u8> {
    let mut out = Vec::new();
    for key in [HTTP_PROXY_KEY, HTTPS_PROXY_KEY] {
        match data.and_then(|d| d.get(key)) {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.0.len() as u64).to_be_bytes());
                out.extend_from_slice(&v.0);
            }
            None => out.push(0),
        }
    }
    out
}

/// Why a credential slot cannot be used. Messages never contain a credential value.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CredentialError {
    /// Missing, unreadable, or not granted: one message for all, so that status does not
    /// tell whether another namespace has a Secret of that name.
    #[error(
        "Secret {secret} is not available to namespace {namespace}: it does not exist, the \
         operator may not read it, or it is in another namespace and its annotation \
         {ALLOWED_NAMESPACES} does not list {namespace}"
    )]
    NotAvailable { secret: String, namespace: String },
    #[error(
        "Secret {secret} has no key {key} (it needs the keys httpProxy and httpsProxy, \
         each a proxy URL)"
    )]
    MissingKey { secret: String, key: String },
    #[error("Secret {secret} key {key} is not UTF-8 text")]
    NotUtf8 { secret: String, key: String },
    #[error("Secret {secret} key {key} is not a valid proxy URL: {reason}")]
    InvalidProxyUrl {
        secret: String,
        key: String,
        reason: String,
    },
}

impl CredentialError {
    /// The Secret was deleted or its grant withdrawn: unlike a malformed value, this takes
    /// the credential away from the workloads.
    pub fn withdrawn(&self) -> bool {
        matches!(self, CredentialError::NotAvailable { .. })
    }

    /// The condition reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            CredentialError::NotAvailable { .. } => reason::SECRET_NOT_AVAILABLE,
            CredentialError::MissingKey { .. } | CredentialError::NotUtf8 { .. } => {
                reason::SECRET_INVALID
            }
            CredentialError::InvalidProxyUrl { .. } => reason::INVALID_PROXY_URL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &[u8])]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
            .collect()
    }

    fn annotated(value: &str) -> BTreeMap<String, String> {
        [(ALLOWED_NAMESPACES.to_owned(), value.to_owned())].into()
    }

    fn is_dns_subdomain(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 253
            && s.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    }

    #[test]
    fn managed_names() {
        assert_eq!(managed_name("corp"), "egress-proxy-corp");
        let fits = "a".repeat(253 - NAME_PREFIX.len());
        assert_eq!(managed_name(&fits), format!("{NAME_PREFIX}{fits}"));

        let long_a = format!("{}x", "a".repeat(252));
        let long_b = format!("{}y", "a".repeat(252));
        let (a, b) = (managed_name(&long_a), managed_name(&long_b));
        assert_eq!(a.len(), 253);
        assert_ne!(a, b, "shortened names stay unique");
        assert_eq!(a, managed_name(&long_a), "stable");
        assert!(is_dns_subdomain(&a) && is_dns_subdomain(&b), "{a}");

        // The cut falls right after a dot or dash: no `.-` in the result.
        for filler in ["a.", "a-", "ab.c-d."] {
            let policy: String = filler.repeat(200).chars().take(250).collect();
            let policy = policy.trim_end_matches(['.', '-']).to_owned();
            let name = managed_name(&policy);
            assert!(is_dns_subdomain(&name), "{name}");
            assert!(name.len() <= 253);
        }
    }

    #[test]
    fn grants() {
        assert!(check_grant("team-a", "proxy", None, "team-a").is_ok());
        let err = check_grant("shared", "proxy", None, "team-a").unwrap_err();
        assert_eq!(
            err,
            CredentialError::NotAvailable {
                secret: "shared/proxy".into(),
                namespace: "team-a".into()
            }
        );
        assert_eq!(err.reason(), "SecretNotAvailable");
        assert!(err.withdrawn());
        assert!(err.to_string().contains("shared/proxy"));
        assert!(err.to_string().contains(ALLOWED_NAMESPACES));

        let list = annotated(" team-b , team-a,,");
        assert!(check_grant("shared", "proxy", Some(&list), "team-a").is_ok());
        assert!(check_grant("shared", "proxy", Some(&list), "team-b").is_ok());
        assert!(check_grant("shared", "proxy", Some(&list), "team-c").is_err());
        // No prefix or substring matching.
        let list = annotated("team-ab,team");
        assert!(check_grant("shared", "proxy", Some(&list), "team-a").is_err());
        assert!(check_grant("shared", "p", Some(&annotated("*")), "any").is_ok());
        assert!(check_grant("shared", "p", Some(&annotated(" * ")), "any").is_ok());
        assert!(check_grant("shared", "p", Some(&annotated("")), "any").is_err());
        let other: BTreeMap<String, String> = [("other".to_owned(), "*".to_owned())].into();
        assert!(check_grant("shared", "p", Some(&other), "any").is_err());
    }

    #[test]
    fn parses_and_trims() {
        let d = data(&[
            ("httpProxy", b"http://user:pa%40ss@proxy.corp:3128\n"),
            ("httpsProxy", b"  https://proxy.corp/ \r\n"),
            ("other", b"ignored"),
        ]);
        let urls = parse_source("ns/s", Some(&d)).unwrap();
        assert_eq!(urls.http_proxy, "http://user:pa%40ss@proxy.corp:3128");
        assert_eq!(urls.https_proxy, "https://proxy.corp/");
    }

    #[test]
    fn a_password_with_shell_code_is_written_encoded() {
        let url = b"http://svc:x$(touch$IFS'PWNED')@proxy.corp.example:3128";
        let d = data(&[("httpProxy", url), ("httpsProxy", url)]);
        let urls = parse_source("ns/s", Some(&d)).unwrap();
        let written = "http://svc:x%24%28touch%24IFS%27PWNED%27%29@proxy.corp.example:3128";
        assert_eq!(
            (urls.http_proxy.as_str(), urls.https_proxy.as_str()),
            (written, written)
        );
    }

    #[test]
    fn missing_and_non_utf8() {
        let err = parse_source("ns/s", None).unwrap_err();
        assert_eq!(
            err,
            CredentialError::MissingKey {
                secret: "ns/s".into(),
                key: "httpProxy".into()
            }
        );
        assert_eq!(err.reason(), "SecretInvalid");
        let d = data(&[("httpProxy", b"http://p:1")]);
        let err = parse_source("ns/s", Some(&d)).unwrap_err();
        assert!(matches!(&err, CredentialError::MissingKey { key, .. } if key == "httpsProxy"));
        assert!(err.to_string().contains("ns/s") && err.to_string().contains("httpsProxy"));

        let d = data(&[("httpProxy", b"http://p:1"), ("httpsProxy", b"\xff\xfe")]);
        let err = parse_source("ns/s", Some(&d)).unwrap_err();
        assert_eq!(
            err,
            CredentialError::NotUtf8 {
                secret: "ns/s".into(),
                key: "httpsProxy".into()
            }
        );
        assert_eq!(err.reason(), "SecretInvalid");
        assert!(!err.withdrawn(), "a malformed value is not a withdrawal");
        let missing = CredentialError::NotAvailable {
            secret: "a/b".into(),
            namespace: "team-a".into(),
        };
        let ungranted = check_grant("a", "b", None, "team-a").unwrap_err();
        assert_eq!(
            missing.to_string(),
            ungranted.to_string(),
            "no existence oracle"
        );
    }

    #[test]
    fn invalid_url_error_names_secret_and_key() {
        let d = data(&[
            ("httpProxy", b"http://p:1"),
            ("httpsProxy", b"socks5://p:1080"),
        ]);
        let err = parse_source("ns/s", Some(&d)).unwrap_err();
        assert_eq!(err.reason(), "InvalidProxyURL");
        let msg = err.to_string();
        assert!(msg.starts_with("Secret ns/s key httpsProxy is not a valid proxy URL"));
        assert!(msg.contains("socks5"), "{msg}");
    }

    #[test]
    fn proxy_urls_print_redacted() {
        let urls = ProxyUrls {
            http_proxy: "http://user:S3NT1NEL@proxy:3128".into(),
            https_proxy: "http://tok3n@proxy:3128".into(),
        };
        let shown = format!("{urls} {urls:?} {urls:#?}");
        assert!(
            !shown.contains("S3NT1NEL") && !shown.contains("tok3n"),
            "{shown}"
        );
        assert!(shown.contains("http://user:***@proxy:3128"), "{shown}");
        assert_eq!(
            urls.to_string(),
            "httpProxy=http://user:***@proxy:3128 httpsProxy=http://***@proxy:3128"
        );
    }

    #[test]
    fn errors_never_show_the_password() {
        const PW: &str = "Zq9sentinelPW";
        let bad = [
            format!("http://user:{PW}@proxy:99999"),
            format!("http://user:{PW}@proxy:abc"),
            format!("http://user:{PW}@proxy:0"),
            format!("http://user:{PW}@@proxy:3128"),
            format!("http://user:{PW}@x@proxy:3128"),
            format!("http://user:{PW}/x@proxy:3128"),
            format!("http://user:{PW}#x@proxy:3128"),
            format!("http://user:{PW}?x@proxy:3128"),
            format!("http://user:{PW}%zz@proxy:3128"),
            format!("http://user:{PW} x@proxy:3128"),
            format!("http://user:{PW}"),
            format!("http://user:{PW}@"),
            format!("http://user:{PW}@proxy:3128/path"),
            format!("http://user:{PW}@proxy:3128?q"),
            format!("http://user:{PW}@proxy:3128#f"),
            format!("http://user:{PW}@[::1:3128"),
            format!("http://user:{PW}@pr_oxy!:3128"),
            format!("socks5://user:{PW}@proxy:1080"),
            format!("user:{PW}@proxy:3128"),
            format!("{PW}://proxy:3128"),
            format!("{PW}:x://proxy:3128"),
            format!("ht{PW}tp://proxy"),
            format!("http:/user:{PW}@proxy"),
        ];
        for value in &bad {
            let d = data(&[
                ("httpProxy", value.as_bytes()),
                ("httpsProxy", b"http://p:1"),
            ]);
            let err = parse_source("ns/s", Some(&d)).expect_err(value);
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(PW), "{value} -> {shown}");
            assert!(!shown.contains("Zq9"), "{value} -> {shown}");
        }
    }
}
