#!/usr/bin/env bats
# Daemon mode under load and failure: concurrent clients with duplicates
# across them (group commit gives the verdicts of one stream), kill -9 while
# clients send, a read-only index, a map that must grow, and a file size
# limit that makes commits fail.  Bounded in count and time; nothing
# asserts speed.

load helpers
load daemon-helpers

# Client k's records (k = 1..$1, $2 each) in c$k.tsv: ids ck-i; about half
# the texts are the client's own, the rest drawn from a pool shared by all
# clients, as they are or with a word added, so that duplicates and near
# duplicates cross clients.
make_clients() {
	python3 - "$1" "$2" <<'EOF'
import random, sys
nc, n = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(3)
abc = 'abcdefghijklmnopqrstuvwxyz'
words = [''.join(rng.choice(abc) for _ in range(rng.randint(3, 9)))
         for _ in range(5000)]
def text():
    return ' '.join(rng.choice(words) for _ in range(12))
pool = [text() for _ in range(300)]
for k in range(1, nc + 1):
    with open('c%d.tsv' % k, 'w') as f:
        for i in range(n):
            r = rng.random()
            if r < 0.5:
                t = text()
            elif r < 0.75:
                t = rng.choice(pool)
            else:
                t = rng.choice(pool) + ' ' + rng.choice(words)
            f.write('c%d-%d\t%s\n' % (k, i, t))
EOF
}

# The id, verdict and match of each reply in files $@ ("ID VERDICT MATCH").
reply_verdicts() {
	awk -F'\t' '{ print $2 "\t" $1 "\t" ($1 == "duplicate" ? $3 : "-") }' "$@"
}

# The same from -a output in file $1.
annotate_verdicts() {
	awk -F'\t' '{ print $4 "\t" $1 "\t" $2 }' "$1"
}

@test "load: 4 clients x 2000 records at once; one reply each, in order; the verdicts of one stream in commit order" {
	make_clients 4 2000
	start_daemon -f tsv -a --output out.tsv --batch 50 --batch-delay 2ms \
	    --listen "unix:$T/sock"
	pids=()
	for k in 1 2 3 4; do
		dsend "unix:$T/sock" "c$k.tsv" "r$k" &
		pids+=($!)
		BG_PIDS+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || fail "client $p failed"
	done
	for k in 1 2 3 4; do
		# Exactly one reply for each record, in the client's order.
		[ "$(wc -l <"r$k")" -eq 2000 ] || fail "client $k: $(wc -l <"r$k") replies"
		cut -f2 "r$k" | cmp - <(cut -f1 "c$k.tsv") ||
		    fail "client $k: replies out of order"
		! grep -qv '^\(unique	[^	]*\|duplicate	[^	]*	[^	]*	[01]\.[0-9]*\)$' "r$k" ||
		    fail "client $k: odd reply:" "$(grep -v '^\(unique\|duplicate\)	' "r$k" | head -n 3)"
	done
	[ "$(dstat "unix:$T/sock" records)" -eq 8000 ]
	batches="$(dstat "unix:$T/sock" batches)"
	stop_daemon
	# The output file has every record once, in the order of the commits.
	[ "$(wc -l <out.tsv)" -eq 8000 ]
	cut -f4- out.tsv | sort | cmp - <(sort c1.tsv c2.tsv c3.tsv c4.tsv)
	# A single stdin run over the records in that order decides each the
	# same, with the same match and similarity: group commit is invisible.
	cut -f4- out.tsv >committed
	mhrun -f tsv -a --batch 1000 committed
	assert_status 0
	assert_same out.tsv "$T/out"
	# And the replies say what the output file says.
	reply_verdicts r1 r2 r3 r4 | sort >from_replies
	annotate_verdicts out.tsv | sort >from_output
	assert_same from_output from_replies
	# There are duplicates across clients, and both kinds of verdict.
	u="$(grep -c '^unique' out.tsv)"
	dups="$(awk -F'\t' '$1 == "duplicate" && substr($2, 1, 3) != substr($4, 1, 3)' out.tsv | wc -l)"
	[ "$u" -gt 1000 ] && [ "$dups" -gt 100 ] || fail "$u unique, $dups cross-client duplicates"
	echo "# $batches batches for 8000 records" >&3
}

