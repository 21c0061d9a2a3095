#!/usr/bin/env bash
# Start or stop a real 6-node Redis Cluster (3 masters + 3 replicas) on loopback.
#
#   topologies/redis-cluster.sh start DIR   # prints DIR/nodes when ready
#   topologies/redis-cluster.sh stop DIR    # kills the nodes (pidfiles) and removes their files
#
# DIR/nodes has one line per node: "port pid role busport" (role at start:
# master or replica). Ports are free ones picked at run time from
# REDIS_PORT_MIN..REDIS_PORT_MAX (default 20000..31999). Environment:
#   CLUSTER_NODE_TIMEOUT  cluster-node-timeout in ms (default 1000)
#   REDIS_SERVER / REDIS_CLI  binaries (default from PATH)
# "start" returns only when every node reports cluster_state:ok, all 16384
# slots are assigned, every node knows all 6 nodes, each master has exactly
# one replica and every replica has master_link_status:up (a replica that has
# not finished its first sync would refuse to take over).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=redis-lib.sh
. "$here/redis-lib.sh"

NODES=6
NODE_TIMEOUT=${CLUSTER_NODE_TIMEOUT:-1000}

# Redis 6.2 has no cluster-port: its bus listens on the port + 10000.
if "$REDIS_SERVER" --version | grep -q ' v=6\.'; then
	fixed_bus=1
else
	fixed_bus=
fi

write_conf() { # DIR PORT -> sets global busport (the cluster bus port)
	if [ -n "$fixed_bus" ]; then
		busport=$(($2 + 10000))
	else
		busport=$(pick_port)
	fi
	{
		common_conf "$1" "$2"
		[ -n "$fixed_bus" ] || echo "cluster-port $busport"
		cat <<EOF
cluster-enabled yes
cluster-config-file $1/nodes.conf
cluster-node-timeout $NODE_TIMEOUT
cluster-replica-validity-factor 0
save ""
appendonly no
repl-diskless-sync yes
repl-diskless-sync-delay 0
repl-diskless-load disabled
EOF
	} >"$1/redis.conf"
}

start_node() { # NODEDIR -> sets globals port busport pid
	start_on_free_port "$1" "$REDIS_SERVER" write_conf
}

cluster_ready() { # PORTS...
	local p masters=0 role
	for p in "$@"; do
		[[ $(field "$p" cluster-info cluster_state) == ok ]] || return 1
		[[ $(field "$p" cluster-info cluster_slots_ok) == 16384 ]] || return 1
		[[ $(field "$p" cluster-info cluster_known_nodes) == "$NODES" ]] || return 1
		role=$(field "$p" replication role) || return 1
		if [[ $role == slave ]]; then
			[[ $(field "$p" replication master_link_status) == up ]] || return 1
			[[ $(field "$p" replication master_sync_in_progress) == 0 ]] || return 1
		else
			[[ $(field "$p" replication connected_slaves) == 1 ]] || return 1
			masters=$((masters + 1))
		fi
	done
	((masters == NODES / 2))
}

cmd_start() {
	local dir=$1 i ports=() addrs=() d
	need_bins "$REDIS_SERVER" "$REDIS_CLI" timeout
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ -e $dir/nodes ]] && die "$dir/nodes exists: stop the old cluster first"
	trap 'rc=$?; if ((rc != 0)); then stop_pids "$dir"; fi' EXIT
	for ((i = 0; i < NODES; i++)); do
		d=$dir/node-$i
		mkdir -p "$d"
		start_node "$d" || die "node $i did not start (see $d/redis.log)"
		ports+=("$port")
		addrs+=("127.0.0.1:$port")
		echo "$busport" >"$d/busport"
	done
	if ! timeout 60 "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
		cat "$dir/create.log" >&2
		die "redis-cli --cluster create failed"
	fi
	# Bounded wait: 60 s at most (usually 1-3 s).
	local deadline=$((SECONDS + 60))
	while ((SECONDS < deadline)); do
		cluster_ready "${ports[@]}" && break
		sleep 0.1
	done
	if ! cluster_ready "${ports[@]}"; then
		rcli "${ports[0]}" cluster nodes >&2 || true
		die "cluster not ready after 60 s"
	fi
	: >"$dir/nodes.tmp"
	for ((i = 0; i < NODES; i++)); do
		d=$dir/node-$i
		local role
		role=$(field "${ports[$i]}" replication role)
		[[ $role == slave ]] && role=replica
		echo "${ports[$i]} $(<"$d/pid") $role $(<"$d/busport")" >>"$dir/nodes.tmp"
	done
	mv "$dir/nodes.tmp" "$dir/nodes"
	cat "$dir/nodes"
}

cmd_stop() {
	local dir=$1
	[[ -d $dir ]] || return 0
	stop_pids "$dir"
	rm -rf "$dir"/node-* "$dir/nodes" "$dir/nodes.tmp" "$dir/create.log"
}

case "${1:-}" in
start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; cmd_start "$2" ;;
stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
*) die "usage: $0 start|stop DIR" ;;
esac
