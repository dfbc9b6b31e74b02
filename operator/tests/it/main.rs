//! The operator's integration tests, one binary: each module is a former test file, run
//! against the in-memory API server (kube-sim), real proxies and the operator binary. One
//! binary links the dependency tree once instead of once per file.
//!
//! Run one module: `cargo test -p egress-proxy-operator --test it -- verify::`.

mod common;

mod cli;
mod cronjobs;
mod demo;
mod distributions;
mod explain_workload;
mod install;
mod leader;
mod net_harness;
mod probe;
mod reconcile;
mod render_consumers;
mod rotation;
mod secrecy;
mod soak;
mod tenancy;
mod verify;
