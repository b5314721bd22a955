#!/usr/bin/env bats
# The Redis Cluster client (src/cluster.c) end to end, against a real
# cluster of 3 masters with a replica each, through tests/unit/cluster_probe
# (built here if $CLUSTER_PROBE is not set).  The tests share one cluster
# and run in order: a manual failover, then the slot migrations, then the
# failover that kills a master.

load helpers
load redis-helpers

# Build the probe and start the cluster, once for the file.
setup_file() {
	local top="$E2E_DIR/../.." bld

	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	if [ -z "${CLUSTER_PROBE:-}" ]; then
		bld="$(dirname "$MHFILTER")"
		CLUSTER_PROBE="$BATS_FILE_TMPDIR/cluster_probe"
		${CC:-cc} -std=c11 -D_GNU_SOURCE -I "$bld" -I "$top" \
		    -I "$top/src" $(pkg-config --cflags hiredis) \
		    -o "$CLUSTER_PROBE" "$top/tests/unit/cluster_probe.c" \
		    "$top/src/cluster.c" "$top/src/xmalloc.c" \
		    "$top/src/log.c" "$top/src/util.c" \
		    $(pkg-config --libs hiredis) -lm ||
		    skip "cannot build cluster_probe"
	fi
	export CLUSTER_PROBE
	RDIR="$BATS_FILE_TMPDIR/redis"
	export RDIR
	redis_cluster_start "$RDIR" 3 1
}

teardown_file() {
	redis_stop_all "$RDIR"
}

# A test may start servers of its own under $T/redis: stop them too.
eval "$(declare -f teardown | sed '1s/teardown/helpers_teardown/')"
teardown() {
	redis_stop_all "$T/redis"
	helpers_teardown
}

# Run the probe against the cluster, bounded; output in $T/pout, $T/perr.
probe() {
	status=0
	timeout 120 "$CLUSTER_PROBE" "$@" >"$T/pout" 2>"$T/perr" || status=$?
}

# The same in the background; its pid goes to $PPID_PROBE.
probe_bg() {
	"$CLUSTER_PROBE" "$@" >"$T/pout" 2>"$T/perr" &
	PPID_PROBE=$!
	BG_PIDS+=("$PPID_PROBE")
}

# Wait (60 s) for file $1, failing if the probe ends first.
wait_file() {
	local i

	for i in $(seq 1200); do
		[ -e "$1" ] && return 0
		kill -0 "$PPID_PROBE" 2>/dev/null ||
		    { fail "the probe ended:" "$(cat "$T/perr")"; return 1; }
		sleep 0.05
	done
	fail "no $1 after 60 s"
}

# The ports of the live masters as the cluster has them now, not as
# $REDIS_CLUSTER had them at the start: under load a node that misses its
# pings for the node timeout (1 s) is failed over, and the master it was
# is a replica when it comes back.
masters_now() {
	redis_cli_any cluster nodes |
	    awk '$3 ~ /master/ && $3 !~ /fail/ {
		sub(/@.*/, "", $2); sub(/.*:/, "", $2); print $2 }' | sort
}

# The port of a live master other than port $1.
other_master() {
	masters_now | grep -vx "$1" | head -n 1
}

# Start moving slot $1 from the master on port $2 to the one on port $3
# (IMPORTING, MIGRATING), and migrate its first $4 keys.
migrate_start() {
	local srcid dstid keys

	srcid="$(redis-cli -p "$2" cluster myid)"
	dstid="$(redis-cli -p "$3" cluster myid)"
	[ "$(redis-cli -p "$3" cluster setslot "$1" importing "$srcid")" = OK ]
	[ "$(redis-cli -p "$2" cluster setslot "$1" migrating "$dstid")" = OK ]
	migrate_keys "$@"
}

# Migrate the first $4 keys left in slot $1 from port $2 to port $3.
migrate_keys() {
	local keys

	mapfile -t keys < <(redis-cli -p "$2" cluster getkeysinslot "$1" "$4" |
	    sed '/^$/d')
	[ "${#keys[@]}" -gt 0 ] || return 0
	[ "$(redis-cli -p "$2" migrate 127.0.0.1 "$3" "" 0 5000 \
	    keys "${keys[@]}")" = OK ]
}

