#!/usr/bin/env bats
# --measure containment: a record is a duplicate when at least -t of its
# shingles are in one earlier document.  Each kind of copy the measure is
# for (a truncation, a lede with a sentence added, a lightly edited
# re-send) is a duplicate; a record that holds an earlier one (another
# article appended, a digest) is new and names what it holds; the index
# remembers its measure.  The Jaccard default is unchanged.

load helpers
load daemon-helpers

# Records of kind $1 ... to stdout as tsv: originals o1..o40 of 150 words
# from a vocabulary of 5,000, then the derived records, each after its
# source.  Ids say the kind: trunc70-N and trunc50-N (the first 70% or
# 50%), lede-N (the first 80% and a new sentence), lede30-N (the first 30%
# and a sentence), edit5-N (one word in twenty replaced), append-N (oN and
# o(N+1)), digest-N (three originals), new-N (unrelated).
make_stream() {
	python3 - <<'EOF'
import random, sys
rnd = random.Random(11)
abc = "abcdefghijklmnopqrstuvwxyz"
vocab = ["".join(rnd.choice(abc) for _ in range(rnd.randint(3, 9)))
         for _ in range(5000)]
def text(n):
    return [rnd.choice(vocab) for _ in range(n)]
orig = {i: text(150) for i in range(1, 41)}
out = sys.stdout
for i in range(1, 41):
    out.write("o%d\t%s\n" % (i, " ".join(orig[i])))
for i in range(1, 11):
    w = orig[i]
    out.write("trunc70-%d\t%s\n" % (i, " ".join(w[:105])))
    out.write("trunc50-%d\t%s\n" % (i, " ".join(w[:75])))
    out.write("lede-%d\t%s\n" % (i, " ".join(w[:120] + text(12))))
    out.write("lede30-%d\t%s\n" % (i, " ".join(w[:45] + text(5))))
    e = [x if k % 20 != 7 else rnd.choice(vocab) for k, x in enumerate(w)]
    out.write("edit5-%d\t%s\n" % (i, " ".join(e)))
for i in range(11, 21, 2):
    out.write("append-%d\t%s\n" % (i, " ".join(orig[i] + orig[i + 1])))
for i in range(21, 30, 3):
    d = orig[i] + orig[i + 1] + orig[i + 2]
    out.write("digest-%d\t%s\n" % (i, " ".join(d)))
for i in range(1, 6):
    out.write("new-%d\t%s\n" % (i, " ".join(text(150))))
EOF
}

# The verdict, match and similarity of record $1 in -a output $2.
verdict_of() {
	awk -F'\t' -v id="$1" '$4 == id { print $1, $2, $3 }' "$2"
}

@test "containment: truncations, ledes and edited copies are duplicates; appended articles and digests are new and name what they hold" {
	make_stream >in
	mhrun -f tsv -a --measure containment -d db in
	assert_status 0
	cp "$T/out" a
	for i in $(seq 10); do
		# Of o$i, or of a copy of it indexed before (chains).
		for kind in trunc70 trunc50 lede lede30 edit5; do
			v="$(verdict_of "$kind-$i" a)"
			[[ "$v" == "duplicate o$i "* ||
			    "$v" =~ ^duplicate\ [a-z0-9]+-$i\  ]] ||
			    fail "$kind-$i: '$v', want a duplicate of o$i"
		done
		# A truncation is all in its source.
		[ "$(verdict_of "trunc70-$i" a)" = "duplicate o$i 1.0000" ] ||
		    fail "trunc70-$i: $(verdict_of "trunc70-$i" a)"
	done
	for i in 11 13 15 17 19; do
		v="$(verdict_of "append-$i" a)"
		[[ "$v" == "unique o$i 1.0000" ||
		    "$v" == "unique o$((i + 1)) 1.0000" ]] ||
		    fail "append-$i: '$v', want unique holding o$i or o$((i + 1))"
	done
	# A digest is new, and holds its first article: the start of the
	# digest is a part of its band keys.
	for i in 21 24 27; do
		v="$(verdict_of "digest-$i" a)"
		[[ "$v" =~ ^unique\ o($i|$((i + 1))|$((i + 2)))\ 1\.0000$ ]] ||
		    fail "digest-$i: '$v'"
	done
	for i in $(seq 40) ; do
		[ "$(verdict_of "o$i" a)" = "unique - -" ] ||
		    fail "o$i: $(verdict_of "o$i" a)"
	done
	for i in $(seq 5); do
		[ "$(verdict_of "new-$i" a)" = "unique - -" ] ||
		    fail "new-$i: $(verdict_of "new-$i" a)"
	done
	# Writing the unique records only, what a record holds is not
	# looked for (those verifications left out): the same records.
	mhrun -f tsv --measure containment -d db2 in
	assert_status 0
	awk -F'\t' '$1 == "unique" { print $4 }' a >ua
	cut -f1 "$T/out" >ub
	assert_same ua ub
	# Jaccard at the same threshold finds the source of no truncation
	# and no lede (a lede may match a truncation).
	mhrun -f tsv -a -t 0.8 in
	assert_status 0
	n="$(grep -c '^duplicate	o[0-9]*	[0-9.]*	\(trunc70\|lede\)-' "$T/out" || true)"
	[ "$n" -eq 0 ] || fail "Jaccard found $n sources of truncations or ledes"
}

