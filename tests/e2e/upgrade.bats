#!/usr/bin/env bats
# Indexes of the older LMDB formats 2 to 8, made by the mhfilter of their
# day (tests/data/index-format2 to 8; see the README there), are
# opened by this one: queried, upgraded by a run that adds documents,
# checked, and their documents still found as duplicates.  Format 9 seals
# every value (a checksum after it), in steps that an interruption leaves
# readable and the next writable open finishes.

load helpers

# The fixture of format $1, copied into db/, and the halves of the sample:
# first (the 20 lines the fixture was made of), rest (the other 20, as TSV
# with their line numbers as ids, as a single run of the whole file names
# them).
old_index() {
	mkdir db
	cp "$DATA/index-format$1/data.mdb" db/
	chmod u+w db/data.mdb
	head -n 20 "$DATA/sample-news.txt" >first
	tail -n +21 "$DATA/sample-news.txt" | awk '{ print NR + 20 "\t" $0 }' >rest
}

# Every line of first is a duplicate, at 1.0, of its own stored document,
# but line 12: the same text as line 6, which was found a duplicate of it
# and not indexed.
assert_first_found() {
	local n want=

	for n in $(seq 1 20); do
		if [ "$n" -eq 12 ]; then
			want="${want}duplicate	6	1.0000
"
		else
			want="${want}duplicate	$n	1.0000
"
		fi
	done
	[ "$(cut -f 1-3 "$T/out")" = "${want%
}" ] || fail "query of the first 20 lines:" "$(cut -f 1-3 "$T/out")"
}

# --info and --check of db succeed and say format $1 and $2 documents.
assert_info() {
	mhrun --db db --info
	assert_status 0
	grep -qx "format: $1" "$T/out" || fail "--info: $(cat "$T/out")"
	grep -qx "documents: $2" "$T/out" || fail "--info: $(cat "$T/out")"
	mhrun --db db --check
	assert_status 0
	grep -qx 'problems: 0' "$T/out" || fail "--check: $(cat "$T/out")"
	grep -qx "documents: $2" "$T/out" || fail "--check: $(cat "$T/out")"
}

# An upgraded index holds 19 + 20 documents and decides the rest as one run
# of the whole sample on a new index does.
assert_upgraded() {
	mhf -a "$DATA/sample-news.txt" >want.all
	tail -n 20 want.all | cut -f 1-3 >want
	mhrun --db db -f tsv -a rest
	assert_status 0
	cut -f 1-3 "$T/out" >got
	cmp want got || fail "the rest, on the upgraded index:" "$(diff want got)"
	grep -q '^duplicate	15	0.9364' got ||
	    fail "line 23 is not a duplicate of the old document 15"
	assert_info 9 39
	mhrun --db db -Q -a first
	assert_status 0
	assert_first_found
}

@test "format 3: --info and --check read it as it is" {
	old_index 3
	assert_info 3 19
}

# -Q on the fixture of format $1 finds its documents and leaves it so.
assert_query_leaves() {
	old_index "$1"
	mhrun --db db -Q -a first
	assert_status 0
	assert_first_found
	mhrun --db db --info
	grep -qx "format: $1" "$T/out" || fail "--info: $(cat "$T/out")"
}

@test "format 3: -Q finds its documents (zstd texts verified) and leaves it format 3" {
	assert_query_leaves 3
}

@test "format 3: a run that adds documents upgrades it to format 9" {
	old_index 3
	assert_upgraded
}

@test "format 2: -Q and --info refuse it (exit 4) until a writable open upgrades it" {
	old_index 2
	mhrun --db db -Q -a first
	assert_status 4
	grep -q 'index format 2: open it once for writing' "$T/err" ||
	    fail "stderr: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "output: $(cat "$T/out")"
	mhrun --db db --info
	assert_status 4
}

@test "format 2: a run that adds documents rewrites its band runs as format 9" {
	old_index 2
	assert_upgraded
}

@test "format 4: --info and --check read it as it is" {
	old_index 4
	assert_info 4 19
}

@test "format 4: -Q finds its documents and leaves it format 4 (no young runs)" {
	assert_query_leaves 4
	run mdb_stat -s l1y db
	assert_status 1
}

@test "format 4: a run that adds documents upgrades it to format 9" {
	old_index 4
	assert_upgraded
	run mdb_stat -s l1y db
	assert_status 0
}

@test "format 5: --info and --check read it as it is" {
	old_index 5
	assert_info 5 19
}

@test "format 5: -Q finds its documents and leaves it format 5" {
	assert_query_leaves 5
}

@test "format 5: a run that adds documents upgrades it to format 9" {
	old_index 5
	assert_upgraded
}

@test "format 6: --info and --check read it as it is" {
	old_index 6
	assert_info 6 19
}

@test "format 6: -Q finds its documents and leaves it format 6" {
	assert_query_leaves 6
}

@test "format 6: a run that adds documents upgrades it to format 9" {
	old_index 6
	assert_upgraded
}

@test "format 7: --info and --check read it as it is" {
	old_index 7
	assert_info 7 19
}

@test "format 7: -Q finds its documents and leaves it format 7" {
	assert_query_leaves 7
}

