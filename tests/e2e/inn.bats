#!/usr/bin/env bats
# INN's Python filter, contrib/inn/filter_innd.py, as innd runs it (a
# stand-in INN module, tests/e2e/inn/INN.py, records its log lines) against
# a daemon started here with -f mail on a unix socket: idle connections
# closed by the daemon, a restart, a daemon that is down, full or hung.
# No article may be accepted without a judgement unless the filter logs it.

load helpers
load daemon-helpers

DRIVE="$E2E_DIR/inn/drive.py"
FILTER_DIR="$TESTDIR/../contrib/inn"

# An article on stdout: $1 Message-ID, $2 Subject, $3 body.
art() {
	printf 'Path: news.example.org!not-for-mail\nFrom: Alice <alice@example.org>\n'
	printf 'Newsgroups: comp.os.example\nSubject: %s\n' "$2"
	printf 'Message-ID: <%s>\nDate: Tue, 1 Jul 2025 10:00:00 +0000\n\n' "$1"
	printf '%s\n' "$3"
}

BODY1='The new version fixes the boot problem on machines with two disks
and adds a setting for the network timeout. Please test it before Friday
and report anything odd to the group, with the output of dmesg attached.'
BODY2='Lunch is at noon in the usual place. Bring your own sandwiches; the
kitchen is closed for repairs until the end of the month, sorry.'
BODY3='The disk images of the three test machines are attached, taken this
morning before the upgrade, in case we have to roll back on Thursday.'

setup() {
	helpers_setup
	art a1@News.Example.ORG 'Release notes' "$BODY1" >a1
	art a2@example.org 'Lunch' "$BODY2" >a2
	# a1 posted again under another Message-ID.
	art copy1@example.net 'Release notes' "$BODY1" >copy1
	art a3@example.org 'Disk images' "$BODY3" >a3
	art copy3@example.net 'Disk images' "$BODY3" >copy3
	: >inn.log
}

# Run the filter on the steps in file steps (see drive.py), in the
# background; its results go to res, its errors to drive.err.
drive_bg() {
	INN_LOG="$T/inn.log" PYTHONDONTWRITEBYTECODE=1 \
	    timeout 120 python3 "$DRIVE" "$FILTER_DIR" steps >res 2>drive.err &
	DRIVE_PID=$!
	BG_PIDS+=("$DRIVE_PID")
}

# Wait for the filter to end; it must exit 0.
drive_wait() {
	wait_exit "$DRIVE_PID" 130 || return 1
	[ "$status" -eq 0 ] || fail "drive.py exit status $status" \
	    "$(cat drive.err)" "results:" "$(cat res)" "log:" "$(cat inn.log)"
}

# Wait (at most 60 s) for the filter to reach pause $1.
drive_reached() {
	local i=0

	while [ ! -e "$1.reached" ]; do
		kill -0 "$DRIVE_PID" 2>/dev/null ||
		    { fail "drive.py ended before pause $1" "$(cat drive.err)"; return 1; }
		i=$((i + 1))
		[ "$i" -lt 1200 ] || { fail "pause $1 not reached"; return 1; }
		sleep 0.05
	done
}

# The verdict the filter gave article $1: "accept" or "reject REASON".
verdict() {
	sed -n "s/^$1 \(.*\) [0-9.]*\$/\1/p" res
}

# Article $1 must have had verdict $2.
assert_verdict() {
	local v

	v="$(verdict "$1")"
	[ "$v" = "$2" ] || fail "article $1: '$v', expected '$2'" \
	    "results:" "$(cat res)" "log:" "$(cat inn.log)" "daemon:" \
	    "$(cat "$T/derr" 2>/dev/null)"
}

# The seconds the filter took on article $1 must be at most $2.
assert_took() {
	local s

	s="$(sed -n "s/^$1 .* \([0-9.]*\)\$/\1/p" res)"
	awk -v s="$s" -v m="$2" 'BEGIN { exit !(s != "" && s <= m) }' ||
	    fail "article $1 took ${s:-?} s, more than $2" "$(cat res)"
}

# The filter's log must (or, with $2 = no, must not) hold a line matching
# the extended regular expression $1.
assert_log() {
	if [ "${2:-yes}" = no ]; then
		run grep -E -- "$1" inn.log
		[ "$status" -eq 1 ] || fail "the log has '$1':" "$(cat inn.log)"
	else
		grep -qE -- "$1" inn.log || fail "the log lacks '$1':" "$(cat inn.log)"
	fi
}

# The number of documents in the index db (the daemon stopped).
documents() {
	mhf --db db --info >"$T/info" && sed -n 's/^documents: //p' "$T/info"
}

