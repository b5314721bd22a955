#!/usr/bin/env bats
# Record formats: NUL-delimited records (-z), tsv and JSON Lines.

load helpers

BODY='Dear team, the quarterly review meeting is moved to Thursday at ten in the large conference room. Please bring your reports.'

# Three e-mails as NUL-delimited records; the second repeats the first's
# body under other headers.
make_mails() {
	printf 'From: alice@example.org\nSubject: Review\n\n%s\n' "$BODY" >m1
	printf 'From: bob@example.org\nSubject: Re: Review\n\n%s\n' "$BODY" >m2
	printf 'From: carol@example.org\nSubject: Lunch\n\nWho wants to get lunch at the new place on Main Street?\n' >m3
	{ cat m1; printf '\0'; cat m2; printf '\0'; cat m3; printf '\0'; } >mails
}

@test "-z: multi-line records, NUL-delimited output, byte-exact" {
	make_mails
	mhrun -z mails
	assert_status 0
	{ cat m1; printf '\0'; cat m3; printf '\0'; } >expected
	assert_same expected "$T/out"
	mhrun --null -D mails
	{ cat m2; printf '\0'; } >expected
	assert_same expected "$T/out"
}

@test "-z -a: annotations end with NUL, the similarity is of the whole message" {
	make_mails
	mhrun -z -a mails
	assert_status 0
	sim="$(jaccard "$(cat m1)" "$(cat m2)")"
	{
		printf 'unique\t-\t-\t'; cat m1; printf '\0'
		printf 'duplicate\t1\t%s\t' "$sim"; cat m2; printf '\0'
		printf 'unique\t-\t-\t'; cat m3; printf '\0'
	} >expected
	assert_same expected "$T/out"
}

@test "-z: newlines are part of the text, and a last record without NUL gets one" {
	printf 'line one\nline two\nline one\nline two' >in
	mhrun -z in
	assert_status 0
	printf 'line one\nline two\nline one\nline two\0' | assert_out
	# Without -z the same bytes are four line records.
	mhrun in
	printf 'line one\nline two\n' | assert_out
}

@test "-z -f tsv: ids with multi-line texts" {
	{
		printf 'mail-1\t'; printf 'Hello Bob,\nthe build is green again.\nCheers, Alice\n'; printf '\0'
		printf 'mail-2\t'; printf 'Hello Bob,\nthe build is green again!\nCheers, Alice\n'; printf '\0'
	} >in
	mhrun -z -f tsv -a in
	assert_status 0
	sim="$(jaccard "$(printf 'Hello Bob,\nthe build is green again.\nCheers, Alice\n')" "$(printf 'Hello Bob,\nthe build is green again!\nCheers, Alice\n')")"
	{
		printf 'unique\t-\t-\tmail-1\tHello Bob,\nthe build is green again.\nCheers, Alice\n\0'
		printf 'duplicate\tmail-1\t%s\tmail-2\tHello Bob,\nthe build is green again!\nCheers, Alice\n\0' "$sim"
	} >expected
	assert_same expected "$T/out"
	# Pairs are lines even with -z.
	mhrun -z -f tsv -p in
	printf 'mail-1\tmail-2\t%s\n' "$sim" | assert_out
}

@test "tsv: the id is not compared, the output is the record as read" {
	printf 'a-1\tThe river flooded the lower town overnight\nzz-99\tthe river flooded the lower town overnight.\nb 2\tNothing in common with the others here\n' >in
	mhrun -f tsv in
	assert_status 0
	printf 'a-1\tThe river flooded the lower town overnight\nb 2\tNothing in common with the others here\n' | assert_out
	mhrun --format tsv -D in
	printf 'zz-99\tthe river flooded the lower town overnight.\n' | assert_out
}

@test "tsv -a: the match is the matched record's id, not its number" {
	printf 'a-1\tThe river flooded the lower town overnight\nzz-99\tthe river flooded the lower town overnight.\nb 2\tNothing in common with the others here\n' >in
	sim="$(jaccard 'The river flooded the lower town overnight' 'the river flooded the lower town overnight.')"
	mhrun -f tsv -a in
	assert_status 0
	assert_out <<-EOF
	unique	-	-	a-1	The river flooded the lower town overnight
	duplicate	a-1	$sim	zz-99	the river flooded the lower town overnight.
	unique	-	-	b 2	Nothing in common with the others here
	EOF
	mhrun -f tsv -p in
	printf 'a-1\tzz-99\t%s\n' "$sim" | assert_out
}

