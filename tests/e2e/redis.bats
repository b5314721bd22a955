#!/usr/bin/env bats
# The Redis index backend (--db redis://...): the same behaviours as the
# LMDB index, run against an LMDB directory, a single Redis and a 3-master
# Redis Cluster with a replica each; then what only a shared index has:
# concurrent writers on one index, restarts, and a master killed mid-run.

load helpers
load redis-helpers
load daemon-helpers

setup_file() {
	redis_have || skip "redis-server, redis-cli or python3 is not installed (Debian packages redis-server, redis-tools, python3)"
	RDIR="$BATS_FILE_TMPDIR/redis"
	export RDIR
	redis_single_start "$RDIR"
	redis_cluster_start "$RDIR" 3 1
	# A stream with known near-duplicates at every distance: 2,000
	# documents, then 500 copies with a few words changed, each put at a
	# random place after its original.
	python3 - "$BATS_FILE_TMPDIR/stream" <<'EOF'
import random, sys
rnd = random.Random(7)
words = ["w%d" % i for i in range(3000)]
docs = [" ".join(rnd.choice(words) for _ in range(rnd.randint(40, 70)))
        for _ in range(2000)]
out = [("d%d" % i, t) for i, t in enumerate(docs)]
for k in range(500):
    i = rnd.randrange(len(docs))
    w = docs[i].split()
    for _ in range(rnd.randint(1, 2)):
        w[rnd.randrange(len(w))] = rnd.choice(words)
    pos = [j for j, (rid, _) in enumerate(out) if rid == "d%d" % i][0]
    out.insert(rnd.randint(pos + 1, min(len(out), pos + 400)),
               ("c%d" % k, " ".join(w)))
with open(sys.argv[1], "w") as f:
    for rid, t in out:
        f.write("%s\t%s\n" % (rid, t))
EOF
}

teardown_file() {
	redis_stop_all "$RDIR"
}

# A fresh index on backend $1 (lmdb, single, cluster), as a --db value.
# Called as "$(fresh ...)", in a subshell: the count of those given is
# kept in a file, so that each call gives a new one.
fresh() {
	local n

	n=$(($(cat "$T/.fresh" 2>/dev/null || echo 0) + 1))
	echo "$n" >"$T/.fresh"
	case "$1" in
	lmdb)	echo "$T/db$n" ;;
	single)	echo "redis://$REDIS_SINGLE/t$$.$BATS_TEST_NUMBER.$n" ;;
	cluster) echo "redis://$REDIS_CLUSTER/t$$.$BATS_TEST_NUMBER.$n" ;;
	esac
}
A_TEXT='the quick brown fox jumps over the lazy dog again and again today'

# "key: value" of --stats in $T/err.
stat_of() {
	sed -n "s/^mhfilter: $1: //p" "$T/err"
}

# "ID GROUP-ID" for every document of the export $1 (its own id when it is
# its own group).
export_groups() {
	python3 - "$1" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])][1:]
ids = [o["id"] for o in lines]
for o in lines:
    g = o.get("group")
    print(o["id"], ids[g - 1] if g else o["id"])
EOF
}

# ------------------------------------------------- the same on every backend

@test "the sample feed: the same output, verdicts and counts on every backend" {
	for b in lmdb single cluster; do
		db="$(fresh $b)"
		mhrun -d "$db" -a --stats "$DATA/sample-news.txt"
		assert_status 0
		cp "$T/out" "out.$b"
		echo "$(stat_of unique) $(stat_of duplicates) $(stat_of index_documents)" >"st.$b"
	done
	cmp out.lmdb out.single
	cmp out.lmdb out.cluster
	cmp st.lmdb st.single
	cmp st.lmdb st.cluster
	[ "$(cut -d' ' -f1 st.lmdb)" -gt 0 ] && [ "$(cut -d' ' -f2 st.lmdb)" -gt 0 ]
}

@test "a later run finds the duplicates of an earlier run's records, replays included" {
	head -n 1000 "$BATS_FILE_TMPDIR/stream" >run1
	tail -n +1001 "$BATS_FILE_TMPDIR/stream" >run2
	for b in lmdb cluster; do
		db="$(fresh $b)"
		mhf -f tsv -d "$db" run1 >"u1.$b"
		mhrun -f tsv -d "$db" -a run2
		assert_status 0
		cp "$T/out" "a2.$b"
		# A rerun of run1 with its ids and --replay all: every unique
		# record again (a Redis index always replays so).
		mhrun -f tsv -d "$db" --replay all --stats run1
		assert_status 0
		cmp "u1.$b" "$T/out"
		[ "$(stat_of replayed)" = "$(wc -l <"u1.$b")" ]
	done
	cmp a2.lmdb a2.cluster
	grep -q '^duplicate' a2.lmdb
}

@test "--query-only reports duplicates and inserts nothing" {
	head -n 300 "$BATS_FILE_TMPDIR/stream" >run1
	for b in lmdb cluster; do
		db="$(fresh $b)"
		mhf -f tsv -d "$db" run1 >/dev/null
		mhf -d "$db" --info >"i1.$b"
		awk -F'\t' '{ print "q" NR "\t" $2 }' run1 >copies
		mhrun -f tsv -d "$db" -Q -a copies
		assert_status 0
		cut -f1,2 "$T/out" >"q.$b"
		mhf -d "$db" --info >"i2.$b"
		[ "$(grep '^documents' "i1.$b")" = "$(grep '^documents' "i2.$b")" ]
	done
	cmp q.lmdb q.cluster
	! grep -q '^unique' q.lmdb || fail "a unique verdict on the second pass"
}

@test "stored parameters: another --perms is refused with status 4 naming the option" {
	db="$(fresh cluster)"
	mhf -d "$db" -k 64 "$DATA/sample-news.txt" >/dev/null
	mhrun -d "$db" -k 128 "$DATA/sample-news.txt"
	assert_status 4
	grep -q -- "was made with --perms 64; you gave --perms 128" "$T/err"
	# Left out, the stored value is used.
	mhrun -d "$db" --explain
	assert_status 0
	grep -q "K = 64\|64 permutations\|perms 64\|K=64" "$T/out"
}