@test "containment: the index keeps its measure; another is refused; --verify exact is needed; export and import keep it" {
	make_stream >in
	mhrun -f tsv --measure containment -d db in
	assert_status 0
	mhrun --info -d db
	assert_status 0
	grep -qx 'measure: containment' "$T/out" || fail "$(cat "$T/out")"
	mhrun --check -d db
	assert_status 0
	# Later runs take it from the index.
	head -n 40 in >orig
	grep '^trunc50-' in >later
	mhrun -f tsv -a -d db later
	assert_status 0
	[ "$(grep -c '^duplicate' "$T/out")" -eq 10 ] || fail "$(cat "$T/out")"
	mhrun -f tsv -d db --measure jaccard later
	assert_status 4
	assert_err_has "was made with --measure containment; you gave --measure jaccard"
	mhrun -f tsv -d db --verify signature later
	assert_status 2
	assert_err_has "--measure containment needs --verify exact"
	mhrun -f tsv --measure containment --verify none later
	assert_status 2
	mhrun -f tsv --measure overlap later
	assert_status 2
	assert_err_has "unknown measure 'overlap' (use jaccard or containment)"
	# An index made without the option is Jaccard's, and says so.
	mhrun -f tsv -d jdb orig
	assert_status 0
	mhrun --info -d jdb
	grep -qx 'measure: jaccard' "$T/out" || fail "$(cat "$T/out")"
	mhrun -f tsv -d jdb --measure containment later
	assert_status 4
	assert_err_has "was made with --measure jaccard; you gave --measure containment"
	# Export and import: the header says the measure; the copy keeps it.
	mhrun -d db --export -
	assert_status 0
	head -n 1 "$T/out" | grep -q '"measure":"containment"' ||
	    fail "$(head -n 1 "$T/out")"
	cp "$T/out" export
	mhrun -d db2 --import export
	assert_status 0
	mhrun --info -d db2
	grep -qx 'measure: containment' "$T/out" || fail "$(cat "$T/out")"
	mhrun --check -d db2
	assert_status 0
	# It counted the documents' shingles again, as the filter did.
	dump_values db docs | cut -c6-9 | sort >codes
	dump_values db2 docs | cut -c6-9 | sort >codes2
	assert_same codes codes2
	! grep -qx 0000 codes2 || fail "an imported document without a count"
	# The import made the parts' keys again: halves are found in it.
	mhrun -f tsv -a -d db2 later
	assert_status 0
	[ "$(grep -c '^duplicate' "$T/out")" -eq 10 ] || fail "$(cat "$T/out")"
	mhrun -d jdb --export -
	head -n 1 "$T/out" | grep -q measure &&
	    fail "a Jaccard export names a measure: $(head -n 1 "$T/out")"
	true
}

@test "containment: --measure jaccard is the default, byte for byte" {
	make_stream >in
	mhrun -f tsv -a in
	cp "$T/out" default
	mhrun -f tsv -a --measure jaccard in
	assert_status 0
	assert_same default "$T/out"
}

