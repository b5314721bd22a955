#!/usr/bin/env bats
# Output modes (-a, -p, -D), --stats, write errors, --progress.

load helpers

V='Voters in the northern province head to the polls on Sunday'

@test "-a: four tab-separated fields, then the record as read" {
	mhrun --annotate "$DATA/sample-news.txt"
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 40 ]
	# The record is everything after the third tab, byte for byte.
	cut -f4- "$T/out" >records
	assert_same "$DATA/sample-news.txt" records
	awk -F'\t' '
	    $1 == "unique" && $2 == "-" && $3 == "-" { next }
	    $1 == "duplicate" && $2 ~ /^[0-9]+$/ && $3 ~ /^[01]\.[0-9][0-9][0-9][0-9]$/ { next }
	    { print "bad line " NR ": " $0; bad = 1 }
	    END { exit bad }' "$T/out"
}

@test "-a: the verdicts unique, duplicate and empty, with match and similarity" {
	printf '%s\n\n%s again\n' "$V" "$V" >in
	mhrun -a in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$V
	empty	-	-	
	duplicate	1	$(jaccard "$V" "$V again")	$V again
	EOF
}

@test "-p: earlier id, later id and similarity for every verified pair" {
	printf '%s\n%s again\nToday: %s\nSomething else entirely, about sport\n' "$V" "$V" "$V" >in
	s12="$(jaccard "$V" "$V again")"
	s13="$(jaccard "$V" "Today: $V")"
	s23="$(jaccard "$V again" "Today: $V")"
	awk -v a="$s12" -v b="$s13" -v c="$s23" \
	    'BEGIN { exit !(a >= 0.8 && b >= 0.8 && c >= 0.8) }'
	mhrun --pairs in
	assert_status 0
	# Record 3 matches both 1 and 2 (2 is chained into the index).
	sort "$T/out" >pairs
	printf '1\t2\t%s\n1\t3\t%s\n2\t3\t%s\n' "$s12" "$s13" "$s23" | cmp - pairs
	# Without chains only unique records are compared with.
	mhrun -p --no-chain in
	sort "$T/out" >pairs
	printf '1\t2\t%s\n1\t3\t%s\n' "$s12" "$s13" | cmp - pairs
	# Pairs below the threshold are not listed.
	mhrun -p -t 0.89 in
	printf '1\t2\t%s\n' "$s12" | assert_out
}

@test "-p: nothing for input without near duplicates" {
	mhrun -p "$DATA/sample-news.txt"
	[ "$(wc -l <"$T/out")" -ge 10 ]
	cut -f2 "$T/out" | sort -n -u >later
	assert_same "$DATA/sample-news.expected-duplicates" later
	head -n 6 "$DATA/sample-news.txt" >distinct
	mhrun -p distinct
	assert_status 0
	[ ! -s "$T/out" ]
}

@test "-D: only the duplicates, as read" {
	printf '%s\n%s again\nSomething else entirely, about sport\nToday: %s\n' "$V" "$V" "$V" >in
	mhrun -D in
	assert_status 0
	printf '%s again\nToday: %s\n' "$V" "$V" | assert_out
}

@test "--stats: every key on stderr with the right numbers, stdout untouched" {
	printf '%s\n%s again\n\n{"x"\nplain unrelated text\n\xff\xfe bytes that are not utf-8\n' "$V" "$V" >in
	printf '%s\n' "$(printf 'L%.0s' $(seq 200))" >>in
	mhrun --stats -q --max-bytes 100 in
	assert_status 0
	printf '%s\n\n{"x"\nplain unrelated text\n\xff\xfe bytes that are not utf-8\n' "$V" | assert_out
	assert_stat records 7
	assert_stat unique 4
	assert_stat duplicates 1
	assert_stat empty 1
	assert_stat invalid 0
	assert_stat too_long 1
	assert_stat unchecked 0
	assert_stat invalid_utf8 1
	assert_stat bytes "$(stat -c %s in)"
	assert_stat index_documents 5
	assert_stat replayed 0
	assert_stat seen 0
	for key in candidates verified records_per_second max_rss_kb; do
		stat_of "$key" | grep -qE '^[0-9]+$' || fail "$key: $(stat_of "$key")"
	done
	[ "$(stat_of candidates)" -ge "$(stat_of verified)" ]
	[ "$(stat_of verified)" -ge 1 ]
	[ "$(stat_of max_rss_kb)" -gt 0 ]
	stat_of seconds | grep -qE '^[0-9]+\.[0-9]{3}$'
	stat_of mb_per_second | grep -qE '^[0-9]+\.[0-9]{2}$'
	# Every line is "mhfilter: key: value".
	! grep -vE '^mhfilter: [a-z_0-9]+: [0-9.]+$' "$T/err" || fail "odd line"
	# Each key once, in the documented order.
	cut -d: -f2 "$T/err" | tr -d ' ' >keys
	printf '%s\n' records unique replayed duplicates seen empty invalid \
	    too_long unchecked blank invalid_utf8 candidates verified verified_same \
	    looked_ahead looked_again verified_ahead expired batches \
	    bytes seconds \
	    records_per_second mb_per_second index_documents \
	    index_band_entries index_bytes max_rss_kb | cmp - keys
	# Malformed records are counted as invalid; the blank line is not one.
	mhrun -f jsonl --stats -q in
	assert_stat invalid 6
	assert_stat blank 1
	assert_stat empty 0
}

