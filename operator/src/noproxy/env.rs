//! A simulated process environment and credential redaction.

use std::collections::BTreeMap;

/// Environment variables as a client would see them (name → value; names are
/// case-sensitive, as on Linux).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// An empty environment.
    pub fn new() -> Env {
        Env::default()
    }

    /// The current process environment (values that are not UTF-8 are converted lossily).
    pub fn from_process() -> Env {
        std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect()
    }

    /// Sets one variable.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }

    /// The value of a variable, if it is set (possibly empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// True when the variable is set, even to an empty value.
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// All variables in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The first of `names` that is set and not empty.
    pub(crate) fn first_non_empty(&self, names: &[&'static str]) -> Option<(&'static str, &str)> {
        names
            .iter()
            .find_map(|n| self.get(n).filter(|v| !v.is_empty()).map(|v| (*n, v)))
    }

    /// The first of `names` that is set, even to an empty value.
    pub(crate) fn first_set(&self, names: &[&'static str]) -> Option<(&'static str, &str)> {
        names.iter().find_map(|n| self.get(n).map(|v| (*n, v)))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Env {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Env {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// Replaces the password (or a user without password) of every `scheme://user:pass@`
/// in `text`: `http://user:***@proxy:3128`, `http://***@proxy:3128`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let end = rest
            .find(|c: char| {
                matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == ',' || c == '"'
            })
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        if let Some((userinfo, hostport)) = authority.rsplit_once('@') {
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":***@");
                }
                None => out.push_str("***@"),
            }
            out.push_str(hostport);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Redacts one proxy value, well-formed or not (`user:pw@proxy:3128` without a scheme, a
/// password with spaces or `@`): everything before the last `@` of the part before the
/// first `/`, `?` or `#` is userinfo.
pub fn redact_proxy(value: &str) -> String {
    let (scheme, rest) = match value.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), value),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}{user}:***@{host}{tail}"),
            None => format!("{scheme}***@{host}{tail}"),
        },
        None => value.to_owned(),
    }
}

/// The variables that hold proxy URLs.
pub const PROXY_URL_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Every variable some modelled client reads: the proxy URLs, NO_PROXY in both cases, and
/// the CGI pair (`REQUEST_METHOD` makes Go, Python and Ruby ignore `HTTP_PROXY`; Ruby then
/// reads `CGI_HTTP_PROXY`). Only these change a decision of [`crate::noproxy::Matcher`].
pub const READ_VARS: [&str; 13] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
    "CGI_HTTP_PROXY",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
];

/// Whether a variable holds a proxy URL (and so maybe credentials): one of
/// [`PROXY_URL_VARS`] or Ruby's `CGI_HTTP_PROXY`.
pub fn holds_proxy_url(name: &str) -> bool {
    PROXY_URL_VARS.contains(&name) || name == "CGI_HTTP_PROXY"
}

impl Env {
    /// Each proxy variable's value that carries userinfo, with its redacted form, longest
    /// first: text mentioning a value verbatim is redacted by replacing it.
    pub fn proxy_secrets(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .vars
            .iter()
            .filter(|(k, _)| holds_proxy_url(k))
            .map(|(_, v)| v)
            .filter(|v| redact_proxy(v) != **v)
            .map(|v| (v.clone(), redact_proxy(v)))
            .collect();
        out.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(redact("http://u:p@h:3128/"), "http://u:***@h:3128/");
        assert_eq!(redact("http://tok@h:3128"), "http://***@h:3128");
        assert_eq!(
            redact("via http://u:p@w@h:1 and https://a:b@c"),
            "via http://u:***@h:1 and https://a:***@c"
        );
        assert_eq!(redact("http://h:3128"), "http://h:3128");
        assert_eq!(redact_proxy("u:secret@h:3128"), "u:***@h:3128");
        // Malformed values too: a space, an unencoded @, a path.
        assert_eq!(
            redact_proxy("http://u:pw word@p:3128"),
            "http://u:***@p:3128"
        );
        assert_eq!(
            redact_proxy("http://u:p@w@p:3128/x"),
            "http://u:***@p:3128/x"
        );
        assert_eq!(redact_proxy("http://tok en@p"), "http://***@p");
        assert_eq!(redact_proxy("http://p:3128"), "http://p:3128");
    }

    #[test]
    fn lookups() {
        let env: Env = [("NO_PROXY", ""), ("no_proxy", "x")].into_iter().collect();
        assert_eq!(
            env.first_non_empty(&["NO_PROXY", "no_proxy"]),
            Some(("no_proxy", "x"))
        );
        assert_eq!(
            env.first_set(&["NO_PROXY", "no_proxy"]),
            Some(("NO_PROXY", ""))
        );
    }

    #[test]
    fn every_proxy_url_variable_is_a_secret() {
        let env: Env = [
            ("CGI_HTTP_PROXY", "http://u:cgi@p:1"),
            ("HTTPS_PROXY", "http://u:pw@p:1"),
            ("NO_PROXY", "http://u:np@p:1"),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            env.proxy_secrets(),
            [
                ("http://u:cgi@p:1".to_owned(), "http://u:***@p:1".to_owned()),
                ("http://u:pw@p:1".to_owned(), "http://u:***@p:1".to_owned()),
            ]
        );
    }
}