@test "tsv: the text is everything after the first TAB" {
	printf 'x1\tcol one\tcol two\tcol three\nx2\tcol one col two col three\n' >in
	mhrun -f tsv -a in
	assert_status 0
	assert_out <<-'EOF'
	unique	-	-	x1	col one	col two	col three
	duplicate	x1	1.0000	x2	col one col two col three
	EOF
}

@test "jsonl: default output is the objects as read, byte for byte" {
	cat >in.jsonl <<-'EOF'
	{"id":"a","text":"The quick brown fox jumps over the lazy dog","n":1}
	{ "text" : "the quick brown fox jumps over the lazy dog!" , "id" : 7 }
	{"z":[1,2,{"k":"}"}],"text":"caf\u00e9 cr\u00e8me and other caf\u00e9 things","id":"c"}
	{"text":"café crème and other café things","id":"d"}
	EOF
	mhrun -f jsonl in.jsonl
	assert_status 0
	sed -n '1p;3p' in.jsonl | assert_out
	mhrun -f jsonl -D in.jsonl
	sed -n '2p;4p' in.jsonl | assert_out
}

@test "jsonl -a: the mhfilter member is added, ids are matched, JSON stays valid" {
	cat >in.jsonl <<-'EOF'
	{"id":"a","text":"The quick brown fox jumps over the lazy dog","n":1}
	{"id":7,"text":"the quick brown fox jumps over the lazy dog!"}
	{"text":"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!"}
	{"text":"Completely different sentence about weather" , "id" : "z" }
	{"id":8,"text":"Completely different sentence about weather"}
	{"id":"e","text":"   "}
	{"id":"q\"x","text":"Something quoted and escaped in its id here"}
	{"text":"something quoted and escaped in its id here."}
	EOF
	s="$(jaccard 'The quick brown fox jumps over the lazy dog' 'the quick brown fox jumps over the lazy dog!')"
	s2="$(jaccard 'Something quoted and escaped in its id here' 'something quoted and escaped in its id here.')"
	mhrun -f jsonl -a in.jsonl
	assert_status 0
	assert_out <<-EOF
	{"id":"a","text":"The quick brown fox jumps over the lazy dog","n":1,"mhfilter":{"verdict":"unique"}}
	{"id":7,"text":"the quick brown fox jumps over the lazy dog!","mhfilter":{"verdict":"duplicate","match":"a","similarity":$s}}
	{"text":"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!","mhfilter":{"verdict":"duplicate","match":"7","similarity":1.0000}}
	{"text":"Completely different sentence about weather" , "id" : "z" ,"mhfilter":{"verdict":"unique"}}
	{"id":8,"text":"Completely different sentence about weather","mhfilter":{"verdict":"duplicate","match":"z","similarity":1.0000}}
	{"id":"e","text":"   ","mhfilter":{"verdict":"empty"}}
	{"id":"q\"x","text":"Something quoted and escaped in its id here","mhfilter":{"verdict":"unique"}}
	{"text":"something quoted and escaped in its id here.","mhfilter":{"verdict":"duplicate","match":"q\"x","similarity":$s2}}
	EOF
	# Every line is one JSON object whose members are the original ones,
	# in their order, and then "mhfilter".
	python3 - "$T/out" in.jsonl <<-'EOF'
	import json, sys
	out = open(sys.argv[1]).read().splitlines()
	inp = open(sys.argv[2]).read().splitlines()
	assert len(out) == len(inp), (len(out), len(inp))
	for o, i in zip(out, inp):
	    a, b = json.loads(o), json.loads(i)
	    assert list(a) == list(b) + ['mhfilter'], (list(a), list(b))
	    assert all(a[k] == b[k] for k in b)
	    assert a['mhfilter']['verdict'] in ('unique', 'duplicate', 'empty')
	EOF
}