@test "Redis indexes of layouts 2, 3 and 4 are read as they are, and upgraded by the first writable run" {
	set -o pipefail
	head -n 300 "$BATS_FILE_TMPDIR/stream" >run1
	awk -F'\t' '{ print "q" NR "\t" $2 }' run1 >copies
	cli() { redis-cli -h "${REDIS_SINGLE%:*}" -p "${REDIS_SINGLE##*:}" "$@"; }
	for old in 2 3 4; do
		db="$(fresh single)"
		key="{${db##*/}}:meta"
		mhf -f tsv -d "$db" run1 >/dev/null
		cli GET "$key" | grep -qx 'format=5'
		mhf -f tsv -d "$db" -Q -a copies >q1
		# Back to layout $old: its "format" line alone (2 and 3 have
		# no delivery marks, and 3 differs from 2 only in LZ4 texts;
		# none has grouped documents, and run1's are all unique).
		meta="$(cli GET "$key")"
		printf '%s\n' "$meta" | sed "s/^format=5\$/format=$old/" |
		    cli -x SET "$key" >/dev/null
		cli GET "$key" | grep -qx "format=$old"
		# Read-only: the same answers, nothing rewritten.
		mhrun -f tsv -d "$db" -Q -a copies
		assert_status 0
		cmp q1 "$T/out"
		cli GET "$key" | grep -qx "format=$old"
		mhf -d "$db" --info | grep -x "format: $old" >/dev/null
		# Writable: upgraded, the same answers, and the earlier
		# documents delivered: the feed again writes nothing.
		mhrun -f tsv -d "$db" -a copies
		assert_status 0
		cmp q1 "$T/out"
		grep -q "upgraded from Redis index format $old to 5" "$T/err"
		cli GET "$key" | grep -qx 'format=5'
		mhf -d "$db" --info | grep -x 'format: 5' >/dev/null
		[ "$(printf '%s\n' "$meta" | sed 1d)" = "$(cli GET "$key" | sed 1d)" ]
		mhrun -f tsv -d "$db" run1
		assert_status 0
		[ ! -s "$T/out" ] || fail "layout $old: $(wc -l <"$T/out") written again"
	done
}

@test "groups on every backend: a chain's last copy names its first document, across writers, runs and an export" {
	set -o pipefail
	# Twenty chains a, b, c: b is a with 8 of 200 words changed, c is b
	# with 8 more; at -t 0.88 b matches a and c matches b, not a.
	python3 - <<'EOF'
import random
rnd = random.Random(11)
words = ["w%d" % i for i in range(5000)]
with open("a", "w") as fa, open("b", "w") as fb, open("c", "w") as fc:
    for g in range(20):
        a = [rnd.choice(words) for _ in range(200)]
        b = list(a)
        for p in rnd.sample(range(200), 8):
            b[p] = rnd.choice(words)
        c = list(b)
        for p in rnd.sample(range(200), 8):
            c[p] = rnd.choice(words)
        for f, w, n in ((fa, a, "a"), (fb, b, "b"), (fc, c, "c")):
            f.write("%s%d\t%s\n" % (n, g, " ".join(w)))
EOF
	cat a b c >abc
	lm="$(fresh lmdb)"
	mhf -f tsv -d "$lm" -t 0.88 --clusters abc >want
	# The premise: every c matches its b, not its a, and is in a's group.
	l2="$(fresh lmdb)"
	mhf -f tsv -d "$l2" -t 0.88 -a abc |
	    awk -F'\t' '$4 ~ /^c/ { print $1, substr($2, 1, 1) }' | sort -u >m
	[ "$(cat m)" = "duplicate b" ] || fail "matches of c:" "$(cat m)"
	[ "$(awk '$1 ~ /^c/ && $2 ~ /^a/' want | wc -l)" = 20 ] || fail "$(cat want)"
	for be in single cluster; do
		# One process, then a process for each of a, b and c.
		db="$(fresh "$be")"
		mhrun -f tsv -d "$db" -t 0.88 --clusters abc
		assert_status 0
		cmp want "$T/out" || fail "$be, one writer:" "$(diff want "$T/out")"
		db="$(fresh "$be")"
		for part in a b c; do
			mhf -f tsv -d "$db" -t 0.88 --clusters "$part"
		done >got
		cmp want got || fail "$be, three writers:" "$(diff want got)"
		mhrun -d "$db" --check
		assert_status 0
		grep -qx 'problems: 0' "$T/out"
		# The export names each b's and c's group, as LMDB's does,
		# and an import into either backend keeps them.
		mhf -d "$db" --export rx
		mhf -d "$lm" --export lx
		export_groups rx >rx.groups
		export_groups lx >lx.groups
		cmp lx.groups rx.groups || fail "$be export:" "$(diff lx.groups rx.groups)"
		[ "$(grep -c '^c[0-9]* a' rx.groups)" = 20 ] || fail "$(cat rx.groups)"
		i2="$(fresh "$be")"
		mhf -d "$i2" --import rx >/dev/null
		mhf -d "$i2" --export ix
		export_groups ix >ix.groups
		cmp lx.groups ix.groups || fail "$be import:" "$(diff lx.groups ix.groups)"
	done
}

@test "--max-docs on every backend: the same verdicts" {
	set -o pipefail
	head -n 400 "$BATS_FILE_TMPDIR/stream" >in
	for b in lmdb cluster; do
		db="$(fresh $b)"
		mhrun -f tsv -d "$db" --batch 50 --max-docs 100 -a --stats in
		assert_status 0
		cp "$T/out" "a.$b"
		[ "$(stat_of expired)" -gt 0 ]
		# What is left is the newest 100 or so: a copy of the first
		# record is new again, a copy of the last is not.
		printf 'x1\t%s\n' "$(head -n 1 in | cut -f2)" >q
		printf 'x2\t%s\n' "$(tail -n 1 in | cut -f2)" >>q
		mhf -f tsv -d "$db" -Q -a q | cut -f1 >"q.$b"
		printf 'unique\nduplicate\n' | cmp - "q.$b"
	done
	cmp a.lmdb a.cluster
}

@test "--remove, --check, --info and --export/--import between backends" {
	set -o pipefail
	head -n 200 "$BATS_FILE_TMPDIR/stream" >in
	lm="$(fresh lmdb)"
	rc="$(fresh cluster)"
	mhf -f tsv -d "$lm" in >/dev/null
	mhf -f tsv -d "$rc" in >/dev/null
	mhrun -d "$rc" --info
	assert_status 0
	n="$(sed -n 's/^documents: //p' "$T/out")"
	m="$(mhf -d "$lm" --info | sed -n 's/^documents: //p')"
	[ "$n" = "$m" ] || fail "documents: $n on Redis, $m on LMDB"
	mhrun -d "$rc" --check
	assert_status 0
	grep -qx 'problems: 0' "$T/out"
	# Export from Redis, import into a new LMDB index and a new namespace.
	mhf -d "$rc" --export dump
	[ "$(($(wc -l <dump) - 1))" = "$n" ]
	l2="$(fresh lmdb)"
	r2="$(fresh single)"
	mhf -d "$l2" --import dump >/dev/null
	mhf -d "$r2" --import dump >/dev/null
	awk -F'\t' '{ print "q" NR "\t" $2 }' in >copies
	for db in "$lm" "$l2" "$r2"; do
		mhf -f tsv -d "$db" -Q -a copies | cut -f1,2
	done >verdicts
	[ "$(sort verdicts | uniq -c | awk '$1 != 3' | wc -l)" = 0 ]
	# --remove: the record's copy is new again.
	echo d1 >ids
	mhrun -d "$rc" --remove ids
	assert_status 0
	printf 'y\t%s\n' "$(grep -P '^d1\t' in | cut -f2)" >q
	mhf -f tsv -d "$rc" -Q -a q | cut -f1 | grep -x unique >/dev/null
	mhrun -d "$rc" --check
	grep -qx 'problems: 0' "$T/out"
}

