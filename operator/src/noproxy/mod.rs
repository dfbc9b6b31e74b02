//! The NO_PROXY engine: intents, canonical set, dialects, render and explain. Pure: no
//! Kubernetes types, no I/O.
//!
//! - [`Intent`] / [`IntentSet`]: what must go direct, parsed and canonicalized.
//! - [`render`]: an intent set → the NO_PROXY value in one [`Dialect`], plus what it cannot
//!   express and warnings.
//! - [`Matcher`] / [`explain`]: what a client does with a URL in an environment.
//!
//! Every dialect models one real client version ([`Dialect::modelled_version`]); the rules
//! and their source references are in the `dialects` module of each client.

#[doc(hidden)]
pub mod bench_intents;
mod dialect;
pub mod dialects;
mod entry;
mod env;
mod explain;
#[cfg(test)]
mod golden;
mod render;
mod set;
mod shape;
mod target;

pub use dialect::Dialect;
pub use dialects::Decision;
pub use entry::{Intent, NameScope, ParseError, split_list};
pub use env::{Env, READ_VARS, holds_proxy_url, redact, redact_proxy};
pub use explain::{Explanation, Matcher, explain, explain_all};
pub use render::{
    LARGE_VALUE, MAX_ARG_STRLEN, Rendered, Uncovered, Widen, env_string_len, render, render_with,
};
pub use set::IntentSet;
pub use target::{Target, TargetError};