@test "a quiet spell past --idle-timeout: the next articles are judged, the copy rejected, none accepted unjudged" {
	start_daemon -v -f mail --db db --idle-timeout 2s --listen "unix:$T/sock"
	cat >steps <<EOF
set SOCKET $T/sock
art a1
sleep 3.5
art a2
art copy1
close
EOF
	drive_bg
	drive_wait
	assert_verdict a1 accept
	assert_verdict a2 accept
	assert_verdict copy1 'reject near-duplicate of <a1@news.example.org> (1.0000)'
	# The daemon did close the idle connection, and the filter saw it.
	wait_log ': idle: ' 5
	assert_log 'connection closed by the daemon: error.-.idle'
	assert_log 'not judged' no
	assert_log '^syslog	err' no
	stop_daemon
	# a2 was judged: indexed.
	[ "$(documents)" = 2 ] || fail "documents: $(documents)"
}

@test "the daemon restarted between two articles: the next ones are judged on a new connection" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	cat >steps <<EOF
set SOCKET $T/sock
art a1
pause restarted
art copy1
art a2
close
EOF
	drive_bg
	drive_reached restarted
	stop_daemon
	start_daemon -f mail --db db --listen "unix:$T/sock"
	touch restarted.go
	drive_wait
	assert_verdict a1 accept
	assert_verdict copy1 'reject near-duplicate of <a1@news.example.org> (1.0000)'
	assert_verdict a2 accept
	assert_log 'not judged' no
	stop_daemon
	[ "$(documents)" = 2 ] || fail "documents: $(documents)"
}

@test "the daemon down: each article accepted (the default) or rejected (UNJUDGED = reject), logged, within about 2 s; judged again once it is back" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	stop_daemon
	cat >steps <<EOF
set SOCKET $T/sock
art a1
art a2
set UNJUDGED reject
art copy1
set RECHECK 0
pause up
art a3
art copy3
close
EOF
	drive_bg
	drive_reached up
	start_daemon -f mail --db db --listen "unix:$T/sock"
	touch up.go
	drive_wait
	assert_verdict a1 accept
	assert_took a1 2.5
	# While it is down, RECHECK spares the next articles the tries.
	assert_verdict a2 accept
	assert_took a2 0.5
	assert_verdict copy1 'reject near-duplicate filter unavailable'
	assert_took copy1 0.5
	assert_log '^syslog	err	mhfilter: cannot reach the daemon at '"$T"'/sock '
	assert_log '^syslog	err	mhfilter: <a1@News.Example.ORG> not judged \(.*\); accepted$'
	assert_log '^syslog	err	mhfilter: <a2@example.org> not judged \(.*\); accepted$'
	assert_log '^syslog	err	mhfilter: <copy1@example.net> not judged \(.*\); rejected$'
	[ "$(grep -c 'not judged' inn.log)" -eq 3 ] || fail "$(cat inn.log)"
	# Back: judged again, and said so once.
	assert_verdict a3 accept
	assert_verdict copy3 'reject near-duplicate of <a3@example.org> (1.0000)'
	assert_log '^syslog	notice	mhfilter: the daemon answers again; 3 article\(s\) were rejected unjudged$'
	stop_daemon
	[ "$(documents)" = 1 ] || fail "documents: $(documents)"
}

@test "a daemon that does not answer: the article is not held past the deadline, and is logged" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	kill -STOP "$DPID"
	cat >steps <<EOF
set SOCKET $T/sock
art a1
close
EOF
	drive_bg
	drive_wait
	kill -CONT "$DPID"
	assert_verdict a1 accept
	assert_took a1 2.5
	assert_log '^syslog	err	mhfilter: <a1@News.Example.ORG> not judged \(no answer within 2 s\); accepted$'
	stop_daemon
}

@test "a busy daemon (--max-clients 1, the slot taken): logged as not judged; judged once the slot is free" {
	start_daemon -f mail --db db --max-clients 1 --idle-timeout 60s \
	    --listen "unix:$T/sock"
	# Another client takes the only slot, and holds it until killed.
	python3 - "$T/sock" <<'EOF' >holder.out 2>&1 &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(b"#mhfilter version\0")
print(s.recv(4096).decode().split("\t")[0], flush=True)
time.sleep(120)
EOF
	HOLDER=$!
	BG_PIDS+=("$HOLDER")
	local i=0
	until grep -q '^version' holder.out; do
		i=$((i + 1))
		[ "$i" -lt 400 ] || fail "the holder got no answer: $(cat holder.out)"
		sleep 0.05
	done
	cat >steps <<EOF
set SOCKET $T/sock
set RECHECK 0
art a1
pause free
art a2
art copy1
close
EOF
	drive_bg
	drive_reached free
	kill "$HOLDER"
	wait "$HOLDER" || true
	# The daemon saw it go: a client is served again.
	printf '#mhfilter version\0' >ver
	i=0
	until dsend "unix:$T/sock" ver | grep -q '^version'; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "the slot stays taken"
		sleep 0.1
	done
	touch free.go
	drive_wait
	assert_verdict a1 accept
	assert_took a1 2.5
	assert_log '^syslog	err	mhfilter: <a1@News.Example.ORG> not judged \(daemon: busy.*\); accepted$'
	# a1 was not indexed: its copy is news to the daemon.
	assert_verdict a2 accept
	assert_verdict copy1 accept
	assert_log '^syslog	notice	mhfilter: the daemon answers again; 1 article\(s\) were accepted unjudged$'
	stop_daemon
	[ "$(documents)" = 2 ] || fail "documents: $(documents)"
}

