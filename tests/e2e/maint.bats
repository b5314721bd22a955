#!/usr/bin/env bats
# Retention (--retain, --max-docs, --time-field) and the maintenance modes
# (--info, --expire, --remove, --check, --compact, --export, --import):
# their usage errors, and what each does to an index.

load helpers

# The value of KEY in the "key: value" lines of $T/out (or of file $2).
info_of() {
	sed -n "s/^$1: //p" "${2:-$T/out}"
}

# --info's KEY must be VALUE.
assert_info() {
	local v

	v="$(info_of "$1")"
	[ "$v" = "$2" ] || fail "--info $1 is '$v', expected '$2'" "$(cat "$T/out")"
}

# Verdicts, "unique -" or "duplicate MATCH", of copies of the records of
# tsv file $2 under new ids, against index $1 without changing it.
verdicts() {
	local -
	set -o pipefail
	awk -F'\t' '{ print "q" NR "\t" $2 }' "$2" >"$T/copies"
	mhf -f tsv -d "$1" -Q -a "$T/copies" | cut -f1,2
}

# jsonl record $1 with id $2 and time $3 (a JSON value, quoted or not).
jrec() {
	printf '{"id":"%s","text":"%s","ts":%s}\n' "$2" "$1" "$3"
}

# ---------------------------------------------------------------- usage

@test "a maintenance mode without --db is a usage error" {
	for mode in --info --check "--expire --max-docs 3" "--remove ids" \
	    "--compact copy" "--export dump" "--import in"; do
		mhrun $mode </dev/null
		status_is 2 || fail "$mode: status $status, expected 2"
		grep -qF -- "${mode%% *} needs --db" "$T/err" ||
		    fail "$mode: $(cat "$T/err")"
		[ ! -s "$T/out" ]
	done
	[ ! -e copy ]; [ ! -e dump ]
}

@test "two maintenance modes at once are a usage error" {
	mhrun -d db --info --check
	assert_status 2
	assert_err_has "--info and --check are exclusive"
	mhrun -d db --export dump --import in
	assert_status 2
	assert_err_has "--export and --import are exclusive"
	mhrun -d db --expire --max-docs 1 --remove ids
	assert_status 2
	assert_err_has "--expire and --remove are exclusive"
	[ ! -e db ]; [ ! -e dump ]
}

@test "a maintenance mode with file operands, --explain, -Q or --listen is a usage error" {
	printf 'some text\n' >in
	mhrun -d db --info in
	assert_status 2
	assert_err_has "--info takes no file operands"
	mhrun -d db --expire --retain 1d -
	assert_status 2
	assert_err_has "--expire takes no file operands"
	mhrun -d db --check --explain
	assert_status 2
	assert_err_has "--check and --explain are exclusive"
	mhrun -d db --export dump -Q
	assert_status 2
	assert_err_has "--export and --query-only are exclusive"
	mhrun -d db --info --listen unix:sock
	assert_status 2
	assert_err_has "--info and --listen are exclusive"
	[ ! -e db ]; [ ! -e dump ]; [ ! -e sock ]
}

@test "--expire needs --retain or --max-docs" {
	mhrun -d db --expire
	assert_status 2
	assert_err_has "--expire needs --retain or --max-docs"
	[ ! -e db ]
}

@test "--retain takes a duration with a unit; a bad one is a usage error naming it" {
	for bad in 30 0s 0d 1.5d 30D -1d d 1d2 '' 36501d 99999999999999999999s; do
		mhrun --retain "$bad" </dev/null
		status_is 2 || fail "--retain '$bad': status $status"
		assert_err_has "--retain: '$bad'"
	done
	mhrun --retain 30
	assert_status 2
	assert_err_has "is not a duration"
	mhrun --retain 0s
	assert_status 2
	assert_err_has "out of range"
	# Good ones are accepted (--explain reads no input and needs no index).
	for good in 1s 3600s 90m 12h 30d 2w 1d12h 36500d; do
		mhrun --explain --retain "$good"
		status_is 0 || fail "--retain $good: $(cat "$T/err")"
	done
}

@test "--max-docs takes a count from 1; -Q with retention is a usage error" {
	for bad in 0 -1 abc 5k ''; do
		mhrun --max-docs "$bad" </dev/null
		status_is 2 || fail "--max-docs '$bad': status $status"
		assert_err_has "--max-docs"
	done
	mhrun --explain --max-docs 1
	assert_status 0
	mhrun --explain --max-docs 18446744073709551615
	assert_status 0
	mhrun -d db -Q --max-docs 5 </dev/null
	assert_status 2
	assert_err_has "--query-only writes nothing"
	mhrun -d db -Q --retain 1d </dev/null
	assert_status 2
}

