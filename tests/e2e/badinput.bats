#!/usr/bin/env bats
# Bad input: malformed records and --on-bad-input, over-long records,
# empty records, invalid UTF-8, NUL bytes, very long lines, -q.

load helpers

# Four jsonl records, the third not JSON.
make_bad_jsonl() {
	cat >in.jsonl <<-'EOF'
	{"id":"r1","text":"Flood warnings were issued for three rivers"}
	{"id":"r2","text":"The cabinet met to discuss the spending plan"}
	{"id":"r3","text":"this line is cut short
	{"id":"r4","text":"Tickets for the final sold out in minutes"}
	EOF
}

@test "invalid JSON, default skip: warning with file:line, record dropped, the rest processed" {
	make_bad_jsonl
	mhrun -f jsonl --stats in.jsonl
	assert_status 0
	sed -n '1p;2p;4p' in.jsonl | assert_out
	assert_err_has "mhfilter: in.jsonl:3: invalid JSON"
	assert_err_has "skipped"
	assert_stat records 4
	assert_stat unique 3
	assert_stat invalid 1
	assert_stat duplicates 0
	# Explicitly.
	mhrun -f jsonl --on-bad-input skip in.jsonl
	assert_status 0
	sed -n '1p;2p;4p' in.jsonl | assert_out
	# -a does not show skipped records either.
	mhrun -f jsonl -a in.jsonl
	[ "$(wc -l <"$T/out")" -eq 3 ]
	! grep -q '"r3"' "$T/out" || fail "the skipped record is shown"
}

@test "the warning names stdin, and the file of a later input" {
	make_bad_jsonl
	mhrun -f jsonl <in.jsonl
	assert_status 0
	assert_err_has "stdin:3: invalid JSON"
	printf '{"text":"fine"}\n[1]\n' >two.jsonl
	mhrun -f jsonl in.jsonl two.jsonl
	assert_err_has "in.jsonl:3: "
	# Record numbers in messages count within each file.
	assert_err_has "two.jsonl:2: not a JSON object"
}

@test "--on-bad-input pass: the malformed record is written unchanged, not indexed" {
	make_bad_jsonl
	mhrun -f jsonl --on-bad-input pass --stats in.jsonl
	assert_status 0
	assert_same in.jsonl "$T/out"
	assert_err_has "in.jsonl:3: invalid JSON"
	assert_err_has "passed through"
	assert_stat invalid 1
	assert_stat unique 3
	assert_stat index_documents 3
}

@test "--on-bad-input fail: exit 3, the records before it are written, none after" {
	make_bad_jsonl
	for batch in 1000 1 2; do
		mhrun -f jsonl --on-bad-input fail --batch "$batch" in.jsonl
		assert_status 3
		sed -n '1p;2p' in.jsonl | assert_out
		assert_err_has "in.jsonl:3: invalid JSON"
	done
	# Even with -q the reason is given.
	mhrun -f jsonl --on-bad-input fail -q in.jsonl
	assert_status 3
	assert_err_has "in.jsonl:3: "
}

@test "--on-bad-input fail: --stats is still written" {
	make_bad_jsonl
	mhrun -f jsonl --on-bad-input fail --stats in.jsonl
	assert_status 3
	assert_stat records 3
	assert_stat unique 2
	assert_stat invalid 1
	assert_stat index_documents 2
}

@test "--on-bad-input fail on the first record writes nothing" {
	printf 'garbage\n{"text":"never reached"}\n' >in.jsonl
	mhrun -f jsonl --on-bad-input=fail in.jsonl
	assert_status 3
	[ ! -s "$T/out" ]
}

@test "every kind of malformed jsonl record is skipped and counted" {
	cat >in.jsonl <<-'EOF'
	{"text":"a good record to begin the stream with"}
	[1,2,3]
	"just a string"
	{"id":"x"}
	{"text":42}
	{"text":null}
	{"id":1.5,"text":"an id that is a real number"}
	{"id":[1],"text":"an id that is an array"}
	{"id":true,"text":"an id that is a boolean"}
	{"text":"trailing garbage"} x
	{"text":"a good record to end the stream with, unlike the first"}
	EOF
	mhrun -f jsonl --stats in.jsonl
	assert_status 0
	sed -n '1p;11p' in.jsonl | assert_out
	assert_stat invalid 9
	assert_stat records 11
	assert_err_has "in.jsonl:2: not a JSON object"
	assert_err_has "in.jsonl:3: "
	assert_err_has "in.jsonl:4: no \"text\" field"
	assert_err_has "in.jsonl:5: field \"text\" is not a string"
	assert_err_has "in.jsonl:6: field \"text\" is not a string"
	assert_err_has "in.jsonl:7: field \"id\" is not a string or an integer"
	assert_err_has "in.jsonl:8: field \"id\""
	assert_err_has "in.jsonl:9: field \"id\""
	assert_err_has "in.jsonl:10: invalid JSON"
	[ "$(grep -c ': skipped$' "$T/err")" -eq 9 ]
}

@test "tsv without a TAB: skip, pass and fail" {
	printf 'k1\tThe first record of this small file\nno tab in this record\nk3\tThe third record, another text\n' >in.tsv
	mhrun -f tsv --stats in.tsv
	assert_status 0
	sed -n '1p;3p' in.tsv | assert_out
	assert_err_has "in.tsv:2: no TAB between id and text: skipped"
	assert_stat invalid 1
	mhrun -f tsv --on-bad-input pass in.tsv
	assert_status 0
	assert_same in.tsv "$T/out"
	assert_err_has "in.tsv:2: no TAB between id and text: passed through"
	mhrun -f tsv --on-bad-input pass -a in.tsv
	assert_out <<-'EOF'
	unique	-	-	k1	The first record of this small file
	invalid	-	-	no tab in this record
	unique	-	-	k3	The third record, another text
	EOF
	mhrun -f tsv --on-bad-input fail in.tsv
	assert_status 3
	sed -n 1p in.tsv | assert_out
	assert_err_has "in.tsv:2: no TAB between id and text"
}

@test "a passed record is not indexed: a copy of it later is not its duplicate" {
	printf 'no tab but a long enough text here\nk2\tno tab but a long enough text here\n' >in.tsv
	mhrun -f tsv --on-bad-input pass -a --stats in.tsv
	assert_status 0
	assert_out <<-'EOF'
	invalid	-	-	no tab but a long enough text here
	unique	-	-	k2	no tab but a long enough text here
	EOF
	assert_stat index_documents 1
}

@test "over-long records: skipped with a warning naming the line and the size" {
	long="$(printf 'x%.0s' $(seq 150))"
	printf 'a short first record\n%s\na short last record\n' "$long" >in
	mhrun --max-bytes 100 --stats in
	assert_status 0
	printf 'a short first record\na short last record\n' | assert_out
	assert_err_has "in:2: record of 150 bytes is over --max-bytes 100: skipped"
	assert_stat too_long 1
	assert_stat records 3
	assert_stat unique 2
	assert_stat bytes 192
}

@test "--max-bytes: the limit itself is allowed, one more byte is not" {
	r100="$(printf 'y%.0s' $(seq 100))"
	r101="$(printf 'z%.0s' $(seq 101))"
	printf '%s\n%s\n' "$r100" "$r101" >in
	mhrun --max-bytes 100 in
	assert_status 0
	printf '%s\n' "$r100" | assert_out
	assert_err_has "in:2: record of 101 bytes"
	# The same at the end of the input, without a newline.
	printf '%s\n%s' "$r100" "$r101" >in2
	mhrun --max-bytes 100 in2
	printf '%s\n' "$r100" | assert_out
	assert_err_has "in2:2: record of 101 bytes"
	# With -z.
	printf '%s\0%s\0' "$r101" "$r100" >in3
	mhrun -z --max-bytes 100 in3
	printf '%s\0' "$r100" | assert_out
	assert_err_has "in3:1: record of 101 bytes"
}

@test "--max-bytes with a suffix; a record far beyond the read buffer" {
	python3 -c 'import sys; sys.stdout.write("before\n" + "w" * 700000 + "\nafter\n")' >in
	mhrun --max-bytes 1K --stats in
	assert_status 0
	printf 'before\nafter\n' | assert_out
	assert_err_has "in:2: record of 700000 bytes is over --max-bytes 1024"
	assert_stat too_long 1
	# 1K is 1024 bytes.
	python3 -c 'import sys; sys.stdout.write("a" * 1024 + "\n" + "b" * 1025 + "\n")' >in2
	mhrun --max-bytes 1k in2
	head -n 1 in2 | assert_out
	mhrun --max-bytes 1KB in2
	head -n 1 in2 | assert_out
}

@test "over-long records with --on-bad-input fail: exit 3 after the records before" {
	long="$(printf 'x%.0s' $(seq 150))"
	printf 'a short first record\n%s\na short last record\n' "$long" >in
	mhrun --max-bytes 100 --on-bad-input fail in
	assert_status 3
	printf 'a short first record\n' | assert_out
	assert_err_has "in:2: record of 150 bytes is over --max-bytes 100"
}

@test "over-long records with --on-bad-input pass are skipped, and the message says so" {
	long="$(printf 'x%.0s' $(seq 150))"
	printf 'a short first record\n%s\na short last record\n' "$long" >in
	mhrun --max-bytes 100 --on-bad-input pass --stats in
	assert_status 0
	printf 'a short first record\na short last record\n' | assert_out
	assert_stat too_long 1
	# The record was dropped: a warning saying "passed through" is false.
	assert_err_has "in:2: record of 150 bytes is over --max-bytes 100: skipped"
	assert_err_lacks "passed through"
}

@test "empty and white-space-only records are passed through and counted empty" {
	printf 'first real record of the file\n\n   \n\t\n\nfirst real record of the file\n\n' >in
	mhrun --stats in
	assert_status 0
	printf 'first real record of the file\n\n   \n\t\n\n\n' | assert_out
	assert_stat empty 5
	assert_stat unique 1
	assert_stat duplicates 1
	assert_stat index_documents 1
	mhrun -a in
	assert_out <<-'EOF'
	unique	-	-	first real record of the file
	empty	-	-	
	empty	-	-	   
	empty	-	-		
	empty	-	-	
	duplicate	1	1.0000	first real record of the file
	empty	-	-	
	EOF
	# -D: empty records are not duplicates.
	mhrun -D in
	printf 'first real record of the file\n' | assert_out
	# Punctuation-only is empty with punct.
	printf '...\n!!!\n' | mhf -a --normalize casefold,space,punct >o
	printf 'empty\t-\t-\t...\nempty\t-\t-\t!!!\n' | cmp - o
}

@test "invalid UTF-8: a near-duplicate pair is found, bytes preserved, counted" {
	set -o pipefail
	printf '\xff\xfe Grain exports resumed from the port on Friday \xc3\n\xff\xfe grain exports resumed from the port on Friday! \xc3\nsome ordinary text in between the two\n' >in
	mhrun --stats in
	assert_status 0
	sed -n '1p;3p' in | assert_out
	assert_stat invalid_utf8 2
	assert_stat duplicates 1
	mhrun -D in
	sed -n 2p in | assert_out
	# ASCII case folding and space collapsing apply, byte shingles.
	printf 'A\xe9B  CDEFG\na\xe9b cdefg\n' >in2
	mhrun -a in2
	printf 'unique\t-\t-\tA\xe9B  CDEFG\nduplicate\t1\t1.0000\ta\xe9b cdefg\n' | assert_out
	# Latin-1 text is not the same as its UTF-8 spelling.
	printf 'caf\xe9 au lait\ncaf\xc3\xa9 au lait\n' | mhf -a -t 1 | cut -f1 >v
	printf 'unique\nunique\n' | cmp - v
}

@test "NUL bytes inside a line record are kept and compared" {
	printf 'abc\0def ghi jkl mno\nabc\0def ghi jkl mno\nabc def ghi jkl mno\n' >in
	mhrun -a in
	assert_status 0
	printf 'unique\t-\t-\tabc\0def ghi jkl mno\nduplicate\t1\t1.0000\tabc\0def ghi jkl mno\nunique\t-\t-\tabc def ghi jkl mno\n' | assert_out
	mhrun in
	sed -n '1p;3p' in | assert_out
}

@test "a 1 MB line under the default limit is filtered like any other" {
	python3 - <<-'EOF' >in
	import random
	rng = random.Random(5)
	s = ' '.join(''.join(rng.choice('abcdefghij') for _ in range(7))
	             for _ in range(131072))[:1048576]
	print(s)
	print('a short record')
	print(s[:500000] + 'Z' + s[500001:])
	EOF
	mhrun --stats in
	assert_status 0
	head -n 2 in | assert_out
	assert_stat duplicates 1
	assert_stat too_long 0
	mhrun --max-bytes 1M in
	head -n 2 in | assert_out
	# The long lines are 1048575 bytes.
	mhrun --max-bytes 1048574 --stats in
	printf 'a short record\n' | assert_out
	assert_stat too_long 2
}

@test "the default --max-bytes is 8M" {
	python3 -c 'import sys; sys.stdout.write("a" * 8388608 + "\n" + "b" * 8388609 + "\nend\n")' >in
	mhrun --stats in
	assert_status 0
	sed -n '1p;3p' in | assert_out
	assert_stat too_long 1
	assert_err_has "in:2: record of 8388609 bytes is over --max-bytes 8388608"
}

@test "-q: no warnings about skipped records, the counts stay" {
	make_bad_jsonl
	printf '%s\n' "{\"text\":\"$(printf 'x%.0s' $(seq 300))\"}" >>in.jsonl
	mhrun -f jsonl -q --max-bytes 200 --stats in.jsonl
	assert_status 0
	sed -n '1p;2p;4p' in.jsonl | assert_out
	assert_err_lacks "in.jsonl:"
	assert_stat invalid 1
	assert_stat too_long 1
	mhrun -f jsonl --quiet in.jsonl
	[ ! -s "$T/err" ]
	mhrun -f jsonl --quiet --on-bad-input pass in.jsonl
	[ ! -s "$T/err" ]
	assert_same in.jsonl "$T/out"
}
