#!/usr/bin/env bats
# -f warc: web archives (ISO 28500), plain and .warc.gz, made by mkwarc.py
# from the real pages in tests/data/warc (see its list of records).

load helpers

# The WARC of mkwarc.py as $1 (with --gz when it ends in .gz), each
# record's own bytes in $1.NN.
mkwarc() {
	local gz=

	case "$1" in *.gz) gz=--gz ;; esac
	python3 "$TESTDIR/e2e/mkwarc.py" "$DATA/warc" "$1" $gz "${@:2}" ||
	    fail "mkwarc.py failed"
}

# The records of $1 numbered $2..., concatenated: what should be written.
records() {
	local f="$1" n

	shift
	for n in "$@"; do
		cat "$f.$n"
	done
}

# What mkwarc.py's WARC keeps: all but the near duplicate (06) and the
# copies of pages b, d and c (10, 13, 14).
KEPT="01 02 03 04 05 07 08 09 11 12"

@test "warc: near-duplicate pages are dropped, every other record is written byte for byte" {
	mkwarc in.warc
	mhrun -f warc in.warc
	assert_status 0
	records in.warc $KEPT >want
	assert_same want "$T/out"
	[ ! -s "$T/err" ] || fail "$(cat "$T/err")"
	# WARC/1.1 alike.
	mkwarc v11.warc --version 1.1
	mhrun -f warc v11.warc
	assert_status 0
	records v11.warc $KEPT >want11
	assert_same want11 "$T/out"
	[ "$(head -c 8 "$T/out")" = "WARC/1.1" ] || fail "not WARC/1.1"
}

@test "warc.gz: the output is the kept records' own gzip members, itself a valid .warc.gz" {
	mkwarc in.warc.gz
	mkwarc in.warc
	mhrun -f warc in.warc.gz
	assert_status 0
	records in.warc.gz $KEPT >want
	assert_same want "$T/out"
	# Each record a gzip member, as read: zcat and python's gzip read it.
	zcat "$T/out" >plain || fail "zcat failed"
	records in.warc $KEPT | cmp - plain || fail "zcat output differs"
	python3 -c 'import gzip, sys; sys.stdout.buffer.write(gzip.open(sys.argv[1]).read())' \
	    "$T/out" | cmp - plain || fail "python gzip output differs"
	# From standard input too.
	mhf -f warc <in.warc.gz >stdin.out || fail "stdin run failed"
	cmp want stdin.out || fail "stdin output differs"
}

@test "warc -a: a line a record, verdict, match, similarity and the id: WARC-Target-URI, else WARC-Record-ID" {
	mkwarc in.warc
	mhrun -f warc -a in.warc
	assert_status 0
	[ "$(wc -l <"$T/out")" -eq 14 ] || fail "$(cat "$T/out")"
	u=https://docs.example.org/libffi
	m=https://mirror.example.net/ffi
	grep -qxF "empty	-	-	<urn:uuid:00000000-0000-0000-0000-000000000001>" "$T/out" ||
	    fail "warcinfo: $(cat "$T/out")"
	for want in "unique	-	-	$u/Simple-Example.html" \
	    "unique	-	-	$u/Memory-Usage.html" \
	    "unique	-	-	$u/Thread-Safety.html" \
	    "unique	-	-	$u/Closure-Example.html" \
	    "duplicate	$u/Memory-Usage.html	1.0000	$m/memory.html" \
	    "duplicate	$u/Closure-Example.html	1.0000	$m/closure.html" \
	    "duplicate	$u/Thread-Safety.html	1.0000	$m/threads.html" \
	    "empty	-	-	$u/style.css" "empty	-	-	$u/missing.html"; do
		grep -qxF "$want" "$T/out" || fail "no '$want' in:" "$(cat "$T/out")"
	done
	# The same article in other navigation and markup: near, not equal.
	grep -q "^duplicate	$u/Simple-Example.html	0\.[89][0-9]*	$m/simple.html\$" \
	    "$T/out" || fail "near duplicate: $(cat "$T/out")"
	[ "$(grep -c '^empty' "$T/out" || true)" -eq 6 ] || fail "$(cat "$T/out")"
}

@test "warc: charset from HTTP, chunked and gzip payloads are decoded before comparing" {
	mkwarc in.warc
	# Page d in KOI8-R (12) and in UTF-8 (13) are the same text; so are
	# page c chunked and gzip-encoded (07) and plain (14).
	mhrun -f warc -p in.warc.12 in.warc.13 in.warc.07 in.warc.14
	assert_status 0
	grep -q 'Closure-Example.html	.*closure.html	1.0000$' "$T/out" ||
	    fail "$(cat "$T/out")"
	grep -q 'Thread-Safety.html	.*threads.html	1.0000$' "$T/out" ||
	    fail "$(cat "$T/out")"
	# With the wrong charset (as long: Content-Length holds) the Russian
	# paragraph reads otherwise.
	sed 's/charset=KOI8-R/charset=cp1251/' in.warc.12 >wrong.warc
	mhrun -f warc -p wrong.warc in.warc.13
	assert_status 0
	grep -q '1.0000$' "$T/out" && fail "charset ignored: $(cat "$T/out")"
	[ -s "$T/out" ] || fail "not even near"
}

