#!/usr/bin/env bats
# The persistent index (--db): parameters kept and checked, --query-only,
# --verify, chains, replays, map growth, foreign directories, concurrent
# writers.

load helpers

A='Storm damage closed the coastal road for two days'
B='Storm damage closed the coastal highway for three days'

@test "--db persists: a later run finds a duplicate of an earlier run's record" {
	printf 'r1\tThe committee approved the budget for next year\n' >run1
	mhrun -f tsv -d db --stats run1
	assert_status 0
	assert_same run1 "$T/out"
	assert_stat index_documents 1
	[ -f db/data.mdb ] && [ -f db/lock.mdb ]
	printf 'r2\tthe committee approved the budget for next year!\n' >run2
	mhrun -f tsv -d db -a --stats run2
	assert_status 0
	printf 'duplicate\tr1\t%s\tr2\tthe committee approved the budget for next year!\n' \
	    "$(jaccard 'The committee approved the budget for next year' 'the committee approved the budget for next year!')" |
	    assert_out
	assert_stat duplicates 1
	# The duplicate is chained into the index.
	assert_stat index_documents 2
}

@test "--db: the parameters are stored; a later run needs no options" {
	set -o pipefail
	[ "$(jaccard "$A" "$B" 3)" = 0.5932 ]
	[ "$(jaccard "$A" "$B" 5)" = 0.4844 ]
	printf 'a\t%s\n' "$A" >run1
	printf 'b\t%s\n' "$B" >run2
	mhrun -f tsv -d db -n 3 -t 0.5 run1
	assert_status 0
	# Shingles of 3 and threshold 0.5 come from the index.
	mhrun -f tsv -d db -a run2
	assert_status 0
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
	# The same as giving them again.
	rm -rf db
	mhf -f tsv -d db -n 3 -t 0.5 run1 >/dev/null
	mhrun -f tsv -d db -n 3 -t 0.5 -a run2
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
	# Without the index the defaults (5, 0.8) apply.
	cat run1 run2 | mhf -f tsv -a | cut -f1 >v
	printf 'unique\nunique\n' | cmp - v
}

@test "--db: the threshold may change from run to run" {
	printf 'a\t%s\n' "$A" >run1
	printf 'b\t%s\n' "$B" >run2
	mhf -f tsv -d db -n 3 -t 0.5 run1 >/dev/null
	cp -r db db0
	mhrun -f tsv -d db -t 0.6 -a run2
	assert_status 0
	printf 'unique\t-\t-\tb\t%s\n' "$B" | assert_out
	[ ! -s "$T/err" ]
	# For that run only: the stored 0.5 is still the default.
	printf 'z\tcompletely unrelated text about sport\n' |
	    mhf -f tsv -d db0 -t 0.6 >/dev/null
	mhrun -f tsv -d db0 -a run2
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
}

@test "--db: a threshold the stored bands miss is warned about" {
	printf 'hello world foo\n' | mhf -d db -t 0.95 >/dev/null
	printf 'a different text\n' | mhf -d db -t 0.5 2>err >/dev/null
	grep -qF "the index's bands (8 x 16 rows) miss" err
	grep -qF "at similarity 0.50" err
}

# A stored parameter given with another value: exit 4, a message with the
# option and both values, the index untouched and still usable.
mismatch() {
	local option="$1" stored="$2" given="$3"
	shift 3
	cp db/data.mdb saved.mdb
	printf 'x\tsomething else altogether to insert\n' >other
	mhrun -f tsv -d db "$@" other
	status_is 4 || fail "'$*' exited $status, expected 4"
	[ ! -s "$T/out" ] || fail "'$*' wrote output"
	grep -qF -- "$option $stored" "$T/err" ||
	    fail "'$*': no '$option $stored' in: $(cat "$T/err")"
	grep -qF -- "$option $given" "$T/err" ||
	    fail "'$*': no '$option $given' in: $(cat "$T/err")"
	cmp saved.mdb db/data.mdb || fail "'$*' changed the index"
}