@test "an article in flight when the daemon dies is sent again to the next one and judged" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	# Tries enough to outlast the start of the next daemon on a slow host.
	cat >steps <<EOF2
set SOCKET $T/sock
set TRIES 40
set DEADLINE 30
art a1
pause stopped
art a3
art copy3
close
EOF2
	drive_bg
	drive_reached stopped
	kill -STOP "$DPID"
	touch stopped.go
	# The filter sends a3 and waits for the answer that never comes.
	sleep 0.5
	kill -KILL "$DPID"
	wait "$DPID" || true
	start_daemon -f mail --db db --listen "unix:$T/sock"
	drive_wait
	assert_verdict a1 accept
	assert_verdict a3 accept
	assert_verdict copy3 'reject near-duplicate of <a3@example.org> (1.0000)'
	assert_log 'not judged' no
	stop_daemon
	[ "$(documents)" = 2 ] || fail "documents: $(documents)"
}

@test "an article offered again after innd lost it (a duplicate of itself) is accepted" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	printf 'set SOCKET %s\nart a1\nclose\n' "$T/sock" >steps
	drive_bg
	drive_wait
	assert_verdict a1 accept
	# innd stopped before storing it, so a peer offers it again.
	drive_bg
	drive_wait
	assert_verdict a1 accept
	assert_log 'not judged' no
	stop_daemon
	[ "$(documents)" = 1 ] || fail "documents: $(documents)"
}

@test "a Message-ID the daemon writes otherwise (a trailing dot) is judged at once" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	art 'odd@host.example.' 'Release notes' "$BODY1" >odd
	art 'odd.copy@host.example' 'Release notes' "$BODY1" >oddcopy
	printf 'set SOCKET %s\nart odd\nart oddcopy\nart a2\nclose\n' "$T/sock" >steps
	drive_bg
	drive_wait
	assert_verdict odd accept
	assert_took odd 1
	assert_verdict oddcopy 'reject near-duplicate of <odd@host.example> (1.0000)'
	assert_verdict a2 accept
	assert_log 'not judged' no
	stop_daemon
}

@test "an article over --max-bytes: accepted at once and logged, and the next article judged" {
	start_daemon -f mail --db db --max-bytes 1000 --listen "unix:$T/sock"
	{ art big@example.org 'Big' "$BODY3"; for i in $(seq 30); do
		printf '%s\n' "$BODY2"; done; } >big
	printf 'set SOCKET %s\nart big\nart a1\nart copy1\nclose\n' "$T/sock" >steps
	drive_bg
	drive_wait
	assert_verdict big accept
	assert_took big 1
	assert_log '^syslog	notice	mhfilter: <big@example.org> not judged \(too-long .*\); accepted$'
	assert_verdict a1 accept
	assert_verdict copy1 'reject near-duplicate of <a1@news.example.org> (1.0000)'
	assert_log '^syslog	err' no
	stop_daemon
}

@test "an article's text reaches the daemon as posted, not as NNTP carries it (dots doubled, the end's dot): the same text as mail is its duplicate at 1.0000" {
	start_daemon -f mail --db db --listen "unix:$T/sock"
	body='.profile and .bashrc are read at login; see the notes below.
..and the end.
.'
	art dots@example.org 'Dot files' "$body" >dots
	art short@example.org 'Short' 'See you at noon at the station, by the clock.' >short
	printf 'set SOCKET %s\nart dots\nart short\nclose\n' "$T/sock" >steps
	drive_bg
	drive_wait
	assert_verdict dots accept
	assert_verdict short accept
	assert_log 'not judged' no
	# The same articles as -f mail reads them from a mailbox or a spool.
	{ art dots.mail@example.net 'Dot files' "$body"; printf '\0'
	  art short.mail@example.net 'Short' 'See you at noon at the station, by the clock.'
	  printf '\0'; } >direct
	dsend "unix:$T/sock" direct >replies
	printf 'duplicate\t%s.mail@example.net\t%s@example.org\t1.0000\n' \
	    dots dots short short >expected
	assert_same expected replies
	stop_daemon
}
