#!/usr/bin/env bats
# --milter: mhfilter as a mail filter, driven by miltertest (Debian's
# miltertest package) with tests/e2e/milter/send.lua, which sends one
# message and checks the milter's answer.

load helpers
load daemon-helpers

MT_SCRIPT="$E2E_DIR/milter/send.lua"

# bats 1.8 cannot skip from setup_file: check before each test.
setup() {
	helpers_setup
	command -v miltertest >/dev/null ||
	    skip "miltertest is not installed (Debian package miltertest)"
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
	[ "$(mhf -d db --info | sed -n 's/^documents: *//p')" = 1 ] ||
	    fail "$(mhf -d db --info)"
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

@test "a message over --max-bytes is accepted undecided, without a header, and counted" {
	start_daemon --milter "unix:$T/sock" -d db --max-bytes 4k --stats
	mtsend accept '<big@example.org>' BIG=20000
	mtsend unique '<one@example.org>'
	stop_daemon
	grep -q 'over --max-bytes 4096: passed undecided' "$T/derr"
	grep -q 'mhfilter: too_long: 1' "$T/derr"
	grep -q 'mhfilter: unique: 1' "$T/derr"
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
