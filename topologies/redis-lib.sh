# shellcheck shell=bash
# Helpers shared by redis-cluster.sh and redis-sentinel.sh. Sourced, not run.
#
# Everything listens on 127.0.0.1 only. Ports are picked at run time from a
# range below the kernel's ephemeral range (so they do not collide with
# outgoing connections or with servers that bind port 0), and a process that
# fails to bind is restarted on other ports.

REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_SENTINEL=${REDIS_SENTINEL:-redis-sentinel}
REDIS_CLI=${REDIS_CLI:-redis-cli}
PORT_MIN=${REDIS_PORT_MIN:-20000}
PORT_MAX=${REDIS_PORT_MAX:-31999}

declare -A _taken_ports=()

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

need_bins() {
	local b
	for b in "$@"; do
		command -v "$b" >/dev/null 2>&1 || die "missing binary: $b (apt-get install redis-server redis-sentinel redis-tools)"
	done
}

# port_free PORT: nothing accepts connections on 127.0.0.1:PORT (bash's
# /dev/tcp, so no extra tool is needed; a refused connect returns at once).
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port: print a port that is free now and not handed out before by this script run.
pick_port() {
	local i p
	for ((i = 0; i < 200; i++)); do
		p=$((PORT_MIN + RANDOM % (PORT_MAX - PORT_MIN + 1)))
		[[ -n ${_taken_ports[$p]:-} ]] && continue
		if port_free "$p"; then
			_taken_ports[$p]=1
			echo "$p"
			return 0
		fi
	done
	die "no free port found in $PORT_MIN..$PORT_MAX"
}

# rcli PORT ARGS...: redis-cli against 127.0.0.1:PORT, bounded to 5 s.
rcli() {
	local port=$1
	shift
	timeout 5 "$REDIS_CLI" -h 127.0.0.1 -p "$port" "$@" 2>/dev/null
}

# field PORT SECTION NAME: the value of NAME in INFO SECTION (or CLUSTER INFO when SECTION=cluster-info).
field() {
	local out
	if [[ $2 == cluster-info ]]; then
		out=$(rcli "$1" cluster info) || return 1
	else
		out=$(rcli "$1" info "$2") || return 1
	fi
	printf '%s\n' "$out" | tr -d '\r' | awk -F: -v k="$3" '$1 == k { print $2; found = 1 } END { exit !found }'
}

# is_our_pid PID PORT: PID is alive and is a redis (or valkey, or
# $REDIS_SERVER) process serving PORT (guards against pid reuse).
is_our_pid() {
	local pid=$1 port=$2 cmd
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ ($cmd == *redis* || $cmd == *valkey* || $cmd == *"$(basename "$REDIS_SERVER")"*) && $cmd == *":$port"* ]]
}

# launch BIN CONF PORT LOG: start BIN CONF in the background, wait until it
# answers PING. Prints the pid. Returns 2 when the port was taken (caller picks
# another), 1 on any other failure.
launch() {
	local bin=$1 conf=$2 port=$3 log=$4 pid i
	: >"$log"
	"$bin" "$conf" >>"$log.stdout" 2>&1 </dev/null &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			if grep -qiE 'address already in use|could not create server tcp listening socket' "$log" "$log.stdout" 2>/dev/null; then
				return 2
			fi
			echo "--- $log" >&2
			tail -n 20 "$log" "$log.stdout" >&2 2>/dev/null
			return 1
		fi
		if [[ $(rcli "$port" ping) == PONG ]]; then
			echo "$pid"
			return 0
		fi
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null
	echo "--- $log: no PONG after 5 s" >&2
	tail -n 20 "$log" >&2 2>/dev/null
	return 1
}

# common_conf DIR PORT: the lines every process's redis.conf starts with.
common_conf() {
	cat <<EOF
port $2
bind 127.0.0.1
protected-mode no
daemonize no
dir $1
logfile $1/redis.log
pidfile $1/redis.pid
EOF
}

# start_on_free_port NODEDIR BIN CONFFN [ARGS...]: picks a free port, has
# "CONFFN NODEDIR PORT ARGS..." write NODEDIR/redis.conf, starts BIN on it,
# and starts again on other ports (5 tries) when a port was taken in the
# meantime. Sets the globals port and pid; writes NODEDIR/pid and NODEDIR/port.
start_on_free_port() {
	local d=$1 bin=$2 conf=$3 try rc
	shift 3
	for ((try = 0; try < 5; try++)); do
		port=$(pick_port)
		"$conf" "$d" "$port" "$@"
		rc=0
		pid=$(launch "$bin" "$d/redis.conf" "$port" "$d/redis.log") || rc=$?
		if ((rc == 0)); then
			echo "$pid" >"$d/pid"
			echo "$port" >"$d/port"
			return 0
		fi
		((rc == 2)) || return 1
	done
	return 1
}

# stop_pids DIR: stop every process listed in DIR/*/pid (SIGTERM, then SIGKILL
# after 3 s), each only if it is still the redis process we started.
stop_pids() {
	local dir=$1 f pid port i alive=()
	for f in "$dir"/*/pid; do
		[[ -f $f ]] || continue
		pid=$(<"$f")
		port=$(<"${f%/pid}/port")
		if is_our_pid "$pid" "$port"; then
			kill -TERM "$pid" 2>/dev/null && alive+=("$pid:$port")
		fi
	done
	for ((i = 0; i < 60 && ${#alive[@]} > 0; i++)); do
		local still=() e
		for e in "${alive[@]}"; do
			is_our_pid "${e%%:*}" "${e##*:}" && still+=("$e")
		done
		alive=("${still[@]}")
		((${#alive[@]} > 0)) && sleep 0.05
	done
	local e
	for e in "${alive[@]}"; do
		kill -KILL "${e%%:*}" 2>/dev/null
	done
	return 0
}