# Finish moving slot $1 to the master on port $3: the rest of its keys,
# then every master is told the new owner (the destination first, then
# the source, as redis-cli --cluster does).  A refusal names the node, its
# reply and the cluster as its nodes see it.
migrate_finish() {
	local dstid p r

	migrate_keys "$1" "$2" "$3" 100000
	dstid="$(redis-cli -p "$3" cluster myid)"
	for p in "$3" "$2" $(masters_now | grep -vx -e "$2" -e "$3"); do
		r="$(redis-cli -p "$p" cluster setslot "$1" node "$dstid" 2>&1)"
		[ "$r" = OK ] || {
			fail "CLUSTER SETSLOT $1 NODE on port $p: $r" \
			    "$(redis_cli_any cluster nodes)"
			return 1
		}
	done
}

@test "key_slot agrees with CLUSTER KEYSLOT" {
	local k

	for k in foo bar 123456789 '{user1000}.following' 'foo{}{bar}' \
	    'foo{{bar}}zap' 'foo{bar}{zap}' '{}' '}{x}' 'x{}y{z}' \
	    'mhf:b:0123456789abcdef' 'a{b}c' '{'; do
		probe "$REDIS_CLUSTER" "slot:$k"
		[ "$status" -eq 0 ]
		[ "$(cat "$T/pout")" = "$(redis-cli -p "${REDIS_CLUSTER##*:}" \
		    cluster keyslot "$k")" ] || fail "key_slot($k) differs"
	done
}

@test "a key in every slot: SET and GET right, one round trip per master and batch" {
	probe "$REDIS_CLUSTER" allslots:s set:20000:k get:20000:k info
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -qx 'slots=16384' "$T/pout"
	# 4 batches, 3 masters, no redirection.
	grep -qx 'cluster=1 masters=3 roundtrips=12' "$T/pout" ||
	    fail "$(cat "$T/pout")"
}

@test "keyless commands go to every master: FLUSHALL, DBSIZE" {
	probe "$REDIS_CLUSTER" set:1000:d flush dbsize set:777:d dbsize
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	[ "$(sed -n 's/^dbsize=//p' "$T/pout" | paste -sd' ')" = "0 777" ]
}

@test "WRONGTYPE is a final reply, not retried" {
	probe "$REDIS_CLUSTER" wrongtype:wt info
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -qx 'cluster=1 masters=3 roundtrips=1' "$T/pout"
}

@test "a manual failover: the seed list's old master is a replica, the client follows the new map" {
	local m rep i

	# The last master of the seed list hands over to its replica, so the
	# tests after this one run, as they would on a loaded machine after
	# a failover, with a seed list that names a replica.
	m="$(masters_now | tail -n 1)"
	rep="$(redis-cli -p "$m" info replication | tr -d '\r' |
	    sed -n 's/^slave0:ip=[^,]*,port=\([0-9]*\).*/\1/p')"
	[ -n "$rep" ] || fail "no replica of the master on port $m"
	[ "$(redis-cli -p "$rep" cluster failover)" = OK ]
	for i in $(seq 300); do
		redis-cli -p "$m" role | head -n 1 | grep -qx slave && break
		sleep 0.1
	done
	redis-cli -p "$m" role | head -n 1 | grep -qx slave ||
	    fail "port $m is still a master after 30 s"
	redis_wait_ok
	redis_wait_synced	# the old master, now a replica, has its data
	masters_now | grep -qx "$rep" || fail "port $rep is not a master"
	echo "$REDIS_CLUSTER" | grep -q ":$m\(,\|\$\)"
	probe "$REDIS_CLUSTER" 'set:1000:{fo}' 'get:1000:{fo}' set:1000:fo \
	    get:1000:fo
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	[ "$(redis-cli -c -p "$m" get '{fo}:999')" = 'v:{fo}:999' ]
}

@test "a slot moved under a running client: MOVED is followed, the map read again" {
	local slot src dst

	slot="$("$CLUSTER_PROBE" "$REDIS_CLUSTER" slot:mv)"
	src="$(redis_master_of_slot "$slot")"
	dst="$(other_master "$src")"
	probe_bg -v "$REDIS_CLUSTER" 'set:200:{mv}' "touch:$T/ready" \
	    "waitfile:$T/go" 'get:200:{mv}' 'set:50:{mv}b' 'get:50:{mv}b' info
	wait_file "$T/ready"
	migrate_start "$slot" "$src" "$dst" 100000
	migrate_finish "$slot" "$src" "$dst"
	touch "$T/go"
	wait_exit "$PPID_PROBE" 60
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -q "MOVED $slot to 127.0.0.1:$dst" "$T/perr" ||
	    fail "no MOVED:" "$(cat "$T/perr")"
	[ "$(redis_master_of_slot "$slot")" = "$dst" ]
	[ "$(redis-cli -p "$dst" get '{mv}b:49')" = 'v:{mv}b:49' ]
	# One slot, one node a batch: 4 batches, one of them sent twice (to
	# the old owner, then the new).  The map is right after one MOVED.
	grep -qx 'cluster=1 masters=3 roundtrips=5' "$T/pout" ||
	    fail "$(cat "$T/pout")"
	[ "$(grep -c "MOVED $slot" "$T/perr")" -eq 1 ]
}

