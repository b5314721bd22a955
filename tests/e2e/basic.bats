#!/usr/bin/env bats
# The default line format: the sample feed, the input stream, the command
# line, --explain, and the algorithm options (threshold, normalisation,
# shingles, seed, bands).

load helpers

# The sample feed without the lines listed as its duplicates.
sample_unique() {
	awk 'NR == FNR { dup[$1]; next } !(FNR in dup)' \
	    "$DATA/sample-news.expected-duplicates" "$DATA/sample-news.txt"
}

# Only the lines listed as duplicates.
sample_duplicates() {
	awk 'NR == FNR { dup[$1]; next } FNR in dup' \
	    "$DATA/sample-news.expected-duplicates" "$DATA/sample-news.txt"
}

@test "sample feed: default output is the input minus the expected duplicates" {
	mhrun "$DATA/sample-news.txt"
	assert_status 0
	sample_unique | assert_out
	[ ! -s "$T/err" ] || fail "unexpected stderr: $(cat "$T/err")"
}

@test "sample feed: -D writes exactly the expected duplicates" {
	mhrun -D "$DATA/sample-news.txt"
	assert_status 0
	sample_duplicates | assert_out
	mhrun --duplicates "$DATA/sample-news.txt"
	sample_duplicates | assert_out
}

@test "sample feed: the annotated verdicts match the expected duplicates" {
	mhrun -a "$DATA/sample-news.txt"
	assert_status 0
	awk -F'\t' '$1 == "duplicate" { print NR }' "$T/out" >dups
	assert_same "$DATA/sample-news.expected-duplicates" dups
	# Every duplicate names an earlier record with a similarity >= 0.8.
	awk -F'\t' '$1 == "duplicate" && !($2 < NR && $3 >= 0.8 &&
	    $3 <= 1) { bad = 1; print } END { exit bad }' "$T/out"
}

@test "stdin, a file argument and '-' give identical output" {
	mhrun "$DATA/sample-news.txt"
	mv "$T/out" byfile
	mhrun <"$DATA/sample-news.txt"
	assert_status 0
	assert_same byfile "$T/out"
	mhrun - <"$DATA/sample-news.txt"
	assert_status 0
	assert_same byfile "$T/out"
	cat "$DATA/sample-news.txt" | mhf -a >piped
	mhrun -a - <"$DATA/sample-news.txt"
	assert_same piped "$T/out"
}

@test "several files are one stream: duplicates across files, record numbers continue" {
	printf 'The harbour bridge reopened to traffic after repairs\nA quiet day on the markets as traders await data\n' >one
	printf 'a quiet day on the markets as traders await data!\nA QUIET DAY ON THE MARKETS as traders await data!\nSomething unrelated about the weather tomorrow\n' >two
	mhrun -a one two
	assert_status 0
	assert_out <<-EOF
	unique	-	-	The harbour bridge reopened to traffic after repairs
	unique	-	-	A quiet day on the markets as traders await data
	duplicate	2	$(jaccard 'A quiet day on the markets as traders await data' 'a quiet day on the markets as traders await data!')	a quiet day on the markets as traders await data!
	duplicate	3	1.0000	A QUIET DAY ON THE MARKETS as traders await data!
	unique	-	-	Something unrelated about the weather tomorrow
	EOF
	# '-' among files reads stdin at that place in the stream.
	mhrun one - <two
	assert_status 0
	printf 'The harbour bridge reopened to traffic after repairs\nA quiet day on the markets as traders await data\nSomething unrelated about the weather tomorrow\n' | assert_out
	# A record never spans files.
	printf 'abc' >f1
	printf 'def\n' >f2
	mhrun -a f1 f2
	printf 'unique\t-\t-\tabc\nunique\t-\t-\tdef\n' | assert_out
	# The sample split in two files gives the same as the whole.
	head -n 20 "$DATA/sample-news.txt" >part1
	tail -n +21 "$DATA/sample-news.txt" >part2
	mhrun part1 part2
	sample_unique | assert_out
}