@test "--time-field goes with -f jsonl" {
	mhrun --time-field ts </dev/null
	assert_status 2
	assert_err_has "--time-field goes with --format jsonl"
	mhrun -f tsv --time-field ts </dev/null
	assert_status 2
}

@test "a maintenance mode on a directory without an index fails with status 1 and creates nothing" {
	for mode in --info --check "--expire --max-docs 3" "--remove ids" \
	    "--compact copy" "--export dump"; do
		printf 'x\n' >ids
		mhrun -d nodb $mode
		status_is 1 || fail "$mode: status $status, expected 1"
		assert_err_has "nodb"
		[ ! -e nodb ] || fail "$mode created the index directory"
		[ ! -e copy ]; [ ! -e dump ]
	done
	# A data.mdb left empty by a run that failed creating it: no index
	# either, for the modes that write too.
	mkdir empty
	: >empty/data.mdb
	for mode in --info --check "--expire --max-docs 3" "--remove ids" \
	    "--compact copy" "--export dump"; do
		mhrun -d empty $mode
		status_is 1 || fail "$mode: status $status, expected 1"
		assert_err_has "no index at empty yet"
		[ ! -s empty/data.mdb ] || fail "$mode made an index"
		[ ! -e copy ]; [ ! -e dump ]
	done
}

# ---------------------------------------------------------- --time-field

@test "--time-field: RFC 3339 and epoch times are accepted" {
	{
		jrec 'alpha beta gamma delta' a '"2026-11-21T10:00:00Z"'
		jrec 'epsilon zeta eta theta' b '"2026-11-21T11:00:00+01:00"'
		jrec 'iota kappa lambda mu' c '"2026-11-21T10:00:00.123456Z"'
		jrec 'nu xi omicron pi' d '"2026-11-21 04:30:00-05:30"'
		jrec 'rho sigma tau upsilon' e '1795255200'
		jrec 'phi chi psi omega' f '"1795255200"'
		jrec 'one two three four' g '1795255200.75'
	} >in
	mhrun -f jsonl --time-field ts in
	assert_status 0
	assert_same in "$T/out"
	[ ! -s "$T/err" ] || fail "warnings: $(cat "$T/err")"
	# Another field name.
	sed 's/"ts"/"published"/' in >in2
	mhrun -f json --time-field published in2
	assert_status 0
	assert_same in2 "$T/out"
}

@test "--time-field: a missing or bad time is a bad record, reported with its line" {
	{
		jrec 'first good record here' a '"2026-11-21T10:00:00Z"'
		printf '{"id":"b","text":"second record without time"}\n'
		jrec 'third record bad time' c '"yesterday"'
		jrec 'fourth record no such day' d '"2026-02-30T00:00:00Z"'
		jrec 'fifth record null time' e 'null'
		jrec 'sixth record at zero' f '0'
		jrec 'seventh record no zone' g '"2026-11-21T10:00:00"'
		jrec 'eighth good record too' h '1795255200'
	} >in
	mhrun -f jsonl --time-field ts --stats in
	assert_status 0
	{ sed -n 1p in; sed -n 8p in; } | assert_out
	assert_stat invalid 6
	assert_err_has 'in:2: no "ts" field: skipped'
	assert_err_has "in:3: field \"ts\": 'yesterday' is not a time"
	assert_err_has "in:4: field \"ts\": '2026-02-30T00:00:00Z' is not a valid date"
	assert_err_has 'in:5: field "ts" is not a time'
	assert_err_has 'in:6: field "ts" is out of range'
	assert_err_has "in:7: field \"ts\": '2026-11-21T10:00:00' is not a time"
	assert_err_lacks "in:1:"
	assert_err_lacks "in:8:"
	# --on-bad-input: pass writes them, fail stops at the first.
	mhrun -f jsonl --time-field ts --on-bad-input pass in
	assert_status 0
	assert_same in "$T/out"
	mhrun -f jsonl --time-field ts --on-bad-input fail in
	assert_status 3
	sed -n 1p in | assert_out
	assert_err_has 'in:2: no "ts" field: stopping'
	# Without --time-field the times are not looked at.
	mhrun -f jsonl --stats in
	assert_status 0
	assert_stat invalid 0
}

