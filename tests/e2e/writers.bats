#!/usr/bin/env bats
# Several writers on one index at once (lmdb.c, "Several writers"): each
# run's records are its own whatever the other inserts meanwhile; what a
# killed run committed and never wrote is replayed by whoever meets it
# next; nothing a run delivered is written again.

load helpers

# The chunks $1.chunk.* on standard output, one every $2 seconds; quietly
# ends when the reader has gone.
feed() {
	local c

	for c in "$1".chunk.*; do
		cat "$c" || return 0
		sleep "$2"
	done
}

# Writer A's input: the chunks of p, then, once the file go exists, q1.
feed_a() {
	feed p 0.05 || return 0
	while [ ! -e go ]; do
		sleep 0.05
	done
	cat q1 || return 0
}

# The lines of file $1 that are not in file $2, sorted.
missing() {
	comm -23 <(sort -u "$1") <(sort -u "$2")
}

# The lines common to files $1 and $2, sorted.
common() {
	comm -12 <(sort -u "$1") <(sort -u "$2")
}

@test "kill -9 of one of two writers at once: the survivor replays the dead one's undelivered records it meets, a later run the rest, nothing delivered written twice" {
	local round rounds=3 nb replays=0 both

	for round in $(seq 1 "$rounds"); do
		rm -rf db ./*.chunk.* inA inB outB go p q q1 q2 outA gotB errA errB
		gen_tsv 9000 "$round" >all
		head -n 3000 all >p
		tail -n +3001 all >q
		split -l 200 p p.chunk.
		split -l 200 q q.chunk.
		mkfifo inA inB outB
		# A: its own records, then (once B is dead) the first of
		# B's, the part B had reached.
		"$MHFILTER" -f tsv -d db --batch 100 --stats <inA >outA \
		    2>errA &
		APID=$!
		BG_PIDS+=("$APID")
		feed_a >inA 2>/dev/null 3>&- &
		BG_PIDS+=($!)
		# B: the other records, its output read by cat, which is
		# paused before the kill so that B has batches committed
		# and not written.
		"$MHFILTER" -f tsv -d db --batch 100 <inB >outB 2>errB &
		BPID=$!
		BG_PIDS+=("$BPID")
		cat outB >gotB &
		RPID=$!
		BG_PIDS+=("$RPID")
		feed q 0.05 >inB 2>/dev/null 3>&- &
		BG_PIDS+=($!)
		wait_lines gotB 30 300
		sleep "0.$((RANDOM % 5))"
		kill -STOP "$RPID"
		sleep "0.$((RANDOM % 4 + 2))"
		kill -9 "$BPID" 2>/dev/null || true
		wait_exit "$BPID"
		[ "$status" -eq 137 ] || fail "round $round: B ended with $status before the kill" "$(cat errB)"
		kill -CONT "$RPID"
		wait "$RPID" || true
		complete_lines gotB >writtenB
		nb="$(wc -l <writtenB)"
		[ "$nb" -lt 6000 ] || fail "round $round: B was not killed mid-stream"
		# q1: what B wrote and what it may have committed since,
		# with room; q2: the rest, which A never sees.
		head -n $((nb + 1000)) q >q1
		tail -n +$((nb + 1001)) q >q2
		touch go
		wait_exit "$APID" 60 || fail "round $round: A still running"
		[ "$status" -eq 0 ] || fail "round $round: A: status $status" "$(cat errA)"
		assert_stat records "$(($(wc -l <p) + $(wc -l <q1)))" errA
		# A wrote each record once, all of its own.
		[ -z "$(sort outA | uniq -d)" ] || fail "round $round: A wrote a record twice"
		[ -z "$(missing p outA)" ] || fail "round $round: A lost its own records"
		# Nothing A met is missing from what A and B wrote: B's
		# committed, unwritten records are A's replays.
		cat p q1 >met
		sort -u outA writtenB >union
		[ -z "$(missing met union)" ] ||
		    fail "round $round: $(missing met union | wc -l) records missing after A"
		replays=$((replays + $(stat_of replayed errA)))
		# Written by both: at most what B wrote and had not marked
		# yet (the batches since its last commit).
		both="$(common outA writtenB | wc -l)"
		[ "$both" -le 600 ] || fail "round $round: $both written by both"
		# A later run over both inputs: nothing A delivered is
		# written again, and only records of q2 are written (B's
		# undelivered ones as replays, those B never committed as
		# new); nothing is missing from all the outputs.
		mhrun -f tsv -d db --batch 100 --stats all
		assert_status 0
		cp "$T/out" final
		[ -z "$(common outA final)" ] ||
		    fail "round $round: $(common outA final | wc -l) records A delivered written again"
		[ -z "$(missing final q2)" ] ||
		    fail "round $round: written again: $(missing final q2 | head -3)"
		sort -u outA writtenB final >union
		[ -z "$(missing all union)" ] ||
		    fail "round $round: $(missing all union | wc -l) records missing"
		# Everything is marked now: a third run writes nothing, and
		# the index is sound.
		mhrun -f tsv -d db all
		assert_status 0
		[ ! -s "$T/out" ] || fail "round $round: $(wc -l <"$T/out") written by a third run"
		mhrun -d db --check
		assert_status 0
		echo "# round $round: B wrote $nb, A replayed $(stat_of replayed errA), both $both, the last run $(wc -l <final)" >&3
	done
	# B was killed with batches committed and not written at least once,
	# and A met them.
	[ "$replays" -gt 0 ] || fail "no replays by A in $rounds rounds"
}

@test "a second writer over the same records while the first has batches committed and not written: each record written once" {
	local round n1

	for round in 1 2; do
		rm -rf db ./*.chunk.* in1 out1 got1 err1
		gen_tsv 4000 "$round" >all
		split -l 100 all a.chunk.
		mkfifo in1 out1
		# The first writer, its reader paused mid-stream: batches
		# committed, undelivered, while it waits to write them.
		"$MHFILTER" -f tsv -d db --batch 50 <in1 >out1 2>err1 &
		P1=$!
		BG_PIDS+=("$P1")
		cat out1 >got1 &
		RPID=$!
		BG_PIDS+=("$RPID")
		feed a 0.01 >in1 2>/dev/null 3>&- &
		BG_PIDS+=($!)
		wait_lines got1 30 $((200 + RANDOM % 1000))
		kill -STOP "$RPID"
		sleep 0.5
		n1="$(wc -l <got1)"
		# The second writer, over the same records, meanwhile: what
		# the first committed is seen (the first writes it), the
		# rest is its own.
		mhrun -f tsv -d db --batch 50 --stats all
		assert_status 0
		cp "$T/out" out2
		kill -CONT "$RPID"
		wait_exit "$P1" 60 || fail "the first writer is still running"
		[ "$status" -eq 0 ] || fail "status $status" "$(cat err1)"
		wait "$RPID" || true
		[ -z "$(common got1 out2)" ] ||
		    fail "round $round: $(common got1 out2 | wc -l) written by both"
		sort got1 out2 | cmp - <(sort all) || fail "round $round: records missing"
		echo "# round $round: the first had written $n1 at the pause, $(wc -l <got1) in all; the second $(wc -l <out2)" >&3
		mhrun -f tsv -d db all
		assert_status 0
		[ ! -s "$T/out" ] || fail "round $round: $(wc -l <"$T/out") written again"
	done
}
