//! egress-proxy-operator: computes NO_PROXY from the live cluster, writes it in the dialect each
//! HTTP client understands, and wires proxy credentials into selected workloads.

pub mod activity;
pub mod admin;
pub mod api;
pub mod cli;
pub mod client;
pub(crate) mod consumers;
pub mod controller;
pub(crate) mod credentials;
pub(crate) mod discovery;
pub mod leader;
pub mod metrics;
pub mod noproxy;
pub mod probe;
pub mod rotation;
#[cfg(test)]
mod schema_values;
pub mod trust;
pub(crate) mod workloads;