@test "--info and --check on Redis: documents, band entries, memory and layout as on LMDB; damage listed, exit 1" {
	head -n 300 "$BATS_FILE_TMPDIR/stream" >in
	lm="$(fresh lmdb)"
	db="$(fresh single)"
	ns="${db##*/}"
	mhf -f tsv -d "$lm" in >/dev/null
	mhf -f tsv -d "$db" in >/dev/null
	mhf -d "$lm" --info >info.lmdb
	mhrun -d "$db" --info
	assert_status 0
	cp "$T/out" info.redis
	for k in documents band_entries next_document; do
		[ "$(grep "^$k: " info.lmdb)" = "$(grep "^$k: " info.redis)" ] ||
		    fail "$k: $(grep "^$k: " info.lmdb) on LMDB, $(grep "^$k: " info.redis) on Redis"
	done
	grep -qx 'format: 5' info.redis
	grep -qx 'pending: 0' info.redis
	grep -qx 'undelivered_ranges: 0' info.redis
	[ "$(sed -n 's/^memory: //p' info.redis)" -gt 100000 ] || fail "$(cat info.redis)"
	[ "$(sed -n 's/^size_bands: //p' info.redis)" = \
	    $((8 * $(sed -n 's/^band_entries: //p' info.redis))) ]
	mhf -d "$lm" --check >check.all
	grep -v '^problems' check.all >check.lmdb
	mhrun -d "$db" --check
	assert_status 0
	grep -v '^problems\|^pending\|^undelivered' "$T/out" | cmp check.lmdb -
	grep -qx 'problems: 0' "$T/out"
	# Damage, one of each kind.
	cli() { redis-cli -h "${REDIS_SINGLE%:*}" -p "${REDIS_SINGLE##*:}" "$@"; }
	cli SET "$ns:d:3" garbage >/dev/null
	# The bucket taken away holds two documents or more, so that one of
	# them is neither document 3 nor 5, damaged otherwise (most buckets
	# hold one: the first the scan met was one of theirs a time in a few
	# hundred); the one appended to is another (a scan may repeat a key).
	bucket="$(cli EVAL "local c = '0'
repeat
	local r = redis.call('SCAN', c, 'MATCH', ARGV[1], 'COUNT', 1000)
	c = r[1]
	for _, k in ipairs(r[2]) do
		if redis.call('STRLEN', k) >= 16 then return k end
	end
until c == '0'
return false" 0 "$ns:b:*")"
	[ -n "$bucket" ] || fail "no band bucket of two documents"
	other="$(cli --scan --pattern "$ns:b:*" | grep -vxF "$bucket" | head -n 1)"
	cli DEL "$bucket" >/dev/null
	cli APPEND "$other" abc >/dev/null
	cli EVAL "local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], 'P' .. string.sub(v, 2)) return 1" 1 "$ns:d:5" >/dev/null
	cli ZADD "{$ns}:undelivered" 1 "1:x:1" 100000 "100000:100001:1" >/dev/null
	mhrun -d "$db" --check
	assert_status 1
	grep -qx "problem: document 3: corrupt record" "$T/out" || fail "$(cat "$T/out")"
	grep -q "^problem: document [0-9]*: missing from band bucket ${bucket##*:}\$" "$T/out" ||
	    fail "$(cat "$T/out")"
	grep -qx "problem: band bucket ${other##*:}: not a list of 8-byte document numbers" "$T/out"
	grep -qx "problem: document 5: pending and without an expiry" "$T/out"
	grep -qx 'problem: undelivered range "1:x:1": malformed' "$T/out"
	grep -q '^problem: undelivered range \[100000, 100001) of 1: past' "$T/out"
	grep -qx 'pending: 1' "$T/out"
	grep -q 'problems found: the index is damaged' "$T/err"
	# --info still reads what is left.
	mhrun -d "$db" --info
	assert_status 0
	grep -qx 'pending: 1' "$T/out"
	grep -qx 'undelivered_ranges: 2' "$T/out"
}

@test "Redis: --compact is refused, a bad URL is a clear error, an unreachable server gives up" {
	mhrun -d "redis://$REDIS_SINGLE/x" --compact somewhere
	assert_status 2
	grep -q "does not apply to a Redis index" "$T/err"
	mhrun -d "redis:///x" </dev/null
	assert_status 1
	grep -q "no host" "$T/err"
	mhrun -d "redis://$REDIS_SINGLE/a{b}" </dev/null
	assert_status 1
	grep -q "namespace" "$T/err"
	mhrun -d "redis://127.0.0.1:1/x?timeout=0.5" "$DATA/sample-news.txt"
	assert_status 1
	grep -q "127.0.0.1:1" "$T/err"
	[ ! -s "$T/out" ]
}

@test "a Redis that refuses writes (out of memory): exit 1, nothing reported, nothing left kept" {
	set -o pipefail
	db="$(fresh single)"
	port="${REDIS_SINGLE##*:}"
	# Made first, so that it is the batch's writes that fail.
	mhf -d "$db" </dev/null
	redis-cli -p "$port" config set maxmemory 1 >/dev/null
	mhrun -d "$db" "$DATA/sample-news.txt"
	redis-cli -p "$port" config set maxmemory 0 >/dev/null
	assert_status 1
	grep -qi "OOM\|maxmemory\|memory" "$T/err" || fail "$(cat "$T/err")"
	[ ! -s "$T/out" ]
	# Nothing half-done stays behind: the same feed is all new.
	mhrun -d "$db" --stats "$DATA/sample-news.txt"
	assert_status 0
	mhf "$DATA/sample-news.txt" | cmp - "$T/out"
}

@test "daemon mode on a Redis index: replies after the commit, seen by a later run" {
	set -o pipefail
	db="$(fresh single)"
	"$MHFILTER" -f tsv -d "$db" --listen "unix:$T/sock" 2>derr &
	BG_PIDS+=("$!")
	for i in $(seq 100); do [ -S "$T/sock" ] && break; sleep 0.05; done
	printf 'a\t%s\nb\t%s!\n' "$A_TEXT" "$A_TEXT" | python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
s.shutdown(socket.SHUT_WR)
sys.stdout.write(s.makefile().read())' "$T/sock" >replies
	cut -f1,2,3 replies >got
	printf 'unique\ta\nduplicate\tb\ta\n' | cmp - got
	printf 'c\t%s.\n' "$A_TEXT" >q
	mhf -f tsv -d "$db" -Q -a q | cut -f1,2 |
	    grep -x "$(printf 'duplicate\ta')" >/dev/null
}