@test "--stats: bytes counts the bytes read, also without a final newline" {
	printf 'abc' >in
	mhrun --stats in
	assert_status 0
	printf 'abc\n' | assert_out
	assert_stat bytes 3
}

@test "--stats with -D, -a and -p counts the same" {
	for mode in "" -D -a -p; do
		mhrun $mode --stats "$DATA/sample-news.txt"
		assert_status 0
		assert_stat records 40
		assert_stat unique 30
		assert_stat duplicates 10
		assert_stat bytes "$(stat -c %s "$DATA/sample-news.txt")"
	done
}

@test "a write error (/dev/full) exits 1 with a message" {
	[ -w /dev/full ] || skip "no /dev/full"
	status=0
	mhf <"$DATA/sample-news.txt" >/dev/full 2>err || status=$?
	[ "$status" -eq 1 ]
	grep -q 'write error' err
	status=0
	printf 'one line\n' | mhf -a >/dev/full 2>err || status=$?
	[ "$status" -eq 1 ]
	grep -qx 'mhfilter: standard output: write error: No space left on device' err ||
	    fail "$(cat err)"
	status=0
	mhf -o /dev/full "$DATA/sample-news.txt" 2>err || status=$?
	[ "$status" -eq 1 ]
	grep -qx 'mhfilter: output /dev/full: write error: No space left on device' err ||
	    fail "$(cat err)"
	# --stats is still written.
	status=0
	mhf --stats <"$DATA/sample-news.txt" >/dev/full 2>err || status=$?
	[ "$status" -eq 1 ]
	grep -q '^mhfilter: records: 40$' err
}

@test "standard input, output or error closed: an error (exit 1), never the index's or an input's file written or read in their place" {
	printf 'one record of words\nanother record, of other words\n' >in
	# Output closed: the records cannot be written; lock.mdb untouched.
	status=0
	"$MHFILTER" -d db in >&- 2>err || status=$?
	[ "$status" -eq 1 ] || fail "status $status" "$(cat err)"
	grep -qx 'mhfilter: standard output: write error: Bad file descriptor' err ||
	    fail "$(cat err)"
	run grep -c 'record' db/lock.mdb
	[ "$output" = 0 ] || fail "lock.mdb holds records"
	# Not written, so not delivered: the next run writes them.
	"$MHFILTER" -d db in >out 2>err || fail "$(cat err)"
	cmp in out
	# Error output closed: a failure still fails, and goes nowhere else.
	status=0
	"$MHFILTER" -d db2 in >/dev/full 2>&- || status=$?
	[ "$status" -eq 1 ] || fail "status $status"
	run grep -c 'write error' db2/lock.mdb
	[ "$output" = 0 ] || fail "lock.mdb holds the message"
	# Input closed: a read error, not another file read instead.
	status=0
	"$MHFILTER" -d db3 <&- >out 2>err || status=$?
	[ "$status" -eq 1 ] || fail "status $status" "$(cat err)"
	grep -qx 'mhfilter: read stdin: Bad file descriptor' err || fail "$(cat err)"
	[ ! -s out ] || fail "$(cat out)"
}

@test "a closed pipe (| head -1) ends the run quietly, with the status grep and sort give (141)" {
	gen_tsv 20000 >big
	mhf -f tsv big 2>err | head -n 1 >first
	codes=("${PIPESTATUS[@]}")
	[ "${codes[0]}" -eq 141 ] || fail "status ${codes[0]}, expected 141" "$(cat err)"
	[ ! -s err ] || fail "stderr: $(cat err)"
	head -n 1 big | cmp - first
	# Another write error is an error, with a message.
	mhf -f tsv big >/dev/full 2>err && fail "exit 0 on a full disk"
	grep -q 'write error: No space left on device' err
}