@test "--db: another -n, -k, --unit, --seed, --normalize or --bands is refused with status 4" {
	printf 'a\t%s\n' "$A" >run1
	printf 'b\t%s\n' "$B" >run2
	mhf -f tsv -d db -n 3 -t 0.5 run1 >/dev/null
	mismatch --shingle 3 4 -n 4
	mismatch --perms 128 64 -k 64
	mismatch --unit char word --unit word
	mismatch --seed 0 7 --seed 7
	mismatch --normalize casefold,nfkc,space none --normalize none
	# -t 0.5 stored 35 bands of 3 rows.
	mismatch --bands 35 32 -b 32
	mismatch --bands 35 32 -b 32 -r 4
	# Giving the stored values is fine.
	cp -r db db0
	mhrun -f tsv -d db -n 3 -k 128 --unit char --seed 0 \
	    --normalize casefold,nfkc,space -b 35 -r 3 -a run2
	assert_status 0
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
	# And so is leaving them out.
	mhrun -f tsv -d db0 -a run2
	assert_status 0
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
}

@test "--db: -r alone that differs is reported as --rows, the option given" {
	printf 'a\t%s\n' "$A" >run1
	mhf -f tsv -d db -n 3 -t 0.5 run1 >/dev/null
	# Not "you gave --bands 32", as the first version said.
	mismatch --rows 3 4 -r 4
}

@test "--db: bands x rows less than perms is stored and used" {
	printf 'a\t%s\n' "$A" >run1
	printf 'b\t%s\n' "$A!" >run2
	mhrun -f tsv -d db -k 128 --bands 10 --rows 6 run1
	assert_status 0
	mhrun --explain -d db
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 10 x rows 6$' "$T/out"
	mhrun -f tsv -d db -a -Q run2
	assert_status 0
	printf 'duplicate\ta\t%s\tb\t%s\n' "$(jaccard "$A" "$A!")" "$A!" |
	    assert_out
	# One of them alone is checked as given.
	cp "$T/out" want
	mhrun -f tsv -d db -a -Q --bands 10 run2
	assert_status 0
	assert_same want "$T/out"
	mhrun -f tsv -d db -a -Q -k 128 --bands 10 --rows 6 run2
	assert_status 0
	assert_same want "$T/out"
	mismatch --rows 6 5 -r 5
	mismatch --bands 10 11 -k 128 -b 11 -r 6
}

@test "--query-only: duplicates of the index are reported, nothing is inserted" {
	printf 'r1\tThe committee approved the budget for next year\n' >run1
	mhf -f tsv -d db run1 >/dev/null
	cp db/data.mdb saved.mdb
	printf 'q1\tthe committee approved the budget for next year!\nq2\tA brand new text about something else\nq3\tA brand new text about something else\n' >q
	mhrun -f tsv -d db -Q -a --stats q
	assert_status 0
	assert_out <<-EOF
	duplicate	r1	$(jaccard 'The committee approved the budget for next year' 'the committee approved the budget for next year!')	q1	the committee approved the budget for next year!
	unique	-	-	q2	A brand new text about something else
	unique	-	-	q3	A brand new text about something else
	EOF
	assert_stat index_documents 1
	cmp saved.mdb db/data.mdb
}

@test "--query-only: the index's document count does not change" {
	gen_tsv 50 >in
	mhf -f tsv -d db in >/dev/null
	gen_tsv 80 2 >more
	mhrun -f tsv -d db --query-only --stats more
	assert_status 0
	assert_same more "$T/out"
	assert_stat index_documents 50
	mhrun -f tsv -d db --stats </dev/null
	assert_stat index_documents 50
}

