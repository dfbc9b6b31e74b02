//! The client families whose NO_PROXY syntax the engine models: the API's enum. What each
//! one does is in its file under `dialects/`, reached through `dialects::client`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::dialects::client;

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
        client(self).name()
    }

    /// The exact client version this dialect models (read from that version's source and
    /// checked by `tests/conformance/`). `portable` models all of them at once.
    pub fn modelled_version(self) -> &'static str {
        client(self).modelled_version()
    }

    /// The real clients that read the proxy variables: every dialect except `portable` and
    /// `java` (the clients `portable` is written for).
    pub fn clients() -> impl Iterator<Item = Dialect> {
        Dialect::ALL
            .into_iter()
            .filter(|d| client(*d).reads_variables())
    }

    /// The dialect the proxy variables are written in for a policy of this dialect: its own
    /// when its clients read them, else `portable` (for `java`, whose JVMs read
    /// `JAVA_TOOL_OPTIONS` instead).
    pub fn for_variables(self) -> Dialect {
        if client(self).reads_variables() {
            self
        } else {
            Dialect::Portable
        }
    }

    /// The separator between entries of the rendered value: `|` for `java`
    /// (`http.nonProxyHosts`), `,` for NO_PROXY.
    pub fn separator(self) -> &'static str {
        client(self).separator()
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
