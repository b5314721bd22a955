#!/usr/bin/env bats
# A damaged index never crashes mhfilter: copies of an index damaged in
# many seeded ways (tests/damage.py: bit flips, truncations, zeroed,
# random, swapped and duplicated 4 KB pages, anywhere in the file) go
# through --check, --info, a small filter run, -Q, --export, --compact,
# --expire --max-docs and a second filter run, each of which must end in
# time with status 0, 1 (saying the index is damaged or a document
# corrupt) or 4, never by a signal or a sanitizer's report.  DAMAGE_COPIES
# copies (make check: 24; make check-damage DAMAGE_COPIES=1000 for more),
# from seed DAMAGE_SEED.

load helpers

DAMAGE="$TESTDIR/damage.py"
# Under AddressSanitizer: a fault caught in a damaged index leaves what
# LMDB was doing unfreed, on purpose (lmdbguard.c, "Damaged pages").
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# An index "db" of 600 documents of 8 to 500 words (texts from a few
# bytes to overflow pages), and "q": 30 of them under new ids, then 10
# new records.  "ref" is what a filter run with -a on q says of a sound
# copy.
make_index() {
	python3 - <<'EOF'
import random
rng = random.Random(17)
words = ["w%d" % i for i in range(400)]
docs = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 500)))
        for _ in range(600)]
with open("in", "w") as f:
    for i, d in enumerate(docs):
        f.write("d%d\t%s\n" % (i, d))
with open("q", "w") as f:
    for i, d in enumerate(rng.sample(docs, 30)):
        f.write("q%d\t%s\n" % (i, d))
    for i in range(10):
        f.write("n%d\t%s\n" % (i, " ".join(
            "x%d" % rng.randrange(10**6) for _ in range(60))))
EOF
	mhf -f tsv -d db in >/dev/null
	rm -f db/lock.mdb
	cp -r db sound
	mhf -f tsv -d sound -a q >ref.all
	cut -f1,2 ref.all >ref
	rm -rf sound
}

# Run mhfilter on copy $1 with the rest of the arguments; stderr in
# $1.err, stdout in $1.out, the status in $st.  Bounded in time, past the
# watchdog's 15 s of processor time (lmdbguard.c): a hang is status 124,
# or 137 when SIGTERM is not enough (a thread looping in LMDB never comes
# back to see it).
on_copy() {
	local copy="$1"

	shift
	st=0
	timeout -k 5 60 "$MHFILTER" -d "$copy" "$@" >"$copy.out" 2>"$copy.err" ||
	    st=$?
}

# The status $st of "$2" on copy $1 must be 0, 1 or 4, with no report of
# a sanitizer; a failure must name the copy, and status 1 say that it is
# damaged (or a document corrupt).  Problems are appended to $T/bad.
judge() {
	if grep -qE "Sanitizer|runtime error:" "$1.err"; then
		echo "$1: $2: status $st, a sanitizer's report" \
		    "($(cat "$1.what")): $(head -c 300 "$1.err")" >>"$T/bad"
		return
	fi
	case "$st" in
	0) ;;
	1|4)	grep -qF "$1" "$1.err" ||
		    echo "$1: $2: status $st, the message does not name" \
		    "the index: $(head -c 300 "$1.err")" >>"$T/bad"
		[ "$st" -eq 4 ] || grep -qE "damaged|corrupt" "$1.err" ||
		    echo "$1: $2: status 1 without saying damaged" \
		    "($(cat "$1.what")): $(head -c 300 "$1.err")" >>"$T/bad" ;;
	*)	echo "$1: $2: status $st ($(cat "$1.what")):" \
		    "$(head -c 300 "$1.err")" >>"$T/bad" ;;
	esac
}

@test "a sound copy passes --check and finds its 30 copies" {
	make_index
	on_copy db --check
	[ "$st" -eq 0 ] || fail "--check: status $st" "$(cat db.err)"
	[ "$(grep -c '^duplicate	d' ref)" -eq 30 ] || fail "$(cat ref)"
	[ "$(grep -c '^unique	-' ref)" -eq 10 ] || fail "$(cat ref)"
}

