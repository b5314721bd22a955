#!/usr/bin/env bats
# --milter: mhfilter as a mail filter, driven by miltertest (Debian's
# miltertest package) with tests/e2e/milter/send.lua, which sends one
# message and checks the milter's answer.

load helpers
load daemon-helpers
load redis-helpers

MT_SCRIPT="$E2E_DIR/milter/send.lua"

# bats 1.8 cannot skip from setup_file: check before each test.
setup() {
	helpers_setup
	command -v miltertest >/dev/null ||
	    skip "miltertest is not installed (Debian package miltertest)"
}

# A test may start a Redis of its own under $T/redis: stop it too.
eval "$(declare -f teardown | sed '1s/teardown/helpers_teardown/')"
teardown() {
	redis_stop_all "$T/redis"
	helpers_teardown
}

# Send one message: mtsend EXPECT MSGID [NAME=VALUE ...] (BODY, BIG, ...).
mtsend() {
	local expect=$1 msgid=$2 d=()

	shift 2
	for v in "$@"; do
		d+=(-D "$v")
	done
	timeout 60 miltertest -D SOCK="unix:$T/sock" -D EXPECT="$expect" \
	    -D MSGID="$msgid" "${d[@]}" -s "$MT_SCRIPT" ||
	    fail "miltertest: $expect for $msgid failed" "$(cat "$T/derr")"
}

@test "header (default): the first message is unique, a re-sent copy with other headers a duplicate" {
	start_daemon --milter "unix:$T/sock" -d db
	mtsend unique '<one@example.org>'
	mtsend duplicate '<two@example.org>'
	mtsend unique '<three@example.org>' BODY=other
	stop_daemon
	grep -q 'milter stopped after 3 messages' "$T/derr"
}

@test "an X-Mhfilter field the message came with is removed" {
	start_daemon --milter "unix:$T/sock" -d db
	mtsend unique '<one@example.org>' FORGED=1
	mtsend duplicate '<two@example.org>' FORGED=1
	stop_daemon
}

@test "the index is kept: a restart remembers what the milter indexed" {
	start_daemon --milter "unix:$T/sock" -d db
	mtsend unique '<one@example.org>'
	stop_daemon
	start_daemon --milter "unix:$T/sock" -d db
	mtsend duplicate '<two@example.org>'
	stop_daemon
	# An identical text is not indexed twice.
	mhrun -d db --info
	assert_status 0
	[ "$(sed -n 's/^documents: *//p' "$T/out")" = 1 ] || fail "$(cat "$T/out")"
}

