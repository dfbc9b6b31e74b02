#!/usr/bin/env bash
# The project's test command (README "Run the tests"): workspace tests, then the conformance run
# of the NO_PROXY engine against the real HTTP clients, which installs what it needs.
# Needs root (apt-get, network namespaces), as on the project's machines and CI.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
cargo test --workspace --locked
# The conformance run uses the binary the tests just built.
cargo build --locked -p egress-proxy-operator
EPO_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/egress-proxy-operator" bash tests/conformance/run.sh
echo "test command: $((SECONDS - started)) s"