@test "damaged copies: every mode ends in time with status 0, 1 or 4, never a signal" {
	local n="${DAMAGE_COPIES:-24}" first="${DAMAGE_SEED:-0}" s c chk
	local passed=0 failed=0 unseen=0

	make_index
	: >"$T/bad"
	for ((s = first; s < first + n; s++)); do
		c="copy$s"
		python3 "$DAMAGE" db "$c" "$s" >"$c.what"
		on_copy "$c" --check
		judge "$c" --check
		chk=$st
		[ "$chk" -eq 0 ] && passed=$((passed + 1))
		on_copy "$c" --info
		judge "$c" --info
		on_copy "$c" -f tsv -a q
		judge "$c" filter
		[ "$st" -ne 0 ] && failed=$((failed + 1))
		# Status 0 must mean the verdicts of a sound copy, unless the
		# damage is where --check does not see it either.
		if [ "$st" -eq 0 ] && ! cut -f1,2 "$c.out" | cmp -s - ref; then
			if [ "$chk" -eq 0 ]; then
				unseen=$((unseen + 1))
			else
				echo "$c: filtering: status 0 but other" \
				    "verdicts than a sound copy's" \
				    "($(cat "$c.what"))" >>"$T/bad"
			fi
		fi
		on_copy "$c" -Q -f tsv -a q
		judge "$c" -Q
		on_copy "$c" --export "$c.dump"
		judge "$c" --export
		on_copy "$c" --compact "$c.compact"
		judge "$c" --compact
		# A maintenance mode that writes (deletions rebalance pages),
		# then a filter run after it.
		on_copy "$c" --expire --max-docs 300
		judge "$c" "--expire --max-docs"
		on_copy "$c" -f tsv -a q
		judge "$c" "a second filter run"
		rm -rf "$c" "$c".*
	done
	echo "# $n copies: --check passed $passed, filtering failed" \
	    "$failed, other verdicts unseen by --check: $unseen" >&3
	[ ! -s "$T/bad" ] || fail "$(cat "$T/bad")"
}

@test "pages swapped so that a lookup goes round in circles inside LMDB: -Q and --export end, saying so" {
	make_index
	# Seed 790 swaps two pages so that a branch page leads to bytes read
	# as a page of garbage counts: LMDB's search of it never ends and
	# never faults (the watchdog of lmdbguard.c ends it).  (Seed 280 did so
	# before format 9 made values 8 bytes longer and moved the pages.)
	python3 "$DAMAGE" db c 790 >c.what
	grep -q '^seed 790: swap pages' c.what || fail "$(cat c.what)"
	on_copy c -Q -f tsv -a q
	[ "$st" -eq 1 ] || fail "-Q: status $st" "$(cat c.err)"
	grep -q "index c is damaged (LMDB went round in circles" c.err ||
	    fail "$(cat c.err)"
	on_copy c --export c.dump
	[ "$st" -eq 1 ] || fail "--export: status $st" "$(cat c.err)"
	grep -q "went round in circles" c.err || fail "$(cat c.err)"
	# The modes that write read every page first, and refuse it sooner.
	on_copy c --expire --max-docs 300
	[ "$st" -eq 1 ] || fail "--expire: status $st" "$(cat c.err)"
	grep -q "damaged" c.err || fail "$(cat c.err)"
}

@test "every page zeroed in turn: --check ends with status 0 or 1, and says damaged or lists problems" {
	local pages p c

	make_index
	pages=$(($(stat -c %s db/data.mdb) / 4096))
	: >"$T/bad"
	for ((p = 0; p < pages; p++)); do
		c="page$p"
		mkdir "$c"
		cp db/data.mdb "$c/"
		dd if=/dev/zero of="$c/data.mdb" bs=4096 seek="$p" count=1 \
		    conv=notrunc status=none
		echo "zero page $p" >"$c.what"
		on_copy "$c" --check
		case "$st" in
		0) ;;
		1) grep -qE "damaged|problems? found" "$c.err" ||
		    echo "$c: $(cat "$c.err")" >>"$T/bad" ;;
		4) [ "$p" -lt 2 ] ||
		    echo "$c: status 4: $(cat "$c.err")" >>"$T/bad" ;;
		*) echo "$c: status $st: $(head -c 300 "$c.err")" >>"$T/bad" ;;
		esac
		rm -rf "$c" "$c".*
	done
	[ ! -s "$T/bad" ] || fail "$(cat "$T/bad")"
}

@test "a truncated data.mdb: every mode fails with status 1, saying the index is damaged" {
	local size cut

	make_index
	size=$(stat -c %s db/data.mdb)
	for cut in 8192 $((size / 2)) $((size - 4096)) $((size - 1)); do
		rm -rf short
		mkdir short
		head -c "$cut" db/data.mdb >short/data.mdb
		for mode in --check --info "-f tsv q" "--export dump"; do
			# shellcheck disable=SC2086
			mhrun -d short $mode
			assert_status 1
			assert_err_has "index short is damaged (data.mdb is $cut bytes"
			assert_err_has "Damaged indexes"
		done
	done
}

