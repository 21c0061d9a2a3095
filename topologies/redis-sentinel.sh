#!/usr/bin/env bash
# Start or stop a real Redis Sentinel setup on loopback: one master, two
# replicas and three redis-sentinel processes (quorum 2).
#
#   topologies/redis-sentinel.sh start DIR   # prints DIR/nodes when ready
#   topologies/redis-sentinel.sh stop DIR    # kills the processes (pidfiles) and removes their files
#
# DIR/nodes has one line per process: "port pid role" with role master,
# replica or sentinel (roles at start). The master name is "mymaster" unless
# SENTINEL_MASTER_NAME is set. Environment:
#   SENTINEL_DOWN_AFTER       down-after-milliseconds (default 1000)
#   SENTINEL_FAILOVER_TIMEOUT failover-timeout in ms (default 3000)
#   SENTINEL_MASTER_VIA       a loopback port through which replicas and
#                             sentinels reach the master (a proxy of the
#                             caller's that forwards to the port in
#                             DIR/master/port); default: the master's port
#   REDIS_SERVER / REDIS_SENTINEL / REDIS_CLI  binaries (default from PATH)
# "start" returns only when both replicas have master_link_status:up and each
# sentinel sees the master, both replicas and the two other sentinels, and
# SENTINEL CKQUORUM passes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=redis-lib.sh
. "$here/redis-lib.sh"

MASTER_NAME=${SENTINEL_MASTER_NAME:-mymaster}
DOWN_AFTER=${SENTINEL_DOWN_AFTER:-1000}
FAILOVER_TIMEOUT=${SENTINEL_FAILOVER_TIMEOUT:-3000}

write_server_conf() { # DIR PORT [MASTERPORT]
	{
		common_conf "$1" "$2"
		cat <<EOF
save ""
appendonly no
repl-diskless-sync yes
repl-diskless-sync-delay 0
repl-diskless-load disabled
EOF
		if [[ -n ${3:-} ]]; then
			echo "replicaof 127.0.0.1 $3"
		fi
	} >"$1/redis.conf"
}

write_sentinel_conf() { # DIR PORT MASTERPORT
	{
		common_conf "$1" "$2"
		cat <<EOF
sentinel monitor $MASTER_NAME 127.0.0.1 $3 2
sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER
sentinel failover-timeout $MASTER_NAME $FAILOVER_TIMEOUT
sentinel parallel-syncs $MASTER_NAME 2
EOF
	} >"$1/redis.conf"
}

start_proc() { # NODEDIR KIND [MASTERPORT] -> sets globals port pid
	if [[ $2 == sentinel ]]; then
		start_on_free_port "$1" "$REDIS_SENTINEL" write_sentinel_conf "$3"
	else
		start_on_free_port "$1" "$REDIS_SERVER" write_server_conf ${3:+"$3"}
	fi
}

# skv PORT ARGS...: a sentinel reply that is a flat key/value list, as "k=v" lines.
skv() {
	local port=$1
	shift
	rcli "$port" "$@" | tr -d '\r' | paste -d= - -
}

setup_ready() { # MASTERPORT VIAPORT "REPLICAPORTS" "SENTINELPORTS"
	local m=$1 via=$2 r s
	for r in $3; do
		[[ $(field "$r" replication master_link_status) == up ]] || return 1
		[[ $(field "$r" replication master_sync_in_progress) == 0 ]] || return 1
	done
	[[ $(field "$m" replication connected_slaves) == 2 ]] || return 1
	for s in $4; do
		local kv
		kv=$(skv "$s" sentinel master "$MASTER_NAME") || return 1
		grep -qx "port=$via" <<<"$kv" || return 1
		grep -qx "flags=master" <<<"$kv" || return 1
		grep -qx "num-slaves=2" <<<"$kv" || return 1
		grep -qx "num-other-sentinels=2" <<<"$kv" || return 1
		# Every replica known to this sentinel must be up and linked.
		local reps
		reps=$(skv "$s" sentinel replicas "$MASTER_NAME") || return 1
		[[ $(grep -cx 'flags=slave' <<<"$reps") == 2 ]] || return 1
		[[ $(grep -cx 'master-link-status=ok' <<<"$reps") == 2 ]] || return 1
		rcli "$s" sentinel ckquorum "$MASTER_NAME" | grep -q '^OK' || return 1
	done
	return 0
}

cmd_start() {
	local dir=$1 i d mport rports=() sports=()
	need_bins "$REDIS_SERVER" "$REDIS_SENTINEL" "$REDIS_CLI" timeout paste
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ -e $dir/nodes ]] && die "$dir/nodes exists: stop the old setup first"
	trap 'rc=$?; if ((rc != 0)); then stop_pids "$dir"; fi' EXIT
	: >"$dir/nodes.tmp"
	d=$dir/master
	mkdir -p "$d"
	start_proc "$d" master || die "master did not start (see $d/redis.log)"
	mport=$port
	echo "$port $pid master" >>"$dir/nodes.tmp"
	# The address everyone else is told to use for the master.
	local via=${SENTINEL_MASTER_VIA:-$mport}
	for i in 1 2; do
		d=$dir/replica-$i
		mkdir -p "$d"
		start_proc "$d" replica "$via" || die "replica $i did not start (see $d/redis.log)"
		rports+=("$port")
		echo "$port $pid replica" >>"$dir/nodes.tmp"
	done
	for i in 1 2 3; do
		d=$dir/sentinel-$i
		mkdir -p "$d"
		start_proc "$d" sentinel "$via" || die "sentinel $i did not start (see $d/redis.log)"
		sports+=("$port")
		echo "$port $pid sentinel" >>"$dir/nodes.tmp"
	done
	# Sentinels find each other through hello messages every 2 s; replicas are
	# discovered through INFO every 10 s at first, so allow up to 60 s.
	local deadline=$((SECONDS + 60))
	while ((SECONDS < deadline)); do
		setup_ready "$mport" "$via" "${rports[*]}" "${sports[*]}" && break
		sleep 0.1
	done
	if ! setup_ready "$mport" "$via" "${rports[*]}" "${sports[*]}"; then
		for i in "${sports[@]}"; do
			skv "$i" sentinel master "$MASTER_NAME" >&2 || true
		done
		die "sentinel setup not ready after 60 s"
	fi
	mv "$dir/nodes.tmp" "$dir/nodes"
	cat "$dir/nodes"
}

cmd_stop() {
	local dir=$1
	[[ -d $dir ]] || return 0
	stop_pids "$dir"
	rm -rf "$dir"/master "$dir"/replica-* "$dir"/sentinel-* "$dir/nodes" "$dir/nodes.tmp"
}

case "${1:-}" in
start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; cmd_start "$2" ;;
stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
*) die "usage: $0 start|stop DIR" ;;
esac
