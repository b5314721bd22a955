#!/usr/bin/env bats
# Indexes of the older LMDB formats 2 to 7, made by the mhfilter of their
# day (tests/data/index-format2 to 7; see the README there), are
# opened by this one: queried, upgraded by a run that adds documents,
# checked, and their documents still found as duplicates.

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
	assert_info 8 39
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

@test "format 3: a run that adds documents upgrades it to format 8" {
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

@test "format 2: a run that adds documents rewrites its band runs as format 8" {
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

@test "format 4: a run that adds documents upgrades it to format 8" {
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

@test "format 5: a run that adds documents upgrades it to format 8" {
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

@test "format 6: a run that adds documents upgrades it to format 8" {
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

@test "format 7: a run that adds documents upgrades it to format 8" {
	old_index 7
	assert_upgraded
}