@test "--query-only: an unchanged rerun finds every record seen; a replay with --replay all" {
	gen_tsv 30 >in
	mhf -f tsv -d db in >/dev/null
	mhrun -f tsv -d db -Q --stats in
	assert_status 0
	[ ! -s "$T/out" ] || fail "seen records written" "$(cat "$T/out")"
	assert_stat seen 30
	assert_stat duplicates 30
	assert_stat unique 0
	mhrun -f tsv -d db -Q --replay all --stats in
	assert_status 0
	assert_same in "$T/out"
	assert_stat replayed 30
	assert_stat unique 30
}

@test "--query-only on a missing or empty index exits 1 with a message" {
	printf 'some text\n' >in
	mhrun -Q -d nodb in
	assert_status 1
	assert_err_has "nodb"
	[ ! -e nodb ] || fail "--query-only created the index directory"
	mkdir emptydir
	mhrun --query-only -d emptydir in
	assert_status 1
	assert_err_has "emptydir"
	[ ! -s "$T/out" ]
}

@test "--verify signature and none find the duplicates and keep no texts" {
	s='The quick brown fox jumps over the lazy dog near the river bank'
	printf '%s\n%s!\nsomething else entirely different here\n' "$s" "$s" >in
	for mode in signature none; do
		rm -rf db
		mhrun --verify "$mode" -d db -a in
		assert_status 0
		cut -f1,2 "$T/out" >v
		printf 'unique\t-\nduplicate\t1\nunique\t-\n' | cmp - v
		# The reported similarity is the signature estimate: a
		# multiple of 1/128.
		sim="$(sed -n 2p "$T/out" | cut -f3)"
		awk -v s="$sim" 'BEGIN { x = s * 128; exit !(s >= 0.8 &&
		    s <= 1 && (x - int(x + 0.5))^2 < 0.0001) }'
		if command -v mdb_stat >/dev/null; then
			mdb_stat -s texts db | grep -q 'Entries: 0$'
		fi
	done
	# Without a database as well.
	mhrun --verify signature -D in
	printf '%s!\n' "$s" | assert_out
}

@test "an index made with --verify signature refuses --verify exact, works without --verify" {
	s='The quick brown fox jumps over the lazy dog near the river bank'
	printf '%s\n' "$s" | mhf --verify signature -d sig >/dev/null
	cp sig/data.mdb saved.mdb
	printf '%s?\n' "$s" >q
	mhrun --verify exact -d sig -a q
	assert_status 4
	assert_err_has "--verify exact"
	[ ! -s "$T/out" ]
	cmp saved.mdb sig/data.mdb
	# Without --verify the stored mode is used: the same as signature.
	cp -r sig sig2
	mhrun -d sig -a q
	assert_status 0
	mv "$T/out" default
	mhrun -d sig2 --verify signature -a q
	assert_same default "$T/out"
	grep -q '^duplicate	1	' default
	# none needs no texts either.
	mhrun -d sig --verify none -D q
	assert_status 0
	assert_same q "$T/out"
}

@test "--verify signature on an index with texts still stores texts for later exact runs" {
	printf 'The quick brown fox jumps over the lazy dog near the river bank\n' >one
	printf 'Markets closed higher on Tuesday after the inflation figures\n' >two
	printf 'markets closed higher on Tuesday after the inflation figures!\n' >three
	mhf -d db one >/dev/null
	mhrun -d db --verify signature two
	assert_status 0
	assert_same two "$T/out"
	# Exact verification against the document the signature run added.
	mhrun -d db -a three
	assert_status 0
	printf 'duplicate\t1\t%s\t%s' "$(jaccard "$(cat two)" "$(cat three)")" "$(cat three)" >expected
	printf '\n' >>expected
	assert_same expected "$T/out"
}