@test "crash: kill -9 while clients send; after a restart every record answered unique is in the index" {
	gen_tsv 20000 >all
	split -n l/4 -d all part.
	start_daemon -f tsv -d db --batch 100 --listen "unix:$T/sock"
	pids=()
	for p in part.0*; do
		CLIENT_CHUNK_LINES=50 CLIENT_CHUNK_PAUSE=0.02 \
		    dsend "unix:$T/sock" "$p" "r.$p" 2>/dev/null &
		pids+=($!)
		BG_PIDS+=($!)
	done
	# Kill it once a good part, but not all, has been answered.
	for i in $(seq 1200); do
		[ "$(cat r.part.0* 2>/dev/null | wc -l)" -ge 4000 ] && break
		sleep 0.05
	done
	kill -9 "$DPID"
	wait_exit "$DPID"
	[ "$status" -eq 137 ]
	for p in "${pids[@]}"; do
		wait "$p" || true
	done
	# Complete reply lines only; each client's are a prefix of its records.
	answered=0
	for p in part.0*; do
		if [ -s "r.$p" ] && [ "$(tail -c 1 "r.$p" | od -An -tx1 | tr -d ' ')" != 0a ]; then
			sed '$d' "r.$p"
		else
			cat "r.$p"
		fi | awk '/^(unique|duplicate)\t/' >"ok.$p"
		n="$(wc -l <"ok.$p")"
		head -n "$n" "$p" | cut -f1 | cmp - <(cut -f2 "ok.$p") ||
		    fail "$p: replies are not its records in order"
		answered=$((answered + n))
	done
	[ "$answered" -ge 100 ] && [ "$answered" -lt 20000 ] ||
	    fail "$answered answered: not killed mid-stream"
	# The records answered unique (all are: the texts are distinct).
	cat ok.part.0* | grep '^unique' | cut -f2 | sort >uids
	[ "$(wc -l <uids)" -eq "$answered" ]
	join -t "$(printf '\t')" uids <(sort -t "$(printf '\t')" -k1,1 all) >resend
	[ "$(wc -l <resend)" -eq "$answered" ]
	# A new daemon on the same index (the stale socket file is replaced):
	# each of them comes back seen (its batch's replies were written and
	# marked so) or, if the kill came before that mark was committed, as
	# a replay of itself: never new, never lost, in order.
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" resend >again
	cut -f1 resend | awk '{ print "unique\t" $1 "\treplay"
	    print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }' >either
	[ "$(wc -l <again)" -eq "$(wc -l <resend)" ]
	paste -d '\n' <(cut -f1 resend) <(cut -f2 again) | uniq -d | wc -l >same
	[ "$(cat same)" -eq "$(wc -l <resend)" ] || fail "replies out of order"
	grep -vxFf either again && fail "neither seen nor a replay"
	# What is replayed is at most the batches delivered since the last
	# commit: the daemon's lead, not the run.
	[ "$(grep -c '	replay$' again)" -le 12000 ] ||
	    fail "$(grep -c '	replay$' again) replays of $answered"
	docs="$(dstat "unix:$T/sock" index_documents)"
	[ "$docs" -ge "$answered" ] || fail "$docs documents for $answered answered"
	stop_daemon
	# The index's own consistency check, where this mhfilter has one.
	if "$MHFILTER" --help | grep -q -- '--check'; then
		mhrun --db db --check
		assert_status 0
	fi
}

@test "read-only index directory: the daemon refuses to start, with a clear error; the index is unchanged" {
	gen_tsv 100 >in
	mhf -f tsv -d db in >/dev/null
	chmod -R a-w db
	before="$(cat db/* | md5sum)"
	if [ "$(id -u)" -eq 0 ]; then
		# root ignores file modes: run the daemon as nobody.
		command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed as root"
		chmod 755 "$T"
		as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	else
		as=()
	fi
	status=0
	timeout 60 "${as[@]}" "$MHFILTER" -f tsv -d db --listen "unix:$T/sock" \
	    2>err || status=$?
	[ "$status" -eq 1 ] || fail "exit status $status" "$(cat err)"
	grep -q "db.*Permission denied" err || fail "$(cat err)"
	! grep -q 'ready:' err || fail "it said ready:" "$(cat err)"
	[ ! -e "$T/sock" ]
	[ "$(cat db/* | md5sum)" = "$before" ]
	# Writable again, the index is intact.
	chmod -R u+w db
	mhrun -f tsv -d db --stats in
	assert_status 0
	assert_stat seen 100
}

