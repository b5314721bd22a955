#!/usr/bin/env bats
# Known answers for what is stored and exchanged, end to end: two known
# documents (fixed ids, times and parameters) go into an LMDB index and a
# Redis one, and what comes out is compared with bytes written down once,
# from the code of index format 4 and Redis format 3 (formats 5 to 8
# changed only the meta record "format" of these; format 9 added the 8
# bytes of a seal to the end of each value of docs and texts, written down
# from its code): the export, LMDB's
# docs, texts, times and meta records (mdb_dump), Redis's keys and values.
# A change of what is stored (document records, texts, time keys, meta
# records, Redis keys and values, the export format)
# or of what goes into a signature fails here loudly; the pure layouts are
# pinned one by one in tests/unit/test_codec.c.  doc-2's text is LZ4 as
# Debian's liblz4 1.9 compresses it: another liblz4 may compress otherwise
# (and still read it), which would show here in kat:d:2 and in texts.

load helpers
load redis-helpers

setup_file() {
	if redis_have; then
		RDIR="$BATS_FILE_TMPDIR/redis"
		export RDIR
		redis_single_start "$RDIR"
	fi
}

teardown_file() {
	[ -z "${RDIR:-}" ] || redis_stop_all "$RDIR"
}

OPTS=(-f jsonl --time-field time --perms 8 --bands 4 --rows 2 --seed 42)

# The two documents: a short text (stored raw) and a long one (LZ4).
input() {
	printf '%s\n' \
	    '{"id":"doc-1","text":"Short Text","time":1700000000}' \
	    '{"id":"doc-2","text":"The quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog; the quick brown fox.","time":"2023-11-14T22:13:21Z"}' \
	    >in.jsonl
}

@test "an export of known documents is these bytes" {
	input
	mhrun --db db "${OPTS[@]}" in.jsonl
	assert_status 0
	mhrun --db db --export -
	assert_status 0
	cat >want <<'EOF'
{"mhfilter_export":1,"scheme":"xxh3-oph16-dens-v2","perms":8,"bands":4,"rows":2,"shingle":5,"unit":"char","normalize":"casefold,nfkc,space","texts":true,"verify":0,"threshold":0.80000000000000004,"seed":"42"}
{"id":"doc-1","time":1700000000,"flags":1,"sig":"be0abe0abe0a921bde8c921b921bbe0a","text":"short text"}
{"id":"doc-2","time":1700000001,"flags":1,"sig":"f504b8504817f74b0a038a8dad04244d","text":"the quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog; the quick brown fox."}
EOF
	cmp want "$T/out" || fail "export:" "$(diff want "$T/out")"
	# Imported into a new index and exported again: the same bytes.
	mhrun --db db2 --import want
	assert_status 0
	mhrun --db db2 --export -
	cmp want "$T/out" || fail "export of the import:" "$(diff want "$T/out")"
}

@test "the LMDB records of known documents are these bytes" {
	command -v mdb_dump >/dev/null || skip "mdb_dump is not installed (Debian package lmdb-utils)"
	input
	mhrun --db db "${OPTS[@]}" in.jsonl
	assert_status 0
	# mdb_dump -p: a line for each key, then one for its value.
	dump() {
		mdb_dump -p -s "$1" db | sed -n '/^HEADER=END/,/^DATA=END/p' |
		    sed '1d;$d'
	}
	cat >want <<'EOF'
 \00\00\00\00\00\00\00\01
 \02\01\00\00\05\00\00\00\00\00\00\00eS\f1\00\be\0a\be\0a\be\0a\92\1b\de\8c\92\1b\92\1b\be\0adoc-1F\cck\cd\04\14\89B
 \00\00\00\00\00\00\00\02
 \02\01\00\00\05\00\00\00\00\00\00\00eS\f1\01\f5\04\b8PH\17\f7K\0a\03\8a\8d\ad\04$Mdoc-2N\e2\1f\f9\e2\ee\ceS
 \00\00\00\00\00\00\00\01
 \00\00short text\a8&?k\0d)\c2\11
 \00\00\00\00\00\00\00\02
 \02\00n\00\00\00\f0\10the quick brown fox jumps over \1f\00\91lazy dog;\0e\00\0f-\00%P fox.\bdRs'0\9b\ab\a3
 \80\00\00\00eS\f1\00\00\00\00\00\00\00\00\01
 
 \80\00\00\00eS\f1\01\00\00\00\00\00\00\00\02
 
EOF
	{ dump docs; dump texts; dump times; } >got
	cmp want got || fail "docs, texts, times:" "$(diff want got)"
	cat >want <<'EOF'
 bands
 4
 created
 NOW
 format
 9
 l0_next
 2
 l1_entries
 0
 next_doc
 3
 normalize
 casefold,nfkc,space
 perms
 8
 rows
 2
 scheme
 2 xxh3-oph16-dens-v2
 seed
 42
 shingle
 5
 sweep
 0
 texts
 1
 threshold
 0.80000000000000004
 unit
 char
 verify
 0
EOF
	dump meta | awk 'prev == " created" { $0 = " NOW" } { print; prev = $0 }' >got
	cmp want got || fail "meta:" "$(diff want got)"
}

