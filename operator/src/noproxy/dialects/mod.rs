//! One module per real client: how it reads the proxy variables from the environment,
//! how it matches a destination against NO_PROXY, and how an intent is spelled for it.

pub(crate) mod curl;
pub(crate) mod go;
pub mod java;
pub(crate) mod node_axios;
pub(crate) mod node_proxy_from_env;
pub(crate) mod node_undici;
pub(crate) mod python_httpx;
pub(crate) mod python_requests;
pub(crate) mod python_urllib;
pub(crate) mod ruby;
pub(crate) mod rust_reqwest;
pub(crate) mod wget;

use super::Dialect;
use super::entry::Intent;
use super::env::Env;
use super::target::Target;

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

/// A client model with its NO_PROXY value parsed once.
#[derive(Clone, Debug)]
pub(crate) enum Model {
    Curl(curl::Model),
    Wget(wget::Model),
    Go(go::Model),
    PythonUrllib(python_urllib::Model),
    PythonRequests(python_requests::Model),
    PythonHttpx(python_httpx::Model),
    NodeAxios(node_axios::Model),
    NodeProxyFromEnv(node_proxy_from_env::Model),
    NodeUndici(node_undici::Model),
    Ruby(ruby::Model),
    RustReqwest(rust_reqwest::Model),
    Java(java::Model),
}

impl Model {
    /// `None` for `portable`, which has no single client.
    pub fn new(d: Dialect, env: &Env) -> Option<Model> {
        Some(match d {
            Dialect::Portable => return None,
            Dialect::Curl => Model::Curl(curl::Model::new(env)),
            Dialect::Wget => Model::Wget(wget::Model::new(env)),
            Dialect::Go => Model::Go(go::Model::new(env)),
            Dialect::PythonUrllib => Model::PythonUrllib(python_urllib::Model::new(env)),
            Dialect::PythonRequests => Model::PythonRequests(python_requests::Model::new(env)),
            Dialect::PythonHttpx => Model::PythonHttpx(python_httpx::Model::new(env)),
            Dialect::NodeAxios => Model::NodeAxios(node_axios::Model::new(env)),
            Dialect::NodeProxyFromEnv => {
                Model::NodeProxyFromEnv(node_proxy_from_env::Model::new(env))
            }
            Dialect::NodeUndici => Model::NodeUndici(node_undici::Model::new(env)),
            Dialect::Ruby => Model::Ruby(ruby::Model::new(env)),
            Dialect::RustReqwest => Model::RustReqwest(rust_reqwest::Model::new(env)),
            Dialect::Java => Model::Java(java::Model::new(env)),
        })
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        match self {
            Model::Curl(m) => m.decide(t),
            Model::Wget(m) => m.decide(t),
            Model::Go(m) => m.decide(t),
            Model::PythonUrllib(m) => m.decide(t),
            Model::PythonRequests(m) => m.decide(t),
            Model::PythonHttpx(m) => m.decide(t),
            Model::NodeAxios(m) => m.decide(t),
            Model::NodeProxyFromEnv(m) => m.decide(t),
            Model::NodeUndici(m) => m.decide(t),
            Model::Ruby(m) => m.decide(t),
            Model::RustReqwest(m) => m.decide(t),
            Model::Java(m) => m.decide(t),
        }
    }
}

/// How `d` spells `intent`, or why it cannot. `None` for `portable`.
pub(crate) fn express(d: Dialect, intent: &Intent) -> Option<Result<Expr, String>> {
    Some(match d {
        Dialect::Portable => return None,
        Dialect::Curl => curl::express(intent),
        Dialect::Wget => wget::express(intent),
        Dialect::Go => go::express(intent),
        Dialect::PythonUrllib => python_urllib::express(intent),
        Dialect::PythonRequests => python_requests::express(intent),
        Dialect::PythonHttpx => python_httpx::express(intent),
        Dialect::NodeAxios => node_axios::express(intent),
        Dialect::NodeProxyFromEnv => node_proxy_from_env::express(intent),
        Dialect::NodeUndici => node_undici::express(intent),
        Dialect::Ruby => ruby::express(intent),
        Dialect::RustReqwest => rust_reqwest::express(intent),
        Dialect::Java => java::express(intent),
    })
}

/// Which CIDR families a dialect reads as networks (v4, v6); used to merge single IPs into
/// CIDRs when rendering for it.
pub(crate) fn cidr_support(d: Dialect) -> (bool, bool) {
    match d {
        Dialect::Go | Dialect::RustReqwest | Dialect::NodeAxios => (true, true),
        Dialect::Curl | Dialect::PythonRequests | Dialect::Ruby => (true, false),
        Dialect::Portable
        | Dialect::Wget
        | Dialect::PythonUrllib
        | Dialect::PythonHttpx
        | Dialect::NodeProxyFromEnv
        | Dialect::NodeUndici
        | Dialect::Java => (false, false),
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
