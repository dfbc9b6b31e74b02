//! One module per dialect, each implementing [`Client`]: for a real client, how it reads the
//! proxy variables from the environment, how it matches a destination against NO_PROXY, and
//! how an intent is spelled for it; `portable` spells what every client agrees on.

pub(crate) mod curl;
pub(crate) mod go;
pub mod java;
pub(crate) mod node_axios;
pub(crate) mod node_proxy_from_env;
pub(crate) mod node_undici;
mod portable;
pub(crate) mod python_httpx;
pub(crate) mod python_requests;
pub(crate) mod python_urllib;
pub(crate) mod ruby;
pub(crate) mod rust_reqwest;
#[cfg(test)]
mod tests;
pub(crate) mod wget;

use std::sync::Arc;

use super::Dialect;
use super::entry::Intent;
use super::env::Env;
use super::target::Target;
use crate::trust::dialects::TrustVar;

/// What a client does with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Connects to the destination itself.
    Direct,
    /// Sends the request through the proxy.
    Proxy,
    /// Fails (client construction or request refused).
    Error,
}

/// A client's decision, before redaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub decision: Decision,
    pub proxy: Option<String>,
    pub matched: Option<String>,
    pub variable: Option<&'static str>,
    pub reason: String,
}

impl Verdict {
    pub fn direct_matched(var: &'static str, entry: &str, why: impl Into<String>) -> Verdict {
        Verdict {
            decision: Decision::Direct,
            proxy: None,
            matched: Some(entry.to_owned()),
            variable: Some(var),
            reason: why.into(),
        }
    }
    pub fn direct(why: impl Into<String>) -> Verdict {
        Verdict {
            decision: Decision::Direct,
            proxy: None,
            matched: None,
            variable: None,
            reason: why.into(),
        }
    }
    pub fn error(why: impl Into<String>) -> Verdict {
        Verdict {
            decision: Decision::Error,
            proxy: None,
            matched: None,
            variable: None,
            reason: why.into(),
        }
    }
    /// Through `proxy` (read from `proxy_var`); `np` is the NO_PROXY variable consulted.
    /// A proxy URL that does not parse makes the request fail.
    pub fn proxied(proxy_var: &str, proxy: String, np: Option<&'static str>) -> Verdict {
        if !valid_proxy_url(&proxy) {
            return Verdict::error(format!(
                "{proxy_var} ({proxy}) is not a valid proxy URL: the request fails"
            ));
        }
        let reason = match np {
            Some(v) => format!("no entry of {v} matches; using {proxy_var}"),
            None => format!("no NO_PROXY variable in effect; using {proxy_var}"),
        };
        Verdict {
            decision: Decision::Proxy,
            proxy: Some(proxy),
            matched: None,
            variable: np,
            reason,
        }
    }
    pub fn no_proxy_for(scheme: &str, vars: &str) -> Verdict {
        Verdict::direct(format!(
            "no proxy configured for {scheme} URLs (read: {vars})"
        ))
    }
}

/// How one intent is spelled in a dialect.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expr {
    pub entries: Vec<String>,
    pub warning: Option<String>,
}

impl Expr {
    pub fn one(e: impl Into<String>) -> Result<Expr, String> {
        Ok(Expr {
            entries: vec![e.into()],
            warning: None,
        })
    }
    pub fn many(e: Vec<String>) -> Result<Expr, String> {
        Ok(Expr {
            entries: e,
            warning: None,
        })
    }
    pub fn warn(mut self, w: impl Into<String>) -> Expr {
        self.warning = Some(w.into());
        self
    }
}

/// Everything that differs between the dialects, implemented once per dialect in its file.
/// The rest of the engine reaches a dialect through [`client`], the one `match` over
/// [`Dialect`]. A new dialect: its variant and its entry in `Dialect::ALL`, a file here
/// implementing [`Client`] and its arm in [`client`] (the compiler and `tests.rs` list what
/// is missing).
pub(crate) trait Client: Sync {
    /// Its name on the command line and in the API: the serde name of its variant.
    fn name(&self) -> &'static str;
    /// The exact client version it models (read from that version's source and checked by
    /// `tests/conformance/`).
    fn modelled_version(&self) -> &'static str;
    /// Whether it is one client family reading the proxy variables: `portable` is written
    /// for these, and the variables of any other dialect (`portable`, `java`) are written as
    /// `portable`.
    fn reads_variables(&self) -> bool;
    /// The separator between the entries of its rendered value.
    fn separator(&self) -> &'static str;
    /// Which CIDR families it reads as networks (v4, v6); single IPs are merged into CIDRs
    /// when rendering for it.
    fn cidr_support(&self) -> (bool, bool);
    /// True when its spelling of host `name` also sends the subdomains of `name` direct.
    fn matches_subdomains_too(&self, name: &str) -> bool;
    /// The variables that point its clients at the trust files: a row of the measured table
    /// in `trust/dialects.rs`.
    fn trust_variables(&self) -> &'static [TrustVar];
    /// How it spells `intent`, or why it cannot.
    fn express(&self, intent: &Intent) -> Result<Expr, String>;
    /// Its client reading `env`; `None` for `portable`, which has no single client.
    fn model(&self, env: &Env) -> Option<Arc<dyn Decide>>;
}

/// A client with its environment read and its NO_PROXY value parsed.
pub(crate) trait Decide: std::fmt::Debug + Send + Sync {
    fn decide(&self, t: &Target) -> Verdict;
}

/// The implementation of `d`: the one place that maps the enum to the dialects' files.
pub(crate) fn client(d: Dialect) -> &'static dyn Client {
    match d {
        Dialect::Portable => &portable::Portable,
        Dialect::Curl => &curl::Curl,
        Dialect::Wget => &wget::Wget,
        Dialect::Go => &go::Go,
        Dialect::PythonUrllib => &python_urllib::PythonUrllib,
        Dialect::PythonRequests => &python_requests::PythonRequests,
        Dialect::PythonHttpx => &python_httpx::PythonHttpx,
        Dialect::NodeAxios => &node_axios::NodeAxios,
        Dialect::NodeProxyFromEnv => &node_proxy_from_env::NodeProxyFromEnv,
        Dialect::NodeUndici => &node_undici::NodeUndici,
        Dialect::Ruby => &ruby::Ruby,
        Dialect::RustReqwest => &rust_reqwest::RustReqwest,
        Dialect::Java => &java::Java,
    }
}

/// A client model with its NO_PROXY value parsed once.
#[derive(Clone, Debug)]
pub(crate) struct Model(Arc<dyn Decide>);

impl Model {
    /// `None` for `portable`, which has no single client.
    pub fn new(d: Dialect, env: &Env) -> Option<Model> {
        client(d).model(env).map(Model)
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        self.0.decide(t)
    }
}

/// True when a proxy URL (with scheme) parses and has a host.
pub(crate) fn valid_proxy_url(v: &str) -> bool {
    url::Url::parse(v).is_ok_and(|u| u.has_host())
}

/// Adds `http://` when a proxy value has no scheme (most clients do).
pub(crate) fn with_scheme(value: &str, scheme: &str) -> String {
    if value.contains("://") {
        value.to_owned()
    } else {
        format!("{scheme}://{value}")
    }
}

pub(crate) const PORT_NAME_ONLY: &str =
    "compares NO_PROXY entries with the host name only, so an entry with a port never matches";