# ------------------------------------------------------- delivery marks

# redis-cli on the master of the {NS} keys of index $1 (a --db URL).
ucli() {
	local url="${1#redis://}" port

	url="${url%%/*}"
	port="${url##*:}"
	case "$url" in
	*,*)	port="$(redis_master_of_slot "$(redis_cli_any cluster keyslot "{${1##*/}}:x")")" ;;
	esac
	timeout 10 redis-cli -p "$port" "${@:2}"
}

# The undelivered ranges of index $1: how many.
ranges_of() {
	ucli "$1" ZCARD "{${1##*/}}:undelivered"
}

@test "a Redis restarted empty under a running writer: the writer stops (exit 1, saying so) rather than take it for a new index" {
	local port n

	gen_tsv 3000 >all
	split -l 100 all chunk.
	port="$(redis_free_ports 1)"
	redis_start_port "$RDIR" "$port"
	mkfifo in
	: >out
	"$MHFILTER" -f tsv -d "redis://127.0.0.1:$port/lost?timeout=20" \
	    --batch 100 <in >out 2>err &
	MPID=$!
	BG_PIDS+=("$MPID")
	feed_chunks 0.05 >in 2>/dev/null 3>&- &
	BG_PIDS+=($!)
	wait_lines out 30 500
	# Without persistence (the helpers' servers have none): empty.
	redis_kill_port "$port"
	redis_start_port "$RDIR" "$port"
	wait_exit "$MPID" 60
	[ "$status" -eq 1 ] || fail "status $status" "$(cat err)"
	grep -q "its document counter went back from [0-9]* to 0: the index was lost" err ||
	    fail "$(cat err)"
	# What it wrote before is the input's first records, in order.
	n="$(wc -l <out)"
	[ "$n" -lt 3000 ] || fail "all written"
	head -n "$n" all | cmp - out
}

@test "a Redis restarted empty under the daemon: the batch that meets it is answered 'index', and the daemon stops (exit 1), never answering an earlier item as new" {
	local port i

	gen_tsv 50 >feed
	port="$(redis_free_ports 1)"
	redis_start_port "$RDIR" "$port"
	start_daemon -f tsv -d "redis://127.0.0.1:$port/dlost?timeout=20" \
	    --listen "unix:$T/sock"
	dsend "unix:$T/sock" <feed >r1
	[ "$(grep -c '^unique	' r1)" -eq 50 ] || fail "$(cat r1)"
	redis_kill_port "$port"
	redis_start_port "$RDIR" "$port"
	# The first batch may meet the broken connection (retried), a later
	# one the emptied index: the feed again until the daemon stops.
	: >r2
	for i in 1 2 3 4 5; do
		kill -0 "$DPID" 2>/dev/null || break
		dsend "unix:$T/sock" <feed >>r2 || true
		sleep 0.5
	done
	run grep -c '^unique' r2
	[ "$output" = 0 ] || fail "answered as new:" "$(cat r2)"
	grep -q '^error	id[0-9]*	index	.*its document counter went back' r2 ||
	    fail "$(cat r2)"
	wait_exit "$DPID" 30
	[ "$status" -eq 1 ] || fail "status $status" "$(cat "$T/derr")"
	grep -q 'stopping on an index error' "$T/derr" || fail "$(cat "$T/derr")"
	# Nothing more was written into the empty Redis but the counter.
	[ "$(timeout 10 redis-cli -p "$port" DBSIZE)" -le 1 ] ||
	    fail "$(timeout 10 redis-cli -p "$port" KEYS '*' | head)"
}

@test "a feed polled again writes nothing the second time, on every backend; --replay all writes it again" {
	head -n 600 "$BATS_FILE_TMPDIR/stream" >in
	for b in lmdb single cluster; do
		db="$(fresh $b)"
		mhrun -f tsv -d "$db" --batch 100 --stats in
		assert_status 0
		cp "$T/out" "first.$b"
		u="$(stat_of unique)"
		[ "$u" -gt 0 ] && [ "$u" = "$(wc -l <"first.$b")" ] ||
		    fail "$b: $u unique, $(wc -l <"first.$b") written"
		mhrun -f tsv -d "$db" --batch 100 --stats in
		assert_status 0
		[ ! -s "$T/out" ] || fail "$b: $(wc -l <"$T/out") written again"
		assert_stat seen 600
		assert_stat replayed 0
		mhrun -f tsv -d "$db" --batch 100 --replay all --stats in
		assert_status 0
		cmp "first.$b" "$T/out"
		assert_stat replayed "$u"
		case "$b" in
		lmdb)	;;
		*)	[ "$(ranges_of "$db")" = 0 ] ||
			    fail "$b: $(ranges_of "$db") ranges left" ;;
		esac
	done
	cmp first.lmdb first.single
	cmp first.lmdb first.cluster
}

@test "kill -9 between commit and output, then a restart: nothing lost, nothing delivered written twice (single Redis, cluster)" {
	local n=6000 b db n1 repeats

	gen_tsv "$n" >all
	split -l 300 all chunk.
	for b in single cluster; do
		db="$(fresh $b)"
		rm -f in.$b out.$b
		DB="$db" start_read "$b" --batch 100
		wait_lines "got.$b" 30 1000
		# The reader paused: batches are committed and not written.
		kill -STOP "$RPID"
		sleep 0.5
		kill -9 "$MPID"
		wait_exit "$MPID"
		[ "$status" -eq 137 ] || fail "$b: status $status" "$(cat "err.$b")"
		kill -CONT "$RPID"
		wait "$RPID" || true
		complete_lines "got.$b" >written
		n1="$(wc -l <written)"
		head -n "$n1" all | cmp - written
		[ "$n1" -lt "$n" ] || fail "$b: the run was over"
		[ "$(ranges_of "$db")" -gt 0 ] || fail "$b: no undelivered range"
		# The restart: what the dead run committed and never wrote is
		# written (replays); nothing is missing; what it delivered and
		# marked is not written again.
		mhrun -f tsv -d "$db" --batch 100 --stats all
		assert_status 0
		sort -u written "$T/out" | cmp - <(sort all) ||
		    fail "$b: records missing"
		[ "$(stat_of replayed)" -gt 0 ] || fail "$b: no replays"
		repeats=$((n1 + $(wc -l <"$T/out") - n))
		[ "$repeats" -le 600 ] || fail "$b: $repeats written twice"
		echo "# $b: $n1 written before the kill, $(stat_of replayed) replayed, $repeats written twice" >&3
		# A completed run marked everything: a third writes nothing.
		mhrun -f tsv -d "$db" --stats all
		assert_status 0
		[ ! -s "$T/out" ] || fail "$b: $(wc -l <"$T/out") written again"
		assert_stat seen "$n"
		[ "$(ranges_of "$db")" = 0 ] || fail "$b: $(ranges_of "$db") ranges left"
	done
}