@test "--progress writes a progress line on stderr, never on stdout" {
	gen_tsv 3000 >in
	mhrun -f tsv --progress --batch 500 in
	assert_status 0
	assert_same in "$T/out"
	grep -q $'\rmhfilter: 3000 records, 3000 unique, 0 duplicates, [0-9]* records/s' "$T/err"
	[ "$(tail -c 1 "$T/err" | od -An -c | tr -d ' ')" = '\n' ]
}

@test "no progress by default when stderr is not a terminal, or with --no-progress" {
	gen_tsv 3000 >in
	mhrun -f tsv in
	assert_status 0
	[ ! -s "$T/err" ]
	mhrun -f tsv --progress --no-progress in
	[ ! -s "$T/err" ]
}

@test "progress by default when stderr is a terminal" {
	command -v script >/dev/null || skip "script(1) is not installed (Debian package bsdutils)"
	gen_tsv 3000 >in
	script -qec "timeout 60 '$MHFILTER' -f tsv in 2>&1 >out" /dev/null >tty
	assert_same in out
	grep -q 'mhfilter: 3000 records, 3000 unique' tty
	script -qec "timeout 60 '$MHFILTER' -f tsv --no-progress in 2>&1 >out" /dev/null >tty
	! grep -q 'records' tty || fail "progress with --no-progress:" "$(cat tty)"
}

@test "-p and -a escape TAB, newline and backslash in ids" {
	printf '{"id":"x\\ty\\nz\\\\","text":"hello world foo bar"}\n{"id":"q","text":"hello world foo bar"}\n' >in
	mhrun -f jsonl -p in
	assert_status 0
	printf 'x\\ty\\nz\\\\\tq\t1.0000\n' | assert_out
	printf 'x\ty\thello world foo bar\nq\thello world foo bar\n' >in2
	mhrun -f tsv -a in2
	[ "$(sed -n 2p "$T/out" | cut -f2)" = 'x' ] || fail "match id" "$(cat "$T/out")"
}

@test "-a with jsonl writes valid JSON when the matched id is not UTF-8" {
	printf '\377\376id\thello world foo bar baz\n' >in1
	mhrun -f tsv -d db in1
	assert_status 0
	printf '{"id":"k","text":"hello world foo bar baz"}\n' >in2
	mhrun -f jsonl -a -d db in2
	assert_status 0
	python3 -c 'import json,sys
o = json.loads(open(sys.argv[1], encoding="utf-8").read())
assert o["mhfilter"]["verdict"] == "duplicate", o
assert o["mhfilter"]["match"] == "\ufffd\ufffdid", o' "$T/out" ||
	    fail "not the expected JSON" "$(cat "$T/out")"
}

@test "progress on a terminal: bytes, rate, and for files the share read and the time left, at most 4 a second" {
	command -v script >/dev/null || skip "script(1) is not installed (Debian package bsdutils)"
	gen_tsv 20000 >in
	gzip -c in >in.gz
	start=$(date +%s.%N)
	script -qec "timeout 60 '$MHFILTER' -f tsv --batch 10 in.gz 2>&1 >out" /dev/null >tty
	end=$(date +%s.%N)
	assert_same in out
	tr '\r' '\n' <tty | grep 'mhfilter: 20000 records' >last
	grep -qE ' records/s, [0-9.]+ MB, [0-9.]+ MB/s, 100%, 0:00 left' last ||
	    fail "$(cat tty)"
	# 2000 batches, but not 2000 redraws.
	n=$(tr '\r' '\n' <tty | grep -c 'mhfilter: [0-9]* records')
	max=$(python3 -c "print(int(($end - $start) * 4) + 2)")
	[ "$n" -le "$max" ] || fail "$n redraws in $(python3 -c "print($end - $start)") s"
	# From a pipe the size is not known: no share, no time left.
	script -qec "cat in | timeout 60 '$MHFILTER' -f tsv 2>&1 >out" /dev/null >tty
	tr '\r' '\n' <tty | grep -q 'mhfilter: 20000 records.* MB/s' ||
	    fail "$(cat tty)"
	if grep -q 'left' tty; then fail "time left from a pipe:" "$(cat tty)"; fi
}