@test "a map that fills up is grown while the daemon runs" {
	gen_tsv 4000 >in
	start_daemon -f tsv -d db --map-size 1M --batch 200 --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	cut -f1 in | sed 's/^/unique	/' | assert_same - replies
	bytes="$(dstat "unix:$T/sock" index_bytes)"
	[ "$bytes" -gt 1048576 ] || fail "index_bytes $bytes"
	stop_daemon
}

@test "a full disk (a file size limit): failed batches are answered 'error ID index', nothing answered is lost" {
	gen_tsv 6000 >in
	mhf -f tsv -d db /dev/null
	# 2 MiB of index at most; SIGXFSZ is ignored, so writes fail (EFBIG).
	(ulimit -f 2048 && exec "$MHFILTER" -f tsv -d db --batch 100 \
	    --listen "unix:$T/sock" --http 127.0.0.1:0 2>>"$T/derr") &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "ready:"
	dsend "unix:$T/sock" in >replies
	[ "$(wc -l <replies)" -eq 6000 ]
	# (LMDB reports the short write as EIO.)
	grep -q '^error	[^	]*	index	index db: commit: ' replies ||
	    fail "no index errors: $(sort replies | cut -f1 | uniq -c)"
	grep -q '^unique	' replies
	! grep -qv '^\(unique	[^	]*\|error	[^	]*	index	.*\)$' replies ||
	    fail "odd reply:" "$(grep -v '^\(unique\|error\)	' replies | head -n 3)"
	# It keeps running, and /healthz says whether the last batch (the
	# last records, from this one client) failed.
	kill -0 "$DPID"
	if tail -n 1 replies | grep -q '^error'; then want=503; else want=200; fi
	timeout 60 python3 "$CLIENT" http "$(http_addr)" /healthz | head -n 1 | grep -qx "$want"
	# The failure is logged, once until a batch commits again, not for
	# each failed batch.
	nfail="$(grep -c 'a batch of .* records failed' "$T/derr")"
	[ "$nfail" -ge 1 ] && [ "$nfail" -le "$(($(grep -c '^error' replies) / 200 + 1))" ] ||
	    fail "$nfail failures logged"
	[ "$(dstat "unix:$T/sock" failed)" -eq "$(grep -c '^error' replies)" ]
	stop_daemon
	# Without the limit: what was answered unique is there (replays), what
	# was answered with an error is not (new, not replays).
	awk -F'\t' '$1 == "unique" { print $2 }' replies | sort >uids
	awk -F'\t' '$1 == "error" { print $2 }' replies | sort >eids
	tab="$(printf '\t')"
	join -t "$tab" uids <(sort -t "$tab" -k1,1 in) >resend_u
	join -t "$tab" eids <(sort -t "$tab" -k1,1 in) >resend_e
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" resend_u >again_u
	dsend "unix:$T/sock" resend_e >again_e
	# (seen: their replies were written before the stop, and marked; or
	# replays, when the full disk failed the commit of that mark)
	cut -f1 resend_u | awk '{ print "unique\t" $1 "\treplay"
	    print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }' >either
	[ "$(wc -l <again_u)" -eq "$(wc -l <resend_u)" ]
	grep -vxFf either again_u && fail "neither seen nor a replay"
	cut -f1 resend_e | sed 's/^/unique	/' | assert_same - again_e
	stop_daemon
}

@test "--max-clients: a burst of connections over the limit all get the busy line, none a reset" {
	start_daemon -v --max-clients 1 --listen "unix:$T/sock" \
	    --listen tcp:127.0.0.1:0
	: >empty
	timeout 120 python3 "$CLIENT" raw "unix:$T/sock" empty held &
	BG_PIDS+=("$!")
	wait_log "connection 1 from"
	for addr in "unix:$T/sock" "$(tcp_addr)"; do
		timeout 120 python3 "$CLIENT" burst "$addr" 100 >outcome
		printf '100 %s\n' "b'error\\t-\\tbusy\\ttoo many clients (--max-clients 1)\\n'" |
		    cmp - outcome || fail "$addr: $(cat outcome)"
	done
	stop_daemon
}
