//! The client families whose NO_PROXY syntax the engine models.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How NO_PROXY is written: the HTTP client family the workloads use.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The string no supported client misroutes: an entry is written unless some client would
    /// send something else direct or fail because of it. Entries some clients ignore (an IPv4
    /// CIDR in wget) are written and listed in `status.uncovered` with those clients; entries
    /// left out are listed there without clients.
    #[default]
    Portable,
    /// curl and libcurl.
    Curl,
    /// GNU Wget.
    Wget,
    /// Go `net/http` `ProxyFromEnvironment`.
    Go,
    /// CPython `urllib.request`.
    PythonUrllib,
    /// Python `requests`.
    PythonRequests,
    /// Python `httpx`.
    PythonHttpx,
    /// axios (its own `shouldBypassProxy` in front of `proxy-from-env`).
    NodeAxios,
    /// The bare Node.js `proxy-from-env` package (`getProxyForUrl`), as used directly or by
    /// libraries other than axios. Until the split it modelled axios: use `node-axios` for that.
    NodeProxyFromEnv,
    /// Node.js `undici` `EnvHttpProxyAgent`.
    NodeUndici,
    /// Ruby `URI::Generic#find_proxy` (net/http).
    Ruby,
    /// Rust `reqwest`.
    RustReqwest,
    /// The JDK (`HttpURLConnection`, `java.net.http.HttpClient`): it never reads the
    /// variables; the operator writes `http.nonProxyHosts` and the proxy properties into
    /// `JAVA_TOOL_OPTIONS` and sets the six variables as `portable` for the other programs.
    Java,
}

impl Dialect {
    /// Every dialect, in a fixed order (the order of `--dialect all`).
    pub const ALL: [Dialect; 13] = [
        Dialect::Portable,
        Dialect::Curl,
        Dialect::Wget,
        Dialect::Go,
        Dialect::PythonUrllib,
        Dialect::PythonRequests,
        Dialect::PythonHttpx,
        Dialect::NodeAxios,
        Dialect::NodeProxyFromEnv,
        Dialect::NodeUndici,
        Dialect::Ruby,
        Dialect::RustReqwest,
        Dialect::Java,
    ];

    /// The name used on the command line and in the API.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Portable => "portable",
            Dialect::Curl => "curl",
            Dialect::Wget => "wget",
            Dialect::Go => "go",
            Dialect::PythonUrllib => "python-urllib",
            Dialect::PythonRequests => "python-requests",
            Dialect::PythonHttpx => "python-httpx",
            Dialect::NodeAxios => "node-axios",
            Dialect::NodeProxyFromEnv => "node-proxy-from-env",
            Dialect::NodeUndici => "node-undici",
            Dialect::Ruby => "ruby",
            Dialect::RustReqwest => "rust-reqwest",
            Dialect::Java => "java",
        }
    }

    /// The exact client version this dialect models (read from that version's source and
    /// checked by `tests/conformance/`). `portable` models all of them at once.
    pub fn modelled_version(self) -> &'static str {
        match self {
            Dialect::Portable => "every version listed for the other dialects",
            Dialect::Curl => "curl 7.88.1 (Debian 12 package 7.88.1-10+deb12u15)",
            Dialect::Wget => "GNU Wget 1.21.3 (Debian 12 package 1.21.3-1+deb12u1)",
            Dialect::Go => "Go 1.19.8 net/http (Debian 12 package golang 2:1.19~1)",
            Dialect::PythonUrllib => "CPython 3.11.7 urllib.request",
            Dialect::PythonRequests => "requests 2.34.2 (PyPI) on CPython 3.11",
            Dialect::PythonHttpx => "httpx 0.29.0 (PyPI) on CPython 3.11",
            Dialect::NodeAxios => "axios 1.21.1 with proxy-from-env 2.1.0 (npm)",
            Dialect::NodeProxyFromEnv => "proxy-from-env 2.1.0 (npm), without axios",
            Dialect::NodeUndici => {
                "undici 7.30.2 EnvHttpProxyAgent on node v20.20.2 (npm; 8.14.0 needs node >= 22.19)"
            }
            Dialect::Ruby => "Ruby 3.1.2 net/http + uri (Debian 12 package ruby 1:3.1)",
            Dialect::RustReqwest => "reqwest 0.13.5 with hyper-util 0.1.21 (crates.io)",
            Dialect::Java => {
                "OpenJDK 17.0 HttpURLConnection (Debian 12 package openjdk-17-jdk-headless)"
            }
        }
    }

    /// The real clients that read the proxy variables: every dialect except `portable` and
    /// `java` (the clients `portable` is written for).
    pub fn clients() -> impl Iterator<Item = Dialect> {
        Dialect::ALL
            .into_iter()
            .filter(|d| *d != Dialect::Portable && *d != Dialect::Java)
    }

    /// The dialect the proxy variables are written in for a policy of this dialect:
    /// `portable` for `java`, whose JVMs read `JAVA_TOOL_OPTIONS` instead.
    pub fn for_variables(self) -> Dialect {
        if self == Dialect::Java {
            Dialect::Portable
        } else {
            self
        }
    }

    /// The separator between entries of the rendered value: `|` for `java`
    /// (`http.nonProxyHosts`), `,` for NO_PROXY.
    pub fn separator(self) -> &'static str {
        if self == Dialect::Java { "|" } else { "," }
    }

    /// Parses a dialect name as written by [`Dialect::name`].
    pub fn from_name(name: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