@test "--no-chain: C close to B but not to A is unique when B was not indexed" {
	a='Quarterly earnings at the regional bank beat analyst forecasts by a wide margin'
	b="$a today"
	c="$a today, the company said"
	sab="$(jaccard "$a" "$b")"
	sbc="$(jaccard "$b" "$c")"
	sac="$(jaccard "$a" "$c")"
	awk -v ab="$sab" -v bc="$sbc" -v ac="$sac" \
	    'BEGIN { exit !(ab >= 0.8 && bc >= 0.8 && ac < 0.8) }'
	printf '%s\n%s\n%s\n' "$a" "$b" "$c" >in
	mhrun -a --stats in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	$sab	$b
	duplicate	2	$sbc	$c
	EOF
	assert_stat index_documents 3
	mhrun -a --no-chain --stats in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	$sab	$b
	unique	-	-	$c
	EOF
	assert_stat index_documents 2
	# Across runs: --no-chain keeps B out of a persistent index.
	printf '%s\n%s\n' "$a" "$b" | mhf -d db --no-chain >/dev/null
	printf '%s\n' "$c" >q
	mhrun -d db -a q
	printf 'unique\t-\t-\t%s\n' "$c" | assert_out
}

@test "exact copies are not indexed twice" {
	printf 'a text that repeats itself\nA TEXT THAT REPEATS ITSELF\na text that repeats itself\nanother text, unique\n  a text  that repeats itself  \n' >in
	mhrun --stats in
	assert_status 0
	printf 'a text that repeats itself\nanother text, unique\n' | assert_out
	assert_stat duplicates 3
	assert_stat index_documents 2
	# Nor across runs.
	mhf -d db in >/dev/null
	mhrun -d db --stats in
	assert_stat index_documents 2
}

@test "replays: a rerun with tsv ids and --replay all writes every unique record again" {
	gen_tsv 40 >in
	# Plus a near duplicate and an exact copy under other ids.
	printf 'dup1\t%s!\n' "$(sed -n 3p in | cut -f2)" >>in
	printf 'copy1\t%s\n' "$(sed -n 5p in | cut -f2)" >>in
	mhrun -f tsv -d db --stats in
	assert_status 0
	head -n 40 in | assert_out
	assert_stat unique 40
	assert_stat duplicates 2
	assert_stat replayed 0
	mhrun -f tsv -d db --replay all --stats in
	assert_status 0
	head -n 40 in | assert_out
	assert_stat unique 40
	assert_stat replayed 40
	assert_stat duplicates 2
	assert_stat index_documents 41
	# A different id with an identical text is a duplicate.
	printf 'other-id\t%s\n' "$(sed -n 7p in | cut -f2)" >q
	mhrun -f tsv -d db -a q
	printf 'duplicate\tid6\t1.0000\tother-id\t%s\n' "$(sed -n 7p in | cut -f2)" | assert_out
	# The same id with a changed text is not a replay.
	printf 'id6\t%s!\n' "$(sed -n 7p in | cut -f2)" >q2
	mhrun -f tsv -d db -D q2
	assert_same q2 "$T/out"
}

@test "a rerun reports a near duplicate with its earlier match, not itself" {
	printf 'r1\t%s\nr2\t%s!\n' "$A" "$A" >in
	mhrun -f tsv -d db -a in
	assert_status 0
	s="$(jaccard "$A" "$A!")"
	printf 'unique\t-\t-\tr1\t%s\nduplicate\tr1\t%s\tr2\t%s!\n' "$A" "$s" "$A" >expected
	assert_same expected "$T/out"
	# Rerun, as after a crash: r1 is a replay, r2 is still a duplicate
	# of r1.  (mhfilter 0.1.0 makes r2 its own best match, the copy
	# chained in by the first run: "duplicate r2 1.0000 r2 ...".)
	mhrun -f tsv -d db --replay all -a in
	assert_status 0
	assert_same expected "$T/out"
	# The first run completed: by default both were seen.
	mhrun -f tsv -d db -a in
	assert_status 0
	printf 'seen\tr1\t1.0000\tr1\t%s\nseen\tr2\t1.0000\tr2\t%s!\n' "$A" "$A" |
	    assert_out
}

