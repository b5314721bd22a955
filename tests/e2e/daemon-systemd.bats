#!/usr/bin/env bats
# Daemon mode under systemd: sd_notify messages (caught by a test listener
# on $NOTIFY_SOCKET), socket activation ($LISTEN_FDS, with
# systemd-socket-activate when installed), and the unit files in contrib/.

load helpers
load daemon-helpers

# Start a notification listener on $1 (a path, or @name), writing what it
# receives to $T/notes, and wait until it listens.
start_listener() {
	timeout 120 python3 "$CLIENT" notify "$1" "$T/notes" &
	BG_PIDS+=($!)
	wait_lines "$T/notes" 20 2
}

# Wait up to 20 s for $T/notes to have the line $1.
wait_note() {
	local i

	for i in $(seq 400); do
		grep -qx -- "$1" "$T/notes" && return 0
		sleep 0.05
	done
	fail "no '$1' notification; got:" "$(cat "$T/notes")"
}

@test "sd_notify: READY=1 and STATUS when listening, STOPPING=1 on SIGTERM" {
	start_listener "$T/notify"
	export NOTIFY_SOCKET="$T/notify"
	start_daemon --listen "unix:$T/sock"
	unset NOTIFY_SOCKET
	wait_note READY=1
	grep -q '^STATUS=ready' "$T/notes"
	# READY=1 comes once the sockets accept connections.
	printf 'x\n' | dsend "unix:$T/sock" | grep -q '^unique'
	! grep -qx STOPPING=1 "$T/notes" || fail "STOPPING=1 before the stop"
	stop_daemon
	wait_note STOPPING=1
	grep -q '^STATUS=stopping on SIGTERM' "$T/notes"
	# In that order.
	[ "$(grep -nx READY=1 "$T/notes" | cut -d: -f1)" -lt \
	    "$(grep -nx STOPPING=1 "$T/notes" | cut -d: -f1)" ]
}

@test "sd_notify: an abstract socket (@name); WATCHDOG=1 when systemd asks" {
	name="@mhfilter-test-$$-$RANDOM"
	start_listener "$name"
	NOTIFY_SOCKET="$name" WATCHDOG_USEC=200000 \
	    "$MHFILTER" --listen "unix:$T/sock" 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_note READY=1
	wait_note WATCHDOG=1
	# RELOADING=1 and READY=1 again around SIGHUP.
	kill -HUP "$DPID"
	wait_note RELOADING=1
	stop_daemon
	wait_note STOPPING=1
}

@test "sd_notify: no NOTIFY_SOCKET, nothing sent and nothing logged; a bad one is warned about once" {
	start_daemon --listen "unix:$T/sock"
	stop_daemon
	! grep -q NOTIFY "$T/derr" || fail "logged:" "$(cat "$T/derr")"
	NOTIFY_SOCKET="$T/nobody-listens" start_daemon --listen "unix:$T/sock2"
	stop_daemon
	[ "$(grep -c 'NOTIFY_SOCKET' "$T/derr")" -eq 1 ]
}

@test "socket activation: systemd-socket-activate hands over a unix socket and an http one" {
	command -v systemd-socket-activate >/dev/null ||
	    skip "systemd-socket-activate is not installed (Debian package systemd)"
	printf 'a\tThe quick brown fox jumps over the lazy dog\nb\tthe quick brown fox jumps over the lazy dog!\n' >in
	# It listens at once and execs mhfilter (same pid) on the first
	# connection, passing LISTEN_FDS=2 and LISTEN_FDNAMES=proto:http.
	systemd-socket-activate -l "$T/sock" -l "$T/http" \
	    --fdname=proto:http -E TMPDIR="$T" \
	    "$MHFILTER" -f tsv 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "Listening on $T/http"
	dsend "unix:$T/sock" in >replies
	grep -qx 'unique	a' replies
	grep -q '^duplicate	b	a	0\.9' replies
	grep -qF "listening on unix:$T/sock (from systemd)" "$T/derr"
	grep -qF "serving HTTP on unix:$T/http (from systemd)" "$T/derr"
	timeout 60 python3 "$CLIENT" http "unix:$T/http" /metrics >metrics
	head -n 1 metrics | grep -qx 200
	grep -qx 'mhfilter_records_total{verdict="unique"} 1' metrics
	grep -qx 'mhfilter_records_total{verdict="duplicate"} 1' metrics
	stop_daemon
	# The sockets are systemd's: mhfilter does not remove them.
	[ -S "$T/sock" ]
}

@test "socket activation: LISTEN_PID of another process is ignored (stdin mode)" {
	printf 'one\none\ntwo\n' >in
	LISTEN_FDS=1 LISTEN_PID=1 mhrun in 3<in
	assert_status 0
	printf 'one\ntwo\n' | assert_out
}

@test "socket activation: a descriptor that is not a listening socket is refused" {
	LISTEN_FDS=1 timeout 60 sh -c 'LISTEN_PID=$$ exec "$0" -f tsv' \
	    "$MHFILTER" 3<"$DATA/sample-news.txt" >out 2>err && status=0 || status=$?
	[ "$status" -eq 1 ] || fail "status $status" "$(cat err)"
	grep -q 'LISTEN_FDS: descriptor 3 is not a listening socket' err
}

@test "socket activation and --listen together" {
	command -v systemd-socket-activate >/dev/null ||
	    skip "systemd-socket-activate is not installed (Debian package systemd)"
	systemd-socket-activate -l "$T/sock" -E TMPDIR="$T" \
	    "$MHFILTER" --listen "unix:$T/own" 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "Listening on $T/sock"
	printf 'first\n' | dsend "unix:$T/sock" >r1
	wait_log "ready:"
	printf 'first\n' | dsend "unix:$T/own" >r2
	grep -q '^unique	' r1
	grep -q '^duplicate	' r2
	stop_daemon
	[ ! -e "$T/own" ]
}

