#!/bin/sh
# The isolated client network of operator/tests/it/common/net.rs (its module doc has the layout).
# Run it through `unshare -rnm` (fresh user, network and mount namespaces) as
#
#     unshare -rnm /bin/sh isolate.sh DIR PROGRAM [ARG...]
#
# It brings loopback up, adds DIR/addresses to it, mounts DIR/hosts over /etc/hosts, listens on
# each bridged address:port and forwards every connection to that bridge's Unix socket (which
# the harness serves on the host, forwarding to the real 127.0.0.1:PORT), waits until every
# bridge listens, and only then execs PROGRAM with the caller's environment: the PID, exit
# status, signals, stdin, stdout and stderr are the program's own. Nothing else is reachable.
#
#   DIR/hosts      the /etc/hosts inside
#   DIR/addresses  IPv4 addresses added to lo, one a line
#   DIR/bridges    "ADDRESS PORT SOCKET" a line: listen on ADDRESS:PORT, forward to SOCKET
#   DIR/bridge.log what the bridges inside say (connection errors), appended by every run
#
# It fails with status 125 and a line on stderr when the network cannot be set up.
set -eu
dir=$1
shift
caller_path_set=${PATH+set}
caller_path=${PATH-}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

fail() {
    echo "isolate.sh: $*" >&2
    exit 125
}

ip link set lo up || fail "cannot bring lo up"
while read -r address; do
    ip addr add "$address/32" dev lo || fail "cannot add $address to lo"
done <"$dir/addresses"
mount --bind "$dir/hosts" /etc/hosts || fail "cannot mount $dir/hosts over /etc/hosts"

pids=
want=
while read -r address port socket; do
    # Killed when the program (this shell after its exec) ends: no bridge outlives it.
    setpriv --pdeathsig KILL socat "TCP-LISTEN:$port,bind=$address,fork,reuseaddr" \
        "UNIX-CONNECT:$socket" </dev/null >>"$dir/bridge.log" 2>&1 &
    pids="$pids $!"
    want="$want $address:$port"
done <"$dir/bridges"

listening() {
    have=$(ss -Hltn | awk '{print $4}')
    for w in $want; do
        printf '%s\n' "$have" | grep -qxF "$w" || return 1
    done
}

alive() {
    # A bridge that exited is a zombie until this shell reaps it: read its state.
    [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]
}

deadline=$(($(date +%s) + 10))
until listening; do
    for pid in $pids; do
        alive "$pid" || fail "a bridge exited before listening; $dir/bridge.log says: $(cat "$dir/bridge.log")"
    done
    [ "$(date +%s)" -lt "$deadline" ] || fail "bridges not listening after 10 s:$want"
    sleep 0.01
done

if [ -n "$caller_path_set" ]; then PATH=$caller_path; else unset PATH; fi
exec "$@"