@test "recovery: --compact refuses, --export leaves a corrupt document out and fails; --import of the rest makes an index that passes --check" {
	command -v mdb_load >/dev/null || skip "mdb_load is not installed (Debian package lmdb-utils)"
	make_index
	# Document 7's record replaced by one byte.
	{
		mdb_dump -s docs db | sed -n '1,/^HEADER=END$/p'
		printf ' 0000000000000007\n 00\nDATA=END\n'
	} | mdb_load -s docs db
	mhrun -d db --check
	assert_status 1
	mhrun -d db --compact copy
	assert_status 1
	assert_err_has "index db is damaged (--check finds 1 problem): not compacted"
	[ ! -e copy/data.mdb ] || fail "a damaged index was compacted"
	mhrun -d db --export dump
	assert_status 1
	assert_err_has "document 7 is corrupt: left out"
	assert_err_has "1 corrupt document left out"
	[ "$(($(wc -l <dump) - 1))" -eq 599 ] || fail "$(wc -l <dump) lines"
	mhrun -d new --import dump
	assert_status 0
	assert_out <<<"imported: 599"
	mhrun -d new --check
	assert_status 0
}

@test "a node size grown inside a leaf page: --check and --expire say damaged and name the page, the index is not written" {
	local page

	make_index
	# The first leaf page (LMDB 0.9: flags at byte 10, bounds at 12 and
	# 14, node offsets from 16) with a node holding a value of 100 bytes
	# or more in place: its size (the node's first 2 bytes) 64 more.
	page=$(python3 - <<'PYEOF'
import struct
f = open("db/data.mdb", "r+b")
data = f.read()
for pg in range(2, len(data) // 4096):
    base = pg * 4096
    pgno, flags, lower, upper = struct.unpack_from("<QxxHHH", data, base)
    if pgno != pg or flags & 0x07 != 0x02 or lower <= 16:
        continue
    off = struct.unpack_from("<H", data, base + 16)[0]
    lo, hi, nflags, ksize = struct.unpack_from("<HHHH", data, base + off)
    if nflags == 0 and hi == 0 and 100 <= lo < 1000:
        f.seek(base + off)
        f.write(struct.pack("<H", lo + 64))
        print(pg)
        break
PYEOF
)
	[ -n "$page" ] || fail "no leaf page with such a node"
	cp db/data.mdb before
	mhrun -d db --check
	assert_status 1
	grep -qE "problem: LMDB's pages: page $page('s nodes| has a bad node)" \
	    "$T/out" ||
	    fail "$(cat "$T/out")"
	mhrun -d db --expire --max-docs 300
	assert_status 1
	assert_err_has "index db is damaged: page $page"
	cmp -s before db/data.mdb || fail "--expire wrote to a damaged index"
}

@test "a bit flipped inside a document's record or text: its readers say which fails its checksum, never another verdict" {
	local d k

	make_index
	# The stored document that the first query line duplicates.
	d="$(head -n 1 ref | cut -f 2)"
	k=$(( ${d#d} + 1 ))
	mhrun -d db --export exp
	assert_status 0
	[ "$(sed -n "$((k + 1))p" exp | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" = "$d" ] ||
	    fail "document $k is not $d"

	cp -r db t
	flip_value t texts "$k"
	on_copy t -Q -f tsv -a q
	[ "$st" -eq 1 ] || fail "-Q, text flipped: status $st" "$(cat t.out)"
	grep -q "index t is damaged: text of document $k fails its checksum" \
	    t.err || fail "-Q: $(cat t.err)"
	on_copy t --check
	[ "$st" -eq 1 ] || fail "--check, text flipped: status $st"
	grep -q "problem: document $k: index t is damaged: text of document $k fails its checksum" t.out ||
	    fail "--check: $(cat t.out)"

	cp -r db r
	flip_value r docs "$k"
	on_copy r -Q -f tsv -a q
	[ "$st" -eq 1 ] || fail "-Q, record flipped: status $st" "$(cat r.out)"
	grep -q "index r is damaged: document $k fails its checksum" r.err ||
	    fail "-Q: $(cat r.err)"
	on_copy r --check
	[ "$st" -eq 1 ] || fail "--check, record flipped: status $st"
	grep -q "problem: document $k: record fails its checksum" r.out ||
	    fail "--check: $(cat r.out)"
	on_copy r --export r.exp
	[ "$st" -eq 1 ] || fail "--export, record flipped: status $st"
	[ "$(wc -l <r.exp)" -eq "$(( $(wc -l <exp) - 1 ))" ] ||
	    fail "--export left out $(( $(wc -l <exp) - $(wc -l <r.exp) )) documents"
}