@test "on a Redis index: the same message for the same recipient again, in the same run and after a restart, is a duplicate; nothing left undelivered" {
	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	redis_single_start "$T/redis"
	db="redis://$REDIS_SINGLE/milter"
	start_daemon --milter "unix:$T/sock" -d "$db"
	mtsend unique '<one@example.org>' RCPTS=bob
	mtsend duplicate '<one@example.org>' RCPTS=bob
	stop_daemon
	start_daemon --milter "unix:$T/sock" -d "$db"
	mtsend duplicate '<one@example.org>' RCPTS=bob
	mtsend unique '<two@example.org>' RCPTS=bob BODY=other
	stop_daemon
	[ "$(redis-cli -p "${REDIS_SINGLE##*:}" ZCARD '{milter}:undelivered')" = 0 ] ||
	    fail "undelivered ranges left"
}

@test "on a Redis index restarted empty: the message is answered a temporary failure and the milter stops (exit 1), never taking it for new" {
	local port i st

	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	redis_single_start "$T/redis"
	port="${REDIS_SINGLE##*:}"
	start_daemon --milter "unix:$T/sock" -d "redis://$REDIS_SINGLE/milter" \
	    --milter-action discard
	mtsend unique '<one@example.org>' RCPTS=bob
	redis_kill_port "$port"
	redis_start_port "$T/redis" "$port"
	# The first batch may meet the broken connection (a temporary
	# failure, retried), the next the emptied index: send until the
	# milter stops, each answer a temporary failure.
	for i in 1 2 3 4 5; do
		kill -0 "$DPID" 2>/dev/null || break
		st=0
		timeout 60 miltertest -D SOCK="unix:$T/sock" -D EXPECT=tempfail \
		    -D MSGID='<one@example.org>' -D RCPTS=bob -s "$MT_SCRIPT" \
		    >mt.out 2>&1 || st=$?
		# (Failing only as the milter stops under it.)
		if [ "$st" -ne 0 ] && kill -0 "$DPID" 2>/dev/null; then
			fail "try $i: $(cat mt.out)" "$(cat "$T/derr")"
		fi
		sleep 0.5
	done
	wait_exit "$DPID" 30
	[ "$status" -eq 1 ] || fail "status $status" "$(cat "$T/derr")"
	grep -q 'its document counter went back' "$T/derr" || fail "$(cat "$T/derr")"
	grep -q 'milter: stopping on an index error' "$T/derr" || fail "$(cat "$T/derr")"
}

@test "--milter-action reject: a duplicate gets the SMTP reply asked for" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action reject
	mtsend unique '<one@example.org>'
	mtsend reject '<two@example.org>'
	stop_daemon
	start_daemon --milter "unix:$T/sock" -d db --milter-action reject \
	    --milter-reply '554 5.7.0 Seen that one already'
	mtsend reject '<three@example.org>' REPLY_CODE=554 \
	    REPLY_XCODE=5.7.0 'REPLY_TEXT=Seen that one already'
	stop_daemon
}

@test "--milter-action discard and quarantine" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action discard
	mtsend unique '<one@example.org>'
	mtsend discard '<two@example.org>'
	stop_daemon
	start_daemon --milter "unix:$T/sock" -d db --milter-action quarantine
	mtsend quarantine '<three@example.org>'
	mtsend unique '<four@example.org>' BODY=other
	stop_daemon
}

@test "a message over --max-bytes passes unchecked, with a header saying so, and is counted" {
	start_daemon --milter "unix:$T/sock" -d db --max-bytes 4k --stats -v
	mtsend unchecked '<big@example.org>' BIG=20000 REASON=too-large \
	    FORGED=1 QID=Q1
	mtsend unique '<one@example.org>'
	stop_daemon
	grep -q 'milter: Q1: message-id=<big@example.org>: over --max-bytes 4096: passed unchecked' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	grep -q 'stats records=2 .* too_long=0 unchecked=1 ' "$T/derr" ||
	    fail "$(cat "$T/derr")"
	grep -q 'stats records=2 unique=1 ' "$T/derr"
}

@test "a batch that cannot commit is answered with a temporary failure, and nothing is indexed" {
	mhf -d db /dev/null
	# The index may not grow: every commit fails (EFBIG).
	blocks=$(( $(stat -c %s db/data.mdb) / 512 ))
	(ulimit -f "$blocks" && exec "$MHFILTER" --milter "unix:$T/sock" \
	    -d db 2>>"$T/derr") &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "ready:"
	mtsend tempfail '<one@example.org>'
	grep -q 'answered with a temporary failure' "$T/derr"
	stop_daemon
	# The sender's retry is decided as new.
	start_daemon --milter "unix:$T/sock" -d db
	mtsend unique '<one@example.org>'
	stop_daemon
}

# The scenario of issue 31: one transaction to alice and bob, a later one
# of the same message to bob and carol, with --milter-action $1.
two_transactions() {
	mtsend unique '<m1@example.org>' RCPTS=alice,bob
	mtsend removed '<m1@example.org>' RCPTS=bob,carol REMOVED=bob QID=Q2
}