@test "a candidate of the same text is verified without shingles; one letter changed is not the same" {
	L='Ferry services between the islands resumed on Monday after the storm'
	M='The council will vote on the new parking rules at its next meeting'
	printf 'r1\t%s\nr2\t%s\n' "$L" "$M" >run1
	mhrun -f tsv -d db --stats run1
	assert_status 0
	assert_stat verified_same 0
	# r1 again (its own copy), r2 with its last letter changed (the
	# same length: its earlier version is an ordinary candidate), r3
	# r1's text under another id.
	N="${M%g}s"
	printf 'r1\t%s\nr2\t%s\nr3\t%s\n' "$L" "$N" "$L" >run2
	mhrun -f tsv -d db -a --stats run2
	assert_status 0
	s="$(jaccard "$M" "$N")"
	[ "$s" != 1.0000 ] || fail "the edit must change the shingles"
	printf 'seen\tr1\t1.0000\tr1\t%s\nduplicate\tr2\t%s\tr2\t%s\nduplicate\tr1\t1.0000\tr3\t%s\n' \
	    "$L" "$s" "$N" "$L" | assert_out
	assert_stat verified 3
	assert_stat verified_same 2
	# Under containment as well: the shares are 1 both ways.
	printf 'r4\t%s\n' "$L" >run3
	mhrun -f tsv -d cdb --measure containment run1
	assert_status 0
	mhrun -f tsv -d cdb --measure containment -a --stats run3
	assert_status 0
	printf 'duplicate\tr1\t1.0000\tr4\t%s\n' "$L" | assert_out
	assert_stat verified_same 1
}

@test "the pairs of a rerun are those of the first run: no self pairs" {
	printf 'r1\t%s\nr2\t%s!\n' "$A" "$A" >in
	s="$(jaccard "$A" "$A!")"
	mhrun -f tsv -d db -p in
	assert_status 0
	printf 'r1\tr2\t%s\n' "$s" | assert_out
	# (mhfilter 0.1.0 gives "r1 r1", "r2 r1" (r2 as the earlier
	# document of r1), "r2 r2" and "r1 r2".)
	mhrun -f tsv -d db --replay all -p in
	assert_status 0
	printf 'r1\tr2\t%s\n' "$s" | assert_out
}

@test "replays: with jsonl ids, and not without them" {
	printf '{"id":"n1","text":"The harbour bridge reopened to traffic"}\n{"id":2,"text":"Markets were quiet ahead of the holiday"}\n' >in
	mhf -f jsonl -d db in >/dev/null
	mhrun -f jsonl -d db --replay all --stats in
	assert_status 0
	assert_same in "$T/out"
	assert_stat replayed 2
	# Without ids the record numbers are the ids: a rerun of line
	# records finds each one a duplicate of itself (see CAVEATS).
	printf 'The harbour bridge reopened to traffic\n' >lines
	mhf -d db2 lines >/dev/null
	mhrun -d db2 -a lines
	printf 'duplicate\t1\t1.0000\tThe harbour bridge reopened to traffic\n' | assert_out
	printf '{"text":"The harbour bridge reopened to traffic"}\n' >noid
	mhf -f jsonl -d db3 noid >/dev/null
	mhrun -f jsonl -d db3 noid
	[ ! -s "$T/out" ]
}

@test "the map grows past --map-size" {
	gen_tsv 3000 >in
	mhrun -f tsv -d db --map-size 1M --batch 500 --stats in
	assert_status 0
	assert_same in "$T/out"
	assert_stat index_documents 3000
	[ "$(stat -c %s db/data.mdb)" -gt 1048576 ]
	# The grown index reopens with the default map size, and the small
	# one too.
	mhrun -f tsv -d db --replay all --stats in
	assert_status 0
	assert_stat replayed 3000
	mhrun -f tsv -d db --replay all --map-size 1M --stats in
	assert_status 0
	assert_stat replayed 3000
}

