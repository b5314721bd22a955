# Redis servers for the tests of the Redis index backend: a .bats file
# does "load redis-helpers" (after "load helpers" if it uses those too).
#
# Every server started here has its own directory under the DIR the test
# gives (DIR/PORT: data, log, pid file, nodes.conf) and binds 127.0.0.1
# only.  redis_stop_all DIR, called from teardown (or teardown_file),
# kills every one of them whatever happened to the test.  Every wait is
# bounded.  Servers daemonize themselves (closing the descriptors bats
# watches), so nothing is left holding a test's output.

# fail() comes from helpers.bash; a file that loads only this one gets
# the same.
type fail >/dev/null 2>&1 || fail() {
	printf '%s\n' "$@" >&2
	return 1
}

# Set by the start functions and exported, so that they survive from
# setup_file into the tests (which load this file again).
: "${REDIS_DIR:=}" "${REDIS_SINGLE:=}" "${REDIS_CLUSTER:=}"
: "${REDIS_CLUSTER_PORTS:=}"

# Whether redis-server and redis-cli are installed; tests skip otherwise:
#	redis_have || skip "redis-server and redis-cli are not installed"
redis_have() {
	command -v redis-server >/dev/null 2>&1 &&
	    command -v redis-cli >/dev/null 2>&1 &&
	    command -v python3 >/dev/null 2>&1
}

# Print $1 distinct free TCP ports on 127.0.0.1.  With $2 = 1, port+10000
# (the cluster bus) must be free too: ports are drawn from 15000-21999 so
# that both stay below the ephemeral range.  Each is held bound until all
# are found, then released for the server to take.
redis_free_ports() {
	python3 - "$1" "${2:-0}" <<'EOF'
import random, socket, sys
n, bus = int(sys.argv[1]), sys.argv[2] == '1'
held, ports = [], []
def grab(p):
    s = socket.socket()
    try:
        s.bind(('127.0.0.1', p))
    except OSError:
        s.close()
        return False
    held.append(s)
    return True
for _ in range(10000):
    if len(ports) == n:
        break
    p = random.randrange(15000, 22000)
    if p not in ports and grab(p) and (not bus or grab(p + 10000)):
        ports.append(p)
if len(ports) < n:
    sys.exit('no free ports')
print(' '.join(map(str, ports)))
EOF
}

# The pid of the server on port $1 started under $REDIS_DIR, if running.
redis_pid() {
	local pid

	pid="$(cat "$REDIS_DIR/$1/redis.pid" 2>/dev/null)" || return 1
	[ -n "$pid" ] && redis_alive "$pid" || return 1
	echo "$pid"
}

# Start one redis-server on port $2 with data in $1/$2 and the extra
# options that follow; wait (10 s) until it answers PING.
redis_start_port() {
	local dir="$1" port="$2" i
	shift 2

	mkdir -p "$dir/$port" || return 1
	redis-server --port "$port" --bind 127.0.0.1 --save '' \
	    --appendonly no --daemonize yes --dir "$dir/$port" \
	    --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" \
	    "$@" >/dev/null 2>&1 || {
		fail "redis-server on port $port did not start" \
		    "$(cat "$dir/$port/redis.log" 2>/dev/null)"
		return 1
	}
	for i in $(seq 200); do
		if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] &&
		    [ -s "$dir/$port/redis.pid" ]; then
			return 0
		fi
		sleep 0.05
	done
	fail "redis-server on port $port does not answer" \
	    "$(cat "$dir/$port/redis.log" 2>/dev/null)"
	return 1
}

# Start one Redis (no cluster) on a free port with data in $1 and the
# redis-server options that follow; set and export
# REDIS_SINGLE="127.0.0.1:PORT".
redis_single_start() {
	local port

	REDIS_DIR="$1"
	export REDIS_DIR
	port="$(redis_free_ports 1)" || return 1
	redis_start_port "$1" "$port" "${@:2}" || return 1
	REDIS_SINGLE="127.0.0.1:$port"
	export REDIS_SINGLE
}

# Start a cluster of $2 masters with $3 replicas each, data in $1, and
# the redis-server options that follow (such as --requirepass, with
# REDISCLI_AUTH exported for redis-cli); wait (30 s) until every node
# sees all slots served.  Exports REDIS_CLUSTER, the masters' addresses
# as a seed list "127.0.0.1:P1,127.0.0.1:P2,...", and
# REDIS_CLUSTER_PORTS, every node's port.
redis_cluster_start() {
	local dir="$1" masters="$2" replicas="$3" ports p addrs=()

	shift 3

	REDIS_DIR="$dir"
	export REDIS_DIR
	ports="$(redis_free_ports $((masters * (1 + replicas))) 1)" || return 1
	REDIS_CLUSTER_PORTS="$ports"
	export REDIS_CLUSTER_PORTS
	for p in $ports; do
		redis_start_port "$dir" "$p" --cluster-enabled yes \
		    --cluster-config-file "nodes-$p.conf" \
		    --cluster-node-timeout 1000 \
		    --cluster-replica-validity-factor 0 \
		    --repl-diskless-sync-delay 0 "$@" || return 1
		addrs+=("127.0.0.1:$p")
	done
	timeout 60 redis-cli --cluster create "${addrs[@]}" \
	    --cluster-replicas "$replicas" --cluster-yes \
	    >"$dir/create.log" 2>&1 || {
		fail "redis-cli --cluster create failed" \
		    "$(cat "$dir/create.log")"
		return 1
	}
	redis_wait_ok || return 1
	redis_wait_synced || return 1
	REDIS_CLUSTER="$(redis_cli_any cluster nodes |
	    awk '$3 ~ /master/ && $3 !~ /fail/ {
		sub(/@.*/, "", $2); print $2 }' |
	    sort | paste -sd, -)"
	export REDIS_CLUSTER
	[ -n "$REDIS_CLUSTER" ] || fail "no masters in the new cluster"
}

