#!/usr/bin/env bash
# Regenerates ../ssa-expected.json from ../ssa-cases.json with the reference program.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/ssa-reference
bash "$here/build.sh" "$bin"
"$bin" "$here/schema.yaml" < "$here/../ssa-cases.json" > "$here/../ssa-expected.json"
echo "wrote $here/../ssa-expected.json"
