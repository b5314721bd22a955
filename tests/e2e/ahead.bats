#!/usr/bin/env bats
# The lookahead (filter.c): with two threads or more, a batch's records are
# looked up and their candidates verified before the decisions, by several
# threads at once, and the decisions take their candidates from there and
# from the batch's own inserts.  Its verdicts must be those of one thread,
# which decides record after record: here on a stream made to meet every
# case where the two could part (copies inside a batch, of the batch
# before, of long ago; identical copies, which are not inserted; a family
# of near-copies that fills band buckets past what a lookup returns), in
# every output mode, and against an index that holds the stream already.

load helpers

# A stream of $1 records "idI<TAB>text", from a fixed seed: fresh texts;
# edited copies of a text 1 to 30 records back, 200 to 700 back (the batch
# before) and 2,000 to 5,000 back; identical copies; and, from record 3000
# on, 1,300 near-copies of one long text (a word at its end), every one a
# duplicate indexed in its chain, so that their band buckets pass the 1,024
# entries a lookup returns.
gen_ahead() {
	python3 - "$1" <<'EOF'
import random, sys
n = int(sys.argv[1])
rng = random.Random(7)
abc = 'abcdefghijklmnopqrstuvwxyz'
words = [''.join(rng.choice(abc) for _ in range(rng.randint(3, 9)))
         for _ in range(8000)]
def fresh():
    return ' '.join(rng.choice(words) for _ in range(rng.randint(20, 160)))
def edit(t):
    w = t.split(' ')
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(w))
        op = rng.randrange(3)
        if op == 0:
            w[i] = rng.choice(words)
        elif op == 1 and len(w) > 5:
            del w[i]
        else:
            w.insert(i, rng.choice(words))
    return ' '.join(w)
family = ' '.join(rng.choice(words) for _ in range(400))
texts = []
for i in range(n):
    r = rng.random()
    if 3000 <= i < 4300:
        t = family + ' ' + rng.choice(words)
    elif i > 40 and r < 0.15:
        t = edit(texts[i - rng.randint(1, 30)])
    elif i > 800 and r < 0.25:
        t = edit(texts[i - rng.randint(200, 700)])
    elif i > 5000 and r < 0.32:
        t = edit(texts[i - rng.randint(2000, 5000)])
    elif i > 900 and r < 0.37:
        t = texts[i - rng.randint(1, 900)]
    else:
        t = fresh()
    texts.append(t)
    sys.stdout.write('id%d\t%s\n' % (i, t))
EOF
}

# The --stats lines of $1 that do not depend on timing, the process or the
# lookahead itself.
stable_stats() {
	grep '^mhfilter: ' "$1" | grep -Ev ': (seconds|records_per_second|mb_per_second|max_rss_kb|batch_seconds[a-z_]*|index_bytes|looked_ahead|looked_again|verified_ahead): '
}

# Run mhfilter -f tsv on in with the arguments given, once with
# --threads 1 and once with --threads $THREADS, each into a fresh index
# (or a copy of $BASE_DB, if set); the outputs and stable counters must
# be the same, and the second run must have looked ahead.
same_as_one_thread() {
	rm -rf one many
	if [ -n "${BASE_DB:-}" ]; then
		cp -r "$BASE_DB" one
		cp -r "$BASE_DB" many
	fi
	mhrun -f tsv --db one --threads 1 --stats "$@" in
	assert_status 0
	mv out out.one
	mv err err.one
	assert_stat looked_ahead 0 err.one
	mhrun -f tsv --db many --threads "${THREADS:-2}" --stats "$@" in
	assert_status 0
	assert_same out.one out
	stable_stats err.one >stats.one
	stable_stats err >stats.many
	assert_same stats.one stats.many
	[ "$(stat_of looked_ahead)" -gt 0 ] ||
	    fail "no record was looked up ahead:" "$(cat err)"
}