# ------------------------------------------------------------------ --info

@test "--info prints the parameters, counts, times and sizes, and changes nothing" {
	gen_tsv 12 >in
	mhf -f tsv -d db -n 3 -t 0.5 in >/dev/null
	cp db/data.mdb saved.mdb
	mhrun -d db --info
	assert_status 0
	[ ! -s "$T/err" ] || fail "stderr: $(cat "$T/err")"
	# Every key, once, in this order.
	cut -d: -f1 "$T/out" >keys
	printf '%s\n' path format perms bands rows shingle unit normalize seed \
	    texts verify threshold measure documents next_document created oldest \
	    newest band_entries size size_bands size_docs size_texts \
	    file_size | assert_same /dev/stdin keys
	assert_info path db
	assert_info format "$("$MHFILTER" --version | sed 's/.*index format \([0-9]*\).*/\1/')"
	assert_info perms 128
	assert_info shingle 3
	assert_info unit char
	assert_info normalize casefold,nfkc,space
	assert_info seed 0
	assert_info texts yes
	assert_info verify exact
	assert_info threshold 0.5
	assert_info measure jaccard
	assert_info documents 12
	assert_info next_document 13
	b="$(info_of bands)" r="$(info_of rows)"
	[ "$b" -ge 1 ]; [ "$r" -ge 1 ]; [ $((b * r)) -le 128 ]
	# Times are RFC 3339 in UTC, and the documents were inserted now.
	for k in created oldest newest; do
		info_of "$k" | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' ||
		    fail "$k: $(info_of "$k")"
		t="$(date -u -d "$(info_of "$k")" +%s)"
		[ $(($(date +%s) - t)) -lt 600 ] || fail "$k is not recent"
	done
	[ "$(info_of band_entries)" -gt 0 ]
	for k in size size_bands size_docs size_texts file_size; do
		[ "$(info_of "$k")" -gt 0 ] || fail "$k: $(info_of "$k")"
	done
	[ "$(info_of file_size)" -eq "$(stat -c %s db/data.mdb)" ]
	[ "$(info_of size)" -le "$(info_of file_size)" ]
	cmp saved.mdb db/data.mdb
	# An index without texts.
	mhf --verify signature -d sig in >/dev/null
	mhrun -d sig --info
	assert_status 0
	assert_info texts no
	assert_info verify signature
}

@test "--info with a parameter that differs from the index exits 4" {
	printf 'some text to index\n' | mhf -d db -n 3 >/dev/null
	mhrun -d db --info -n 4
	assert_status 4
	assert_err_has "--shingle 3"
	[ ! -s "$T/out" ]
}

# -------------------------------------------------------------- retention

@test "--max-docs: the filter keeps the newest N documents" {
	gen_tsv 8 >in
	mhrun -f tsv -d db --max-docs 5 --stats in
	assert_status 0
	assert_same in "$T/out"
	assert_stat index_documents 5
	mhrun -d db --info
	assert_status 0
	assert_info documents 5
	# The three oldest are gone: their copies are unique now.
	verdicts db in >v
	printf 'unique\t-\nunique\t-\nunique\t-\nduplicate\tid3\nduplicate\tid4\nduplicate\tid5\nduplicate\tid6\nduplicate\tid7\n' |
	    assert_same /dev/stdin v
	mhrun -d db --check
	assert_status 0
	# A later run without --max-docs keeps everything it adds.
	gen_tsv 4 9 >more
	mhrun -f tsv -d db --stats more
	assert_stat index_documents 9
}

@test "--retain with --time-field: documents older than the window are expired" {
	now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	hour="$(date -u -d '1 hour ago' +%Y-%m-%dT%H:%M:%SZ)"
	{
		jrec 'old news about the harbour bridge' o1 '"2001-01-01T00:00:00Z"'
		jrec 'old news about the river ferry' o2 978307300
		jrec 'old news about the town hall clock' o3 '"2001-01-02T00:00:00+01:00"'
		jrec 'recent news about the football match' r1 "\"$hour\""
		jrec 'recent news about the school concert' r2 "\"$now\""
	} >in
	mhrun -f jsonl --time-field ts -d db in
	assert_status 0
	assert_same in "$T/out"
	mhrun -d db --info
	assert_info documents 5
	assert_info oldest 2001-01-01T00:00:00Z
	assert_info newest "$now"
	cp -r db db2
	# A run with --retain expires them as it goes.
	jrec 'brand new story about the weather' n1 "\"$now\"" >new
	mhrun -f jsonl --time-field ts -d db --retain 30d new
	assert_status 0
	assert_same new "$T/out"
	mhrun -d db --info
	assert_info documents 3
	assert_info oldest "$hour"
	# The old ones are no longer matched, the recent ones are.
	sed 's/"id":"/"id":"q/' in >q
	mhf -f jsonl -d db -Q -a q >v
	grep -c '"verdict":"unique"' v | grep -qx 3
	grep -q '"id":"qr1".*"match":"r1"' v
	grep -q '"id":"qr2".*"match":"r2"' v
	# --expire does the same on the copy, all at once.
	mhrun -d db2 --expire --retain 4w
	assert_status 0
	printf 'expired: 3\n' | assert_out
	mhrun -d db2 --expire --retain 4w
	printf 'expired: 0\n' | assert_out
	mhrun -d db2 --info
	assert_info documents 2
}

