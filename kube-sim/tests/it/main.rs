//! kube-sim's integration tests, one binary: each module is a former test file (kube-rs and
//! kubectl against the server, HTTP edges, rollouts, Jobs, and the strategic merge and
//! server-side apply cases checked against upstream). One binary links the tree once.
//!
//! Run one module: `cargo test -p kube-sim --test it -- jobs::`.

mod apply_upstream;
mod client_crud;
mod http_edges;
mod jobs;
mod kubectl;
mod rollouts;
mod seeding;
mod strategic_upstream;
mod watch_runtime;