@test "two writers on one Redis index: a running writer's undelivered records are seen by the other, its killed ones replayed" {
	local n=4000 db n1

	gen_tsv "$n" >all
	split -l 100 all chunk.
	db="$(fresh single)"
	# The first writer, its reader paused: batches committed and not
	# written, while it waits to write them.
	DB="$db" start_read 1 --batch 50
	wait_lines got.1 30 500
	kill -STOP "$RPID"
	sleep 0.5
	kill -0 "$MPID" || fail "the first writer ended" "$(cat err.1)"
	n1="$(wc -l <got.1)"
	# The second, over the same records meanwhile: what the first
	# committed is seen (it is running: it writes them), the rest its
	# own.
	mhrun -f tsv -d "$db" --batch 50 --stats all
	assert_status 0
	cp "$T/out" out2
	[ "$(stat_of replayed)" = 0 ] || fail "$(stat_of replayed) replayed"
	[ "$(stat_of seen)" -gt "$n1" ] || fail "$(stat_of seen) seen, $n1 written"
	# The first is killed with those batches unwritten: the next run
	# writes them, and nothing else.
	kill -9 "$MPID"
	wait_exit "$MPID"
	kill -CONT "$RPID"
	wait "$RPID" || true
	complete_lines got.1 >written
	mhrun -f tsv -d "$db" --batch 50 --stats all
	assert_status 0
	cp "$T/out" out3
	[ "$(stat_of replayed)" -gt 0 ] || fail "no replays"
	sort -u written out2 out3 | cmp - <(sort all) || fail "records missing"
	[ -z "$(sort out2 out3 | uniq -d)" ] || fail "written by both later runs"
	[ -z "$(sort out2 written | uniq -d)" ] || fail "written by both writers"
	echo "# the first wrote $(wc -l <written), the second $(wc -l <out2), the third replayed $(wc -l <out3)" >&3
	mhrun -f tsv -d "$db" all
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") written again"
}

@test "the daemon on a Redis index: a feed polled again is seen, in the same run and after a restart; replies that never went are replays, once" {
	gen_tsv 300 >feed
	db="$(fresh single)"
	start_daemon -f tsv -d "$db" --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r1
	[ "$(grep -c '^unique	' r1)" -eq 300 ]
	cut -f1 feed | awk '{ print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }' >seen
	dsend "unix:$T/sock" feed >r2
	cmp seen r2
	stop_daemon
	start_daemon -f tsv -d "$db" --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r3
	cmp seen r3
	# A client that goes away before its replies: its records are
	# replays the next time, once.
	gen_tsv 200 7 >feed2
	dleave "unix:$T/sock" feed2 500
	dsend "unix:$T/sock" feed2 >r4
	cut -f1 feed2 | sed 's/^/unique	/; s/$/	replay/' | cmp - r4
	dsend "unix:$T/sock" feed2 >r5
	cut -f1 feed2 | awk '{ print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }' | cmp - r5
	# After kill -9, once the marks are committed (at once when idle).
	sleep 1
	kill -9 "$DPID"
	wait_exit "$DPID" 30
	start_daemon -f tsv -d "$db" --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r6
	cmp seen r6
	stop_daemon
	[ "$(ranges_of "$db")" = 0 ] || fail "$(ranges_of "$db") ranges left"
}

# Line records have no id of their own: the daemon's ids differ on every
# connection, so their text tells a record sent again (filter_self).
@test "the daemon on a Redis index, line records: replies that never went are replays on the next connection, once" {
	line_replies_lost "$(fresh single)"
	stop_daemon
}

# --------------------------------------------- many writers on one index

# Check the verdicts of a split run (annotated outputs $@) against the
# annotated single-process LMDB run in lmdb.a; prints the race count.
judge() {
	python3 - lmdb.a "$@" <<'EOF'
import sys
def load(paths):
    v = {}
    for p in paths:
        for line in open(p):
            f = line.rstrip("\n").split("\t")
            assert f[3] not in v, "record %s answered twice" % f[3]
            v[f[3]] = (f[0], f[1])
    return v
ref = load(sys.argv[1:2])
got = load(sys.argv[2:])
assert set(ref) == set(got), "records lost or invented"
# Every dropped record leads, match by match, to a unique one.
for rid, (kind, match) in got.items():
    seen = set()
    while kind == "duplicate":
        assert match not in seen, "a cycle of duplicates at %s" % rid
        seen.add(match)
        assert match in got, "%s matched an unknown record %s" % (rid, match)
        kind, match = got[match]
    assert kind == "unique", rid
# Pairs of the reference run: both kept is a race lost; mutual drops
# never happen.
pairs = [(r, m) for r, (k, m) in ref.items() if k == "duplicate"]
both_kept = sum(1 for r, m in pairs
                if got[r][0] == "unique" and got[m][0] == "unique")
for r, (k, m) in got.items():
    if k == "duplicate":
        assert not (got[m][0] == "duplicate" and got[m][1] == r), \
            "%s and %s dropped each other" % (r, m)
print(both_kept, len(pairs))
EOF
}

@test "three writers on one cluster index: no pair lost, none kept twice" {
	set -o pipefail
	S="$BATS_FILE_TMPDIR/stream"
	mhf -f tsv -d "$(fresh lmdb)" -a "$S" | cut -f1-4 >lmdb.a
	# Records go round-robin to three concurrent processes.
	for i in 0 1 2; do
		awk -v i=$i 'NR % 3 == i' "$S" >"part$i"
	done
	db="$(fresh cluster)"
	for i in 0 1 2; do
		timeout 120 "$MHFILTER" -f tsv -d "$db" --batch 100 -a --stats \
		    "part$i" >"out$i" 2>"err$i" &
		pids[$i]=$!
	done
	for i in 0 1 2; do
		wait "${pids[$i]}" || fail "writer $i failed" "$(cat "err$i")"
	done
	for i in 0 1 2; do cut -f1-4 "out$i" >"a$i"; done
	run judge a0 a1 a2
	[ "$status" -eq 0 ] || fail "$output"
	read -r kept pairs <<<"$output"
	# Batches that read buckets again after another's ticket, and the
	# buckets they read: those the other batches' filters named, not
	# all of theirs (16 a record).
	rr=0
	rb=0
	for i in 0 1 2; do
		rr=$((rr + $(sed -n 's/^mhfilter: index_rereads: //p' "err$i")))
		rb=$((rb + $(sed -n 's/^mhfilter: index_reread_buckets: //p' "err$i")))
	done
	echo "# $kept of $pairs duplicate pairs kept twice; $rr batches read $rb buckets again" >&3
	# None: of two batches that share a bucket, the one with the larger
	# ticket sees the other (mhfilter(1), Concurrency).
	[ "$kept" -eq 0 ] || fail "$kept of $pairs pairs kept twice"
	[ "$rr" -gt 0 ] || fail "no batch met another's ticket: no race"
	[ "$rb" -lt $((rr * 100 * 16 / 4)) ] ||
	    fail "$rr batches read $rb buckets again: the filters did not narrow them"
	# A restart forgets nothing: the same records again are all
	# replays or duplicates, none new.
	for i in 0 1 2; do
		mhrun -f tsv -d "$db" --stats "part$i"
		assert_status 0
		[ "$(stat_of unique)" = "$(stat_of replayed)" ] ||
		    fail "writer $i: $(stat_of unique) unique, $(stat_of replayed) replayed"
	done
}