@test "--retain without --time-field uses the insertion time" {
	gen_tsv 6 >in
	mhf -f tsv -d db in >/dev/null
	sleep 2
	mhrun -d db --expire --retain 1h
	assert_status 0
	printf 'expired: 0\n' | assert_out
	mhrun -d db --expire --retain 1s
	assert_status 0
	printf 'expired: 6\n' | assert_out
	mhrun -d db --info
	assert_info documents 0
	assert_info oldest -
	assert_info newest -
}

@test "--expire --max-docs removes the oldest documents now" {
	gen_tsv 10 >in
	mhf -f tsv -d db in >/dev/null
	mhrun -d db --expire --max-docs 4
	assert_status 0
	printf 'expired: 6\n' | assert_out
	[ ! -s "$T/err" ]
	mhrun -d db --info
	assert_info documents 4
	verdicts db in | cut -f1 | uniq -c | awk '{ print $1, $2 }' >v
	printf '6 unique\n4 duplicate\n' | assert_same /dev/stdin v
	mhrun -d db --expire --max-docs 4 --retain 1d
	printf 'expired: 0\n' | assert_out
	mhrun -d db --check
	assert_status 0
}

# ---------------------------------------------------------------- --remove

@test "--remove: documents by id leave the index; unknown ids are warned about" {
	gen_tsv 10 >in
	mhf -f tsv -d db in >/dev/null
	printf 'id2\nid7\nnope\n\nid2\n' >ids
	mhrun -d db --remove ids
	assert_status 0
	printf 'removed: 2\nnot_found: 2\n' | assert_out
	assert_err_has "ids:3: id 'nope' not found"
	assert_err_has "ids:5: id 'id2' not found"
	mhrun -d db --info
	assert_info documents 8
	verdicts db in >v
	sed -n 3p v | grep -qx 'unique	-'
	sed -n 8p v | grep -qx 'unique	-'
	[ "$(grep -c '^duplicate' v)" -eq 8 ]
	# From stdin, one id per transaction; -q silences the warnings.
	printf 'id0\nid1\nmissing\n' >ids
	mhrun -d db --remove - --batch 1 -q <ids
	assert_status 0
	printf 'removed: 2\nnot_found: 1\n' | assert_out
	[ ! -s "$T/err" ]
	mhrun -d db --info
	assert_info documents 6
	# A list written on Windows (CRLF): the same ids.
	printf 'id3\r\nid4\r\n' >ids
	mhrun -d db --remove ids
	assert_status 0
	printf 'removed: 2\nnot_found: 0\n' | assert_out
	mhrun -d db --check
	assert_status 0
	# An unreadable list is an error.
	mhrun -d db --remove no-such-file
	assert_status 1
	assert_err_has "no-such-file"
}

@test "--remove: a removed document is no longer a replay or a match" {
	printf 'r1\tThe committee approved the budget for next year\n' >in
	mhf -f tsv -d db in >/dev/null
	printf 'r1\n' >ids
	mhrun -d db --remove - <ids
	assert_status 0
	printf 'removed: 1\nnot_found: 0\n' | assert_out
	printf 'r2\tthe committee approved the budget for next year!\n' >q
	mhrun -f tsv -d db -a --stats q
	assert_status 0
	cut -f1,2 "$T/out" | grep -qx 'unique	-'
	# Reinserting r1 is a new document, not a replay.
	mhrun -f tsv -d db -a --stats in
	cut -f1,2 "$T/out" | grep -qx 'duplicate	r2'
}

# ----------------------------------------------------------------- --check

