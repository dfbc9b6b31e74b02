#!/usr/bin/env bash
# The project's test command (README "Run the tests"): workspace tests, then the conformance run
# of the NO_PROXY engine against the real HTTP clients, which installs what it needs.
# Needs root (apt-get, network namespaces), as on the project's machines and CI.
#   scripts/test.sh                   everything
#   scripts/test.sh --workspace-only  the set-up and `cargo test --workspace` only (what
#                                     scripts/stress-test.sh repeats under load)
set -euo pipefail
cd "$(dirname "$0")/.."
workspace_only=false
[[ ${1:-} == --workspace-only ]] && workspace_only=true

started=$SECONDS
cache="${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxy-operator"
# The Prometheus project's OpenMetrics parser, which operator/tests/it/leader.rs checks /metrics with.
venv="$cache/venv-tests"
if ! "$venv/bin/python" -c 'import prometheus_client' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet prometheus-client==0.21.1
fi
export EPO_PYTHON="$venv/bin/python"
# Lua 5.1, the language of Argo CD's health checks (tests/argocd_health.rs).
command -v lua5.1 >/dev/null || { apt-get update -qq && apt-get install -y -qq lua5.1 >/dev/null; }
# Real proxies, the isolated network's bridges and curl (operator/tests/it/common/net.rs, net_harness.rs).
{ command -v tinyproxy && command -v squid && command -v socat && command -v curl && command -v mitmdump; } >/dev/null || { apt-get update -qq && apt-get install -y -qq tinyproxy squid socat curl mitmproxy >/dev/null; }
# Go and the structured-merge-diff library: kube-sim/tests/it/apply_upstream.rs builds and runs
# the server-side apply reference program (kube-sim/tests/upstream/ssa) with them.
[[ -f /usr/share/gocode/src/sigs.k8s.io/structured-merge-diff/merge/update.go ]] && command -v go >/dev/null || { apt-get update -qq && apt-get install -y -qq golang-go golang-k8s-sigs-structured-merge-diff-dev >/dev/null; }
# systemd-analyze, which checks the rendered containerd drop-in (operator/tests/it/render_consumers.rs).
command -v systemd-analyze >/dev/null || { apt-get update -qq && apt-get install -y -qq systemd >/dev/null; }
# No module of either crate imports another in a circle (docs/architecture.md).
python3 scripts/module-cycles.py
# --no-fail-fast: a failing test binary does not hide the failures of the ones after it.
cargo test --workspace --locked --no-fail-fast
# kube-sim against upstream's own code (already passed above): the counts, printed.
cargo test --locked -p kube-sim --test it -- strategic_upstream:: apply_upstream:: --nocapture 2>&1 \
    | grep -E "cases match|stale|reference program"
if $workspace_only; then
    echo "workspace tests: $((SECONDS - started)) s"
    exit 0
fi
# The conformance run uses the binary the tests just built.
cargo build --locked -p egress-proxy-operator
EPO_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/egress-proxy-operator" bash tests/conformance/run.sh
# The Helm chart with real Helm against kube-sim, then the operator as the chart runs it.
bash scripts/chart-test.sh
# The container image: static release build, buildah, and a run under podman against kube-sim.
bash scripts/image-test.sh
echo "test command: $((SECONDS - started)) s"
