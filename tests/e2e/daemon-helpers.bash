# Shared set-up for the daemon-mode tests (daemon*.bats), loaded after
# helpers.  Clients are tests/e2e/client.py (python3): no socat or nc is
# needed.  Nothing here waits a fixed time for the daemon: readiness is
# polled for in its log, and every wait is bounded.

CLIENT="$E2E_DIR/client.py"

# Start mhfilter with the given options in the background, stdout to
# $T/dout and stderr appended to $T/derr, and wait until it logs that it
# is ready (one "ready:" line more than the log held before).  Its pid
# goes to $DPID.
start_daemon() {
	local n

	n="$(grep -c 'ready:' "$T/derr" 2>/dev/null)" || n=0
	"$MHFILTER" "$@" >"$T/dout" 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "ready:" 20 $((n + 1))
}

# Wait up to $2 seconds (default 20) for the daemon's log to hold the
# fixed string $1 at least $3 times (default 1); fail if the daemon ends
# first.
wait_log() {
	local i=0 limit=$((${2:-20} * 20)) n

	# The log may not exist yet: the daemon's shell opens it after fork.
	while n="$(grep -cF -- "$1" "$T/derr" 2>/dev/null)"
	    [ "${n:-0}" -lt "${3:-1}" ]; do
		if ! kill -0 "$DPID" 2>/dev/null; then
			fail "the daemon ended while waiting for '$1':" \
			    "$(cat "$T/derr")"
			return 1
		fi
		i=$((i + 1))
		if [ "$i" -ge "$limit" ]; then
			fail "timed out waiting for '$1' in the log:" \
			    "$(cat "$T/derr")"
			return 1
		fi
		sleep 0.05
	done
}

# The address of the daemon's first TCP listener, from its log (for
# --listen tcp:127.0.0.1:0, where the system picks the port).
tcp_addr() {
	sed -n 's/.*listening on \(tcp:[^ ]*\).*/\1/p' "$T/derr" | head -n 1
}

# The HOST:PORT of the daemon's HTTP server, from its log.
http_addr() {
	sed -n 's/.*serving HTTP on \([^ ]*\).*/\1/p' "$T/derr" | head -n 1
}

# Send a file (or stdin) to the daemon at address $1 and write the replies
# to stdout (or file $3): client.py send, bounded in time.
dsend() {
	timeout 120 python3 "$CLIENT" send "$@"
}

# One connection to the daemon at $1, its replies into file $2, in the
# steps after them (client.py steps: a file to send, +N replies to wait
# for, or close), bounded in time.
dsteps() {
	timeout 120 python3 "$CLIENT" steps "$@"
}

# Send file $2 to the daemon at unix socket $1 and go away at once,
# without reading a reply; then wait (up to 10 s) until the daemon has
# received $3 records in all.
dleave() {
	local i

	timeout 60 python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(open(sys.argv[2], "rb").read())
s.close()' "${1#unix:}" "$2"
	for i in $(seq 200); do
		[ "$(dstat "$1" records)" -ge "$3" ] && return 0
		sleep 0.05
	done
	fail "the daemon received $(dstat "$1" records) records, not $3"
}

# One statistic from a "stats" reply line on stdin.
stats_of() {
	tr '\t' '\n' | sed -n "s/^$1=//p"
}

# Ask the daemon at $1 for its statistics; print the value of $2.
dstat() {
	printf '#mhfilter stats\n' | dsend "$1" | stats_of "$2"
}

# Wait up to 20 s until the daemon at $1 has delivered $2 records in all:
# its statistics count a batch's verdicts as it delivers the batch, in the
# thread that answers them, so a batch whose client went away has its
# replies given up by then.
wait_delivered() {
	local i s

	for i in $(seq 200); do
		s="$(printf '#mhfilter stats\n' | dsend "$1")"
		[ $(($(printf '%s\n' "$s" | stats_of unique) +
		    $(printf '%s\n' "$s" | stats_of duplicates))) -ge "$2" ] &&
		    return 0
		sleep 0.1
	done
	fail "the daemon delivered fewer than $2 records: $s"
}

# A daemon started on index $1 with line records (ids it makes, another on
# every connection), 300 of them, an identical copy and a near copy, into
# feed: a client sends them and goes away before the replies, then another
# sends them again.  Its replies: the stream's verdicts, every unique one
# a replay; and once answered, all duplicates of themselves.  The daemon
# is left running.
line_replies_lost() {
	gen_tsv 300 12 | cut -f2 >feed
	sed -n 5p feed >>feed
	sed -n 7p feed | sed 's/^[a-z]* /changed /' >>feed
	mhrun -a feed
	assert_status 0
	cut -f1 "$T/out" >kinds
	[ "$(grep -c '^unique$' kinds)" -eq 300 ] ||
	    fail "$(sort kinds | uniq -c)"
	start_daemon -f line -d "$1" --listen "unix:$T/sock"
	dleave "unix:$T/sock" feed 302
	wait_delivered "unix:$T/sock" 302	# (their replies given up)
	dsend "unix:$T/sock" feed >r1
	cut -f1 r1 >kinds1
	assert_same kinds kinds1
	[ "$(grep -c '^unique	.*	replay$' r1)" -eq 300 ] ||
	    fail "$(grep -vc 'replay$' r1) not replays:" \
	    "$(grep -v 'replay$' r1 | head)"
	dsend "unix:$T/sock" feed >r2
	[ "$(grep -c '^duplicate	.*	1\.0000$' r2)" -eq 302 ] ||
	    fail "$(grep -v '1\.0000$' r2 | head)"
}

# Stop the daemon with SIGTERM: it must exit 0 within 30 s.
stop_daemon() {
	kill -TERM "$DPID"
	wait_exit "$DPID" 30 || return 1
	[ "$status" -eq 0 ] ||
	    fail "daemon exit status $status, expected 0" "$(cat "$T/derr")"
}

# The resident memory of process $1, in kilobytes.
rss_kb() {
	sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"
}
