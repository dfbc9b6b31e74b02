#!/usr/bin/env bash
# Builds the reference program offline against Debian's packaged structured-merge-diff
# (apt-get install golang-go golang-k8s-sigs-structured-merge-diff-dev).
#   build.sh OUT   writes the binary to OUT
# GOPATH mode over a scratch GOPATH: the package's source lives at
# /usr/share/gocode/src/sigs.k8s.io/structured-merge-diff while its import paths carry /v4,
# and module mode would need go.mod files for test-only dependencies Debian does not ship.
set -euo pipefail
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
src=/usr/share/gocode/src
[[ -f $src/sigs.k8s.io/structured-merge-diff/merge/update.go ]] || {
    echo "golang-k8s-sigs-structured-merge-diff-dev is not installed" >&2
    exit 1
}
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/sigs.k8s.io/structured-merge-diff" "$gopath/src/ssaref"
ln -s "$src/sigs.k8s.io/structured-merge-diff" "$gopath/src/sigs.k8s.io/structured-merge-diff/v4"
for dep in gopkg.in github.com; do ln -s "$src/$dep" "$gopath/src/$dep"; done
cp "$here/main.go" "$gopath/src/ssaref/"
cd "$gopath/src/ssaref"
GOENV=off GOPATH=$gopath GO111MODULE=off GOFLAGS= GOPROXY=off GOCACHE=${GOCACHE:-$gopath/cache} \
    go build -o "$out" .