@test "containment: JSON Lines, -p, and mail's X-Mhfilter name the document a message holds" {
	make_stream >in
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    i, t = line.rstrip("\n").split("\t")
    print(json.dumps({"id": i, "text": t}))' in >in.jsonl
	mhrun -f jsonl -a --measure containment in.jsonl
	assert_status 0
	grep '"id": "append-11"' "$T/out" | grep -q '"mhfilter":{"verdict":"unique","contains":"o1[12]","similarity":1.0000}' ||
	    fail "$(grep '"append-11"' "$T/out")"
	grep '"id": "trunc70-1"' "$T/out" | grep -q '"verdict":"duplicate","match":"o1","similarity":1.0000' ||
	    fail "$(grep '"trunc70-1"' "$T/out")"
	# -p: every match is a pair, with its containment.
	mhrun -f tsv -p --measure containment in
	assert_status 0
	grep -qx 'o1	trunc70-1	1.0000' "$T/out" || fail "$(head "$T/out")"
	# Mail: the second message is the first with a paragraph added.
	body="$(cut -f2 in | head -n 1)"
	more="$(cut -f2 in | sed -n 2p)"
	{
		printf 'From a@example.org Mon Jan  1 00:00:00 2024\nFrom: a@example.org\nMessage-ID: <m1@example.org>\nSubject: one\n\n%s\n\n' "$body"
		printf 'From a@example.org Mon Jan  1 00:01:00 2024\nFrom: a@example.org\nMessage-ID: <m2@example.org>\nSubject: one, updated\n\n%s\n\n%s\n\n' "$body" "$more"
	} >box
	mhrun -f mail -a --measure containment box
	assert_status 0
	grep -qx 'X-Mhfilter: unique; contains=<m1@example.org>; similarity=1.00' "$T/out" ||
	    fail "$(grep X-Mhfilter "$T/out")"
}

@test "containment: through the daemon and --connect, the stream's bytes" {
	make_stream >in
	mhrun -f tsv -a --measure containment -d sdb in
	assert_status 0
	cp "$T/out" want
	mhrun -f tsv -p --measure containment -d pdb in
	assert_status 0
	cp "$T/out" wantp
	start_daemon -f tsv --measure containment -d db --listen "unix:$T/sock"
	timeout 60 "$MHFILTER" --connect "unix:$T/sock" -f tsv -a <in >got
	stop_daemon
	assert_same want got
	grep -q '^unique	o1[12]	1.0000	append-11	' got || fail "no contains"
	# -p, its lines of documents held too ("pair-held" in the protocol).
	start_daemon -f tsv --measure containment -d db2 --listen "unix:$T/sock"
	timeout 60 "$MHFILTER" --connect "unix:$T/sock" -f tsv -p <in >gotp
	stop_daemon
	assert_same wantp gotp
	grep -q '^o1[12]	append-11	1.0000	contains$' gotp || fail "no contains"
}

@test "containment: -p lists each match, and each earlier document a record holds, marked contains" {
	make_stream >in
	mhrun -f tsv -p --measure containment -d db in
	assert_status 0
	cp "$T/out" p
	# A digest holds its three articles at least once each way found;
	# an appended article its first, and its second as Jaccard finds it.
	for i in 21 24 27; do
		grep -q "^o$i	digest-$i	1.0000	contains$" p ||
		    fail "digest-$i does not hold o$i" "$(cat p)"
	done
	for i in 11 13 15 17 19; do
		grep -q "^o$i	append-$i	1.0000	contains$" p ||
		    fail "append-$i does not hold o$i" "$(cat p)"
	done
	# A truncation is in its source: a match, not marked.
	grep -q '^o1	trunc50-1	1.0000$' p || fail "$(cat p)"
	# Every line: three fields and a match, or four ending in contains.
	awk -F'\t' '!(NF == 3 || (NF == 4 && $4 == "contains")) { exit 1 }' p ||
	    fail "a line of another shape" "$(cat p)"
	# With --group the group comes first, then the mark.
	mhrun -f tsv -p --group --measure containment -d gdb in
	assert_status 0
	grep -q "^o21	digest-21	1.0000	digest-21	contains$" "$T/out" ||
	    fail "$(cat "$T/out")"
	# A Jaccard index lists no such lines.
	mhrun -f tsv -p -t 0.5 -d jdb in
	assert_status 0
	! grep -q 'contains' "$T/out" || fail "contains under Jaccard"
}