@test "socket activation with listen in the configuration for the same socket: the unit's socket is served, no crash" {
	command -v systemd-socket-activate >/dev/null ||
	    skip "systemd-socket-activate is not installed (Debian package systemd)"
	# As mhfilter(1)'s EXAMPLES and mhfilter.conf(5) show it: the
	# configuration says where to listen, and the .socket unit too.
	printf 'format = tsv\nlisten = unix:%s/sock\ndb = %s/db\n' "$T" "$T" >conf
	systemd-socket-activate -l "$T/sock" -E TMPDIR="$T" \
	    "$MHFILTER" --config conf 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "Listening on $T/sock"
	printf 'a\tThe quick brown fox jumps over the lazy dog\n' |
	    dsend "unix:$T/sock" >r1
	grep -qx 'unique	a' r1 || fail "$(cat r1)" "$(cat "$T/derr")"
	grep -qF "listen unix:$T/sock: systemd passed this socket: serving it" "$T/derr"
	printf 'a\tThe quick brown fox jumps over the lazy dog\n' |
	    dsend "unix:$T/sock" >r2
	grep -qx 'duplicate	a	a	1.0000	seen' r2
	stop_daemon
	[ -S "$T/sock" ]
}

@test "contrib: every setting of the unit files has a comment above it" {
	for u in "$TESTDIR/../contrib/mhfilter.service.in" \
	    "$TESTDIR/../contrib/mhfilter.socket.in" \
	    "$TESTDIR/../contrib/mhfilter-expire.service.in" \
	    "$TESTDIR/../contrib/mhfilter-expire.timer"; do
		[ -f "$u" ] || fail "$u missing"
		awk -v f="$u" '
			/^[A-Za-z]+=/ && prev !~ /^#/ { print f ": " NR ": " $0; bad = 1 }
			/^#/ || /^[A-Za-z]+=/ { prev = $0 }
			/^$/ || /^\[/ { prev = "" }
			END { exit bad }' "$u" || fail "settings without a comment in $u"
	done
	grep -qx 'Type=notify' "$TESTDIR/../contrib/mhfilter.service.in"
	grep -qx 'StateDirectory=mhfilter' "$TESTDIR/../contrib/mhfilter.service.in"
	grep -qx 'ProtectSystem=strict' "$TESTDIR/../contrib/mhfilter.service.in"
	grep -qx 'NoNewPrivileges=yes' "$TESTDIR/../contrib/mhfilter.service.in"
}

@test "JOURNAL_STREAM naming stderr: messages carry syslog priorities; otherwise not" {
	: >err
	js="$(stat -c '%d:%i' err)"
	printf 'no tab here\n' | JOURNAL_STREAM="$js" timeout 60 "$MHFILTER" -f tsv 2>>err >/dev/null
	grep -q '^<4>mhfilter: stdin:1: no TAB' err || fail "$(cat err)"
	# Another file: no prefix.
	printf 'no tab here\n' | JOURNAL_STREAM="$js" timeout 60 "$MHFILTER" -f tsv 2>err2 >/dev/null
	grep -q '^mhfilter: stdin:1: no TAB' err2 || fail "$(cat err2)"
	# The daemon's informational messages are priority 6.
	JOURNAL_STREAM="$js" "$MHFILTER" --listen "unix:$T/sock" 2>>err &
	DPID=$!
	BG_PIDS+=("$DPID")
	for i in $(seq 400); do grep -q 'ready:' err && break; sleep 0.05; done
	grep -q '^<6>mhfilter: ready:' err || fail "$(cat err)"
	stop_daemon
	# An error that ends the program is priority 3: a usage error, and
	# a daemon that cannot start (its socket taken by a live one).
	JOURNAL_STREAM="$js" timeout 60 "$MHFILTER" --listen bogus:x 2>>err &&
	    fail "a bad --listen was taken"
	grep -q '^<3>mhfilter: --listen bogus:x: use unix:PATH' err || fail "$(cat err)"
	start_daemon --listen "unix:$T/sock2"
	JOURNAL_STREAM="$js" timeout 60 "$MHFILTER" --listen "unix:$T/sock2" \
	    2>>err </dev/null && fail "started on a live socket"
	grep -q '^<3>mhfilter: --listen unix:.*another process is listening' err ||
	    fail "$(cat err)"
	stop_daemon
}

@test "started by systemd with a configuration lacking listen and no socket: refused, status 2" {
	printf 'threshold = 0.8\n' >conf
	for var in INVOCATION_ID NOTIFY_SOCKET LISTEN_FDS; do
		status=0
		env "$var=x" timeout 60 "$MHFILTER" --config conf \
		    </dev/null >out 2>err || status=$?
		[ "$status" -eq 2 ] || fail "$var: status $status" "$(cat err)"
		grep -q "^mhfilter: started by systemd ($var is set) with no socket: conf has no listen key" err ||
		    fail "$(cat err)"
	done
	# Records on standard input, or files: a filter, as from a shell.
	echo 'some words to filter' >in
	INVOCATION_ID=x mhrun --config conf <in
	assert_status 0
	assert_same in "$T/out"
	INVOCATION_ID=x mhrun --config conf in </dev/null
	assert_status 0
	assert_same in "$T/out"
	mhrun --config conf </dev/null
	assert_status 0
}