@test "the lookahead gives one thread's verdicts, counters and index" {
	gen_ahead 8000 >in
	same_as_one_thread --annotate --batch 2000
	[ "$(stat_of verified_ahead)" -gt 0 ] ||
	    fail "nothing was verified ahead:" "$(cat err)"
	# The family's buckets fill up: records looked up again by the writer.
	[ "$(stat_of looked_again)" -gt 0 ] ||
	    fail "no record was looked up again:" "$(cat err)"
	[ "$(stat_of duplicates)" -gt 2500 ]
	# The two indexes hold the same documents, in the same order (their
	# times are those of the runs).
	mhrun --db one --export one.jsonl
	assert_status 0
	mhrun --db many --export many.jsonl
	assert_status 0
	sed 's/"time":[0-9]*,//' one.jsonl >one.notime
	sed 's/"time":[0-9]*,//' many.jsonl >many.notime
	assert_same one.notime many.notime
}

@test "the lookahead with four threads, every pair, and the index's own check" {
	gen_ahead 8000 >in
	THREADS=4 same_as_one_thread --pairs --batch 3000
	mhrun --db many --check
	assert_status 0
}

@test "the lookahead under containment and with --verify signature" {
	gen_ahead 6000 >in
	same_as_one_thread --annotate --measure containment --batch 2000
	same_as_one_thread --annotate --verify signature --batch 2000
	assert_stat verified_ahead 0
}

@test "the lookahead against an index that holds the stream already" {
	gen_ahead 6000 >in
	mhrun -f tsv --db base --batch 1500 -o /dev/null in
	assert_status 0
	BASE_DB=base same_as_one_thread --annotate --batch 2500
	assert_stat duplicates 6000
	[ "$(stat_of seen)" -gt 4000 ]
}

@test "a damaged document met while the lookahead runs: its batch fails, the batch before is written" {
	local k

	gen_ahead 3000 >in
	mhrun -f tsv --db many --threads 1 -o /dev/null in
	assert_status 0
	mhrun --db many --export exp
	assert_status 0
	# The first document of the second batch of 1,000 (the export's line
	# after the header is document 1), its text damaged.
	k=$(python3 -c 'import json, sys
for k, l in enumerate(open(sys.argv[1])):
    if k > 0 and int(json.loads(l)["id"][2:]) >= 1000:
        print(k); break' exp)
	[ "$k" -gt 0 ] || fail "no document of the second batch"
	rm -f many/lock.mdb
	flip_value many texts "$k"
	# Its copy in the stream (the same id and text) reads it: the reader
	# leaves it to the writer, whose read fails while the lookahead is
	# still running.
	mhrun -f tsv --db many --threads 2 --batch 1000 --annotate --stats in
	assert_status 1
	assert_err_has "index many is damaged: text of document $k fails its checksum"
	[ "$(wc -l <out)" -eq 1000 ] ||
	    fail "$(wc -l <out) records written, not the first batch's 1000"
	head -n 1000 in | cut -f 1 >ids.first
	cut -f 4 out >ids.out
	assert_same ids.first ids.out
}

@test "batches under the lookahead's minimum are decided as before" {
	gen_ahead 1000 >in
	mhrun -f tsv --stats --threads 2 --batch 200 --annotate in
	assert_status 0
	assert_stat looked_ahead 0
}

@test "a reader that never returns is ended by the watchdog, and the writer decides without it" {
	[ -n "${FAULTINJECT:-}" ] || skip "needs the fault injection shim"
	gen_ahead 3000 >in
	mhrun -f tsv --threads 1 --annotate in
	assert_status 0
	mv out out.one
	# The 20th document read by a reader, whichever thread it is on (in the
	# second batch or later: the first has nothing committed to read),
	# spins, as LMDB does in a cycle of damaged pages
	# (tests/fault/faultinject.c): 15 s of processor time later the
	# watchdog (lmdbguard.c) takes it away.
	LD_PRELOAD="$(fault_preload)" FAULT_SPIN=20 mhrun -f tsv --threads 2 \
	    --batch 1000 --annotate --stats in
	assert_status 0
	assert_same out.one out
	# What that reader did not look up, the writer did.
	assert_err_has "the lookahead stopped at a page it could not read"
	[ "$(stat_of looked_ahead)" -gt 0 ]
	assert_err_lacks damaged
}
