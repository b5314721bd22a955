#!/usr/bin/env bats
# Crashes and signals: what was written as unique is in the index, and a
# rerun over the same input loses nothing.

load helpers

N=20000

# Start mhfilter on a slow stream of $T/all (tsv; made of $N distinct records
# unless it exists), sent in chunks of $CHUNK lines (default 500) through
# a fifo, with the options given; its pid goes to $MPID, its output to
# $T/out1 and its stderr to $T/err1.  Then wait until it has written at
# least $AFTER lines (default 1000).
start_slow() {
	[ -e all ] || gen_tsv "$N" >all
	split -l "${CHUNK:-500}" all chunk.
	mkfifo fifo
	"$MHFILTER" -f tsv -d db "$@" <fifo >out1 2>err1 &
	MPID=$!
	BG_PIDS+=("$MPID")
	(
		for c in chunk.*; do
			cat "$c" || exit 0
			sleep 0.05
		done
	) >fifo 2>/dev/null 3>&- &
	BG_PIDS+=($!)
	wait_lines out1 30 "${AFTER:-1000}"
	kill -0 "$MPID" || fail "mhfilter ended before the signal"
}

# The complete lines of $1 (a record cut short by a crash is not one).
complete_lines() {
	if [ -s "$1" ] && [ "$(tail -c 1 "$1" | od -An -tx1 | tr -d ' ')" != 0a ]; then
		sed '$d' "$1"
	else
		cat "$1"
	fi
}

# Every line of $1 must be in the index: run it through again; each one must
# come back as a replay (unique again, by its own id and identical text),
# none as a new unique record, none as a duplicate.
assert_all_indexed() {
	local n

	n="$(wc -l <"$1")"
	mhrun -f tsv -d db --stats "$1"
	assert_status 0
	assert_same "$1" "$T/out"
	assert_stat records "$n"
	assert_stat replayed "$n"
	assert_stat unique "$n"
	assert_stat duplicates 0
}

@test "kill -9 mid-stream: every record written is in the index, a rerun loses nothing" {
	start_slow --batch 100
	kill -9 "$MPID"
	wait_exit "$MPID"
	[ "$status" -eq 137 ]
	complete_lines out1 >written
	n1="$(wc -l <written)"
	[ "$n1" -ge 1000 ] && [ "$n1" -lt "$N" ] || fail "$n1 lines written"
	# In input order, none missing in between.
	head -n "$n1" all | cmp - written
	# The index is usable after the crash (stale reader slots, lock).
	assert_all_indexed written
	# At most the batch under way was committed and not written.
	docs="$(stat_of index_documents)"
	[ "$docs" -ge "$n1" ] && [ "$docs" -le $((n1 + 100)) ] ||
	    fail "$docs documents for $n1 written"
	# Rerun the whole input: the records of the crashed run come back
	# as replays, the rest as new; the union of both outputs is all.
	mhrun -f tsv -d db --stats all
	assert_status 0
	assert_same all "$T/out"
	assert_stat unique "$N"
	assert_stat replayed "$docs"
	assert_stat duplicates 0
	assert_stat index_documents "$N"
	sort -u written "$T/out" | cmp - <(sort all)
}

@test "kill -9 with near duplicates in the stream: the rerun gives the same verdicts" {
	gen_tsv 3000 >base
	# Every tenth record again, slightly changed, under a new id.
	awk -F'\t' '{ print } NR % 10 == 0 { print "near" NR "\t" $2 " again" }' base >all
	N="$(wc -l <all)"
	mhf -f tsv -a all >reference
	rm -rf db
	CHUNK=300 AFTER=600 start_slow --batch 50 -a
	kill -9 "$MPID"
	wait_exit "$MPID"
	complete_lines out1 >written
	n1="$(wc -l <written)"
	[ "$n1" -lt "$N" ] || fail "not killed mid-stream"
	head -n "$n1" reference | cmp - written
	# The rerun decides every record as a run without a crash would
	# have.  (Matches may differ: a near duplicate indexed by the crashed
	# run is now its own best match; see index.bats.)
	mhrun -f tsv -d db -a all
	assert_status 0
	cut -f1,4- reference >expected
	cut -f1,4- "$T/out" >actual
	assert_same expected actual
	# The union of what both runs wrote as unique is every unique record.
	grep '^unique' reference | cut -f4- >want
	{ grep '^unique' written; grep '^unique' "$T/out"; } | cut -f4- | sort -u >got
	sort want | cmp - got
}

@test "SIGTERM mid-stream: exit 143, a message, everything read is committed and written" {
	start_slow --batch 100 --stats
	kill -TERM "$MPID"
	wait_exit "$MPID" 20
	[ "$status" -eq 143 ] || fail "exit status $status" "$(cat err1)"
	grep -q 'interrupted by signal 15' err1
	# Output ends at a record boundary, in input order.
	[ "$(tail -c 1 out1 | od -An -tx1 | tr -d ' ')" = 0a ]
	n1="$(wc -l <out1)"
	[ "$n1" -lt "$N" ] || fail "not stopped mid-stream"
	head -n "$n1" all | cmp - out1
	# --stats is written at the end all the same: every record read
	# was decided and written.
	assert_stat records "$n1" err1
	assert_stat unique "$n1" err1
	assert_stat index_documents "$n1" err1
	assert_all_indexed out1
	# Nothing was committed without being written.
	assert_stat index_documents "$n1"
}

@test "SIGINT mid-stream: exit 130 and the same guarantees" {
	start_slow --batch 100
	kill -INT "$MPID"
	wait_exit "$MPID" 20
	[ "$status" -eq 130 ] || fail "exit status $status" "$(cat err1)"
	grep -q 'interrupted by signal 2' err1
	n1="$(wc -l <out1)"
	head -n "$n1" all | cmp - out1
	assert_all_indexed out1
	assert_stat index_documents "$n1"
}

@test "SIGTERM while the input is idle ends the run promptly" {
	mkfifo fifo
	"$MHFILTER" -f tsv -d db <fifo >out1 2>err1 &
	MPID=$!
	BG_PIDS+=("$MPID")
	exec 5>fifo
	printf 'a\tthe first record, answered at once\nb\tthe second record, also answered\n' >&5
	wait_lines out1 10 2
	# The producer stays open but sends nothing (tail -f, a quiet feed).
	kill -TERM "$MPID"
	if ! wait_exit "$MPID" 3; then
		exec 5>&-
		fail "mhfilter still running 3 s after SIGTERM"
	fi
	exec 5>&-
	[ "$status" -eq 143 ] || fail "exit status $status" "$(cat err1)"
	grep -q 'interrupted by signal 15' err1
	printf 'a\tthe first record, answered at once\nb\tthe second record, also answered\n' | cmp - out1
}

@test "after kill -9, --query-only finds every written record in the index" {
	AFTER=500 start_slow --batch 100
	kill -9 "$MPID"
	wait_exit "$MPID"
	complete_lines out1 >written
	n1="$(wc -l <written)"
	mhrun -f tsv -d db --query-only -a --stats written
	assert_status 0
	# Each comes back unique as a replay of itself; none is absent.
	cut -f1-3 "$T/out" | sort -u >verdicts
	printf 'unique\t-\t-\n' | cmp - verdicts
	assert_stat replayed "$n1"
}