@test "the last record without a newline is written with one" {
	printf 'first line of the input\nlast line without newline' >in
	mhrun <in
	assert_status 0
	printf 'first line of the input\nlast line without newline\n' | assert_out
	# Also when it is a duplicate, with -D.
	printf 'first line of the input\nfirst line of the input' | mhf -D >out2
	printf 'first line of the input\n' | cmp - out2
}

@test "empty input gives empty output" {
	mhrun </dev/null
	assert_status 0
	[ ! -s "$T/out" ]
	mhrun --stats </dev/null
	assert_stat records 0
	assert_stat unique 0
}

@test "an unreadable input file: the records before it are written, exit 1" {
	printf 'one record before the error\n' >f1
	mhrun f1 no-such-file f1
	assert_status 1
	printf 'one record before the error\n' | assert_out
	assert_err_has "no-such-file"
	mhrun "$T"
	assert_status 1
	assert_err_has "Is a directory"
}

@test "the temporary index is made in TMPDIR, and gone from it as soon as it is open" {
	# Made there: a TMPDIR that does not exist is named in the error.
	printf 'a record\n' >in
	TMPDIR="$T/missing" mhrun in
	assert_status 1
	grep -q "$T/missing/mhfilter\." "$T/err" || fail "$(cat "$T/err")"
	mkfifo fifo
	"$MHFILTER" <fifo >out 2>err &
	BG_PIDS+=($!)
	exec 5>fifo
	printf 'a first record\n' >&5
	wait_lines out
	# Open, and already unlinked: a crash leaves nothing behind.
	[ -z "$(ls -A "$T" | grep '^mhfilter\.')" ] || fail "$(ls -la "$T")"
	exec 5>&-
	wait_exit "${BG_PIDS[0]}"
	assert_status 0
	[ -z "$(ls -A "$T" | grep '^mhfilter\.')" ] || fail "temporary index left"
}

@test "--version names the index format and the signature scheme" {
	mhrun --version
	assert_status 0
	echo 'mhfilter 0.1.0 (index format 9, signature scheme 2 xxh3-oph16-dens-v2)' | assert_out
	mhrun -V
	echo 'mhfilter 0.1.0 (index format 9, signature scheme 2 xxh3-oph16-dens-v2)' | assert_out
}

@test "--help prints the usage with every option and exits 0" {
	mhrun --help </dev/null
	assert_status 0
	grep -q '^usage: mhfilter' "$T/out"
	for opt in --null --format --text-field --id-field --max-bytes \
	    --on-bad-input --threshold --perms --bands --rows --max-fn \
	    --max-fp --shingle --unit --normalize --seed --verify \
	    --max-candidates --no-chain --db --query-only --batch \
	    --duplicates --annotate --pairs --stats '--\[no-\]progress' --quiet \
	    --explain --help --version; do
		grep -qe "$opt" "$T/out" || fail "--help lacks $opt"
	done
	mhrun -h
	assert_status 0
	grep -q '^usage: mhfilter' "$T/out"
}

# The long options of --help, one a line (--[no-]x as --x and --no-x).
help_options() {
	mhf --help | grep -o -- '--\(\[no-\]\)\?[a-z][a-z-]*' |
	    sed 's/^--\[no-\]\(.*\)/--\1\n--no-\1/' | sort -u
}

@test "the option table: --help and the man page's option lists name the same options" {
	set -o pipefail
	help_options >help
	grep '^\.It' "$TESTDIR/../man/mhfilter.1" | grep -o 'Fl -[a-z][a-z-]*' |
	    sed 's/^Fl -/--/' | sort -u >man
	[ "$(wc -l <help)" -gt 70 ] || fail "only $(wc -l <help) options"
	diff help man || fail "--help (<) and mhfilter(1) (>) differ"
}

@test "the option table: every long option is a configuration key but those mhfilter.conf(5) forbids" {
	set -o pipefail
	sed -n '/^The keys$/,/are not allowed/p' \
	    "$TESTDIR/../man/mhfilter.conf.5" | sed -n 's/^\.Cm \([a-z-]*\).*/\1/p' |
	    sort -u >forbidden
	[ "$(wc -l <forbidden)" -eq 12 ] || fail "forbidden: $(cat forbidden)"
	help_options | sed 's/^--//' >keys
	: >refused
	while read -r key; do
		printf '%s = 1\n' "$key" >conf
		mhrun --config conf --version </dev/null
		# 0, or 2 for a key refused or a value ("1") it does not take.
		status_is 0 2
		if grep -q "unknown key '$key'" "$T/err"; then
			assert_status 2
			echo "$key" >>refused
		fi
	done <keys
	diff forbidden refused || fail "forbidden (<) and refused (>) differ"
}