@test "--check: a sound index passes, a corrupted copy fails" {
	command -v mdb_load >/dev/null || skip "mdb_load is not installed (Debian package lmdb-utils)"
	mhf -d db "$DATA/sample-news.txt" >/dev/null
	cp db/data.mdb saved.mdb
	mhrun -d db --check
	assert_status 0
	cmp saved.mdb db/data.mdb
	# A document record that is one byte long, numbered past the end,
	# loaded with the docs table's own header (and so its flags).
	mkdir bad
	cp db/data.mdb bad/
	{
		mdb_dump -s docs db | sed -n '1,/^HEADER=END$/p'
		printf ' 7ffffffffffffff0\n 00\nDATA=END\n'
	} | mdb_load -s docs bad
	mhrun -d bad --check
	assert_status 1
	[ -s "$T/out" ] || fail "no report on stdout"
	assert_err_has "bad"
	cmp saved.mdb db/data.mdb
}

# --------------------------------------------------------------- --compact

@test "--compact: a copy that passes --check and finds the same duplicates" {
	gen_tsv 200 >in
	mhf -f tsv -d db in >/dev/null
	mhf -d db --remove - <<<"id5" >/dev/null
	cp db/data.mdb saved.mdb
	mhrun -d db --compact copy
	assert_status 0
	[ -f copy/data.mdb ]
	[ "$(info_of compacted_size)" -eq "$(stat -c %s copy/data.mdb)" ]
	[ "$(info_of file_size)" -eq "$(stat -c %s db/data.mdb)" ]
	[ "$(stat -c %s copy/data.mdb)" -le "$(stat -c %s db/data.mdb)" ]
	cmp saved.mdb db/data.mdb
	mhrun -d copy --check
	assert_status 0
	mhrun -d copy --info
	assert_info documents 199
	verdicts db in >v1
	verdicts copy in >v2
	assert_same v1 v2
	# Never over an existing index.
	cp copy/data.mdb copy.mdb
	mhrun -d db --compact copy
	assert_status 1
	assert_err_has "copy already holds an index"
	cmp copy.mdb copy/data.mdb
	# An existing empty directory is fine.
	mkdir empty
	mhrun -d db --compact empty
	assert_status 0
	[ -f empty/data.mdb ]
}

# ------------------------------------------------------ --export, --import

@test "--export then --import into a new index finds the same duplicates" {
	gen_tsv 20 >in
	mhf -f tsv -d db in >/dev/null
	cp db/data.mdb saved.mdb
	mhrun -d db --export dump.jsonl
	assert_status 0
	[ ! -s "$T/out" ]; [ ! -s "$T/err" ]
	cmp saved.mdb db/data.mdb
	# JSON Lines, at least one line per document.
	python3 -c 'import json, sys
for line in open(sys.argv[1]):
    json.loads(line)' dump.jsonl
	[ "$(wc -l <dump.jsonl)" -ge 20 ]
	# To stdout, the same bytes.
	mhf -d db --export - >dump2.jsonl
	assert_same dump.jsonl dump2.jsonl
	mhrun -d db2 --import dump.jsonl
	assert_status 0
	printf 'imported: 20\n' | assert_out
	mhrun -d db2 --info
	assert_info documents 20
	mhrun -d db2 --check
	assert_status 0
	verdicts db in >v1
	verdicts db2 in >v2
	assert_same v1 v2
	[ "$(grep -c '^duplicate' v2)" -eq 20 ]
	# Through a pipe.
	set -o pipefail
	mhf -d db --export - | mhf -d db3 --import - >"$T/out"
	printf 'imported: 20\n' | assert_out
	verdicts db3 in >v3
	assert_same v1 v3
}