@test "three writers, a master and a writer killed mid-run, the writer restarted: nothing lost, repeats bounded, nothing written by a last run" {
	local i n=6000 total victim

	gen_tsv "$n" 3 >all
	db="$(fresh cluster)"
	for i in 0 1 2; do
		awk -v i=$i 'NR % 3 == i' all >"part$i"
		mkdir "c$i"
		(cd "c$i" && split -l 50 "../part$i" chunk.)
		mkfifo "in$i"
		"$MHFILTER" -f tsv -d "$db" --batch 50 <"in$i" >"out$i" \
		    2>"err$i" &
		pids[$i]=$!
		BG_PIDS+=("${pids[$i]}")
		(cd "c$i" && feed_chunks 0.05) >"in$i" 2>/dev/null 3>&- &
		BG_PIDS+=($!)
	done
	wait_lines out1 60 300
	# Writer 1, then the master of the namespace's own keys (counter,
	# tickets, marks), both with SIGKILL.
	victim="$(redis_master_of_slot "$(redis_cli_any cluster keyslot "{${db##*/}}:seq")")"
	kill -9 "${pids[1]}"
	redis_kill_port "$victim"
	wait_exit "${pids[1]}"
	[ "$status" -eq 137 ] || fail "writer 1 ended with $status first" "$(cat err1)"
	for i in 0 2; do
		wait_exit "${pids[$i]}" 120
		[ "$status" -eq 0 ] || fail "writer $i: status $status" "$(cat "err$i")"
	done
	redis_wait_ok
	# The master again: it comes back as its replica's replica.
	redis_start_port "$RDIR" "$victim" --cluster-enabled yes \
	    --cluster-config-file "nodes-$victim.conf" \
	    --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 \
	    --repl-diskless-sync-delay 0
	redis_wait_ok
	redis_wait_synced
	complete_lines out1 >written1
	[ "$(wc -l <written1)" -lt 2000 ] || fail "writer 1 was not killed mid-run"
	# Writer 1 again, on its whole input.
	mhrun -f tsv -d "$db" --batch 50 --stats part1
	assert_status 0
	cp "$T/out" again1
	# Nothing lost: every record of the clean run (all are unique) is in
	# some output; repeats are writer 1's batches not marked when killed.
	sort -u out0 written1 again1 out2 | cmp - <(sort all) ||
	    fail "$(comm -23 <(sort all) <(sort -u out0 written1 again1 out2) | wc -l) records missing"
	total="$(cat out0 written1 again1 out2 | wc -l)"
	echo "# writer 1 wrote $(wc -l <written1) before the kill, $(wc -l <again1) after ($(stat_of replayed) replays); $((total - n)) written twice" >&3
	[ $((total - n)) -le 600 ] || fail "$((total - n)) written twice"
	# Everything is marked: the whole input again writes nothing.
	mhrun -f tsv -d "$db" --stats all
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") written by a last run"
	assert_stat seen "$n"
}

# Hold a connection named $1 (a writer's, as redismarks.c names them) to
# the single Redis until the file $2 exists.
hold_name() {
	python3 - "${REDIS_SINGLE##*:}" "$1" "$2" <<'EOF' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
name = sys.argv[2].encode()
s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$%d\r\n%s\r\n" %
          (len(name), name))
assert s.recv(16).startswith(b"+OK")
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
EOF
	BG_PIDS+=($!)
}

@test "a candidate pending in a dead writer's batch is passed over in seconds, not 90; one of a running writer, or of a ticket with no owner (older writers), is waited for and its verdict taken" {
	local db ns key docid port="${REDIS_SINGLE##*:}" now owner pid

	rcli() { timeout 10 redis-cli -p "$port" "$@"; }
	# Document a, kept; then made pending again, as its writer would
	# have left it between its batch's ticket and its commit.
	db="$(fresh single)"
	ns="${db##*/}"
	printf 'a\t%s\n' "$A_TEXT" >a
	mhrun -f tsv -d "$db" a
	assert_status 0
	key="$(rcli --scan --pattern "$ns:d:*")"
	docid="${key##*:}"
	[ -n "$docid" ] || fail "no document key"
	[ "$(rcli COPY "$key" "$ns:saved")" = 1 ] || fail "COPY"
	printf 'b\t%s.\n' "$A_TEXT" >b
	now="$(date +%s)"
	for owner in dead running none; do
		# b, as inserted by an earlier round, goes.
		rcli --scan --pattern "$ns:d:*" | grep -vx "$key" |
		    while read -r k; do rcli DEL "$k" >/dev/null; done
		rcli SET "$key" P >/dev/null
		rcli DEL "{$ns}:tickets" >/dev/null
		case "$owner" in
		dead)	rcli ZADD "{$ns}:tickets" "$docid" \
			    "$docid:$((docid + 1)):1:999999:$now" >/dev/null ;;
		running) rcli ZADD "{$ns}:tickets" "$docid" \
			    "$docid:$((docid + 1)):1:888888:$now" >/dev/null
			hold_name "mhfilter:$ns:888888" "$T/released" ;;
		none)	rcli ZADD "{$ns}:tickets" "$docid" \
			    "$docid:$((docid + 1)):1:$now" >/dev/null ;;
		esac
		rm -f "$T/released"
		"$MHFILTER" -f tsv -d "$db" -a b >"out.$owner" 2>"err.$owner" &
		pid=$!
		BG_PIDS+=("$pid")
		if [ "$owner" = dead ]; then
			# Not PENDING_WAIT (90 s): no connection has its name
			# at two looks a second apart.
			wait_exit "$pid" 30
			[ "$status" -eq 0 ] || fail "dead: status $status" "$(cat err.dead)"
			cut -f1,2,4 out.dead | grep -qx "$(printf 'unique\t-\tb')" ||
			    fail "dead: $(cat out.dead)"
			grep -q "writer 999999 has stopped" err.dead ||
			    fail "no word of the stopped writer" "$(cat err.dead)"
			continue
		fi
		# Waited for, past several looks at the writers running; the
		# document decided meanwhile is b's match.
		sleep 3
		kill -0 "$pid" || fail "$owner: did not wait" "$(cat "out.$owner" "err.$owner")"
		rcli COPY "$ns:saved" "$key" REPLACE >/dev/null
		touch "$T/released"
		wait_exit "$pid" 30
		[ "$status" -eq 0 ] || fail "$owner: status $status" "$(cat "err.$owner")"
		cut -f1,2,4 "out.$owner" | grep -qx "$(printf 'duplicate\ta\tb')" ||
		    fail "$owner: $(cat "out.$owner")"
		if grep -q "has stopped" "err.$owner"; then
			fail "$owner: $(cat "err.$owner")"
		fi
	done
}