@test "an unknown option exits 2 naming it" {
	mhrun --bogus </dev/null
	assert_status 2
	assert_err_has "--bogus"
	assert_err_has "mhfilter --help"
	[ ! -s "$T/out" ]
	mhrun -x </dev/null
	assert_status 2
	assert_err_has "'x'"
}

@test "bad option values exit 2 with a message naming the option" {
	check() {
		local name="$1"
		shift
		mhrun "$@" </dev/null
		status_is 2 || fail "'$*' exited $status, expected 2"
		grep -qF -- "$name" "$T/err" ||
		    fail "'$*': stderr does not name $name: $(cat "$T/err")"
		[ ! -s "$T/out" ] || fail "'$*' wrote output"
	}
	check -t -t 2
	check -t -t 0
	check -t -t abc
	check -k -k 0
	check -k -k 1025
	check --bands --bands 129
	check --rows -r 129
	check --bands -k 64 -b 65
	check --bands -b 16 -r 9 -k 128
	check --perms -b 16 -r 9 -k 128
	check --bands -b 30 -r 40
	check -f -f xml
	check --verify --verify foo
	check --max-bytes --max-bytes 1X
	check --max-bytes --max-bytes 2G
	check --max-bytes --max-bytes 0
	check -u -u foo
	check --normalize --normalize foo
	check --normalize --normalize casefold,bogus
	check -n -n 0
	check -n -n 65
	check --seed --seed -1
	check --batch --batch 0
	check --max-candidates --max-candidates 0
	check --max-fn --max-fn 1.5
	check --max-fp --max-fp -0.1
	check --on-bad-input --on-bad-input maybe
	check --map-size --map-size 1K
	check --duplicates -D -a
	check --annotate -a -p
	check --pairs -D -p
	check --query-only -Q
	check --text-field --text-field body
	check --id-field -f tsv --id-field url
}

@test "an error names a long option as it was typed" {
	# Not by its short form: "--format xml" once gave "-f: ...".
	mhrun --format xml </dev/null
	assert_status 2
	assert_err_has "--format"
	mhrun --threshold 2 </dev/null
	assert_status 2
	assert_err_has "--threshold"
	mhrun --unit foo </dev/null
	assert_status 2
	assert_err_has "--unit"
}

@test "an error for a short option whose value starts with -- names that option" {
	# The name once came from an uninitialised getopt_long index:
	# "--null", or a crash (SIGSEGV) depending on the stack.
	for i in 1 2 3 4 5; do
		mhrun -t --5 </dev/null
		assert_status 2
	done
	assert_status 2
	assert_err_has "-t: '--5'"
	assert_err_lacks "--null"
}

@test "a long option's value may follow '='" {
	mhrun --threshold=0.5 -a --format=line "$DATA/sample-news.txt"
	assert_status 0
	mv "$T/out" eq
	mhrun -t 0.5 -a -f line "$DATA/sample-news.txt"
	assert_same "$T/out" eq
}

@test "--explain -t 0.5 prints 35 x rows 3 and a table of ten similarities" {
	mhrun --explain -t 0.5 </dev/null
	assert_status 0
	# b x r = 105 of the 128 values: b x r <= K, not = K.
	grep -q '^perms 128, threshold 0.50: bands 35 x rows 3$' "$T/out"
	# fn = (1 - 0.5^3)^35, fp = 1 - (1 - 0.25^3)^35
	grep -q '^missed at s = 0.50 (fn): 0.009339$' "$T/out"
	grep -q '^candidate at s = 0.25 (fp): 0.423738$' "$T/out"
	grep -A10 '^similarity  P(candidate)$' "$T/out" | tail -n 10 |
	    awk '{ print $1 }' >col
	printf '0.1\n0.2\n0.3\n0.4\n0.5\n0.6\n0.7\n0.8\n0.9\n1.0\n' | cmp - col
	# P(0.1) = 1 - (1 - 0.1^3)^35, and '#' from the threshold on.
	grep -q '^       0.1      0.034411  |\*\*$' "$T/out"
	grep -q '^       0.5      0.990661  |####' "$T/out"
	# It reads no input: a stdin that never ends is fine.
	mkfifo fifo
	exec 5<>fifo
	mhf --explain -t 0.5 <fifo >/dev/null
	exec 5>&-
}

