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

@test "--duplicates-to naming an input or the output, and a standard output appended to an input, are refused: nothing read again or lost" {
	gen_tsv 100 >in
	cat in in >twice
	cp twice copy
	# Its duplicates would be read again as it grows, without end.
	mhrun -f tsv --duplicates-to twice twice
	assert_status 2
	assert_err_has "--duplicates-to twice is also an input"
	cmp twice copy
	# One file for both: the duplicates were lost, or mixed in.
	mhrun -f tsv -o out --duplicates-to out twice
	assert_status 2
	assert_err_has "--duplicates-to out is the output too"
	[ ! -s out ]
	status=0
	timeout 60 "$MHFILTER" -f tsv --duplicates-to both twice >both 2>err ||
	    status=$?
	[ "$status" -eq 2 ] || fail "status $status: $(cat err)"
	grep -q -- '--duplicates-to both is the output too' err
	# A standard output appended to an input: the same loop.
	status=0
	timeout 60 "$MHFILTER" -f tsv -D twice >>twice 2>err || status=$?
	[ "$status" -eq 2 ] || fail "status $status: $(cat err)"
	grep -q 'the standard output is also an input' err
	cmp twice copy
	# Files of their own: the uniques and the duplicates, 100 each.
	mhrun -f tsv -o out --duplicates-to dups twice
	assert_status 0
	cmp in out
	cmp in dups
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

@test "numbers: a negative one is out of range; a size's limits in K, M, G, T" {
	mhrun --batch -1 </dev/null
	assert_status 2
	assert_err_has "--batch: '-1' is out of range (1 to 1000000)"
	mhrun --memtable 1 </dev/null
	assert_status 2
	assert_err_has "--memtable: '1' is out of range (64K to 1T bytes)"
	assert_err_lacks 9223372036854775807
	# A duration's limits in the units the manual gives them.
	mhrun -d db --retain 0s --expire </dev/null
	assert_status 2
	assert_err_has "--retain: '0s' is out of range (1s to 36500d)"
	mhrun --batch-delay 2m --listen "unix:$T/sock" </dev/null
	assert_status 2
	assert_err_has "--batch-delay: '2m' is out of range (0s to 1m)"
	# none is alone; an index is somewhere.
	mhrun --normalize none,space </dev/null
	assert_status 2
	assert_err_has "--normalize: 'none' goes alone, not in a list ('none,space')"
	mhrun -d "" </dev/null
	assert_status 2
	assert_err_has "--db: the path is empty"
}

@test "--explain says which of --max-fn and --max-fp is not met" {
	mhrun --explain
	assert_status 0
	assert_err_lacks 'not met'
	grep -q '^--max-fp 0.05 is not met: fp is 0.361820' "$T/out" ||
	    fail "$(cat "$T/out")"
	mhrun --explain --max-fn 0.5 --max-fp 0.5
	if grep -q 'not met' "$T/out"; then fail "$(cat "$T/out")"; fi
	mhrun --explain -t 0.5 --perms 4 --max-fn 0.001
	grep -q '^--max-fn 0.001 is not met: fn is ' "$T/out" ||
	    fail "$(cat "$T/out")"
}

@test "control bytes in messages (file names, ids) are escaped on stderr" {
	name="$(printf 'in\033[31m\ttab')"
	printf 'no tab here\n' >"$name"
	mhrun -f tsv "$name"
	assert_status 0
	assert_err_has 'mhfilter: in\x1b[31m\x09tab:1: no TAB between id and text'
	if grep -q "$(printf '\033')" "$T/err"; then fail "ESC on stderr"; fi
	mhrun "$(printf 'no\nsuch')"
	assert_status 1
	assert_err_has 'mhfilter: no\x0asuch: No such file or directory'
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$(cat "$T/err")"
}