@test "a master killed mid-run: the run goes on after failover, nothing acknowledged is lost" {
	set -o pipefail
	S="$BATS_FILE_TMPDIR/stream"
	db="$(fresh cluster)"
	# Small batches so that the kill lands in the middle of the run:
	# after the first 300 verdicts.
	timeout 180 "$MHFILTER" -f tsv -d "$db" --batch 5 -a "$S" >out 2>err &
	pid=$!
	BG_PIDS+=("$pid")
	for i in $(seq 600); do
		[ "$(wc -l <out)" -ge 300 ] && break
		sleep 0.05
	done
	kill -0 "$pid" || fail "the run ended before the kill" "$(cat err)"
	[ "$(wc -l <out)" -lt "$(wc -l <"$S")" ] || fail "the run was over"
	# The master of the namespace's own keys: the counter and the
	# delivery marks.
	victim="$(redis_master_of_slot "$(redis_cli_any cluster keyslot "{${db##*/}}:seq")")"
	redis_kill_port "$victim"
	wait "$pid" || fail "the run failed" "$(cat err)"
	redis_wait_ok
	[ "$(wc -l <out)" = "$(wc -l <"$S")" ]
	# Every record answered unique is in the index: its copy under a new
	# id is a duplicate.
	awk -F'\t' '$1 == "unique" { print "q" NR "\t" $5 }' out >copies
	[ -s copies ]
	mhf -f tsv -d "$db" -Q -a copies | cut -f1 | sort | uniq -c >v
	grep -q ' duplicate$' v && ! grep -q ' unique$' v || fail "$(cat v)"
	# The delivery marks survived the failover: the feed again writes
	# nothing, every record seen.
	mhrun -f tsv -d "$db" --stats "$S"
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") written again"
	assert_stat seen "$(wc -l <"$S")"
}

# Every node of the file's cluster running again (a master killed by an
# earlier test comes back as its replica's replica), every replica in
# sync and known to every node, none flagged failing, and CLUSTER SLOTS
# listing each master's replica (a replica is left out of it until its
# replication offset moves: a write or the master's PING every 10 s), so
# that a writer started now WAITs for one.
cluster_whole() {
	local p

	for p in $REDIS_CLUSTER_PORTS; do
		redis_pid "$p" >/dev/null && continue
		redis_start_port "$RDIR" "$p" --cluster-enabled yes \
		    --cluster-config-file "nodes-$p.conf" \
		    --cluster-node-timeout 1000 \
		    --cluster-replica-validity-factor 0 \
		    --repl-diskless-sync-delay 0 || return 1
	done
	redis_wait_ok || return 1
	redis_wait_synced || return 1
	redis_until nodes_whole "a node missing, failing or without a replica" \
	    cluster nodes || return 1
	redis_until slots_whole "CLUSTER SLOTS without a replica per master" \
	    cluster slots
}

# CLUSTER NODES of a node that sees 3 masters and 3 replicas, all
# connected, none failing.
nodes_whole() {
	printf '%s\n' "$1" | awk '
	    $3 ~ /master/ { m++ } $3 ~ /slave/ { s++ }
	    $3 ~ /fail/ || $8 != "connected" { bad++ }
	    END { exit !(m == 3 && s == 3 && bad == 0) }'
}

# CLUSTER SLOTS (as redis-cli prints it) naming 6 nodes: 3 masters and
# a replica of each.
slots_whole() {
	[ "$(printf '%s\n' "$1" | grep -cE '^[0-9a-f]{40}$')" -eq 6 ]
}

# Whether the replica of master $1 has acknowledged every write it was
# given.
caught_up() {
	local info off

	info="$(timeout 5 redis-cli -p "$1" info replication | tr -d '\r')"
	off="$(printf '%s\n' "$info" | sed -n 's/^master_repl_offset://p')"
	[ -n "$off" ] && [ "$(printf '%s\n' "$info" |
	    sed -n 's/^slave0:.*,offset=\([0-9]*\),.*/\1/p')" = "$off" ]
}

# The number of WAITs node $1 has run.
waits_on() {
	timeout 10 redis-cli -p "$1" info commandstats | tr -d '\r' |
	    sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p' | grep . ||
	    echo 0
}