@test "a directory whose data.mdb is not LMDB is refused with status 4" {
	mkdir garbage
	head -c 20000 /dev/urandom >garbage/data.mdb
	cp garbage/data.mdb saved
	printf 'some text\n' >in
	mhrun -d garbage in
	assert_status 4
	assert_err_has "garbage is not an LMDB index"
	[ ! -s "$T/out" ]
	cmp saved garbage/data.mdb
	mhrun -d garbage -Q in
	assert_status 4
	assert_err_has "garbage"
}

@test "an LMDB environment that is not an mhfilter index is refused with status 4" {
	command -v mdb_load >/dev/null || skip "mdb_load is not installed (Debian package lmdb-utils)"
	mkdir foreign
	printf 'VERSION=3\nformat=print\ntype=btree\nHEADER=END\n hello\n world\nDATA=END\n' |
	    mdb_load -s other foreign
	cp foreign/data.mdb saved
	printf 'some text\n' >in
	mhrun -d foreign in
	assert_status 4
	assert_err_has "not an mhfilter index"
	[ ! -s "$T/out" ]
	cmp saved foreign/data.mdb
}

@test "--db naming a file, or in a missing directory, exits 1 with a message" {
	printf 'x\n' >afile
	printf 'some text\n' >in
	mhrun -d afile in
	assert_status 1
	assert_err_has "afile"
	mhrun -d missing/sub in
	assert_status 1
	assert_err_has "missing/sub"
}

@test "--explain with --db shows the index's parameters" {
	printf 'x\n' | mhf -d db -n 3 -t 0.95 >/dev/null
	mhrun --explain -d db
	assert_status 0
	grep -q '^perms 128, threshold 0.95: bands 8 x rows 16$' "$T/out"
	mhrun --explain -d db -t 0.5
	grep -q '^perms 128, threshold 0.50: bands 8 x rows 16$' "$T/out"
	# --max-fn and --max-fp choose the bands stored by the first run.
	printf 'x\n' | mhf -d db2 --max-fn 0.5 --max-fp 0.5 >/dev/null
	mhrun --explain -d db2
	grep -q '^perms 128, threshold 0.80: bands 16 x rows 8$' "$T/out"
	# A mismatch is status 4 here too (mhfilter(1) says 1; spec.md 4).
	mhrun --explain -d db -n 4
	assert_status 4
	assert_err_has "--shingle 3"
}

@test "two processes writing to one index: every record is decided once" {
	gen_tsv 4000 >all
	head -n 2000 all >h1
	# The second half: 1800 new records and copies, under new ids, of
	# 200 records of the first half.
	{
		sed -n '2001,3800p' all
		awk -F'\t' 'NR % 10 == 1 && NR <= 2000 { print "cp" NR "\t" $2 }' all
	} >h2
	[ "$(wc -l <h2)" -eq 2000 ]
	# Batches of 50 look l1 runs up one by one, with a small memtable
	# that keeps the sweep merging; batches of 300 (4,800 band keys) find
	# them through a snapshot of l1 kept across batches, and must see the
	# runs the other process merged meanwhile (with 8M the sweep moves
	# about 300 chunks a batch, too few to renew it every batch).
	for spec in "50 256K" "300 8M"; do
		set -- $spec
		b=$1
		rm -rf db
		mhf -f tsv -d db --batch "$b" --memtable "$2" -a h1 >o1 2>e1 &
		p1=$!
		mhf -f tsv -d db --batch "$b" --memtable "$2" -a h2 >o2 2>e2 &
		p2=$!
		s1=0 s2=0
		wait "$p1" || s1=$?
		wait "$p2" || s2=$?
		[ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] ||
		    fail "batch $b: exit $s1 $s2" "$(cat e1 e2)"
		[ "$(wc -l <o1)" -eq 2000 ] && [ "$(wc -l <o2)" -eq 2000 ]
		# Of each original and its copy exactly one is unique.
		cat o1 o2 | awk -F'\t' '$1 == "unique" { print $5 }' |
		    sort | uniq -d >twice
		[ ! -s twice ] ||
		    fail "batch $b: unique in both runs: $(head -3 twice)"
		[ "$(cat o1 o2 | grep -c '^unique')" -eq 3800 ] ||
		    fail "batch $b: $(cat o1 o2 | grep -c '^unique') unique"
		[ "$(cat o1 o2 | grep -c '^duplicate')" -eq 200 ]
		mhrun -f tsv -d db --stats </dev/null
		assert_stat index_documents 3800
	done
}