@test "warc --stats, -D, --duplicates-to and --clusters" {
	mkwarc in.warc.gz
	mhrun -f warc --stats in.warc.gz
	assert_status 0
	assert_err_has 'mhfilter: records: 14'
	assert_err_has 'mhfilter: unique: 4'
	assert_err_has 'mhfilter: duplicates: 4'
	assert_err_has 'mhfilter: empty: 6'
	mhrun -f warc -D in.warc.gz
	assert_status 0
	records in.warc.gz 06 10 13 14 | cmp - "$T/out" || fail "-D differs"
	mhrun -f warc --duplicates-to dups.warc.gz in.warc.gz
	assert_status 0
	records in.warc.gz 06 10 13 14 | cmp - dups.warc.gz ||
	    fail "--duplicates-to differs"
	mhrun -f warc --clusters in.warc.gz
	assert_status 0
	grep -qxF 'https://mirror.example.net/ffi/memory.html	https://docs.example.org/libffi/Memory-Usage.html' \
	    "$T/out" || fail "$(cat "$T/out")"
}

@test "warc: a record over --max-message is passed through whole, unjudged, in pieces" {
	mkwarc in.warc
	mkwarc in.warc.gz
	for f in in.warc in.warc.gz; do
		mhrun -f warc --max-message 1000 "$f"
		assert_status 0
		assert_same "$f" "$T/out"
		assert_err_has "mhfilter: $f:3: over --max-message: passed through unchecked"
	done
}

@test "warc: malformed input is an error naming the file and the record's offset; what came before is written" {
	mkwarc in.warc
	mkwarc g.warc.gz
	python3 - <<'EOF' || fail "damaging failed"
import gzip
d = open("in.warc", "rb").read()
r3 = open("in.warc.03", "rb").read()
off = len(open("in.warc.01", "rb").read()) + len(open("in.warc.02", "rb").read())
def w(n, b):
    open(n, "wb").write(b)
def third(new):
    w(n, d[:off] + new + d[off + len(r3):])
for n, new in (("ver.warc", b"WARC/2.0" + r3[8:]),
               ("nocl.warc", r3.replace(b"Content-Length:", b"Content-Lenxth:", 1)),
               ("badcl.warc", r3.replace(b"Content-Length: ", b"Content-Length: x", 1)),
               ("wrongcl.warc", r3.replace(b"Content-Length: 4", b"Content-Length: 3", 1))):
    third(new)
w("cut.warc", d[:off + 1000])
g = open("g.warc.gz", "rb").read()
goff = len(open("g.warc.gz.01", "rb").read()) + len(open("g.warc.gz.02", "rb").read())
b = bytearray(g)
b[goff + 100:goff + 108] = b"\xff" * 8
w("bad.warc.gz", bytes(b))
w("cut.warc.gz", g[:goff + 500])
w("whole.warc.gz", gzip.compress(d))
EOF
	off=$(cat in.warc.01 in.warc.02 | wc -c)
	goff=$(cat g.warc.gz.01 g.warc.gz.02 | wc -c)
	while IFS='|' read -r f at msg; do
		mhrun -f warc "$f" </dev/null
		assert_status 1
		assert_err_has "mhfilter: $f: WARC record at byte $at: $msg"
		[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$(cat "$T/err")"
		case "$f" in
		*.gz) records g.warc.gz 01 02 ;;
		*) records in.warc 01 02 ;;
		esac >want
		[ "$at" -eq 0 ] && : >want
		assert_same want "$T/out"
	done <<EOF
ver.warc|$off|bad version line 'WARC/2.0' (not WARC/1.0 or WARC/1.1)
nocl.warc|$off|no Content-Length
badcl.warc|$off|bad Content-Length 'x4
wrongcl.warc|$off|no two CRLFs after its block of
cut.warc|$off|cut short: 1000 of its
bad.warc.gz|$goff|bad gzip member (
cut.warc.gz|$goff|cut short: its gzip member ends after 500 bytes
whole.warc.gz|0|its gzip member holds
EOF
	# The next file is read; under --on-bad-input fail the run stops, 3.
	mhrun -f warc ver.warc in.warc.05
	assert_status 1
	{ records in.warc 01 02 05; } | cmp - "$T/out" || fail "next file"
	mhrun -f warc --on-bad-input fail ver.warc in.warc.05
	assert_status 3
	records in.warc 01 02 | cmp - "$T/out" || fail "fail policy"
}

@test "warc.gz: a record whose Content-Length is wrong is a malformed record, under --on-bad-input; the members after it are read" {
	mkwarc in.warc
	mkwarc g.warc.gz
	# Member 3 again, its Content-Length 5 more than its block.
	python3 -c '
import gzip, re
r3 = open("in.warc.03", "rb").read()
m = re.search(rb"Content-Length: (\d+)", r3)
r3 = r3[:m.start(1)] + str(int(m.group(1)) + 5).encode() + r3[m.end(1):]
open("bad.03", "wb").write(gzip.compress(r3))' || fail "damaging failed"
	cat g.warc.gz.01 g.warc.gz.02 bad.03 g.warc.gz.04 g.warc.gz.05 >cl.warc.gz
	mhrun -f warc cl.warc.gz
	assert_status 0
	assert_err_has "cl.warc.gz:3: not a WARC record (its block and two CRLFs are"
	assert_err_has "skipped"
	records g.warc.gz 01 02 04 05 | cmp - "$T/out" || fail "skip"
	mhrun -f warc --on-bad-input pass cl.warc.gz
	assert_status 0
	cmp cl.warc.gz "$T/out" || fail "pass"
	mhrun -f warc --on-bad-input fail cl.warc.gz
	assert_status 3
	records g.warc.gz 01 02 | cmp - "$T/out" || fail "fail"
}

@test "warc: not with -z, --listen or --connect; --text-field is jsonl's" {
	mkwarc in.warc
	for opts in "-z" "--listen unix:$T/sock" "--connect unix:$T/sock"; do
		mhrun -f warc $opts in.warc
		assert_status 2
		assert_err_has 'mhfilter: --format warc frames its own records'
	done
	mhrun -f warc --text-field body in.warc
	assert_status 2
	assert_err_has 'go with --format jsonl'
}
