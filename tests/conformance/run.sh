#!/usr/bin/env bash
# NO_PROXY conformance: installs the real HTTP clients from the package registries,
# builds the operator, and runs the case table through every client inside a private
# network namespace (nothing leaves the machine); then the trust section (trust.py): the
# clients with `render trust`'s variables through a real TLS-intercepting proxy (mitmproxy).
# Exits non-zero on any disagreement between a real client and `egress-proxy-operator
# explain` / `render-no-proxy` / `render trust`.
#
#   bash tests/conformance/run.sh [--observe-only] [--client NAME] [--case ID-SUBSTRING]
#
# Environment: EPO_BIN=path  use this operator binary instead of building one.
#              CARGO_TARGET_DIR is honoured for both builds.
# Must run as root (network namespace, apt-get).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$HERE/.work"
mkdir -p "$WORK"
T0=$(date +%s)

log() { printf '==> %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "run.sh must run as root (apt-get, ip netns)" >&2
  exit 2
fi

# ---------------------------------------------------------------- apt: curl wget go ruby ip
need_apt=()
command -v curl >/dev/null || need_apt+=(curl)
command -v wget >/dev/null || need_apt+=(wget)
command -v ruby >/dev/null || need_apt+=(ruby)
command -v ip >/dev/null || need_apt+=(iproute2)
# Debian's golang (the version the `go` dialect models), not any other go on PATH
[ -x /usr/lib/go/bin/go ] || need_apt+=(golang)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
command -v python3 >/dev/null || need_apt+=(python3)
# Debian's OpenJDK 17 (the version the `java` dialect models), not any other JDK on PATH;
# the JDK (javac), not only the JRE: the probe is compiled once (see below)
JDK=/usr/lib/jvm/java-17-openjdk-amd64
[ -x "$JDK/bin/javac" ] || need_apt+=(openjdk-17-jdk-headless)
# the trust section's TLS-intercepting proxy (mitmdump) and the test PKI (openssl CLI)
command -v mitmdump >/dev/null || need_apt+=(mitmproxy)
command -v openssl >/dev/null || need_apt+=(openssl)
if ((${#need_apt[@]})); then
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${need_apt[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}"
  }
fi
GO=/usr/lib/go/bin/go

# ---------------------------------------------------------------- Python venv
PY=python3
if [ ! -x "$WORK/venv/bin/python" ]; then
  log "python venv"
  if ! "$PY" -m venv "$WORK/venv" >/dev/null 2>&1; then
    rm -rf "$WORK/venv"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || {
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    }
    PY=/usr/bin/python3
    "$PY" -m venv "$WORK/venv"
  fi
fi
if [ ! -f "$WORK/venv/.requirements" ] || ! cmp -s "$HERE/python/requirements.txt" "$WORK/venv/.requirements"; then
  log "pip install -r python/requirements.txt"
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check -r "$HERE/python/requirements.txt"
  cp "$HERE/python/requirements.txt" "$WORK/venv/.requirements"
fi
"$WORK/venv/bin/python" -c 'import tomllib' 2>/dev/null || { echo "python >= 3.11 needed (tomllib)" >&2; exit 2; }

# ---------------------------------------------------------------- Node packages (lock committed)
if [ ! -d "$HERE/node/node_modules/undici" ] || [ "$HERE/node/package-lock.json" -nt "$HERE/node/node_modules/.package-lock.json" ]; then
  log "npm ci (axios, proxy-from-env, undici)"
  (cd "$HERE/node" && npm ci --no-audit --no-fund --loglevel=error)
fi

# ---------------------------------------------------------------- Go probe
if [ ! -x "$WORK/go-probe" ] || [ "$HERE/go/probe.go" -nt "$WORK/go-probe" ]; then
  log "go build probe ($($GO version))"
  (cd "$HERE/go" && GOTOOLCHAIN=local GO111MODULE=off "$GO" build -o "$WORK/go-probe" probe.go)
fi

# ---------------------------------------------------------------- Java probe
# Compiled once into .work/java-classes: a JVM per case then starts in ~0.15 s, where
# source-file mode (`java Probe.java URL`) would compile it again for every case (+0.55 s).
if [ ! -f "$WORK/java-classes/Probe.class" ] || [ "$HERE/java/Probe.java" -nt "$WORK/java-classes/Probe.class" ]; then
  log "javac java/Probe.java"
  rm -rf "$WORK/java-classes"
  env -u JAVA_TOOL_OPTIONS -u _JAVA_OPTIONS -u JDK_JAVA_OPTIONS "$JDK/bin/javac" -d "$WORK/java-classes" "$HERE/java/Probe.java"
fi

# ---------------------------------------------------------------- reqwest probe (own workspace, Cargo.lock committed)
RQ_TARGET="${CARGO_TARGET_DIR:-$WORK/reqwest-target}"
if [ ! -x "$RQ_TARGET/release/reqwest-probe" ] || [ -n "$(find "$HERE/reqwest-probe/src" "$HERE/reqwest-probe/Cargo.lock" -newer "$RQ_TARGET/release/reqwest-probe" 2>/dev/null)" ]; then
  log "cargo build reqwest-probe"
  CARGO_TARGET_DIR="$RQ_TARGET" cargo build --release --locked --quiet --manifest-path "$HERE/reqwest-probe/Cargo.toml"
fi

# ---------------------------------------------------------------- the operator
observe_only=0
for a in "$@"; do [ "$a" = "--observe-only" ] && observe_only=1; done
if [ -z "${EPO_BIN:-}" ] && [ "$observe_only" -eq 0 ]; then
  log "cargo build --release -p egress-proxy-operator"
  (cd "$ROOT" && cargo build --release --quiet -p egress-proxy-operator)
  EPO_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/egress-proxy-operator"
fi
export EPO_BIN="${EPO_BIN:-}"

# ---------------------------------------------------------------- versions
log "versions"
echo "  curl:     $(curl --version | head -1 | cut -d' ' -f1-2)"
echo "  wget:     $(wget --version | head -1)"
echo "  go:       $($GO version)"
echo "  python:   $("$WORK/venv/bin/python" --version)"
"$WORK/venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -Ei '^(requests|httpx|httpcore|urllib3) ' | sed 's/^/  pypi:     /'
echo "  node:     $(node --version)"
(cd "$HERE/node" && npm ls --depth=0 2>/dev/null | tail -n +2 | grep . | sed 's/^/  npm:     /')
echo "  ruby:     $(ruby --version)"
echo "  java:     $("$JDK/bin/java" -version 2>&1 | grep -m1 'Runtime Environment')"
echo "  mitmproxy: $(mitmdump --version 2>/dev/null | head -1)"
echo "  reqwest:  $(grep -A1 '^name = "reqwest"$' "$HERE/reqwest-probe/Cargo.lock" | tail -1)"
echo "  prep:     $(($(date +%s) - T0))s"

# ---------------------------------------------------------------- run
# conformance.py prints its own elapsed time, and `N passed, N failed` as the last line.
exec "$WORK/venv/bin/python" "$HERE/conformance.py" "$@"