# A failover that loses writes: the master of the namespace's own keys
# is given writes its replica never gets, then dies, and the replica
# takes over without them.  The writer's WAIT (REPLICA_WAIT_MS) falls
# short on the first of those, so it stops before reporting anything of
# that batch.  The writer is already running when the replica is cut
# off: one that reads the slot map after the cluster has flagged the
# frozen replica failing (a second or two) sees no replica in CLUSTER
# SLOTS and cannot WAIT: it says so, as the rerun below does after the
# takeover (mhfilter(1), Failures: min-replicas-to-write refuses such
# writes instead).
@test "a failover that loses writes a replica never got: the writer whose WAIT fell short stopped (exit 1) without reporting them; nothing lost, nothing written twice" {
	local S="$BATS_FILE_TMPDIR/stream" n half db ns master replica rpid
	local wpid feed cut t0 t1 st1 stuck=0 killed=0 takeover role
	local w0 w1 seqcut seq1 seq2 repeats i

	cluster_whole
	n="$(wc -l <"$S")"
	half=$((n / 2))
	head -n "$half" "$S" >half1
	tail -n +"$((half + 1))" "$S" >half2
	# The second half comes in two parts: 200 records (4 batches of 50)
	# before the replica is cut off, the rest after.
	head -n 200 half2 >b1
	tail -n +201 half2 >b2
	# The clean run: the whole stream, in the same order, on LMDB; and
	# what it writes of each part.
	mhrun -f tsv -d "$(fresh lmdb)" "$S"
	assert_status 0
	cp "$T/out" clean
	part() { awk -F'\t' 'NR == FNR { in1[$1] = 1; next } $1 in in1' "$1" clean; }
	part half1 >clean1
	part half2 >clean2
	part b1 >cleanb1
	[ -s clean1 ] && [ -s cleanb1 ] || fail "a part with nothing unique"
	db="$(fresh cluster)"
	ns="${db##*/}"
	# The master of the namespace's own keys (the counter, tickets,
	# delivery marks), and its replica.
	master="$(redis_master_of_slot "$(redis_cli_any cluster keyslot "{$ns}:seq")")"
	[ -n "$master" ] || fail "no master for {$ns}:seq"
	replica="$(timeout 10 redis-cli -p "$master" info replication |
	    tr -d '\r' | sed -n 's/^slave0:.*,port=\([0-9]*\),.*/\1/p')"
	[ -n "$replica" ] || fail "master $master has no replica" \
	    "$(redis_cli_any cluster nodes)"
	rpid="$(redis_pid "$replica")"

	# The first half, the replica up: written as a clean run writes it,
	# every batch WAITed for on the master.
	w0="$(waits_on "$master")"
	mhrun -f tsv -d "$db" --batch 50 half1
	assert_status 0
	cp "$T/out" outA
	cmp clean1 outA
	w1="$(waits_on "$master")"
	[ "$w1" -gt "$w0" ] || fail "no WAIT on master $master ($w0, then $w1)"

	# The second half, fed through a fifo: the first 200 records, then
	# a wait until their verdicts are all written (the writer is idle,
	# waiting for input).
	cluster_whole
	mkfifo inB
	"$MHFILTER" -f tsv -d "$db" --batch 50 --stats <inB >outB 2>errB &
	wpid=$!
	BG_PIDS+=("$wpid")
	exec {feed}>inB
	cat b1 >&"$feed"
	wait_lines outB 30 "$(wc -l <cleanb1)"
	# ... and the delivery marks of those written committed (in a
	# commit of their own, the writer having nothing else to do), and
	# on the replica: no write of the writer's is in flight.
	for i in $(seq 200); do
		[ "$(ranges_of "$db")" = 0 ] && caught_up "$master" && break
		sleep 0.05
	done
	[ "$(ranges_of "$db")" = 0 ] && caught_up "$master" ||
	    fail "$(ranges_of "$db") ranges undelivered" \
	    "$(timeout 5 redis-cli -p "$master" info replication)"
	kill -0 "$wpid" || fail "the writer ended" "$(cat errB)"
	# The replica frozen, then its link from the master cut, so that it
	# cannot reconnect (it would at once): nothing the master is given
	# from here on reaches it (a frozen replica alone would read it all
	# from its socket when thawed).  Then the rest of the input: the
	# next batch's first write is not replicated, its WAIT falls short
	# (2 s), the writer stops.  Nothing here may end the test until the
	# replica is thawed.
	kill -STOP "$rpid"
	cut="$(timeout 5 redis-cli -p "$master" client kill type replica 2>&1)" || true
	seqcut="$(timeout 5 redis-cli -p "$master" GET "{$ns}:seq" 2>&1)" || true
	t0="$(date +%s%N)"
	{ cat b2 >&"$feed"; } 2>/dev/null 3>&- &
	BG_PIDS+=("$!")
	exec {feed}>&-
	wait_exit "$wpid" 30 || stuck=1
	st1="$status"
	t1="$(date +%s%N)"
	seq1="$(timeout 5 redis-cli -p "$master" GET "{$ns}:seq" 2>&1)" || true
	# The master dies with those writes; the replica, thawed, takes over
	# without them.
	redis_kill_port "$master" || killed=1
	kill -CONT "$rpid"
	takeover="$(timeout 10 redis-cli -p "$replica" cluster failover takeover 2>&1)" || true

	[ "$cut" = 1 ] || fail "CLIENT KILL TYPE replica on $master: $cut"
	[ "$stuck" -eq 0 ] || fail "the writer still runs with its replica cut off" "$(cat errB)"
	[ "$killed" -eq 0 ] || fail "master $master would not die"
	[ "$st1" -eq 1 ] || fail "the writer cut off from its replica: status $st1" "$(cat errB)"
	grep -q "redis 127.0.0.1:$master: write reached 0 of 1 replicas" errB ||
	    fail "$(cat errB)"
	[ $(((t1 - t0) / 1000000)) -lt 15000 ] ||
	    fail "it took $(((t1 - t0) / 1000000)) ms to stop"
	# Nothing of the failed batch was reported: the output is exactly
	# the clean run's of the first 200 records.
	cmp cleanb1 outB
	for i in $(seq 200); do
		role="$(timeout 5 redis-cli -p "$replica" role 2>/dev/null | head -n 1)"
		[ "$role" = master ] && break
		sleep 0.05
	done
	[ "$role" = master ] || fail "replica $replica did not take over: $takeover"
	redis_wait_ok
	# The writes were lost: the counter is back to what it was when the
	# replica was cut off.
	seq2="$(timeout 10 redis-cli -p "$replica" GET "{$ns}:seq")"
	[ "$seq2" = "$seqcut" ] && [ "$seq1" -gt "$seqcut" ] ||
	    fail "{$ns}:seq $seqcut when cut off, $seq1 when killed, $seq2 after the takeover"
	# The second half again, the new master alone (its old master is
	# dead): everything the failed run did not write, and a warning that
	# its writes are not confirmed on a replica.
	mhrun -f tsv -d "$db" --batch 50 --stats half2
	assert_status 0
	cp "$T/out" outC
	grep -q "redis 127.0.0.1:$replica: has no replica: writes to it are not confirmed" "$T/err" ||
	    fail "no warning of the master alone" "$(cat "$T/err")"
	# The old master back, as its replica's replica.
	cluster_whole
	# Nothing lost: every record of the clean run in some output, and
	# none other.
	sort -u outA outB outC | cmp - <(sort clean) ||
	    fail "$(comm -23 <(sort clean) <(sort -u outA outB outC) | wc -l) records missing," \
	    "$(comm -13 <(sort clean) <(sort -u outA outB outC) | wc -l) not in the clean run"
	repeats="$(cat outA outB outC | cut -f1 | sort | uniq -d | wc -l)"
	echo "# written: $(wc -l <outA) by the first half, $(wc -l <outB) before the WAIT fell short ($(((t1 - t0) / 1000000)) ms to stop), $(wc -l <outC) by the rerun ($(stat_of replayed) replays); $(wc -l <clean) by a clean run; $repeats twice; {$ns}:seq $seqcut when cut off, $seq1 when killed, $seq2 after the takeover" >&3
	[ "$repeats" -eq 0 ] || fail "$repeats written twice"
	# Everything is marked: the whole stream again writes nothing.
	mhrun -f tsv -d "$db" --stats "$S"
	assert_status 0
	[ ! -s "$T/out" ] || fail "$(wc -l <"$T/out") written again"
	assert_stat seen "$n"
}