@test "--export/--import: texts and ids with NUL bytes go and come back; an import's errors name its file and line" {
	printf '{"id":"a\\u0000b","text":"before \\u0000 after, a text with a NUL byte"}\n{"id":"c","text":"an ordinary text of some words"}\n' >in.jsonl
	mhf -f jsonl -d db in.jsonl >/dev/null
	mhrun -d db --export dump.jsonl
	assert_status 0
	grep -q 'before \\u0000 after' dump.jsonl || fail "$(cat dump.jsonl)"
	mhrun -d db2 --import dump.jsonl
	assert_status 0
	printf 'imported: 2\n' | assert_out
	mhf -d db2 --export dump2.jsonl
	assert_same dump.jsonl dump2.jsonl
	# The copy finds the text again, with its NUL byte.
	mhrun -f jsonl -d db2 -a in.jsonl
	assert_status 0
	[ "$(grep -c '"verdict":"seen","match":"[ac][^"]*","similarity":1.0000' \
	    "$T/out")" -eq 2 ] ||
	    fail "$(cat "$T/out")"
	# Errors: the file and the line, in the index's own words.
	{ head -1 dump.jsonl; echo '{"id":"x"}'; } >bad.jsonl
	mhrun -d db3 --import bad.jsonl
	assert_status 1
	assert_err_has "import bad.jsonl: line 2: not a document of this export"
	printf '%s\n' '{"not": "an export"}' >notexport.jsonl
	mhrun -d db3 --import - <notexport.jsonl
	assert_status 1
	assert_err_has "import stdin: line 1: not an mhfilter export"
	mhrun -d db3 --import "$T"
	assert_status 1
	assert_err_has "import $T: read error: Is a directory"
	: >empty.jsonl
	mhrun -d db3 --import empty.jsonl
	assert_status 1
	assert_err_has "import empty.jsonl: empty: not an mhfilter export"
}

@test "--export/--import move an index with its own parameters" {
	A='Storm damage closed the coastal road for two days'
	B='Storm damage closed the coastal highway for three days'
	printf 'a\t%s\n' "$A" | mhf -f tsv -d db -n 3 -t 0.5 -b 40 -r 3 \
	    >/dev/null
	mhf -d db --export dump.jsonl
	# No options: the parameters come with the export, the bands too.
	mhrun -d moved --import dump.jsonl
	assert_status 0
	mhrun -d moved --info
	assert_info shingle 3
	assert_info threshold 0.5
	assert_info bands 40
	mhrun -d moved --check
	assert_status 0
	printf 'b\t%s\n' "$B" >q
	mhrun -f tsv -d moved -a q
	assert_status 0
	printf 'duplicate\ta\t0.5932\tb\t%s\n' "$B" | assert_out
}

@test "--export to a full disk fails with status 1" {
	[ -w /dev/full ] || skip "no /dev/full"
	gen_tsv 300 >in
	mhf -f tsv -d db in >/dev/null
	mhrun -d db --export ok.jsonl
	assert_status 0
	mhrun -d db --export /dev/full
	assert_status 1
	assert_err_has "export /dev/full: write error: No space left on device"
	status=0
	timeout 60 "$MHFILTER" -d db --export - >/dev/full 2>"$T/err" || status=$?
	assert_status 1
}

@test "--export - | head and --info | head: quiet, with SIGPIPE's status, as the filter" {
	gen_tsv 3000 >in
	mhf -f tsv -d db in >/dev/null
	for mode in --export --info; do
		arg=-
		[ "$mode" = --info ] && arg=
		timeout 60 "$MHFILTER" -d db $mode $arg 2>err | head -n 1 >first
		st=("${PIPESTATUS[@]}")
		[ -s first ] || fail "$mode: nothing read"
		[ ! -s err ] || fail "$mode: $(cat err)"
		# --info fits in the pipe's buffer: it may finish first.
		[ "${st[0]}" -eq 141 ] || { [ "$mode" = --info ] && [ "${st[0]}" -eq 0 ]; } ||
		    fail "$mode: status ${st[0]}"
	done
}

@test "--remove then -Q: a removed document's band entries are skipped in every batch, not an error" {
	printf 'a\tthe quick brown fox jumps over the lazy dog\nb\tlorem ipsum dolor sit amet consectetur\nc\tsphinx of black quartz judge my vow now\n' >in
	mhf -f tsv -d db in >/dev/null
	printf 'b\n' >ids
	mhrun -d db --remove ids
	assert_status 0
	# The copy of b comes in the second batch: read-only transactions
	# after the first must still know which documents were removed.
	printf 'x\tsomething else entirely different here\ny\tlorem ipsum dolor sit amet consectetur\n' >q
	mhrun -f tsv -d db -Q --batch 1 -a q
	assert_status 0
	[ "$(grep -c '^unique' "$T/out")" -eq 2 ]
}

@test "--import into a map too small for it grows the map and redoes the block: nothing lost, nothing twice" {
	gen_tsv 3000 >in
	mhf -f tsv -d db in >/dev/null
	mhf -d db --export ex.jsonl
	mhrun -d small --map-size 1M --import ex.jsonl
	assert_status 0
	printf 'imported: 3000\n' | assert_out
	mhrun -d small --info
	assert_info documents 3000
	mhrun -d small --check
	assert_status 0
}