@test "--explain with -b 16 -r 8 uses them and computes fn" {
	mhrun --explain -b 16 -r 8 </dev/null
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 16 x rows 8$' "$T/out"
	# fn = (1 - 0.8^8)^16
	grep -q '^missed at s = 0.80 (fn): 0.052951$' "$T/out"
	grep -q '^       0.8      0.947049  |' "$T/out"
	# One of them derives the other: as many as K allows.
	mhrun --explain -b 16
	grep -q 'bands 16 x rows 8$' "$T/out"
	mhrun --explain -r 8
	grep -q 'bands 16 x rows 8$' "$T/out"
	mhrun --explain -k 64 -r 4
	grep -q '^perms 64, threshold 0.80: bands 16 x rows 4$' "$T/out"
	# floor(128 / 3) = 42 and floor(128 / 7) = 18: K need not divide.
	mhrun --explain -b 3
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 3 x rows 42$' "$T/out"
	mhrun --explain -r 7
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 18 x rows 7$' "$T/out"
	# Both without -k set K.
	mhrun --explain -b 10 -r 5
	grep -q '^perms 50, threshold 0.80: bands 10 x rows 5$' "$T/out"
	mhrun --explain -b 30 -r 6
	grep -q '^perms 180, threshold 0.80: bands 30 x rows 6$' "$T/out"
}

@test "--bands x --rows may be less than --perms, not more" {
	# 60 of 128 values banded; the rest still count in the estimates.
	mhrun --explain -k 128 --bands 10 --rows 6
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 10 x rows 6$' "$T/out"
	# fn = (1 - 0.8^6)^10
	grep -q '^missed at s = 0.80 (fn): 0.047832$' "$T/out"
	mhrun -D -k 128 --bands 10 --rows 6 "$DATA/sample-news.txt"
	assert_status 0
	sample_duplicates | assert_out
	# 30 x 6 = 180 values, more than there are.
	mhrun -k 128 --bands 30 --rows 6 "$DATA/sample-news.txt"
	assert_status 2
	[ ! -s "$T/out" ]
	assert_err_has "--perms 128"
	assert_err_has "--bands 30"
	mhrun --explain -k 128 --bands 30 --rows 6
	assert_status 2
	assert_err_has "--perms 128"
	# One of them more than K.
	mhrun --explain -k 128 --rows 129
	assert_status 2
	assert_err_has "--rows 129 is more than --perms 128"
}

@test "--explain: the default choice and --max-fn / --max-fp change it" {
	mhrun --explain
	# 96 of the 128 values: fp 0.36 where b x r = K allowed only 32 x 4
	# and fp 0.95.
	grep -q '^perms 128, threshold 0.80: bands 16 x rows 6$' "$T/out"
	grep -q '^missed at s = 0.80 (fn): 0.007719$' "$T/out"
	grep -q '^candidate at s = 0.55 (fp): 0.361820$' "$T/out"
	# A looser fn bound: more rows, fewer bands, fp under its bound.
	mhrun --explain --max-fn 0.5
	grep -q '^perms 128, threshold 0.80: bands 11 x rows 9$' "$T/out"
	# With loose bounds both hold for more rows: the smallest fn+fp wins.
	mhrun --explain --max-fn 0.5 --max-fp 0.5
	assert_status 0
	grep -q '^perms 128, threshold 0.80: bands 16 x rows 8$' "$T/out"
	# fn bound 0: only pairs whose fn rounds to 0 in double precision
	# (r = 2 from 37 bands, r = 1 from 24); of those the least fp.
	mhrun --explain --max-fn 0
	grep -q 'bands 37 x rows 2$' "$T/out"
	grep -q '^missed at s = 0.80 (fn): 0.000000$' "$T/out"
}

