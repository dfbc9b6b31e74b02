//! `portable`: no single client. The value every client that reads the proxy variables
//! ([`Dialect::clients`]) decides the same for: an entry is kept only when every one of them
//! can express it, spelled so that they all agree (checked by the tests of `render.rs`
//! against every client model). Render writes an address or network some clients ignore
//! when none then misroutes (`render.rs`, `portable_in_part`); explain asks every client.

use std::sync::Arc;

use super::{Client, Decide, Expr};
use crate::noproxy::Dialect;
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::trust::dialects::{ALL, TrustVar};

/// The dialect `portable`.
pub(crate) struct Portable;

impl Client for Portable {
    fn name(&self) -> &'static str {
        "portable"
    }
    fn modelled_version(&self) -> &'static str {
        "every version listed for the other dialects"
    }
    fn reads_variables(&self) -> bool {
        false
    }
    fn separator(&self) -> &'static str {
        ","
    }
    fn cidr_support(&self) -> (bool, bool) {
        (false, false)
    }
    fn matches_subdomains_too(&self, _name: &str) -> bool {
        true
    }
    fn trust_variables(&self) -> &'static [TrustVar] {
        ALL
    }
    fn express(&self, intent: &Intent) -> Result<Expr, String> {
        express(intent)
    }
    fn model(&self, _env: &Env) -> Option<Arc<dyn Decide>> {
        None
    }
}

/// Kept only when every client can express it, spelled so that every client decides the
/// same for it.
fn express(intent: &Intent) -> Result<Expr, String> {
    let failures: Vec<String> = Dialect::clients()
        .filter_map(|d| match super::client(d).express(intent) {
            Err(why) => Some(format!("{d}: {why}")),
            Ok(_) => None,
        })
        .collect();
    if !failures.is_empty() {
        return Err(format!(
            "not every client can express it; {}",
            failures.join("; ")
        ));
    }
    match intent {
        Intent::Name {
            name,
            scope,
            port: None,
            ..
        } => match scope {
            NameScope::Host => Expr::one(name.clone()),
            // proxy-from-env: bare is exact, `.d` subdomains only; go/wget/ruby/httpx: `.d`
            // is subdomains only. Both spellings are needed.
            NameScope::Domain => Expr::many(vec![name.clone(), format!(".{name}")]),
            NameScope::Subdomains => Expr::one(format!(".{name}")),
        },
        Intent::Ip { addr, port: None } if addr.is_ipv4() => Expr::one(addr.to_string()),
        other => Err(format!(
            "no spelling of {other} gives the same decision in every client"
        )),
    }
}