@test "jsonl: a missing id is the record number" {
	printf '{"text":"first text of the stream, long enough"}\n{"text":"another text entirely, not like the first"}\n{"text":"First text of the stream, long enough"}\n' >in.jsonl
	mhrun -f jsonl -a in.jsonl
	assert_status 0
	sed -n '3p' "$T/out" | grep -qF '"mhfilter":{"verdict":"duplicate","match":"1","similarity":1.0000}}'
	mhrun -f jsonl -p in.jsonl
	printf '1\t3\t1.0000\n' | assert_out
}

@test "jsonl: --text-field and --id-field" {
	cat >in.jsonl <<-'EOF'
	{"url":"http://a.example/1","body":"Parliament passed the water bill after a long debate","text":"ignored one"}
	{"url":"http://b.example/2","body":"parliament passed the water bill after a long debate.","text":"ignored two"}
	{"url":3,"body":"Unrelated: the football season starts next week","text":"ignored one"}
	EOF
	s="$(jaccard 'Parliament passed the water bill after a long debate' 'parliament passed the water bill after a long debate.')"
	mhrun -f jsonl --text-field body --id-field url -a in.jsonl
	assert_status 0
	assert_out <<-EOF
	{"url":"http://a.example/1","body":"Parliament passed the water bill after a long debate","text":"ignored one","mhfilter":{"verdict":"unique"}}
	{"url":"http://b.example/2","body":"parliament passed the water bill after a long debate.","text":"ignored two","mhfilter":{"verdict":"duplicate","match":"http://a.example/1","similarity":$s}}
	{"url":3,"body":"Unrelated: the football season starts next week","text":"ignored one","mhfilter":{"verdict":"unique"}}
	EOF
	# With the default field the third record repeats the first.
	mhrun -f jsonl -D in.jsonl
	sed -n 3p in.jsonl | assert_out
}

@test "jsonl: escapes in the text are decoded before comparing" {
	printf '%s\n' '{"text":"caf\u00e9 cr\u00e8me \"quoted\" and\ttabs"}' \
	    '{"text":"CAFÉ CRÈME \"QUOTED\" AND TABS"}' >in.jsonl
	mhrun -f jsonl -a in.jsonl
	assert_status 0
	sed -n 2p "$T/out" | grep -qF '"verdict":"duplicate","match":"1","similarity":1.0000'
	# Non-ASCII bytes are written as read, not re-escaped.
	sed -n 2p "$T/out" | grep -qF 'CAFÉ CRÈME'
}

@test "jsonl -z: pretty-printed objects over several lines" {
	printf '{\n  "id": "p1",\n  "text": "Shares rose sharply in early trading on Monday"\n}\0{\n  "id": "p2",\n  "text": "shares rose sharply in early trading on Monday."\n}\0' >in
	s="$(jaccard 'Shares rose sharply in early trading on Monday' 'shares rose sharply in early trading on Monday.')"
	mhrun -z -f jsonl -a in
	assert_status 0
	printf '{\n  "id": "p1",\n  "text": "Shares rose sharply in early trading on Monday"\n,"mhfilter":{"verdict":"unique"}}\0{\n  "id": "p2",\n  "text": "shares rose sharply in early trading on Monday."\n,"mhfilter":{"verdict":"duplicate","match":"p1","similarity":%s}}\0' "$s" | assert_out
	tr '\0' '\n' <"$T/out" >/dev/null
	python3 -c '
import json, sys
for rec in open(sys.argv[1]).read().split("\0")[:-1]:
    json.loads(rec)' "$T/out"
}

@test "jsonl: CRLF line ends are kept, the member goes before the brace" {
	printf '{"text":"windows line ending here, a text"}\r\n{"text":"Windows line ending here, a text"}\r\n' >in.jsonl
	mhrun -f jsonl -a in.jsonl
	assert_status 0
	printf '{"text":"windows line ending here, a text","mhfilter":{"verdict":"unique"}}\r\n{"text":"Windows line ending here, a text","mhfilter":{"verdict":"duplicate","match":"1","similarity":1.0000}}\r\n' | assert_out
}

@test "jsonl -a --on-bad-input pass: a passed object is written unchanged, without the member" {
	# mhfilter(1): "A malformed record passed through is written
	# unchanged, without the member."  (spec.md: every written record
	# carries its verdict; see the report.)
	printf '{}\n{"id":1}\n{ }\n{"text":"a proper record with a text"}\n' >in.jsonl
	mhrun -f jsonl -a --on-bad-input pass in.jsonl
	assert_status 0
	assert_out <<-'EOF'
	{}
	{"id":1}
	{ }
	{"text":"a proper record with a text","mhfilter":{"verdict":"unique"}}
	EOF
}