@test "threshold: a pair of similarity 0.5238 is a duplicate at -t 0.5, not at -t 0.95" {
	# 20 characters, one changed in the middle: 5 of 16 5-shingles
	# differ, so J = 11 / 21.
	printf 'abcdefghijklmnopqrst\nabcdefghijXlmnopqrst\n' >in
	[ "$(jaccard abcdefghijklmnopqrst abcdefghijXlmnopqrst)" = 0.5238 ]
	mhrun -a -t 0.5 in
	assert_status 0
	assert_out <<-'EOF'
	unique	-	-	abcdefghijklmnopqrst
	duplicate	1	0.5238	abcdefghijXlmnopqrst
	EOF
	mhrun -a --threshold 0.95 in
	assert_out <<-'EOF'
	unique	-	-	abcdefghijklmnopqrst
	unique	-	-	abcdefghijXlmnopqrst
	EOF
	# At exactly the similarity it is a duplicate (>=), just above not.
	mhrun -D -t 0.5238 in
	printf 'abcdefghijXlmnopqrst\n' | assert_out
	mhrun -D -t 0.524 in
	assert_out </dev/null
	# -t 1: only identical shingle sets.
	printf 'abcdefghijklmnopqrst\nABCDEFGHIJKLMNOPQRST\nabcdefghijklmnopqrsX\n' | mhf -D -t 1 >d
	printf 'ABCDEFGHIJKLMNOPQRST\n' | cmp - d
}

@test "the default threshold is 0.8" {
	a='The committee approved the new budget for the coming year'
	b='The committee approved the new budget for the coming years'
	c='The committee approved the revised budget for the coming fiscal year'
	sb="$(jaccard "$a" "$b")"
	sc="$(jaccard "$a" "$c")"
	awk -v b="$sb" -v c="$sc" 'BEGIN { exit !(b >= 0.8 && c < 0.8) }'
	printf '%s\n%s\n%s\n' "$a" "$b" "$c" >in
	mhrun -a in
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	$sb	$b
	unique	-	-	$c
	EOF
}

@test "--normalize none makes case and spacing matter" {
	printf 'Hello World Again And Again\nhello   world again and again\n' >in
	mhrun -a in
	assert_out <<-'EOF'
	unique	-	-	Hello World Again And Again
	duplicate	1	1.0000	hello   world again and again
	EOF
	mhrun -a --normalize none in
	assert_status 0
	assert_out <<-'EOF'
	unique	-	-	Hello World Again And Again
	unique	-	-	hello   world again and again
	EOF
	# casefold alone: spacing still matters.
	mhrun -D --normalize casefold in
	assert_out </dev/null
	mhrun -D --normalize casefold,space in
	printf 'hello   world again and again\n' | assert_out
}

@test "--normalize punct turns punctuation into spaces" {
	printf 'Hello, world: how are you today?\nhello world how are you today\n' >in
	mhrun -a in
	grep -q '^unique	-	-	hello world how' "$T/out"
	mhrun -a --normalize casefold,space,punct in
	assert_status 0
	assert_out <<-'EOF'
	unique	-	-	Hello, world: how are you today?
	duplicate	1	1.0000	hello world how are you today
	EOF
	# Unicode punctuation too (the em dash, the guillemets).
	printf 'bonjour \xc2\xabmonde\xc2\xbb \xe2\x80\x94 encore une fois\nbonjour monde encore une fois\n' |
	    mhf -D --normalize casefold,nfkc,space,punct >d
	printf 'bonjour monde encore une fois\n' | cmp - d
}

@test "nfkc: a ligature and a full-width letter compare equal to their plain forms" {
	printf '\xef\xac\x81nance officer \xef\xbc\xa1nnual report\nfinance officer annual report\n' >in
	mhrun -a in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$(printf '\xef\xac\x81nance officer \xef\xbc\xa1nnual report')
	duplicate	1	1.0000	finance officer annual report
	EOF
	mhrun -D --normalize casefold,space in
	assert_out </dev/null
}