@test "format 7: a run that adds documents upgrades it to format 9" {
	old_index 7
	assert_upgraded
}

@test "format 8: --info and --check read it as it is" {
	old_index 8
	assert_info 8 19
}

@test "format 8: -Q finds its documents and leaves it format 8" {
	assert_query_leaves 8
}

@test "format 8: a run that adds documents upgrades it to format 9" {
	old_index 8
	assert_upgraded
}

# A format 8 index of 1,500 documents of 60 words (docs.txt) in db/,
# made by unseal: a data.mdb of 1.8 MB, as full as mdb_load leaves it.
big_old() {
	python3 -c '
import random
r = random.Random(7)
w = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz")
    for _ in range(r.randint(3, 9))) for _ in range(3000)]
for i in range(1500):
    print(" ".join(r.choice(w) for _ in range(60)))' >docs.txt
	mhrun --db new --memtable 64K --batch 50 -o /dev/null docs.txt
	assert_status 0
	unseal new db
}

@test "format 8: sealing goes in steps; interrupted, the index reads as it is, and the next writable open finishes it" {
	command -v mdb_dump >/dev/null || skip "mdb_dump is not installed (Debian package lmdb-utils)"
	local d n
	# Sealed 64 KB at a time.
	big_old
	mhrun --db db --info
	assert_status 0
	grep -qx 'format: 8' "$T/out" || fail "--info: $(cat "$T/out")"
	for d in docs texts l0 l1; do
		dump_values db "$d" >"old.$d"
		[ -s "old.$d" ] || fail "no $d in the unsealed index"
	done

	# The fourth commit fails: the open's, then two steps of sealing.
	status=0
	[ -f "$FAULTINJECT" ] || fail "no $FAULTINJECT (make check builds it)"
	LD_PRELOAD="$(fault_preload)" FAULT_PATH=data.mdb \
	    FAULT_CALLS=fdatasync FAULT_AT=4 timeout 60 "$MHFILTER" --db db \
	    --memtable 64K -o /dev/null /dev/null 2>"$T/err" || status=$?
	assert_status 1
	grep -q 'commit: Input/output error' "$T/err" ||
	    fail "stderr: $(cat "$T/err")"
	mdb_dump -p -s meta db | grep -A1 -x ' sealing' | tail -n 1 >sealing
	grep -qxE ' 1 [0-9]+' sealing || fail "sealing record: $(cat sealing)"
	n="$(cut -d' ' -f3 sealing)"
	[ "$n" -gt 1 ] && [ "$n" -lt 1500 ] || fail "sealed up to $n"

	# Half sealed: read as it is, every document found, nothing wrong.
	mhrun --db db --info
	assert_status 0
	grep -qx 'format: 9' "$T/out" || fail "--info: $(cat "$T/out")"
	mhrun --db db -Q -a docs.txt
	assert_status 0
	[ "$(cut -f 1 "$T/out" | sort | uniq -c | awk '{ print $1, $2 }')" = \
	    "1500 duplicate" ] || fail "-Q: $(cut -f 1 "$T/out" | sort | uniq -c)"
	mhrun --db db --check
	assert_status 0
	grep -qx 'problems: 0' "$T/out" || fail "--check: $(cat "$T/out")"

	# A writable open finishes: every value is 8 bytes longer.
	mhrun --db db --memtable 64K -o /dev/null /dev/null
	assert_status 0
	grep -q 'every value sealed (index format 9)' "$T/err" ||
	    fail "stderr: $(cat "$T/err")"
	if mdb_dump -p -s meta db | grep -qx ' sealing'; then
		fail "the sealing record is still there"
	fi
	for d in docs texts l0 l1; do
		dump_values db "$d" | awk '{ print length($0) - 16 }' >new.len
		awk '{ print length($0) }' "old.$d" >old.len
		cmp old.len new.len || fail "$d: not every value sealed"
		dump_values db "$d" | awk '{ print substr($0, 1, length($0) - 16) }' |
		    cmp - "old.$d" || fail "$d: values changed"
	done
	mhrun --db db --check
	assert_status 0
	grep -qx 'problems: 0' "$T/out" || fail "--check: $(cat "$T/out")"
	mhrun --db db -Q -a docs.txt
	assert_status 0
	[ "$(cut -f 1 "$T/out" | sort -u)" = duplicate ] ||
	    fail "-Q after: $(cut -f 1 "$T/out" | sort | uniq -c)"
}

@test "format 8: sealing an index whose map is full grows the map and finishes" {
	command -v mdb_dump >/dev/null || skip "mdb_dump is not installed (Debian package lmdb-utils)"
	big_old
	# The map no larger than the file: sealing's first transaction fills it.
	mhrun --db db --map-size 1M -o /dev/null /dev/null
	assert_status 0
	grep -q 'every value sealed (index format 9)' "$T/err" ||
	    fail "stderr: $(cat "$T/err")"
	mhrun --db db --check
	assert_status 0
	grep -qx 'problems: 0' "$T/out" || fail "--check: $(cat "$T/out")"
	grep -qx 'documents: 1500' "$T/out" || fail "--check: $(cat "$T/out")"
}