@test "per recipient, discard: a later copy for bob and carol reaches carol only" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action discard
	two_transactions
	# All of them had it: the action applies to the message.
	mtsend discard '<m1@example.org>' RCPTS=carol,alice,bob QID=Q3
	# A re-sent copy to the same recipient (another Message-ID too).
	mtsend discard '<m1-again@example.org>' RCPTS=alice
	# Another text with the same Subject, and a reply quoting the first
	# one under new text, reach everyone.
	mtsend unique '<m2@example.org>' RCPTS=alice,bob BODY=other
	mtsend unique '<m3@example.org>' RCPTS=alice,bob BODY=reply
	stop_daemon
	grep -q 'milter: Q2: message-id=<m1@example.org>: seen .*for 1 of 2 recipients: removed <bob@example.org>; delivered to the others' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	grep -q 'milter: Q3: message-id=<m1@example.org>: seen .*: discarded' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	grep -q 'milter stopped after 6 messages' "$T/derr"
}

@test "per recipient: addresses are compared lower-cased, without angle brackets" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action discard
	mtsend unique '<m1@example.org>' RCPTS=Alice
	mtsend discard '<m1@example.org>' RCPTS=ALICE
	stop_daemon
}

@test "per recipient, reject and quarantine: the recipients who had it are removed, the others get it" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action reject
	two_transactions
	mtsend reject '<m1@example.org>' RCPTS=alice,carol
	stop_daemon
	rm -rf db
	start_daemon --milter "unix:$T/sock" -d db --milter-action quarantine
	two_transactions
	mtsend quarantine '<m1@example.org>' RCPTS=carol
	stop_daemon
}

@test "per recipient, header: nobody is removed; the field is duplicate only when all had it" {
	start_daemon --milter "unix:$T/sock" -d db -v
	mtsend unique '<m1@example.org>' RCPTS=alice,bob
	mtsend unique '<m1@example.org>' RCPTS=bob,carol QID=Q2
	mtsend duplicate '<m1@example.org>' RCPTS=carol,bob
	stop_daemon
	grep -q 'milter: Q2: .* for 1 of 2 recipients: delivered to all, marked unique' \
	    "$T/derr" || fail "$(cat "$T/derr")"
}

@test "--milter-scope message: anyone's copy makes a duplicate (list servers)" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action discard \
	    --milter-scope message
	mtsend unique '<m1@example.org>' RCPTS=alice,bob
	mtsend discard '<m1@example.org>' RCPTS=carol
	stop_daemon
	mhrun --milter "unix:$T/sock" --milter-scope everyone
	assert_status 2
	grep -q "unknown scope 'everyone'" "$T/err" || fail "$(cat "$T/err")"
}

@test "SIGUSR1 logs the counters, and the milter goes on" {
	start_daemon --milter "unix:$T/sock" -d db
	mtsend unique '<m1@example.org>' RCPTS=alice,bob
	kill -USR1 "$DPID"
	wait_log 'stats records=2 unique=2 '
	kill -0 "$DPID" || fail "the milter ended on SIGUSR1"
	grep -q 'stats .* messages=1 ' "$T/derr" || fail "$(cat "$T/derr")"
	mtsend duplicate '<m1@example.org>' RCPTS=alice
	stop_daemon
}

