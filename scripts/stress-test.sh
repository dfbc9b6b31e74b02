#!/usr/bin/env bash
# The test command on a busy machine: runs scripts/test.sh (or only its workspace tests) RUNS
# times in a row while stress-ng keeps every core busy, and prints which tests failed in which
# run. Races that a quiet machine hides show up here (README "Run the tests", issue 32).
#   scripts/stress-test.sh [--runs N] [--workspace-only] [--cpu N]
#     --runs N            how many runs in a row (default 3)
#     --workspace-only    only the set-up and `cargo test --workspace` (the tests that
#                         race), not the conformance, chart and image steps
#     --cpu N             stress-ng CPU workers (default: the number of cores)
# Logs: target/stress/run-K.log. Exit status: 0 only when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3 workspace_only=false cpu=$(nproc)
while [[ $# -gt 0 ]]; do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        --workspace-only) workspace_only=true; shift ;;
        --cpu) cpu=$2; shift 2 ;;
        *) echo "usage: $0 [--runs N] [--workspace-only] [--cpu N]" >&2; exit 2 ;;
    esac
done

command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null; }
logs="${CARGO_TARGET_DIR:-$PWD/target}/stress"
mkdir -p "$logs"

stress-ng --cpu "$cpu" --timeout 0 --quiet &
stress_pid=$!
trap 'kill "$stress_pid" 2>/dev/null || true; wait "$stress_pid" 2>/dev/null || true' EXIT
echo "stress-ng --cpu $cpu running (pid $stress_pid)"

# Failed test names in a log: cargo's and nextest's, the chart test's and the conformance
# run's failure lines.
failures() {
    grep -hE '^test .* \.\.\. FAILED$|^    [A-Za-z0-9_:]+$|^FAIL |^chart-test: FAIL|^image-test: FAIL|^[0-9]+ passed, [1-9][0-9]* failed' "$1" |
        sed -E 's/^test (.*) \.\.\. FAILED$/\1/; s/^    //' | sort -u
}

failed_runs=0
summary=""
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.log"
    started=$SECONDS
    cmd=(bash scripts/test.sh)
    $workspace_only && cmd+=(--workspace-only)
    echo "run $run/$runs: ${cmd[*]} (log $log)"
    if "${cmd[@]}" >"$log" 2>&1; then
        result="passed"
    else
        result="FAILED"
        failed_runs=$((failed_runs + 1))
    fi
    line="run $run: $result in $((SECONDS - started)) s"
    if [[ $result == FAILED ]]; then
        names=$(failures "$log" | paste -sd ' ' -)
        line="$line: ${names:-see $log}"
    fi
    echo "$line"
    summary+="$line"$'\n'
done

echo
echo "under stress-ng --cpu $cpu:"
printf '%s' "$summary"
echo "$((runs - failed_runs)) passed, $failed_runs failed"
[[ $failed_runs -eq 0 ]]
