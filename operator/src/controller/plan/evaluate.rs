//! The evaluation stage: the policy's entries, the discovered facts, the NO_PROXY value and
//! what a process can start with (the credentials come from the slot stage). The first
//! problem found blocks the policy, in that order.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::Blocker;
use crate::api::reasons::reason;
use crate::api::{DiscoveredFacts, EgressProxyPolicy, Fact};
use crate::credentials::ProxyUrls;
use crate::discovery::{self, ClusterInputs};
use crate::noproxy::dialects::java;
use crate::noproxy::{
    Dialect, Intent, IntentSet, MAX_ARG_STRLEN, Rendered, Widen, env_string_len, render_with,
};

/// What the six variables together may take, in bytes: a quarter of the 1 MiB that
/// `ARG_MAX` leaves with a small (4 MiB) stack limit, so the container's own environment
/// and arguments keep the rest.
pub const ENV_BUDGET: usize = 262_144;

/// What a policy renders: the NO_PROXY value, and for `java` the `http.nonProxyHosts` one
/// (the variables then carry the `portable` value for the container's other programs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rendering {
    pub no_proxy: Rendered,
    pub java: Option<Rendered>,
}

impl Rendering {
    /// What the configuration hash covers: the NO_PROXY value, and the java one after it.
    pub fn hashed(&self) -> String {
        match &self.java {
            None => self.no_proxy.value.clone(),
            Some(j) => format!("{}\njava:{}", self.no_proxy.value, j.value),
        }
    }

    /// The rendering of the policy's own client: its uncovered entries and warnings are
    /// the ones reported.
    pub fn reported(&self) -> &Rendered {
        self.java.as_ref().unwrap_or(&self.no_proxy)
    }

    /// The options a `java` policy appends to `JAVA_TOOL_OPTIONS` for these proxy URLs.
    pub fn java_options(&self, urls: &ProxyUrls) -> Option<Result<String, String>> {
        let j = self.java.as_ref()?;
        Some(java::options(&urls.http_proxy, &urls.https_proxy, &j.value))
    }
}

/// The discovered facts, and the rendering or why there is none. `previous`: the node
/// subnets the last status reported.
pub(super) fn rendered(
    policy: &EgressProxyPolicy,
    cluster: &ClusterInputs,
    previous: Option<&Fact>,
) -> (DiscoveredFacts, Result<Rendering, Blocker>) {
    let (facts, intents) = intents(policy, cluster, previous);
    let rendered = intents.and_then(|intents| {
        let dialect = policy.spec.no_proxy.dialect;
        let widen = policy.spec.no_proxy.widen;
        let set = IntentSet::new(intents);
        let java = (dialect == Dialect::Java).then(|| remembered(Dialect::Java, &set, widen));
        let r = remembered(dialect.for_variables(), &set, widen);
        everything_direct(policy, &r)?;
        let size = env_string_len("NO_PROXY", &r.value);
        if size > MAX_ARG_STRLEN {
            return Err(blocker(
                reason::ENVIRONMENT_TOO_LARGE,
                format!(
                    "NO_PROXY=value would be {size} bytes in dialect {}; a container cannot \
                     start with an environment string over {MAX_ARG_STRLEN} bytes (Linux \
                     MAX_ARG_STRLEN): list networks instead of hosts in \
                     spec.noProxy.additional, or fewer entries",
                    dialect.name()
                ),
            ));
        }
        Ok(Rendering { no_proxy: r, java })
    });
    (facts, rendered)
}

/// How many renders [`remembered`] keeps.
const RENDERS_KEPT: usize = 16;

/// The last renders, newest first. Every reconcile renders its policy's set (twice: for
/// `needs_credentials`, then for the plan), and the policies of one cluster mostly share
/// one set: at 500 policies, rendering was the largest part of the operator's work.
static RENDERS: Mutex<VecDeque<(Dialect, Widen, IntentSet, Rendered)>> =
    Mutex::new(VecDeque::new());

/// [`render_with`], remembered: rendering is a pure function of its inputs, so a
/// remembered render is the same bytes.
fn remembered(dialect: Dialect, set: &IntentSet, widen: Widen) -> Rendered {
    let same = |(d, w, s, _): &&(Dialect, Widen, IntentSet, Rendered)| {
        *d == dialect && *w == widen && s == set
    };
    let hit = RENDERS
        .lock()
        .ok()
        .and_then(|kept| kept.iter().find(same).map(|e| e.3.clone()));
    if let Some(r) = hit {
        return r;
    }
    let r = render_with(dialect, set, widen);
    if let Ok(mut kept) = RENDERS.lock() {
        kept.truncate(RENDERS_KEPT - 1);
        kept.push_front((dialect, widen, set.clone(), r.clone()));
    }
    r
}