# Run redis-cli with arguments "$@" against the first live cluster node.
redis_cli_any() {
	local p

	for p in $REDIS_CLUSTER_PORTS; do
		redis_pid "$p" >/dev/null || continue
		timeout 10 redis-cli -p "$p" "$@" && return 0
	done
	return 1
}

# Print the port of the master serving slot $1 (from CLUSTER NODES as a
# live node sees it).
redis_master_of_slot() {
	redis_cli_any cluster nodes | awk -v slot="$1" '
	    $3 ~ /master/ && $3 !~ /fail/ {
		for (i = 9; i <= NF; i++) {
			if ($i ~ /^\[/)
				continue;
			n = split($i, r, "-");
			lo = r[1]; hi = n > 1 ? r[2] : r[1];
			if (slot + 0 >= lo + 0 && slot + 0 <= hi + 0) {
				sub(/@.*/, "", $2); sub(/.*:/, "", $2);
				print $2; exit;
			}
		}
	    }'
}

# Kill (SIGKILL) the server on port $1 and wait (10 s) until it is gone.
redis_kill_port() {
	local pid i

	pid="$(redis_pid "$1")" || {
		fail "no redis-server of ours on port $1"
		return 1
	}
	kill -9 "$pid"
	for i in $(seq 200); do
		redis_alive "$pid" || return 0
		sleep 0.05
	done
	fail "redis-server $pid (port $1) did not die"
	return 1
}

# Wait (30 s) until, for every live node, function $1 accepts what
# redis-cli prints for the command in $3...; $2 says what was awaited.
redis_until() {
	local test="$1" what="$2" i p info ok

	shift 2
	for i in $(seq 300); do
		ok=1
		for p in $REDIS_CLUSTER_PORTS; do
			redis_pid "$p" >/dev/null || continue
			info="$(timeout 5 redis-cli -p "$p" "$@" 2>/dev/null |
			    tr -d '\r')"
			"$test" "$info" || { ok=0; break; }
		done
		[ "$ok" -eq 1 ] && return 0
		sleep 0.1
	done
	fail "$what after 30 s" "$(redis_cli_any cluster nodes 2>&1)"
	return 1
}

# CLUSTER INFO of a node that is ok: every slot assigned and served.
redis_info_ok() {
	case "$1" in *cluster_state:ok*) ;; *) return 1 ;; esac
	case "$1" in *cluster_slots_assigned:16384*) ;; *) return 1 ;; esac
	case "$1" in *cluster_slots_ok:16384*) ;; *) return 1 ;; esac
}

# INFO replication of a master, or of a replica done with its first sync.
redis_info_synced() {
	case "$1" in
	*role:master*|*master_link_status:up*) return 0 ;;
	*) return 1 ;;
	esac
}

# Wait (30 s) until every live cluster node reports cluster_state:ok with
# all 16384 slots assigned and served by masters not failing, as after a
# failover has completed.
redis_wait_ok() {
	redis_until redis_info_ok "the cluster is not ok" cluster info
}

# Wait (30 s) until every live replica has finished its first sync
# (master_link_status:up).  Until then CLUSTER SLOTS does not list it and
# a failover would promote an empty node.
redis_wait_synced() {
	redis_until redis_info_synced "replicas not in sync" info replication
}

# Kill every redis-server started under $1: those of its pid files, and
# any other whose working directory is under $1 (started but not yet
# recorded).  Waits (10 s) until they are gone.
redis_stop_all() {
	local dir="$1" pids=() f pid p i alive

	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	dir="$(cd "$dir" && pwd -P)"
	for f in "$dir"/*/redis.pid; do
		[ -f "$f" ] || continue
		pid="$(cat "$f" 2>/dev/null)"
		[ -n "$pid" ] && pids+=("$pid")
	done
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = redis-server ] || continue
		case "$(readlink "$p/cwd" 2>/dev/null)" in
		"$dir"/*) pids+=("${p#/proc/}") ;;
		esac
	done
	for pid in "${pids[@]}"; do
		redis_alive "$pid" && kill -9 "$pid" 2>/dev/null
	done
	for i in $(seq 200); do
		alive=0
		for pid in "${pids[@]}"; do
			redis_alive "$pid" && alive=1
		done
		[ "$alive" -eq 0 ] && return 0
		sleep 0.05
	done
	fail "redis-server still running after SIGKILL: ${pids[*]}"
	return 1
}

# Whether process $1 is a redis-server that has not ended (a zombie, left
# where nothing reaps orphans, counts as ended).
redis_alive() {
	local stat

	[ "$(cat "/proc/$1/comm" 2>/dev/null)" = redis-server ] || return 1
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[ "${stat%% *}" != Z ]
}