# Set bytes 2-3 of document records of unsealed index $1 (format 8, made by
# unseal) to a code: of every record with $2 "zero", or of the record of id
# $3 to the code of its count less one with $2 "less".
set_codes() {
	mdb_dump -s docs "$1" | python3 -c '
import sys
how, want = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
K = 128
body = False
for line in sys.stdin:
    if line.startswith("HEADER=END"):
        body, n = True, 0
    elif line.startswith("DATA=END"):
        body = False
    elif body:
        n += 1
        if n % 2 == 0:
            v = bytearray.fromhex(line.strip())
            idlen = int.from_bytes(v[4:8], "little")
            rid = v[16 + 2 * K:16 + 2 * K + idlen].decode()
            code = v[2] | v[3] << 8
            if how == "zero":
                v[2] = v[3] = 0
            elif rid == want:
                assert 1 < code < 2048
                v[2], v[3] = (code - 1) & 0xff, (code - 1) >> 8
            line = " " + v.hex() + "\n"
    sys.stdout.write(line)' "$2" "${3:-}" >"$1.docs" ||
	    fail "set_codes $*"
	mdb_load -s docs "$1" <"$1.docs" 2>/dev/null || fail "mdb_load docs"
}

@test "containment: each document keeps its shingle count, --check compares it with the text, and records without one (before) give the same verdicts" {
	make_stream >in
	mhrun -f tsv --measure containment -d db in
	assert_status 0
	mhrun --info -d db
	grep -qx 'perms: 128' "$T/out" || fail "$(cat "$T/out")"
	# Bytes 2-3 of each record: its text's distinct 5-grams, counted here
	# apart (under 2,048 the count itself, else a range that holds it).
	dump_values db docs | python3 -c '
import sys
texts = dict(l.rstrip("\n").split("\t", 1) for l in open("in"))
n = 0
for line in sys.stdin:
    v = bytes.fromhex(line.strip())
    idlen = int.from_bytes(v[4:8], "little")
    rid = v[16 + 256:16 + 256 + idlen].decode()
    t = texts[rid]
    want = len({t[i:i + 5] for i in range(len(t) - 4)})
    c, e = v[2] | v[3] << 8, (v[3] << 8) >> 11
    lo = c if e == 0 else (2048 + (c & 2047)) << (e - 1)
    hi = lo if e == 0 else lo + (1 << (e - 1)) - 1
    assert lo <= want <= hi, (rid, want, c)
    n += 1
assert n >= 40, n' || fail "the records' shingle counts"
	# A Jaccard index keeps none: its records as before.
	mhrun -f tsv -d jdb in
	assert_status 0
	[ -z "$(dump_values jdb docs | cut -c6-9 | grep -v 0000)" ] ||
	    fail "a Jaccard record keeps a count"
	mhrun --check -d db
	assert_status 0

	# One count off by one: --check names the document and both counts.
	unseal db u
	cp -r u z
	set_codes u less o3
	mhrun --check -d u
	assert_status 1
	grep -q '^problem: document 3: its record counts [0-9]* to [0-9]* distinct shingles, its text [0-9]*$' \
	    "$T/out" || fail "$(cat "$T/out")"

	# Without counts, as an index of before: the same verdicts and pairs.
	set_codes z zero
	grep -v '^o[0-9]' in >later
	mhrun --check -d z
	assert_status 0
	for opt in -a -p; do
		mhrun -Q -f tsv $opt -d z later
		assert_status 0
		cp "$T/out" without
		mhrun -Q -f tsv $opt -d db later
		assert_status 0
		cmp -s without "$T/out" || fail "$opt differs" "$(diff without "$T/out")"
		[ "$(grep -c '^duplicate	.*	trunc50-\|^o[0-9]*	trunc50-' \
		    without)" -ge 10 ] || fail "too few with $opt"
	done
}