/// The six variables together, as `NAME=value` strings, must fit [`ENV_BUDGET`].
/// A `java` policy's options must be usable by the JDK and count as well.
pub(super) fn within_budget(r: &Rendering, urls: &ProxyUrls) -> Result<(), Blocker> {
    let pair = |name: &str, value: &str| 2 * env_string_len(name, value);
    let java = match r.java_options(urls) {
        None => 0,
        Some(Ok(options)) => {
            let size = env_string_len(java::TOOL_OPTIONS, &options);
            if size > MAX_ARG_STRLEN {
                return Err(blocker(
                    reason::ENVIRONMENT_TOO_LARGE,
                    format!(
                        "JAVA_TOOL_OPTIONS would be {size} bytes with the operator's part \
                         alone; a container cannot start with an environment string over \
                         {MAX_ARG_STRLEN} bytes: list networks instead of hosts in \
                         spec.noProxy.additional, or fewer entries"
                    ),
                ));
            }
            size
        }
        Some(Err(why)) => {
            return Err(blocker(
                reason::INVALID_PROXY_URL,
                format!("dialect java: {why}"),
            ));
        }
    };
    let total = pair("NO_PROXY", &r.no_proxy.value)
        + pair("HTTP_PROXY", &urls.http_proxy)
        + pair("HTTPS_PROXY", &urls.https_proxy)
        + java;
    if total <= ENV_BUDGET {
        return Ok(());
    }
    Err(blocker(
        reason::ENVIRONMENT_TOO_LARGE,
        format!(
            "the six proxy variables would take {total} bytes of each container's \
             environment; the operator keeps them within {ENV_BUDGET} bytes so that a \
             container can still start: shorten NO_PROXY (spec.noProxy.additional)"
        ),
    ))
}

/// `*` sends every host direct. In a dialect that cannot say so, rendering would drop it
/// and every other entry with it: refuse instead.
fn everything_direct(policy: &EgressProxyPolicy, r: &Rendered) -> Result<(), Blocker> {
    let Some(lost) = r.uncovered.iter().find(|u| u.entry == "*") else {
        return Ok(());
    };
    let additional = &policy.spec.no_proxy.additional;
    let at = additional.iter().position(|e| e.trim() == "*").unwrap_or(0);
    Err(blocker(
        reason::INVALID_NO_PROXY_ENTRY,
        format!(
            "spec.noProxy.additional[{at}] \"*\" sends every host direct, and dialect {} \
             cannot say so ({}): set spec.noProxy.dialect to the workloads' client family, \
             or remove \"*\"",
            policy.spec.no_proxy.dialect.name(),
            lost.reason
        ),
    ))
}

fn blocker(reason: &'static str, message: String) -> Blocker {
    Blocker {
        reason,
        message,
        withdrawn: false,
    }
}

/// The discovered facts, and the NO_PROXY intents or why there are none: entries are
/// checked before discovery.
fn intents(
    policy: &EgressProxyPolicy,
    cluster: &ClusterInputs,
    previous: Option<&Fact>,
) -> (DiscoveredFacts, Result<Vec<Intent>, Blocker>) {
    let mut facts = discovery::discover(cluster);
    let prefix = policy.spec.no_proxy.node_subnets;
    facts.node_subnets = discovery::node_subnets(facts.node_addresses.as_ref(), prefix, previous);
    let intents = discovery::policy_intents(&facts, &policy.spec.no_proxy)
        .map_err(|e| blocker(e.reason, e.message));
    (facts, intents)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remembered render is the render of exactly its inputs, whichever was asked before.
    #[test]
    fn a_remembered_render_is_the_render() {
        let set = |s: &str| IntentSet::new(s.split(',').map(|e| e.parse().expect("intent")));
        let sets = [
            set("10.0.0.0/8,.corp.example"),
            set("10.0.0.1,corp.example"),
        ];
        for _ in 0..2 {
            for d in [Dialect::Go, Dialect::Curl, Dialect::Portable] {
                for s in &sets {
                    for w in [Widen::Deny, Widen::Allow] {
                        assert_eq!(remembered(d, s, w), render_with(d, s, w), "{d} {s}");
                    }
                }
            }
        }
    }
}