@test "Unicode: full case folding, composed and decomposed forms compare equal" {
	printf 'Die Straße ist gesperrt worden\nDIE STRASSE IST GESPERRT WORDEN\n\xc3\x89cole \xc3\xa9l\xc3\xa9mentaire du quartier\nE\xcc\x81cole e\xcc\x81le\xcc\x81mentaire du quartier\n' >in
	mhrun -a in
	assert_status 0
	cut -f1-3 "$T/out" >v
	printf 'unique\t-\t-\nduplicate\t1\t1.0000\nunique\t-\t-\nduplicate\t3\t1.0000\n' | cmp - v
	cut -f4- "$T/out" | cmp - in
	# Without nfkc the canonical composition (NFC) still applies.
	mhrun -D --normalize casefold,space in
	sed -n '2p;4p' in | assert_out
}

@test "a CR before the newline is white space in the text, kept in the output" {
	printf 'abc def ghi\r\nABC DEF GHI\n' >in
	mhrun -a in
	assert_status 0
	printf 'unique\t-\t-\tabc def ghi\r\nduplicate\t1\t1.0000\tABC DEF GHI\n' | assert_out
}

@test "-u word -n 2 compares word bigrams" {
	a='the cat sat on the mat today'
	b='the cat sat on the mat yesterday'
	[ "$(jaccard "$a" "$b" 2 word)" = 0.7143 ]
	printf '%s\n%s\n' "$a" "$b" >in
	mhrun -a -u word -n 2 -t 0.7 in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	0.7143	$b
	EOF
	mhrun -a --unit word --shingle 2 -t 0.75 in
	grep -c '^unique' "$T/out" | grep -qx 2
	# A text of fewer words than n is one shingle.
	printf 'two words\ntwo  WORDS\n' | mhf -a -u word -n 3 >o
	printf 'unique\t-\t-\ttwo words\nduplicate\t1\t1.0000\ttwo  WORDS\n' | cmp - o
}

@test "-n 3 compares character trigrams" {
	a='shipping rates rose sharply'
	b='shipping rates rose slightly'
	s3="$(jaccard "$a" "$b" 3)"
	s5="$(jaccard "$a" "$b" 5)"
	printf '%s\n%s\n' "$a" "$b" >in
	mhrun -a -n 3 -t 0.5 in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	$s3	$b
	EOF
	mhrun -a -t 0.5 in
	assert_out <<-EOF
	unique	-	-	$a
	duplicate	1	$s5	$b
	EOF
	[ "$s3" != "$s5" ]
	# A text shorter than n is one shingle: "ab" and "AB" are equal.
	printf 'ab\nAB\nabc\n' | mhf -a -n 3 >o
	printf 'unique\t-\t-\tab\nduplicate\t1\t1.0000\tAB\nunique\t-\t-\tabc\n' | cmp - o
}

@test "--seed: runs are deterministic and the verdicts do not depend on it" {
	mhrun -a --seed 12345 "$DATA/sample-news.txt"
	assert_status 0
	mv "$T/out" s1
	mhrun -a --seed 12345 "$DATA/sample-news.txt"
	assert_same s1 "$T/out"
	mhrun -a "$DATA/sample-news.txt"
	assert_same s1 "$T/out"
	mhrun -a --seed 18446744073709551615 "$DATA/sample-news.txt"
	assert_status 0
	assert_same s1 "$T/out"
}

@test "--batch does not change the output" {
	mhrun -a "$DATA/sample-news.txt"
	mv "$T/out" ref
	for b in 1 3 40 1000000; do
		mhrun -a --batch "$b" "$DATA/sample-news.txt"
		assert_status 0
		assert_same ref "$T/out"
	done
}