@test "the Redis keys and values of known documents are these bytes" {
	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	input
	mhrun --db "redis://$REDIS_SINGLE/kat" "${OPTS[@]}" in.jsonl
	assert_status 0
	rcli() {
		redis-cli -h 127.0.0.1 -p "${REDIS_SINGLE#*:}" "$@"
	}
	# {kat}:filters: ticket 1's filter of its 8 band keys, 128 bits, bit
	# t (0-2) of key k the low 7 bits of rotl(k, 21t) times 1,
	# 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f (computed apart, in Python).
	cat >want <<'EOF'
kat:b:1af6ce156e3835d9 "\x00\x00\x00\x00\x00\x00\x00\x01"
kat:b:2ee3384aebd4503c "\x00\x00\x00\x00\x00\x00\x00\x01"
kat:b:3721cd4bd8ae016e "\x00\x00\x00\x00\x00\x00\x00\x01"
kat:b:40b1b78321954b4d "\x00\x00\x00\x00\x00\x00\x00\x02"
kat:b:468a47fdbff2cc6b "\x00\x00\x00\x00\x00\x00\x00\x02"
kat:b:ae55f6b3716ceec5 "\x00\x00\x00\x00\x00\x00\x00\x02"
kat:b:c1281d0e99d802b8 "\x00\x00\x00\x00\x00\x00\x00\x01"
kat:b:c1fa0215f2309722 "\x00\x00\x00\x00\x00\x00\x00\x02"
kat:d:1 "K\x02\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00eS\xf1\x00\xbe\n\xbe\n\xbe\n\x92\x1b\xde\x8c\x92\x1b\x92\x1b\xbe\ndoc-1\x00\x00short text"
kat:d:2 "K\x02\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00eS\xf1\x01\xf5\x04\xb8PH\x17\xf7K\n\x03\x8a\x8d\xad\x04$Mdoc-2\x02\x00n\x00\x00\x00\xf0\x10the quick brown fox jumps over \x1f\x00\x91lazy dog;\x0e\x00\x0f-\x00%P fox."
{kat}:docs "2"
{kat}:filters 1) "1" 2) "\x02\x00@\x00\x04 \x02\xd1!+\x00\x06\x00I\b\x00"
{kat}:meta "format=5\nscheme=2 xxh3-oph16-dens-v2\nperms=8\nbands=4\nrows=2\nshingle=5\nunit=char\nnormalize=casefold,nfkc,space\nseed=42\ntexts=1\nverify=0\nthreshold=0.80000000000000004\ncreated=NOW\n"
{kat}:order "1"
{kat}:seq "2"
EOF
	for k in $(rcli --raw --scan --pattern '*kat*' | sort); do
		case "$(rcli TYPE "$k")" in
		hash)	printf '%s %s\n' "$k" \
			    "$(rcli --no-raw HGETALL "$k" | paste -sd ' ' -)" ;;
		*)	printf '%s %s\n' "$k" "$(rcli --no-raw GET "$k")" ;;
		esac
	done | sed 's/created=[0-9]*\\n/created=NOW\\n/' >got
	cmp want got || fail "Redis:" "$(diff want got)"
	# Kept documents have no expiry without --retain.
	[ "$(rcli TTL kat:d:1)" = -1 ] || fail "TTL $(rcli TTL kat:d:1)"
	# Output that cannot be written: the batch stays undelivered, one
	# range FIRST:END:OWNER scored FIRST, owned by its first document.
	status=0
	timeout 60 "$MHFILTER" --db "redis://$REDIS_SINGLE/kat2" "${OPTS[@]}" \
	    in.jsonl >/dev/full 2>err || status=$?
	[ "$status" -eq 1 ] || fail "exit status $status" "$(cat err)"
	printf '1:3:1\n1\n' >want
	rcli --raw ZRANGE '{kat2}:undelivered' 0 -1 WITHSCORES >got
	cmp want got || fail "undelivered:" "$(diff want got)"
}

@test "the LMDB groups and undelivered records are these bytes" {
	command -v mdb_dump >/dev/null || skip "mdb_dump is not installed (Debian package lmdb-utils)"
	dump() {
		mdb_dump -p -s "$1" db | sed -n '/^HEADER=END/,/^DATA=END/p' |
		    sed '1d;$d'
	}
	t='Storm damage closed the coastal road for two days'
	printf 'a\t%s\nb\t%s!\nc\t%s!!\n' "$t" "$t" "$t" >in
	# The output cannot be written: the batch stays undelivered.
	status=0
	timeout 60 "$MHFILTER" -f tsv -d db in >/dev/full 2>err || status=$?
	[ "$status" -eq 1 ] || fail "exit status $status" "$(cat err)"
	cat >want <<'EOF2'
 \00\00\00\00\00\00\00\02
 \00\00\00\00\00\00\00\01
 \00\00\00\00\00\00\00\03
 \00\00\00\00\00\00\00\01
EOF2
	dump groups >got
	cmp want got || fail "groups:" "$(diff want got)"
	# The range [1, 4) and its owner: the process whose first range
	# began at document 1 (lmdb.c, "Several writers").
	dump meta | grep -A1 '^ undelivered' >got
	printf ' undelivered-owner:0000000000000004\n 1\n undelivered:0000000000000004\n 1\n' |
	    cmp - got || fail "meta: $(cat got)"
	# Written by the next run (a replay), then marked delivered.
	mhrun -f tsv -d db --stats in
	assert_status 0
	assert_stat replayed 1
	dump meta >got
	if grep -q undelivered got; then
		fail "still undelivered: $(cat got)"
	fi
}
