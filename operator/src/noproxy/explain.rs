//! Explain: what each client does with one URL in one environment, and why.

use serde::Serialize;

use super::Dialect;
use super::dialects::{Decision, Model, Verdict};
use super::env::{Env, redact, redact_proxy};
use super::target::{Target, TargetError};

/// One dialect's decision for one URL. Credentials are redacted in every field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The dialect (client family).
    pub dialect: Dialect,
    /// The URL asked about.
    pub url: String,
    /// direct, proxy or error.
    pub decision: Decision,
    /// The proxy used (`http://user:***@host:port`), when the decision is `proxy`.
    pub proxy: Option<String>,
    /// The NO_PROXY entry that sent the request direct, if one did.
    pub matched: Option<String>,
    /// `NO_PROXY` or `no_proxy`: the variable the client read for this decision.
    pub variable: Option<String>,
    /// Why, in words.
    pub reason: String,
}

/// A dialect with its environment read and its NO_PROXY value parsed once; call
/// [`Matcher::decide`] for each destination.
#[derive(Clone, Debug)]
pub struct Matcher {
    dialect: Dialect,
    models: Vec<(Dialect, Model)>,
    /// Proxy values with userinfo and their redacted forms (see [`Env::proxy_secrets`]).
    secrets: Vec<(String, String)>,
    /// `java`: the http and https proxy URLs of the variables, whose credentials an
    /// application `Authenticator` would give the JDK's proxy.
    authenticator: [Option<String>; 2],
}

impl Matcher {
    /// Reads `env` as `dialect`'s client would. For `portable`, every client is modelled.
    pub fn new(dialect: Dialect, env: &Env) -> Matcher {
        let models = match Model::new(dialect, env) {
            Some(m) => vec![(dialect, m)],
            None => Dialect::clients()
                .filter_map(|d| Model::new(d, env).map(|m| (d, m)))
                .collect(),
        };
        let var = |names: [&'static str; 2]| {
            (dialect == Dialect::Java)
                .then(|| env.first_non_empty(&names).map(|(_, v)| v.to_owned()))
                .flatten()
        };
        Matcher {
            dialect,
            models,
            secrets: env.proxy_secrets(),
            authenticator: [
                var(["http_proxy", "HTTP_PROXY"]),
                var(["https_proxy", "HTTPS_PROXY"]),
            ],
        }
    }

    /// `text` with every proxy value of the environment redacted, then any other
    /// `scheme://user:pass@` in it.
    fn hide(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (raw, redacted) in &self.secrets {
            out = out.replace(raw.as_str(), redacted);
        }
        redact(&out)
    }

    /// The decision for one destination. For `portable`: the decision (and proxy, entry,
    /// variable where they are the same) when every modelled client agrees; otherwise
    /// `error`, with a reason listing which clients do what — a portable configuration
    /// must not depend on the client.
    pub fn decide(&self, target: &Target, url: &str) -> Explanation {
        let v = self.decide_verdict(target);
        Explanation {
            dialect: self.dialect,
            url: self.hide(url),
            decision: v.decision,
            proxy: v.proxy.as_deref().map(redact_proxy),
            matched: v.matched.as_deref().map(|m| self.hide(m)),
            variable: v.variable.map(str::to_owned),
            reason: self.hide(&v.reason),
        }
    }

    /// The decision for one destination and, when it is `proxy`, the proxy URL as the
    /// environment spells it (credentials included: for connecting, never for printing).
    /// For `java`, the credentials are those of the scheme's proxy variable, as an
    /// application `Authenticator` reading it would answer the proxy's challenge.
    pub fn route(&self, target: &Target, url: &str) -> (Explanation, Option<String>) {
        let proxy = self.decide_verdict(target).proxy;
        let source = &self.authenticator[usize::from(target.scheme == "https")];
        let proxy = match (proxy, source) {
            (Some(p), Some(from)) => Some(with_userinfo(&p, from)),
            (p, _) => p,
        };
        (self.decide(target, url), proxy)
    }

    /// Only the decision (no text): the fast path for bulk checks.
    pub fn decision(&self, target: &Target) -> Decision {
        self.decide_verdict(target).decision
    }