@test "two processes growing a small map at the same time" {
	gen_tsv 6000 7 >all
	head -n 3000 all >h1
	tail -n 3000 all >h2
	mhf -f tsv -d db --map-size 1M --batch 100 h1 >o1 2>e1 &
	p1=$!
	mhf -f tsv -d db --map-size 1M --batch 100 h2 >o2 2>e2 &
	p2=$!
	s1=0 s2=0
	wait "$p1" || s1=$?
	wait "$p2" || s2=$?
	[ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] || fail "exit $s1 $s2" "$(cat e1 e2)"
	assert_same h1 o1
	assert_same h2 o2
	mhrun -f tsv -d db --stats </dev/null
	assert_stat index_documents 6000
	[ "$(stat -c %s db/data.mdb)" -gt 2097152 ]
}

@test "the same id and text twice in one run is seen, not a replay" {
	printf 'a\thello world foo bar\na\thello world foo bar\n' >in
	mhrun -f tsv -a --stats in
	assert_status 0
	printf 'unique\t-\t-\ta\thello world foo bar\nseen\ta\t1.0000\ta\thello world foo bar\n' |
	    assert_out
	assert_stat replayed 0
	assert_stat duplicates 1
	assert_stat seen 1
	# --replay all: a duplicate of the record with its id, as before.
	mhrun -f tsv -a --replay all in
	printf 'unique\t-\t-\ta\thello world foo bar\nduplicate\ta\t1.0000\ta\thello world foo bar\n' |
	    assert_out
}

@test "stored parameters out of range are refused with status 4, not used" {
	command -v mdb_load >/dev/null || skip "mdb_load is not installed (Debian package lmdb-utils)"
	mhrun -d db "$DATA/sample-news.txt"
	assert_status 0
	# 3 x 2863311531 wraps to 1 in 32 bits: it must not pass for perms 1.
	mdb_dump -p -s meta db |
	    awk '$1 == "perms" { print; getline; print " 1"; next }
		 $1 == "bands" { print; getline; print " 3"; next }
		 $1 == "rows" { print; getline; print " 2863311531"; next }
		 { print }' >meta.txt
	mdb_load -s meta db <meta.txt
	echo 'hello world foo bar baz' >q
	mhrun -d db q
	assert_status 4
	grep -q 'out of range\|invalid' "$T/err" || fail "no clear message" "$(cat "$T/err")"
}

@test "stored bands x rows more than perms, or no bands, are refused with status 4" {
	command -v mdb_load >/dev/null || skip "mdb_load is not installed (Debian package lmdb-utils)"
	mhrun -d db "$DATA/sample-news.txt"
	assert_status 0
	cp -r db db0
	# 30 x 6 = 180 rows of a 128-value signature.
	mdb_dump -p -s meta db |
	    awk '$1 == "bands" { print; getline; print " 30"; next }
		 $1 == "rows" { print; getline; print " 6"; next }
		 { print }' >meta.txt
	mdb_load -s meta db <meta.txt
	echo 'hello world foo bar baz' >q
	mhrun -d db q
	assert_status 4
	assert_err_has "invalid"
	mdb_dump -p -s meta db0 |
	    awk '$1 == "bands" { print; getline; print " 0"; next }
		 { print }' >meta.txt
	mdb_load -s meta db0 <meta.txt
	mhrun -d db0 q
	assert_status 4
	assert_err_has "invalid"
}

