#!/usr/bin/env bats
# The rough edges a feed operator meets (a closed pipe: output.bats): an
# output file that is also an input, SIGUSR1, a temporary index after
# kill -9, messages.

load helpers

# Start mhfilter -f tsv reading the fifo $T/fifo, held open on fd 5, with
# the first $1 lines of $T/in sent; wait until they are written to $T/out.
# Its pid goes to $MPID.
start_fed() {
	mkfifo fifo
	"$MHFILTER" -f tsv <fifo >out 2>err &
	MPID=$!
	BG_PIDS+=("$MPID")
	exec 5>fifo
	head -n "$1" in >&5
	wait_lines out 20 "$1"
}

@test "-o naming an input file is refused before anything is emptied" {
	gen_tsv 100 >in
	cp in copy
	mhrun -f tsv -o in in
	assert_status 2
	grep -q -- '--output in is also an input' "$T/err"
	cmp in copy
	# Standard input is an input too.
	status=0
	timeout 60 "$MHFILTER" -f tsv -o in <in >/dev/null 2>err || status=$?
	[ "$status" -eq 2 ]
	cmp in copy
	# Another file is fine.
	mhrun -f tsv -o out in
	assert_status 0
	cmp in out
}

@test "SIGUSR1 during a run prints the counters and the run goes on" {
	gen_tsv 3000 >in
	start_fed 1000
	kill -USR1 "$MPID"
	for i in $(seq 100); do
		grep -q '^mhfilter: records: 1000$' err && break
		sleep 0.05
	done
	grep -q '^mhfilter: records: 1000$' err || fail "$(cat err)"
	kill -0 "$MPID"
	tail -n +1001 in >&5
	exec 5>&-
	wait_exit "$MPID" 30
	[ "$status" -eq 0 ] || fail "exit status $status" "$(cat err)"
	cmp in out
}

@test "kill -9 leaves no temporary index behind" {
	gen_tsv 1000 >in
	start_fed 1000
	# The run is going, its index open: nothing of it in $TMPDIR.
	[ -z "$(ls -A "$T" | grep '^mhfilter\.')" ] || fail "$(ls -la "$T")"
	kill -9 "$MPID"
	wait_exit "$MPID"
	exec 5>&-
	[ -z "$(ls -A "$T" | grep '^mhfilter\.')" ] || fail "$(ls -la "$T")"
}

@test "usage errors name the program, not the path it was run by" {
	mhrun --no-such-option
	assert_status 2
	grep -q "^mhfilter: unrecognized option '--no-such-option'" "$T/err" ||
	    fail "$(cat "$T/err")"
}