@test "a producer that keeps writing through a pipe fills whole batches" {
	# 20,000 records of 36 bytes, written 4 KB at a time with a pause of
	# half a millisecond: the filter drains the pipe faster than that.
	seq 20000 | awk '{ x = $1 * 2654435761 % 4294967296
	    printf "%08x %08x %08x %08x\n", x, x * 3 % 4294967296,
	    x * 5 % 4294967296, x * 7 % 4294967296 }' >fast
	mhrun --stats --batch 4000 < <(python3 -c '
import sys, time
data = open(sys.argv[1], "rb").read()
for i in range(0, len(data), 4096):
    sys.stdout.buffer.write(data[i:i + 4096])
    sys.stdout.buffer.flush()
    time.sleep(0.0005)
' fast)
	assert_status 0
	assert_same fast "$T/out"
	# 5 when every batch is full.  Closing a batch whenever the pipe was
	# empty for an instant made dozens.
	echo "# $(stat_of batches) batches" >&3
	[ "$(stat_of batches)" -le 25 ] ||
	    fail "$(stat_of batches) batches for 20000 records"
}

@test "-k and explicit bands still find the sample's duplicates" {
	for opts in "-k 256" "-k 64" "-b 64 -r 2" "--perms 128 --bands 128" "--rows 2"; do
		mhrun -D $opts "$DATA/sample-news.txt"
		assert_status 0
		sample_duplicates | assert_out
	done
}

@test "--max-candidates 1 examines only the candidate sharing most bands" {
	a='Quarterly earnings at the regional bank beat analyst forecasts by a wide margin'
	printf '%s\n%s today\n%s today, the company said\n' "$a" "$a" "$a" >in
	mhrun -p -t 0.7 in
	assert_status 0
	sort "$T/out" >all
	printf '1\t2\t%s\n1\t3\t%s\n2\t3\t%s\n' \
	    "$(jaccard "$a" "$a today")" \
	    "$(jaccard "$a" "$a today, the company said")" \
	    "$(jaccard "$a today" "$a today, the company said")" | cmp - all
	mhrun -p -t 0.7 --max-candidates 1 in
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 2 ]
	grep -q "^1	2	" "$T/out"
	grep -q "	3	" "$T/out"
}

@test "a family of near-copies: each record verifies at most 9 candidates once it has a match, the verdicts those of every match (-p)" {
	# 1,500 copies of one line, each with its own number: every record a
	# near-copy of every other, all inserted (chains), so that every
	# earlier one is a candidate within the margin of the best.
	python3 -c 'for i in range(1500): print("a%d\tOil prices slipped for a third straight session as crude inventories rose more than expected, record %d" % (i, i))' >fam
	mhrun -f tsv --stats -D fam
	assert_status 0
	assert_stat duplicates 1499
	v="$(sed -n 's/^mhfilter: verified: //p' "$T/err")"
	[ "$v" -le $((9 * 1499)) ] || fail "verified $v candidates for 1499 records"
	cut -f1 "$T/out" >dups
	# -p verifies every candidate: the same records are duplicates.
	mhrun -f tsv --stats -p fam
	assert_status 0
	vp="$(sed -n 's/^mhfilter: verified: //p' "$T/err")"
	[ "$vp" -gt $((9 * 1499)) ] || fail "-p verified only $vp"
	cut -f2 "$T/out" | sort -u >paired
	sort dups | cmp - paired
}

@test "--text-field and --id-field with their default names are accepted without jsonl" {
	echo hi >in
	mhrun --text-field text --id-field id in
	assert_status 0
	echo hi | assert_out
}

@test "an option's unknown word is a usage error that lists the words to use" {
	local opt want
	while IFS='|' read -r opt want; do
		mhrun $opt bogus /dev/null
		assert_status 2
		assert_err_has "$want"
	done <<'LIST'
-f|-f: unknown format 'bogus' (use line, tsv, jsonl, mail or warc)
--on-bad-input|--on-bad-input: unknown policy 'bogus' (use skip, pass or fail)
-u|-u: unknown unit 'bogus' (use char or word)
--verify|--verify: unknown mode 'bogus' (use exact, signature or none)
--replay|--replay: unknown mode 'bogus' (use undelivered or all)
LIST
	# The aliases, not listed, are taken.
	printf '{"id":"a","text":"some text here"}\n' >in.jsonl
	mhrun -f json in.jsonl
	assert_status 0
	mhrun -f news /dev/null
	assert_status 0
}