@test "jsonl -a --on-bad-input pass: a line that is not JSON is written as read" {
	printf 'not json at all\n{"text":"a proper record with a text"}\n' >in.jsonl
	mhrun -f jsonl -a --on-bad-input pass in.jsonl
	assert_status 0
	assert_out <<-'EOF'
	not json at all
	{"text":"a proper record with a text","mhfilter":{"verdict":"unique"}}
	EOF
}

@test "jsonl: an id that is null or empty is the record number" {
	printf '%s\n' '{"id":null,"text":"The ferry service resumed after the storm"}' \
	    '{"id":"","text":"the ferry service resumed after the storm"}' \
	    '{"id":"x","text":"THE FERRY SERVICE RESUMED AFTER THE STORM"}' >in.jsonl
	mhrun -f jsonl -p in.jsonl
	assert_status 0
	sort "$T/out" >pairs
	printf '1\t2\t1.0000\n1\tx\t1.0000\n' | cmp - pairs
}

@test "tsv: an empty id is the record number" {
	printf '\tThe ferry service resumed after the storm\n\tthe ferry service resumed after the storm\n' >in.tsv
	mhrun -f tsv -a in.tsv
	assert_status 0
	assert_out <<-'EOF'
	unique	-	-		The ferry service resumed after the storm
	duplicate	1	1.0000		the ferry service resumed after the storm
	EOF
}

@test "record numbers count skipped records too, across files" {
	printf '{"text":"Local elections are held in the spring"}\nnot json\n' >a.jsonl
	printf '{"text":"local elections are held in the spring"}\n' >b.jsonl
	mhrun -f jsonl -q -p a.jsonl b.jsonl
	assert_status 0
	printf '1\t3\t1.0000\n' | assert_out
}

@test "-0 is -z and json is jsonl" {
	make_mails
	mhrun -0 mails
	mv "$T/out" zero
	mhrun -z mails
	assert_same zero "$T/out"
	printf '{"text":"same text here"}\n{"text":"Same text here"}\n' >in.jsonl
	mhrun -f json -D in.jsonl
	assert_status 0
	sed -n 2p in.jsonl | assert_out
}

@test "compressed input (gzip, zstd, xz) is read as zcat would, from files and stdin" {
	gen_tsv 2000 >in
	gzip -c in >in.gz
	zstd -q -c in >in.zst
	xz -c in >in.xz
	for f in in.gz in.zst in.xz; do
		mhrun -f tsv "$f"
		assert_status 0
		assert_same in "$T/out"
		mhrun -f tsv <"$f"
		assert_status 0
		assert_same in "$T/out"
	done
	# Concatenated members and frames, and a plain file among them.
	cat in.gz in.gz >twice.gz
	gen_tsv 10 7 >plain
	mhrun -f tsv --stats twice.gz plain in.zst
	assert_status 0
	assert_stat records 6010
	cat in plain >expected
	assert_same expected "$T/out"
	# Zeros padding a gzip member (tar's blocks) are not data.
	{ cat in.gz; head -c 10240 /dev/zero; } >padded.gz
	mhrun -f tsv padded.gz
	assert_status 0
	assert_same in "$T/out"
}

@test "corrupt or truncated compressed input: one error naming the file and the offset, the rest is read" {
	gen_tsv 2000 >in
	gen_tsv 10 7 >plain
	gzip -c in >in.gz
	head -c 3000 in.gz >cut.gz
	mhrun -f tsv cut.gz plain
	assert_status 1
	assert_err_has 'mhfilter: cut.gz: gzip data cut short (3000 bytes)'
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$(cat "$T/err")"
	# What came before the damage is kept, then the next file.
	tail -n 10 "$T/out" | cmp - plain
	python3 -c '
import sys
b = bytearray(open("in.gz", "rb").read())
b[4000:4008] = b"\xff" * 8
open("bad.gz", "wb").write(b)'
	mhrun -f tsv bad.gz plain
	assert_status 1
	grep -q '^mhfilter: bad.gz: corrupt gzip data at byte [0-9]* (' \
	    "$T/err" || fail "$(cat "$T/err")"
	xz -c in | head -c 2000 >cut.xz
	mhrun -f tsv cut.xz
	assert_status 1
	assert_err_has 'mhfilter: cut.xz: xz data cut short'
	zstd -q -c in | head -c 2000 >cut.zst
	mhrun -f tsv cut.zst
	assert_status 1
	assert_err_has 'mhfilter: cut.zst: zstd data cut short'
}

