#!/usr/bin/env bash
# The Helm chart's tests (docs/install.md): lint, schema and rendered objects, deploy/rbac.yaml
# as the chart renders it, then install, the operator binary with the installed Deployment's
# args and a token of its ServiceAccount, upgrade, rollback and uninstall with real Helm against
# kube-sim. Helm is helm-python-sdk (Helm v4 as a library, from PyPI), in a cached venv.
# Runs as root on a fresh Debian 12 machine and sets up what it needs.
#   scripts/chart-test.sh               the tests
#   scripts/chart-test.sh --write-rbac  regenerate deploy/rbac.yaml from the chart
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

pins="helm-python-sdk==0.2.2 pyyaml==6.0.3"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxy-operator/venv-chart"
if [ "$(cat "$venv/pins" 2>/dev/null)" != "$pins" ] || ! "$venv/bin/python" -c 'import helm_python, yaml' 2>/dev/null; then
  command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3; }
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
  echo "$pins" > "$venv/pins"
fi

if [ "${1:-}" = "--write-rbac" ]; then
  exec "$venv/bin/python" tests/chart/run.py --write-rbac
fi

command -v kubectl >/dev/null || { echo "chart-test: kubectl is required (it comes with the machine)" >&2; exit 1; }
cargo build --locked -p egress-proxy-operator -p kube-sim
"$venv/bin/python" tests/chart/run.py --bin-dir "${CARGO_TARGET_DIR:-$PWD/target}/debug"
echo "chart test command: $((SECONDS - started)) s"