    fn decide_verdict(&self, target: &Target) -> Verdict {
        if self.dialect == Dialect::Portable {
            combine(
                self.models
                    .iter()
                    .map(|(d, m)| (*d, m.decide(target)))
                    .collect(),
            )
        } else {
            self.models.first().map_or_else(
                || Verdict::error("no client model"),
                |(_, m)| m.decide(target),
            )
        }
    }
}

fn combine(all: Vec<(Dialect, Verdict)>) -> Verdict {
    let n = all.len();
    let Some((_, first)) = all.first() else {
        return Verdict::error("no client model");
    };
    let same = |f: &dyn Fn(&Verdict) -> String| all.iter().all(|(_, v)| f(v) == f(first));
    let agree = same(&|v| format!("{:?}", v.decision)) && same(&|v| format!("{:?}", v.proxy));
    if agree {
        let matched = if same(&|v| format!("{:?}", v.matched)) {
            first.matched.clone()
        } else {
            None
        };
        let variable = if same(&|v| format!("{:?}", v.variable)) {
            first.variable
        } else {
            None
        };
        return Verdict {
            decision: first.decision,
            proxy: first.proxy.clone(),
            matched,
            variable,
            reason: format!(
                "all {n} modelled clients agree: {}",
                match first.decision {
                    Decision::Direct => "direct".to_owned(),
                    Decision::Proxy => "through the proxy".to_owned(),
                    Decision::Error => "error".to_owned(),
                }
            ),
        };
    }
    let mut groups: Vec<(String, Vec<Dialect>)> = Vec::new();
    for (d, v) in &all {
        let key = match (&v.decision, &v.proxy) {
            (Decision::Proxy, Some(p)) => format!("proxy via {}", redact_proxy(p)),
            (Decision::Direct, _) => "direct".to_owned(),
            (Decision::Error, _) => "error".to_owned(),
            (Decision::Proxy, None) => "proxy".to_owned(),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ds)) => ds.push(*d),
            None => groups.push((key, vec![*d])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(k, ds)| {
            let names: Vec<&str> = ds.iter().map(|d| d.name()).collect();
            format!("{k}: {}", names.join(", "))
        })
        .collect();
    Verdict::error(format!("the clients disagree ({})", parts.join("; ")))
}

/// Explains `url` for one dialect.
pub fn explain(dialect: Dialect, env: &Env, url: &str) -> Result<Explanation, TargetError> {
    let t = Target::parse(url)?;
    Ok(Matcher::new(dialect, env).decide(&t, url))
}

/// `proxy` with the user and password of the URL `from` (unchanged when either lacks them).
fn with_userinfo(proxy: &str, from: &str) -> String {
    let (Ok(mut p), Ok(f)) = (url::Url::parse(proxy), url::Url::parse(from)) else {
        return proxy.to_owned();
    };
    if f.username().is_empty()
        || p.set_username(f.username()).is_err()
        || p.set_password(f.password()).is_err()
    {
        return proxy.to_owned();
    }
    p.to_string()
}