@test "groups: a chain's first document is the group of every later one, across runs" {
	B="$A!"
	C="$A!!"
	printf 'a\t%s\nb\t%s\nz\tan unrelated record of its own\n' "$A" "$B" >run1
	printf 'c\t%s\n' "$C" >run2
	mhrun -f tsv -d db -t 0.9 --clusters run1
	assert_status 0
	printf 'a\ta\nb\ta\nz\tz\n' | assert_out
	# A later run: c's best match is b (chained in by run 1), its group
	# is still a.
	mhrun -f tsv -d db -t 0.9 -a --group run2
	assert_status 0
	cut -f1,2,4,5 "$T/out" >got
	printf 'duplicate\tb\ta\tc\n' | assert_same - got
	printf 'e\t%s\n' "$C" >e
	mhrun -f tsv -d db -t 0.9 -p --group e
	assert_status 0
	awk -F'\t' '{ print $1 "\t" $2 "\t" $4 }' "$T/out" | sort >got
	printf 'a\te\ta\nb\te\ta\nc\te\ta\n' | assert_same - got
	# jsonl: a "group" member.
	printf '{"id":"d","text":"%s!!!"}\n' "$A" >run3
	mhrun -f jsonl -d db -t 0.9 -a --group run3
	grep -q '"verdict":"duplicate".*"group":"a"' "$T/out" || fail "$(cat "$T/out")"
	# Seen records keep their group.
	mhrun -f tsv -d db -t 0.9 --clusters run1
	printf 'a\ta\nb\ta\nz\tz\n' | assert_out
	# An export carries the groups (the position of the group's first
	# document); an import keeps them.
	mhrun -d db --export ex
	assert_status 0
	[ "$(grep -c '"group":1}' ex)" -eq 3 ] || fail "$(cat ex)"
	mhrun -d db2 --import ex
	assert_status 0
	printf 'f\t%s!!!!\n' "$A" >q
	mhrun -f tsv -d db2 -t 0.9 --clusters q
	assert_status 0
	printf 'f\ta\n' | assert_out
	# A group that is not an earlier line is refused.
	sed '2s/}$/,"group":5}/' ex >bad
	mhrun -d db3 --import bad
	assert_status 1
	assert_err_has "line 2: its group is not an earlier document"
}

@test "groups: --group needs -a or -p; --clusters excludes the other modes" {
	mhrun --group </dev/null
	assert_status 2
	assert_err_has "--group goes with --annotate or --pairs"
	mhrun --clusters -a </dev/null
	assert_status 2
}

# Run mhfilter as a user who may read the index but not write it: nobody
# when the tests run as root, else the caller (the modes do the rest).
mhrun_reader() {
	status=0
	if [ "$(id -u)" -eq 0 ]; then
		timeout 60 setpriv --reuid=nobody --regid=nogroup \
		    --clear-groups "$MHFILTER" "$@" >"$T/out" 2>"$T/err" ||
		    status=$?
	else
		timeout 60 "$MHFILTER" "$@" >"$T/out" 2>"$T/err" || status=$?
	fi
}

@test "-Q, --info, --check and --export read an index they may not write" {
	gen_tsv 200 >in
	mhrun -f tsv --db "$T/db" in
	assert_status 0
	chmod 0755 "$T"
	chmod 0444 "$T/db"/*
	chmod 0555 "$T/db"
	mkdir "$T/w"
	chmod 0777 "$T/w"
	mhrun_reader -f tsv --db "$T/db" -Q --stats "$T/in"
	assert_status 0
	assert_stat seen 200
	mhrun_reader --db "$T/db" --info
	assert_status 0
	grep -q . "$T/out" || fail "no --info output"
	mhrun_reader --db "$T/db" --check
	assert_status 0
	mhrun_reader --db "$T/db" --export "$T/w/export"
	assert_status 0
	[ -s "$T/w/export" ] || fail "nothing exported"
	# Writing it is still refused.
	mhrun_reader -f tsv --db "$T/db" "$T/in"
	assert_status 1
	assert_err_has 'Permission denied'
	chmod -R u+w "$T/db"
}