@test "per-message log lines: -v for every message, at info level for what changed a delivery; --log-file" {
	"$MHFILTER" --milter "unix:$T/sock" -d db --milter-action discard \
	    --log-file "$T/log" 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	for i in $(seq 200); do
		grep -q 'ready:' "$T/log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q 'ready:' "$T/log" || fail "not ready:" "$(cat "$T/derr")"
	mtsend unique '<m1@example.org>' RCPTS=alice QID=Q1
	mtsend discard '<m1@example.org>' RCPTS=alice QID=Q2
	stop_daemon
	# Without -v: the discarded one only, in the file, not on stderr.
	run ! grep -q 'Q1' "$T/log"
	# (a log file's lines start with their time)
	grep -qE '^[0-9T:-]+Z mhfilter: milter: Q2: message-id=<m1@example.org>: seen \(its own copy delivered before\) of <m1@example.org>, similarity 1.00: discarded$' \
	    "$T/log" || fail "$(cat "$T/log")"
	run ! grep -q 'milter: Q2' "$T/derr"
	grep -q 'milter stopped after 2 messages' "$T/log"
	start_daemon --milter "unix:$T/sock" -d db -v
	mtsend unique '<m2@example.org>' RCPTS=alice QID=Q3 BODY=other
	mtsend duplicate '<m4@example.org>' RCPTS=alice QID=Q4 BODY=other
	stop_daemon
	grep -q 'milter: Q3: message-id=<m2@example.org>: unique$' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	grep -q 'milter: Q4: message-id=<m4@example.org>: duplicate of <m2@example.org>, similarity 1.00: marked$' \
	    "$T/derr" || fail "$(cat "$T/derr")"
}

@test "--http with the milter: /metrics counts records, messages and actions; /healthz" {
	start_daemon --milter "unix:$T/sock" -d db --milter-action discard \
	    --http 127.0.0.1:0
	two_transactions
	h="$(http_addr)"
	[[ "$h" =~ ^127\.0\.0\.1:[1-9][0-9]*$ ]] || fail "http address '$h'"
	timeout 60 python3 "$CLIENT" http "$h" /metrics >metrics
	head -n 1 metrics | grep -qx 200
	grep -qx 'mhfilter_records_total{verdict="unique"} 3' metrics ||
	    fail "$(cat metrics)"
	grep -qx 'mhfilter_records_total{verdict="duplicate"} 1' metrics
	grep -qx 'mhfilter_records_total{verdict="unchecked"} 0' metrics
	grep -qx 'mhfilter_messages_total 2' metrics
	grep -qx 'mhfilter_milter_actions_total{action="recipients_removed"} 1' \
	    metrics
	grep -qx 'mhfilter_milter_actions_total{action="discarded"} 0' metrics
	grep -qx 'mhfilter_index_documents 3' metrics
	grep -qx 'mhfilter_batch_duration_seconds_count 2' metrics
	tail -n +2 metrics >exposition
	python3 "$E2E_DIR/promcheck.py" exposition || fail "$(cat exposition)"
	timeout 60 python3 "$CLIENT" http "$h" /healthz >health
	head -n 1 health | grep -qx 200
	stop_daemon
}

@test "a socket that cannot be made: the error names the path and the cause" {
	mhrun --milter "unix:$T/no/such/dir/milter" -d db
	assert_status 1
	grep -q "cannot make the socket $T/no/such/dir/milter: No such file or directory" \
	    "$T/err" || fail "$(cat "$T/err")"
	touch "$T/file"
	mhrun --milter "unix:$T/file" -d db
	assert_status 1
	grep -q "a file that is not a socket is there" "$T/err" ||
	    fail "$(cat "$T/err")"
}

@test "--milter reads mail whatever -f says" {
	start_daemon -f jsonl --milter "unix:$T/sock" -d db
	mtsend unique '<one@example.org>'
	mtsend duplicate '<two@example.org>'
	stop_daemon
	mhrun --http 127.0.0.1:0
	assert_status 2
	grep -q -- '--http needs --listen or --milter' "$T/err"
}

@test "usage: --milter with --listen, a bad action or reply" {
	mhrun --milter "unix:$T/sock" --listen "unix:$T/sock2"
	assert_status 2
	grep -q -- '--milter and --listen are exclusive' "$T/err"
	mhrun --milter "unix:$T/sock" --milter-action bounce
	assert_status 2
	grep -q "unknown action 'bounce'" "$T/err"
	mhrun --milter "unix:$T/sock" --milter-reply 'Duplicate'
	assert_status 2
	grep -q '4xx or 5xx SMTP code' "$T/err"
	mhrun --milter "unix:$T/sock" file.txt
	assert_status 2
}