/// Explains `url` for every dialect, in [`Dialect::ALL`] order.
pub fn explain_all(env: &Env, url: &str) -> Result<Vec<Explanation>, TargetError> {
    let t = Target::parse(url)?;
    Ok(Dialect::ALL
        .into_iter()
        .map(|d| Matcher::new(d, env).decide(&t, url))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    /// The JDK's proxy comes from JAVA_TOOL_OPTIONS; its credentials, for the probe, from the
    /// scheme's variable as an application Authenticator would read them.
    #[test]
    fn a_java_route_authenticates_from_the_variables() {
        let e = env(&[
            (
                "JAVA_TOOL_OPTIONS",
                "-Dhttps.proxyHost=p -Dhttps.proxyPort=3128",
            ),
            ("HTTPS_PROXY", "http://u:pw@other:1"),
        ]);
        let m = Matcher::new(Dialect::Java, &e);
        let t = Target::parse("https://x.example/").unwrap();
        let (x, proxy) = m.route(&t, "https://x.example/");
        assert_eq!(proxy.as_deref(), Some("http://u:pw@p:3128/"));
        assert_eq!(x.proxy.as_deref(), Some("http://p:3128"));
        let t = Target::parse("http://x.example/").unwrap();
        assert_eq!(
            m.route(&t, "http://x.example/").1,
            None,
            "no http.proxyHost"
        );
    }

    #[test]
    fn redacts_credentials_everywhere() {
        let e = env(&[
            ("HTTPS_PROXY", "http://user:s3cret@proxy:3128"),
            ("https_proxy", "http://user:s3cret@proxy:3128"),
        ]);
        for x in explain_all(&e, "https://example.org/").unwrap() {
            let json = serde_json::to_string(&x).unwrap();
            assert!(!json.contains("s3cret"), "{json}");
            if x.decision == Decision::Proxy {
                assert_eq!(
                    x.proxy.as_deref(),
                    Some("http://user:***@proxy:3128"),
                    "{}",
                    x.dialect
                );
            }
        }
    }

    #[test]
    fn reports_entry_and_variable() {
        let e = env(&[
            ("HTTP_PROXY", "http://p:1"),
            ("NO_PROXY", "a.example,.corp.example"),
        ]);
        let x = explain(Dialect::Go, &e, "http://x.corp.example/").unwrap();
        assert_eq!(x.decision, Decision::Direct);
        assert_eq!(x.matched.as_deref(), Some(".corp.example"));
        assert_eq!(x.variable.as_deref(), Some("NO_PROXY"));
        let x = explain(Dialect::Go, &e, "http://other.example/").unwrap();
        assert_eq!(x.decision, Decision::Proxy);
        assert_eq!(x.proxy.as_deref(), Some("http://p:1"));
    }

    #[test]
    fn portable_agreement_and_disagreement() {
        let base = [
            ("http_proxy", "http://p:1"),
            ("HTTP_PROXY", "http://p:1"),
            ("https_proxy", "http://p:1"),
            ("HTTPS_PROXY", "http://p:1"),
        ];
        let mut pairs = base.to_vec();
        pairs.extend([("no_proxy", "corp.example"), ("NO_PROXY", "corp.example")]);
        let x = explain(Dialect::Portable, &env(&pairs), "http://corp.example/").unwrap();
        assert_eq!(x.decision, Decision::Direct);
        assert_eq!(x.matched.as_deref(), Some("corp.example"));
        let mut pairs = base.to_vec();
        pairs.extend([("no_proxy", "10.0.0.0/8"), ("NO_PROXY", "10.0.0.0/8")]);
        let x = explain(Dialect::Portable, &env(&pairs), "http://10.1.2.3/").unwrap();
        assert_eq!(x.decision, Decision::Error);
        assert!(x.reason.contains("direct: curl, go"), "{}", x.reason);
        assert!(x.reason.contains("python-urllib"), "{}", x.reason);
    }

    proptest::proptest! {
        /// Any NO_PROXY/proxy values and any URL: every model decides without panicking.
        #[test]
        fn never_panics(
            np in "[-a-zA-Z0-9.*:/\\[\\], \t_é@%]{0,40}",
            proxy in "(http://|https://|socks5://)?[a-z0-9.:@\\[\\]]{0,20}",
            url in "https?://[a-zA-Z0-9.:\\[\\]@-]{1,30}(/x)?",
            empty_lower in proptest::bool::ANY,
        ) {
            let lower_np = if empty_lower { String::new() } else { np.clone() };
            let e = env(&[
                ("NO_PROXY", np.as_str()),
                ("no_proxy", lower_np.as_str()),
                ("HTTP_PROXY", proxy.as_str()),
                ("https_proxy", proxy.as_str()),
                ("ALL_PROXY", proxy.as_str()),
            ]);
            if let Ok(xs) = explain_all(&e, &url) {
                proptest::prop_assert_eq!(xs.len(), Dialect::ALL.len());
            }
        }
    }

    #[test]
    fn all_dialects_in_order() {
        let xs = explain_all(&Env::new(), "http://x/").unwrap();
        let names: Vec<Dialect> = xs.iter().map(|x| x.dialect).collect();
        assert_eq!(names, Dialect::ALL);
        assert!(xs.iter().all(|x| x.decision == Decision::Direct));
        assert!(explain_all(&Env::new(), "ftp://x/").is_err());
    }
}