@test "a slot being migrated: ASK is followed with ASKING, then MOVED when done" {
	local slot src dst

	slot="$("$CLUSTER_PROBE" "$REDIS_CLUSTER" slot:ask)"
	src="$(redis_master_of_slot "$slot")"
	dst="$(other_master "$src")"
	probe_bg -v "$REDIS_CLUSTER" 'set:200:{ask}' "touch:$T/ready" \
	    "waitfile:$T/go" 'get:200:{ask}' 'set:50:{ask}n' 'get:50:{ask}n' \
	    "touch:$T/ready2" "waitfile:$T/go2" 'get:200:{ask}' \
	    'get:50:{ask}n' info
	wait_file "$T/ready"
	migrate_start "$slot" "$src" "$dst" 100
	touch "$T/go"
	wait_file "$T/ready2"
	# The new keys went to the importing node (which answers them only
	# after ASKING).
	[ "$(printf 'ASKING\nGET {ask}n:7\n' | redis-cli -p "$dst" |
	    tail -n 1)" = 'v:{ask}n:7' ]
	migrate_finish "$slot" "$src" "$dst"
	touch "$T/go2"
	wait_exit "$PPID_PROBE" 60
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -q "ASK $slot at 127.0.0.1:$dst" "$T/perr" ||
	    fail "no ASK:" "$(cat "$T/perr")"
	grep -q "MOVED $slot to 127.0.0.1:$dst" "$T/perr" ||
	    fail "no MOVED:" "$(cat "$T/perr")"
}

@test "a master killed mid-run: its replica takes over, every batch succeeds (WAIT 1)" {
	local victim rounds

	probe_bg -t 30 -w 1 "$REDIS_CLUSTER" "touch:$T/ready" loop:10:500:fo \
	    info
	wait_file "$T/ready"
	sleep 2
	victim="$(redis_master_of_slot 0)"
	redis_kill_port "$victim"
	wait_exit "$PPID_PROBE" 90
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -q "redis 127.0.0.1:$victim: .*; retrying" "$T/perr" ||
	    fail "no warning:" "$(cat "$T/perr")"
	rounds="$(sed -n 's/^rounds=//p' "$T/pout")"
	[ "$rounds" -gt 2 ]
	redis_wait_ok
	[ "$(redis_master_of_slot 0)" != "$victim" ]
	# A new client starts from the new map.
	probe "$REDIS_CLUSTER" set:1000:after get:1000:after
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
}

@test "a single Redis owns every slot" {
	local cluster="$REDIS_CLUSTER"

	redis_single_start "$T/redis"
	probe "$REDIS_SINGLE" allslots:s flush set:100:k dbsize info
	[ "$status" -eq 0 ] || fail "$(cat "$T/perr")"
	grep -qx 'dbsize=100' "$T/pout"
	grep -qx 'cluster=0 masters=1 roundtrips=5' "$T/pout" ||
	    fail "$(cat "$T/pout")"
	# The cluster's variables are untouched.
	[ "$REDIS_CLUSTER" = "$cluster" ]
}

@test "no server: cluster_connect gives up after the timeout, naming the cause" {
	local port

	port="$(redis_free_ports 1)"
	probe -t 0.5 "127.0.0.1:$port" info
	[ "$status" -eq 1 ]
	grep -q "redis 127.0.0.1:$port: Connection refused (gave up after 0.5 s)" \
	    "$T/perr" || fail "$(cat "$T/perr")"
}

@test "a malformed host list is refused with a clear cause" {
	probe "127.0.0.1:6379,localhost" info
	[ "$status" -eq 1 ]
	grep -qF 'bad Redis address "localhost" in "127.0.0.1:6379,localhost": no :port' \
	    "$T/perr" || fail "$(cat "$T/perr")"
}
