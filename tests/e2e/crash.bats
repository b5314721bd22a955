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
	feed_chunks 0.05 >fifo 2>/dev/null 3>&- &
	BG_PIDS+=($!)
	wait_lines out1 30 "${AFTER:-1000}"
	kill -0 "$MPID" || fail "mhfilter ended before the signal"
}

# Every line of $1 must be in the index: run it through again; each one must
# come back either seen (its batch was marked delivered) or as a replay
# (unique again, written again: its batch may not have been), none as a new
# unique record, none as a duplicate of another.  With $2, exactly that
# many seen.
assert_all_indexed() {
	local n seen

	n="$(wc -l <"$1")"
	mhrun -f tsv -d db --stats "$1"
	assert_status 0
	assert_stat records "$n"
	seen="$(stat_of seen)"
	assert_stat duplicates "$seen"
	assert_stat unique "$((n - seen))"
	assert_stat replayed "$((n - seen))"
	# The replays are written, in input order.
	grep -Fxf "$T/out" "$1" | cmp - "$T/out"
	[ -z "${2:-}" ] || assert_stat seen "$2"
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
	# Delivered batches were marked: at most the batches in flight and
	# those delivered since the last commit come back as replays.
	[ "$(stat_of replayed)" -le 400 ] ||
	    fail "$(stat_of replayed) of $n1 written records replayed"
	# At most the batches under way were committed and not written.
	docs="$(stat_of index_documents)"
	[ "$docs" -ge "$n1" ] && [ "$docs" -le $((n1 + 200)) ] ||
	    fail "$docs documents for $n1 written"
	# Rerun the whole input: the records the crashed run committed but
	# did not write come back as replays, the rest as new; the union of
	# both outputs is all, and nothing written is written again.
	mhrun -f tsv -d db --stats all
	assert_status 0
	assert_stat unique "$((N - n1))"
	assert_stat replayed "$((docs - n1))"
	assert_stat seen "$n1"
	assert_stat index_documents "$N"
	sort written "$T/out" | cmp - <(sort all)
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
	# have, but those the crashed run delivered: they are seen.
	mhrun -f tsv -d db -a all
	assert_status 0
	cut -f1,4- reference >expected
	cut -f1,4- "$T/out" >actual
	paste expected actual | awk -F'\t' '{ n = NF / 2 }
	    $1 == "seen" || $(n + 1) == "seen" { seen++; next }
	    { for (i = 1; i <= n; i++) if ($i != $(n + i)) { print NR ": " $0; bad = 1; next } }
	    END { exit bad }' || fail "verdicts differ"
	grep -c '^seen' actual >nseen || true
	[ "$(cat nseen)" -le "$n1" ] && [ "$(cat nseen)" -ge $((n1 - 400)) ] ||
	    fail "$(cat nseen) seen for $n1 written"
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
	# It stopped cleanly: every batch was marked delivered, so all are
	# seen, none written again.
	assert_all_indexed out1 "$n1"
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
	assert_all_indexed out1 "$n1"
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
	# Each comes back seen (delivered) or as a replay of itself (maybe
	# not); none is absent, none new.
	cut -f1 "$T/out" | sort -u >verdicts
	grep -vxE 'seen|unique' verdicts && fail "$(cat verdicts)"
	assert_stat unique "$(stat_of replayed)"
	[ $(($(stat_of seen) + $(stat_of replayed))) -eq "$n1" ] ||
	    fail "$(stat_of seen) seen, $(stat_of replayed) replayed of $n1"
	[ "$(stat_of seen)" -ge $((n1 - 400)) ] || fail "$(stat_of seen) seen"
}

# Kill mhfilter while its reader is paused (a slow consumer): batches are
# committed that are not written yet.  (A run that has ended by then, all
# its input read, is left as it ended.)
kill_paused() {
	kill -STOP "$RPID"
	sleep "${1:-0.5}"
	kill -9 "$MPID" 2>/dev/null || true
	wait_exit "$MPID"
	kill -CONT "$RPID"
	wait "$RPID" || true
}

@test "kill -9 with a slow reader: records committed but never written are written by the next run" {
	gen_tsv "$N" >all
	split -l 500 all chunk.
	start_read 1 --batch 100
	wait_lines got.1 30 2000
	kill_paused 1
	complete_lines got.1 >written
	n1="$(wc -l <written)"
	head -n "$n1" all | cmp - written
	# The index holds more than was written: the batches committed
	# while the reader was paused.
	mhrun -f tsv -d db -Q --stats /dev/null
	docs="$(stat_of index_documents)"
	[ "$docs" -gt "$n1" ] || fail "$docs documents, $n1 written: nothing in flight"
	mhrun -f tsv -d db --stats all
	assert_status 0
	assert_stat index_documents "$N"
	# Nothing lost; written twice, at most the records of the batches
	# whose output was under way (not marked delivered).
	sort -u written "$T/out" | cmp - <(sort all)
	repeats=$((n1 + $(wc -l <"$T/out") - N))
	assert_stat replayed "$((docs - n1 + repeats))"
	[ "$repeats" -le 600 ] || fail "$repeats records written twice"
	# A completed run marked everything: a third run writes nothing.
	mhrun -f tsv -d db --stats all
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") records written again"
	assert_stat seen "$N"
}

@test "kill -9 at random moments, restarted on the same input each time: nothing lost, repeats bounded" {
	local kills=6 batch=100 i total repeats
	gen_tsv "$N" >all
	split -l 500 all chunk.
	for i in $(seq 1 "$kills"); do
		start_read "$i" --batch "$batch"
		sleep "0.$((RANDOM % 9 + 1))"
		kill_paused "0.$((RANDOM % 5))"
		complete_lines "got.$i" >"written.$i"
	done
	mhrun -f tsv -d db --batch "$batch" all
	assert_status 0
	cp "$T/out" written.final
	# Every record of a clean run is in some run's output.
	sort -u written.* | cmp - <(sort all) || fail "records missing"
	# Repeats come only from the batches in flight or delivered since
	# the last commit at each kill: at most 2 x 3 batches a kill.
	total="$(cat written.* | wc -l)"
	repeats=$((total - N))
	echo "# $kills kills, $N records, 0 missing, $repeats repeated" >&3
	[ "$repeats" -le $((kills * 6 * batch)) ] ||
	    fail "$repeats records written twice after $kills kills"
	# The final run completed: a rerun writes nothing.
	mhrun -f tsv -d db all
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") written again"
}

@test "kill -9 with a slow reader, line records without ids: identical texts are replayed the same way" {
	gen_tsv "$N" | cut -f2 >all
	split -l 500 all chunk.
	FORMAT=line start_read 1 --batch 100
	wait_lines got.1 30 2000
	kill_paused 1
	complete_lines got.1 >written
	n1="$(wc -l <written)"
	mhrun -d db -Q --stats /dev/null
	[ "$(stat_of index_documents)" -gt "$n1" ] || fail "nothing in flight"
	mhrun -d db --stats all
	assert_status 0
	sort -u written "$T/out" | cmp - <(sort -u all) || fail "records missing"
	repeats=$((n1 + $(wc -l <"$T/out") - $(sort -u all | wc -l)))
	[ "$repeats" -le 600 ] || fail "$repeats records written twice"
	[ "$(stat_of replayed)" -gt 0 ] || fail "no replays"
}