@test "binary input: one error naming the file, which is skipped; -z is not binary" {
	gen_tsv 10 >in
	head -c 100000 "$MHFILTER" >bin
	for f in line tsv jsonl; do
		mhrun -f "$f" bin
		assert_status 1
		assert_err_has 'mhfilter: bin: binary data (NUL and control bytes in its first'
		[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$(cat "$T/err")"
		[ ! -s "$T/out" ] || fail "binary written out"
	done
	mhrun -f tsv bin in
	assert_status 1
	assert_same in "$T/out"
	# Compressed binary too.
	gzip -c bin >bin.gz
	mhrun bin.gz
	assert_status 1
	assert_err_has 'mhfilter: bin.gz: binary data'
	[ ! -s "$T/out" ] || fail "binary written out"
	# Under --on-bad-input=fail it stops there, with status 3.
	mhrun -f tsv --on-bad-input=fail bin in
	assert_status 3
	[ ! -s "$T/out" ] || fail "$(cat "$T/out")"
	# NUL-delimited records hold NULs.
	printf 'one\0two\0' | gzip -c >z.gz
	mhrun -z z.gz
	assert_status 0
	printf 'one\0two\0' | cmp - "$T/out"
}

@test "UTF-16 text is binary; a text with a stray NUL is not" {
	printf 'a text of words\n' | iconv -f utf-8 -t utf-16 >u16
	mhrun u16
	assert_status 1
	assert_err_has 'mhfilter: u16: binary data'
	printf 'one \0two three\nfour five six\n' >stray
	mhrun stray
	assert_status 0
	assert_same stray "$T/out"
	# Latin-1 (invalid UTF-8) with a stray NUL: a text too.
	printf 'caf\351 au lait\nline two has a \0 byte\nline three\n' >latin
	mhrun latin
	assert_status 0
	assert_same latin "$T/out"
}

@test "a UTF-8 byte-order mark at the start of a file is skipped" {
	printf '\357\273\277{"id":"a","text":"the first text of words"}\n' >bom.jsonl
	printf '{"id":"b","text":"the first text of words"}\n' >>bom.jsonl
	mhrun -f jsonl --stats bom.jsonl
	assert_status 0
	assert_stat invalid 0
	assert_stat duplicates 1
	printf '{"id":"a","text":"the first text of words"}\n' | assert_out
	# In every file, and on stdin; the BOM is not part of a TSV id.
	printf '\357\273\277x\tsome words here\n' >bom.tsv
	mhrun -f tsv -a bom.tsv bom.tsv
	printf 'unique\t-\t-\tx\tsome words here\nseen\tx\t1.0000\tx\tsome words here\n' |
	    assert_out
	mhrun -f tsv <bom.tsv
	printf 'x\tsome words here\n' | assert_out
}

@test "blank lines in JSON Lines and TSV are skipped without a warning, counted as blank" {
	printf '{"text":"one two three four"}\n\n  \r\n{"text":"five six seven eight"}\n' >b.jsonl
	mhrun -f jsonl --stats b.jsonl
	assert_status 0
	assert_stat blank 2
	assert_stat records 2
	assert_stat invalid 0
	[ -z "$(grep -v '^mhfilter: [a-z_0-9]*: ' "$T/err")" ] || fail "$(cat "$T/err")"
	grep -v '^ *.\?$' b.jsonl | assert_out
	printf 'a\tone two three four\n\n2\tfive six seven\n' >b.tsv
	mhrun -f tsv --stats b.tsv
	assert_status 0
	assert_stat blank 1
	assert_stat invalid 0
	# Record numbers count the blank lines: the original is record 2.
	printf '\n{"text":"one two three four"}\n{"text":"one two three four"}\n' |
	    mhf -f jsonl -a >out
	grep -q '"verdict":"duplicate","match":"2"' out || fail "$(cat out)"
}
