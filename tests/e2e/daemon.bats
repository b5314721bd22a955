#!/usr/bin/env bats
# Daemon mode: the protocol over unix and TCP sockets, commands, formats,
# the output file, limits and bad clients, signals, the configuration file
# and the HTTP server.

load helpers
load daemon-helpers

# Four tsv records: a, its near duplicate b, an unrelated c, an empty d.
make_abcd() {
	printf 'a\tThe quick brown fox jumps over the lazy dog\n' >in
	printf 'b\tthe quick brown fox jumps over the lazy dog!\n' >>in
	printf 'c\tSomething else entirely, about the weather\n' >>in
	printf 'd\t   \n' >>in
}

# The replies make_abcd's records must get.
abcd_replies() {
	local sim

	sim="$(jaccard 'The quick brown fox jumps over the lazy dog' \
	    'the quick brown fox jumps over the lazy dog!')"
	printf 'unique\ta\nduplicate\tb\ta\t%s\nunique\tc\nempty\td\n' "$sim"
}

@test "unix socket: one reply per record, in order, in the protocol's format" {
	make_abcd
	start_daemon -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	abcd_replies >expected
	assert_same expected replies
	# A second connection: the same texts under the same ids are now
	# exact copies of indexed documents of this run, which were answered:
	# seen, as the stream says.
	dsend "unix:$T/sock" in >replies2
	printf 'duplicate\ta\ta\t1.0000\tseen\nduplicate\tb\tb\t1.0000\tseen\nduplicate\tc\tc\t1.0000\tseen\nempty\td\n' >expected2
	assert_same expected2 replies2
	stop_daemon
	# The socket file is removed at exit.
	[ ! -e "$T/sock" ]
}

@test "tcp: --listen tcp:127.0.0.1:0 logs the port it got, and serves the same protocol" {
	make_abcd
	start_daemon -f tsv --listen tcp:127.0.0.1:0
	addr="$(tcp_addr)"
	[[ "$addr" =~ ^tcp:127\.0\.0\.1:[1-9][0-9]*$ ]] || fail "address '$addr'"
	dsend "$addr" in >replies
	abcd_replies >expected
	assert_same expected replies
	stop_daemon
}

@test "unix and tcp at once; both feed the same index" {
	make_abcd
	start_daemon -f tsv --listen "unix:$T/sock" --listen tcp:127.0.0.1:0
	head -n 1 in | dsend "unix:$T/sock" >r1
	sed -n 2p in | dsend "$(tcp_addr)" >r2
	printf 'unique\ta\n' | assert_same - r1
	grep -q '^duplicate	b	a	0\.9' r2 || fail "$(cat r2)"
	stop_daemon
}

@test "--listen given twice: served once, and the log says so, not that systemd passed it" {
	make_abcd
	start_daemon -f tsv --listen "unix:$T/sock" --listen "unix:$T/sock"
	head -n 1 in | dsend "unix:$T/sock" >r1
	printf 'unique\ta\n' | assert_same - r1
	stop_daemon
	grep -qF -- "--listen unix:$T/sock: given twice: served once" "$T/derr" ||
	    fail "$(cat "$T/derr")"
	run grep -c 'systemd' "$T/derr"
	[ "$output" = 0 ] || fail "$(cat "$T/derr")"
	[ "$(grep -c '^mhfilter: listening on' "$T/derr")" -eq 1 ] || fail "$(cat "$T/derr")"
}

@test "records without ids get RUN:CONNECTION:RECORD ids; matches across connections name them" {
	printf 'first line of the first client, long enough\nsecond line of the first client, long enough\n' >one
	printf 'nothing like the others at all\nfirst line of the first client, long enough\n' >two
	start_daemon --listen "unix:$T/sock"
	dsend "unix:$T/sock" one >r1
	dsend "unix:$T/sock" two >r2
	printf 'unique\t1:1:1\nunique\t1:1:2\n' | assert_same - r1
	printf 'unique\t1:2:1\nduplicate\t1:2:2\t1:1:1\t1.0000\n' | assert_same - r2
	stop_daemon
	# The run number is a document number the daemon takes at start (1;
	# its records 2 and 3), so a later daemon on the same index (4) never
	# gives the same ids.
	start_daemon --db db --listen "unix:$T/sock"
	dsend "unix:$T/sock" one >r3
	stop_daemon
	start_daemon --db db --listen "unix:$T/sock"
	dsend "unix:$T/sock" two >r4
	printf 'unique\t1:1:1\nunique\t1:1:2\n' | assert_same - r3
	printf 'unique\t4:1:1\nduplicate\t4:1:2\t1:1:1\t1.0000\n' | assert_same - r4
	stop_daemon
}

@test "commands: version, stats and unknown ones are answered in order with the records" {
	make_abcd
	{ cat in; printf '#mhfilter version\n#mhfilter stats\n#mhfilter bogus\n'; } >req
	start_daemon -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" req >replies
	[ "$(wc -l <replies)" -eq 7 ] || fail "$(cat replies)"
	abcd_replies | cmp - <(head -n 4 replies)
	v="$("$MHFILTER" --version | sed 's/^mhfilter \([^ ]*\) .*/\1/')"
	sed -n 5p replies | grep -qx "version	protocol=1	mhfilter=$v	index_format=[0-9]*	scheme=[0-9]*" ||
	    fail "$(sed -n 5p replies)"
	# The statistics include the four records before them.
	s="$(sed -n 6p replies)"
	[[ "$s" == stats$'\t'* ]] || fail "$s"
	[ "$(stats_of records <<<"$s")" = 4 ]
	[ "$(stats_of unique <<<"$s")" = 2 ]
	[ "$(stats_of duplicates <<<"$s")" = 1 ]
	[ "$(stats_of empty <<<"$s")" = 1 ]
	[ "$(stats_of errors <<<"$s")" = 0 ]
	[ "$(stats_of index_documents <<<"$s")" = 3 ]
	[ "$(stats_of batches <<<"$s")" -ge 1 ]
	sed -n 7p replies | grep -q '^error	-	command	unknown command' ||
	    fail "$(sed -n 7p replies)"
	# Alone, a command is answered at once.
	[ "$(dstat "unix:$T/sock" records)" = 4 ]
	stop_daemon
}

@test "commands ack and taken: a reply counts delivered only once the client says it took it; taken without ack is unknown" {
	# A batch a record: one told taken (seen when sent again), one not
	# (a replay).
	start_daemon -f tsv -d db --batch 1 --listen "unix:$T/sock"
	printf '#mhfilter ack\na1\tthe first text of the feed here with words\n' >s1
	printf 'a2\tanother text entirely different words in it\n' >>s1
	# "ack\n" and "unique\ta1\n": 14 bytes.
	printf '#mhfilter taken 14\n' >s2
	dsteps "unix:$T/sock" r1 s1 +3 s2 close
	printf 'ack\nunique\ta1\nunique\ta2\n' >want
	assert_same want r1
	tail -n +2 s1 >again
	dsend "unix:$T/sock" again r2
	printf 'duplicate\ta1\ta1\t1.0000\tseen\nunique\ta2\treplay\n' >want
	assert_same want r2
	# Without ack, taken is no command.
	printf '#mhfilter taken 5\n' >s3
	dsend "unix:$T/sock" s3 r3
	grep -q "^error	-	command	unknown command" r3 || fail "$(cat r3)"
	stop_daemon
}

@test "commands pairs and groups: the duplicates after them carry every match and their group, as -p and --group say them" {
	t="the quick brown fox jumps over the lazy dog again and again"
	printf 'a\t%s\nb\t%s!\n#mhfilter pairs\n#mhfilter groups\nc\t%s?\nd\tsomething else entirely, nothing like the others at all\n' \
	    "$t" "$t" "$t" >req
	start_daemon -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" req >replies
	stop_daemon
	# The stream's view of the same records: every pair of c, its group.
	grep -v '^#' req | "$MHFILTER" -f tsv -p --group >pairs
	[ "$(grep -c '	c	' pairs)" -eq 2 ] || fail "$(cat pairs)"
	want="$(awk -F'\t' '$2 == "c" { printf "\tpair=%s:%s", $3, $1 }' pairs)"
	[ "$(sed -n 1p replies)" = "unique	a" ] || fail "$(cat replies)"
	# Before the commands: the match only.
	sed -n 2p replies | grep -qx 'duplicate	b	a	[01]\.[0-9]\{4\}' ||
	    fail "$(cat replies)"
	[ "$(sed -n 3,4p replies | tr '\n' ' ')" = "pairs groups " ] ||
	    fail "$(cat replies)"
	sed -n 5p replies | grep -qx "duplicate	c	a	[01]\.[0-9]\{4\}	group=a$want" ||
	    fail "$(sed -n 5p replies), want ...group=a$want"
	[ "$(sed -n 6p replies)" = "unique	d" ] || fail "$(cat replies)"
	[ "$(wc -l <replies)" -eq 6 ] || fail "$(cat replies)"
}

@test "jsonl: a malformed record gets 'error ID invalid', the connection goes on" {
	cat >in <<-'EOF'
	{"id":"r1","text":"Flood warnings were issued for three rivers"}
	{"id":"r2","text":"this line is cut short
	{"text":"The cabinet met to discuss the spending plan"}
	{"id":7,"text":"Flood warnings were issued for three rivers!"}
	EOF
	start_daemon -f jsonl --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	[ "$(wc -l <replies)" -eq 4 ] || fail "$(cat replies)"
	sed -n 1p replies | grep -qx 'unique	r1'
	sed -n 2p replies | grep -q '^error	1:1:2	invalid	invalid JSON at column' ||
	    fail "$(sed -n 2p replies)"
	sed -n 3p replies | grep -qx 'unique	1:1:3'
	sed -n 4p replies | grep -q '^duplicate	7	r1	0\.' || fail "$(sed -n 4p replies)"
	[ "$(dstat "unix:$T/sock" invalid)" = 1 ]
	[ "$(dstat "unix:$T/sock" errors)" = 1 ]
	stop_daemon
}

@test "--on-bad-input fail: the client gets the error and is disconnected" {
	printf '{"id":"r1","text":"one good record"}\nnot json\n{"id":"r3","text":"never read"}\n' >in
	start_daemon -f jsonl --on-bad-input fail --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	[ "$(wc -l <replies)" -eq 2 ] || fail "$(cat replies)"
	sed -n 2p replies | grep -q '^error	1:1:2	invalid	'
	# The daemon goes on.
	printf '{"id":"x","text":"another client"}\n' | dsend "unix:$T/sock" >r2
	grep -qx 'unique	x' r2
	stop_daemon
}

@test "ids with tabs and newlines are escaped in replies as in tab-separated output" {
	printf '{"id":"a\\tb\\nc\\\\d","text":"an id that needs escaping"}\n' >in
	start_daemon -f jsonl --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	printf 'unique\ta\\tb\\nc\\\\d\n' | assert_same - replies
	stop_daemon
}

@test "-z: NUL-terminated records, replies are still lines; a last record without delimiter counts" {
	printf 'a\tmulti\nline text of a message\0b\tsomething else altogether\0c\tmulti\nline text of a message' >in
	start_daemon -z -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	printf 'unique\ta\nunique\tb\nduplicate\tc\ta\t1.0000\n' | assert_same - replies
	stop_daemon
}

@test "--output -a: every record with its verdict in commit order; SIGHUP reopens the file" {
	make_abcd
	start_daemon -f tsv -a --output out.tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >/dev/null
	# Written before the replies were sent.
	mhf -f tsv -a in >expected
	assert_same expected out.tsv
	mv out.tsv out.tsv.1
	kill -HUP "$DPID"
	wait_log "SIGHUP: output and log reopened"
	printf 'e\tA brand new story about a cat\n' | dsend "unix:$T/sock" >/dev/null
	printf 'unique\t-\t-\te\tA brand new story about a cat\n' | assert_same - out.tsv
	assert_same expected out.tsv.1
	stop_daemon
}

@test "--output without -a: the unique records as read; '-' is stdout" {
	make_abcd
	start_daemon -f tsv --output - --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >/dev/null
	stop_daemon
	mhf -f tsv in >expected
	assert_same expected "$T/dout"
}

@test "--output on a full disk (/dev/full): the batch is answered, then the daemon exits 1" {
	[ -w /dev/full ] || skip "no /dev/full"
	start_daemon --output /dev/full --listen "unix:$T/sock"
	printf 'one\n' | dsend "unix:$T/sock" >replies
	# Committed, so answered; then the daemon stops as on SIGTERM.
	head -n 1 replies | grep -qx 'unique	1:1:1'
	wait_exit "$DPID" 30
	[ "$status" -eq 1 ] || fail "exit status $status" "$(cat "$T/derr")"
	grep -q 'output /dev/full: write error: No space left on device' "$T/derr"
	grep -q 'stopping on an output error' "$T/derr"
}

@test "an over-long record, --on-bad-input=fail: 'error ID too-long', disconnected; other clients are served" {
	{
		printf 'short one\n'
		head -c 5000 /dev/zero | tr '\0' x
		printf '\nnever answered\n'
	} >in
	start_daemon --on-bad-input fail --max-bytes 1K --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	[ "$(wc -l <replies)" -eq 2 ] || fail "$(cat replies)"
	sed -n 1p replies | grep -qx 'unique	1:1:1'
	sed -n 2p replies | grep -q '^error	1:1:2	too-long	record of .* bytes is over --max-bytes 1024$' ||
	    fail "$(sed -n 2p replies)"
	printf 'another client\n' | dsend "unix:$T/sock" >r2
	grep -qx 'unique	1:2:1' r2
	[ "$(dstat "unix:$T/sock" too_long)" = 1 ]
	stop_daemon
	# A record with an id of its own is answered with it, when its first
	# bytes hold it: TSV before the tab, JSON Lines its id member.
	{ printf 'big\t'; head -c 5000 /dev/zero | tr '\0' x; echo; } >in.tsv
	start_daemon -f tsv --max-bytes 1K --listen "unix:$T/sock"
	dsend "unix:$T/sock" in.tsv >replies
	grep -q '^error	big	too-long	' replies || fail "$(cat replies)"
	stop_daemon
	{ printf '{"text":"'; head -c 5000 /dev/zero | tr '\0' x
	  printf '","id" : "big2"}\n'; } >late.jsonl
	{ printf '{"id":"big3","text":"'; head -c 5000 /dev/zero | tr '\0' x
	  printf '"}\n'; } >early.jsonl
	start_daemon -f jsonl --max-bytes 1K --listen "unix:$T/sock"
	dsend "unix:$T/sock" early.jsonl >replies
	grep -q '^error	big3	too-long	' replies || fail "$(cat replies)"
	# (its id past the first 4 KB: numbered)
	dsend "unix:$T/sock" late.jsonl >replies
	grep -q '^error	1:2:1	too-long	' replies || fail "$(cat replies)"
	stop_daemon
}

@test "an over-long record, --on-bad-input=skip (the default) or pass: 'error ID too-long' in its place, dropped as it arrives; the connection goes on" {
	# A, then B of 6,500 bytes (over 6 times --max-bytes 1K) in five
	# writes, its newline in the last; then C, a near duplicate of A, and
	# D.  A and B's first piece in one write: B is met while A waits for
	# its batch.
	printf 'a\tThe quick brown fox jumps over the lazy dog\n' >AB.1
	printf 'big\t' >>AB.1
	head -c 1500 /dev/zero | tr '\0' x >>AB.1
	for i in 2 3 4; do head -c 1500 /dev/zero | tr '\0' y >B.$i; done
	{ head -c 496 /dev/zero | tr '\0' z; printf '\n'; } >B.5
	printf 'c\tthe quick brown fox jumps over the lazy dog!\n' >C
	printf 'd\tSomething else entirely, about the weather\n' >D
	sim="$(jaccard 'The quick brown fox jumps over the lazy dog' \
	    'the quick brown fox jumps over the lazy dog!')"
	for policy in skip pass; do
		rm -rf db
		start_daemon -f tsv -d db --output - --on-bad-input "$policy" \
		    --max-bytes 1K --listen "unix:$T/sock"
		# B's reply comes before the rest of it is sent (+2): it is
		# not held until its end.  C's and D's come on the same
		# connection (+4), and it is still open after them.
		dsteps "unix:$T/sock" replies AB.1 +2 B.2 B.3 B.4 B.5 C D +4 \
		    open close || fail "$policy: dsteps exit $?" "$(cat replies)"
		[ "$(wc -l <replies)" -eq 4 ] || fail "$policy:" "$(cat replies)"
		[ "$(sed -n 1p replies)" = "unique	a" ] ||
		    fail "$policy:" "$(cat replies)"
		sed -n 2p replies | grep -qx 'error	big	too-long	record of more than 1024 bytes is over --max-bytes 1024' ||
		    fail "$policy:" "$(cat replies)"
		printf 'duplicate\tc\ta\t%s\nunique\td\n' "$sim" >expected
		sed -n 3,4p replies | assert_same expected -
		[ "$(dstat "unix:$T/sock" too_long)" = 1 ] ||
		    fail "$policy: too_long $(dstat "unix:$T/sock" too_long)"
		[ "$(dstat "unix:$T/sock" records)" = 4 ] ||
		    fail "$policy: records $(dstat "unix:$T/sock" records)"
		stop_daemon
		# Never written, even under pass: it was never held whole.
		printf 'a\tThe quick brown fox jumps over the lazy dog\nd\tSomething else entirely, about the weather\n' >expected
		assert_same expected "$T/dout"
	done
}

@test "an over-long record, --on-bad-input=skip: the last thing its client sends, in pieces, before it closes" {
	printf 'first\n' >A
	# 1 MiB pieces of a 32 MiB record without a newline.
	head -c 1048576 /dev/zero | tr '\0' q >piece
	pieces=()
	for i in $(seq 32); do pieces+=(piece); done
	# Under AddressSanitizer, freed memory waits in its quarantine (256
	# MB) before it is reused: the 32 MiB dropped would count in full.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
	    start_daemon --max-bytes 64K --listen "unix:$T/sock"
	printf 'warm up\n' | dsend "unix:$T/sock" >r0
	grep -qx 'unique	1:1:1' r0 || fail "$(cat r0)"
	hwm0="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DPID/status")"
	# Still open after the record's last piece: closed by the client.
	CLIENT_CHUNK_PAUSE=0 dsteps "unix:$T/sock" replies A +1 piece +2 \
	    "${pieces[@]}" open close || fail "dsteps exit $?" "$(cat replies)"
	[ "$(wc -l <replies)" -eq 2 ] || fail "$(cat replies)"
	[ "$(sed -n 1p replies)" = "unique	1:2:1" ] || fail "$(cat replies)"
	sed -n 2p replies | grep -qx 'error	1:2:2	too-long	record of more than [0-9]* bytes is over --max-bytes 65536' ||
	    fail "$(cat replies)"
	# Dropped as it came: the daemon's peak memory grew by far less
	# than the record.
	hwm="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DPID/status")"
	[ $((hwm - hwm0)) -lt 8192 ] || fail "peak RSS $hwm0 kB, then $hwm kB"
	# The same record whole, its newline last, then the end.
	{ cat "${pieces[@]}"; printf '\n'; } >whole
	dsteps "unix:$T/sock" replies2 whole open close ||
	    fail "dsteps exit $?" "$(cat replies2)"
	grep -qx 'error	1:3:1	too-long	record of more than [0-9]* bytes is over --max-bytes 65536' replies2 ||
	    fail "$(cat replies2)"
	[ "$(wc -l <replies2)" -eq 1 ] || fail "$(cat replies2)"
	printf 'after\n' | dsend "unix:$T/sock" >r2
	grep -qx 'unique	1:4:1' r2 || fail "$(cat r2)"
	[ "$(dstat "unix:$T/sock" too_long)" = 2 ]
	stop_daemon
}

@test "an over-long record without any newline, still being sent, is cut off" {
	head -c 3000000 /dev/zero | tr '\0' y >in
	start_daemon --max-bytes 64K --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	grep -q '^error	1:1:1	too-long	record of more than [0-9]* bytes is over --max-bytes 65536$' replies ||
	    fail "$(cat replies)"
	[ "$(wc -l <replies)" -eq 1 ]
	stop_daemon
}

@test "binary garbage: every record is answered, and the daemon goes on" {
	python3 -c '
import random, sys
r = random.Random(7)
sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(300000)))' >garbage
	# Records: newline-terminated, plus a last one without.
	n="$(tr -cd '\n' <garbage | wc -c)"
	[ "$(tail -c 1 garbage | od -An -tx1 | tr -d ' ')" = 0a ] || n=$((n + 1))
	start_daemon --listen "unix:$T/sock"
	dsend "unix:$T/sock" garbage >replies
	[ "$(wc -l <replies)" -eq "$n" ] || fail "$(wc -l <replies) replies for $n records"
	! grep -qv '^\(unique\|duplicate\|empty\)	' replies ||
	    fail "odd reply:" "$(grep -v '^\(unique\|duplicate\|empty\)	' replies | head -n 3)"
	# In jsonl, garbage is malformed: one error each.
	stop_daemon
	start_daemon -f jsonl --listen "unix:$T/sock"
	dsend "unix:$T/sock" garbage >replies
	# (less its blank lines, JSON white space only: no records)
	nj="$(python3 -c '
import re, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
if lines[-1] == b"":
    lines.pop()
print(sum(1 for l in lines if not re.fullmatch(rb"[ \t\r]*", l)))' garbage)"
	[ "$(wc -l <replies)" -eq "$nj" ] || fail "$(wc -l <replies) replies for $nj"
	[ "$(grep -c '^error	[^	]*	invalid	' replies)" -eq "$nj" ]
	printf '{"text":"still fine"}\n' | dsend "unix:$T/sock" >r2
	grep -q '^unique	' r2
	stop_daemon
}

@test "half-close: records sent before the client shuts its side down are all answered" {
	gen_tsv 3000 >in
	start_daemon -f tsv --batch 100 --listen "unix:$T/sock"
	# client.py shuts down its sending side after the input and reads on.
	dsend "unix:$T/sock" in >replies
	cut -f1 in | sed 's/^/unique	/' >expected
	assert_same expected replies
	stop_daemon
}

@test "a client that never reads its replies is paused; others are served; memory stays bounded" {
	start_daemon --max-bytes 64K --listen "unix:$T/sock"
	timeout 120 python3 "$CLIENT" stuck "unix:$T/sock" stuck.out &
	BG_PIDS+=($!)
	wait_lines stuck.out 90
	read -r what sent <stuck.out
	# The daemon stopped reading it long before it could send 16 MiB.
	[ "$what" = blocked ] || fail "the client sent $sent bytes unhindered"
	gen_tsv 2000 >in
	dsend "unix:$T/sock" in >replies
	[ "$(wc -l <replies)" -eq 2000 ]
	rss="$(rss_kb "$DPID")"
	[ "$rss" -lt 200000 ] || fail "daemon RSS $rss kB"
	# The stuck client stays paused: the count of records comes to rest
	# (it is only read again once it reads its replies).
	r1="$(dstat "unix:$T/sock" records)"
	for i in $(seq 30); do
		sleep 1
		r2="$(dstat "unix:$T/sock" records)"
		[ "$r1" = "$r2" ] && break
		r1="$r2"
	done
	[ "$r1" = "$r2" ] || fail "the records count never came to rest: $r2"
	[ "$(rss_kb "$DPID")" -lt 200000 ]
	stop_daemon
}

@test "--idle-timeout: a silent client gets 'error - idle' and is disconnected" {
	start_daemon --idle-timeout 1s --listen "unix:$T/sock"
	: >empty
	timeout 60 python3 "$CLIENT" raw "unix:$T/sock" empty replies
	grep -q '^error	-	idle	nothing received for 1 s (--idle-timeout)$' replies ||
	    fail "$(cat replies)"
	stop_daemon
}

@test "--max-clients: one too many gets 'error - busy'; the others are served" {
	start_daemon -v --max-clients 1 --listen "unix:$T/sock"
	: >empty
	timeout 120 python3 "$CLIENT" raw "unix:$T/sock" empty held &
	HELD=$!
	BG_PIDS+=("$HELD")
	wait_log "connection 1 from"
	printf 'refused\n' | dsend "unix:$T/sock" >r2
	grep -q '^error	-	busy	too many clients (--max-clients 1)$' r2 || fail "$(cat r2)"
	[ "$(wc -l <r2)" -eq 1 ]
	kill "$HELD"
	wait_log "connection 1 closed"
	printf 'served\n' | dsend "unix:$T/sock" >r3
	grep -q '^unique	' r3 || fail "$(cat r3)"
	stop_daemon
}

@test "SIGTERM: the batch in flight is committed and answered, then exit 0" {
	gen_tsv 5 >in
	# A batch that would wait a minute for more records.
	start_daemon -f tsv -d db --batch-delay 60s --listen "unix:$T/sock"
	timeout 120 python3 "$CLIENT" raw "unix:$T/sock" in replies &
	CL=$!
	BG_PIDS+=("$CL")
	# A client that sends only a command is answered at once: the five
	# records are in the batch when it says so.
	for i in $(seq 200); do
		[ "$(dstat "unix:$T/sock" records)" = 5 ] && break
		sleep 0.05
	done
	[ "$(dstat "unix:$T/sock" records)" = 5 ]
	[ "$(dstat "unix:$T/sock" batches)" = 0 ]
	stop_daemon
	wait "$CL"
	{ cut -f1 in | sed 's/^/unique	/'; printf 'error\t-\tshutdown\tthe server is stopping\n'; } >expected
	assert_same expected replies
	grep -q 'stopping on SIGTERM' "$T/derr"
	# They were committed and answered, and the answers written before
	# the exit: a new daemon has them as seen, duplicates of themselves.
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >again
	cut -f1 in | awk '{ print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }' >expected
	assert_same expected again
	stop_daemon
}

# The replies of a feed's records seen before: duplicates of themselves.
seen_replies() {
	cut -f1 "$1" | awk '{ print "duplicate\t" $1 "\t" $1 "\t1.0000\tseen" }'
}

@test "a feed polled again: seen in the same run, after SIGTERM, after kill -9; replays only for replies that never went" {
	gen_tsv 300 >feed
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r1
	[ "$(grep -c '^unique	' r1)" -eq 300 ]
	# The same run: its replies went, so each is seen.
	dsend "unix:$T/sock" feed >r2
	seen_replies feed | assert_same - r2
	# After a restart (SIGTERM): the same.
	stop_daemon
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r3
	seen_replies feed | assert_same - r3
	# A client that sends and goes away before its replies: they never
	# go, so its records are answered unique again (replays), once.
	gen_tsv 200 7 >feed2
	dleave "unix:$T/sock" feed2 500
	dsend "unix:$T/sock" feed2 >r4
	cut -f1 feed2 | sed 's/^/unique	/; s/$/	replay/' | assert_same - r4
	dsend "unix:$T/sock" feed2 >r5
	seen_replies feed2 | assert_same - r5
	# After kill -9, once the marks are committed (at once when idle):
	# seen; nothing answered unique again.
	sleep 1
	kill -9 "$DPID"
	wait_exit "$DPID" 30
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r6
	seen_replies feed | assert_same - r6
	# --replay all: a client that wants the first verdicts again.
	stop_daemon
	start_daemon -f tsv -d db --replay all --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r7
	cut -f1 feed | sed 's/^/unique	/; s/$/	replay/' | assert_same - r7
	stop_daemon
}

# A unix client that sends its feed, shuts its side and reads nothing:
# the replies wait in its socket.  Run in the background, it says "ready"
# into $3 once all of them ($4 bytes) have come, then waits to be killed.
unread_client() {
	python3 -c '
import fcntl, socket, struct, sys, termios, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(open(sys.argv[2], "rb").read())
s.shutdown(socket.SHUT_WR)
end = time.time() + 60
while time.time() < end:
    n = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
    if n >= int(sys.argv[4]):
        open(sys.argv[3], "w").write("ready %d\n" % n)
        break
    time.sleep(0.02)
time.sleep(120)' "${1#unix:}" "$2" "$3" "$4" 7>&- &
	UNREAD_PID=$!
}

@test "a unix client killed with its replies unread in its socket: replays when the feed comes again; one that read them all and closed at once: seen" {
	gen_tsv 200 11 >feed
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	# Every reply "unique ID": 8 bytes and the id's.
	unread_client "unix:$T/sock" feed ready \
	    "$(cut -f1 feed | awk '{ n += length($0) + 8 } END { print n }')"
	local i
	for i in $(seq 300); do
		[ -s ready ] && break
		sleep 0.1
	done
	[ -s ready ] || fail "the replies did not come"
	kill -9 "$UNREAD_PID"
	wait "$UNREAD_PID" 2>/dev/null || true
	wait_delivered "unix:$T/sock" 200
	dsend "unix:$T/sock" feed >r1
	cut -f1 feed | sed 's/^/unique	/; s/$/	replay/' | assert_same - r1
	dsend "unix:$T/sock" feed >r2
	seen_replies feed | assert_same - r2
	# A client that reads every reply and closes at once, not waiting
	# for the daemon's end of the stream: it took them all.
	gen_tsv 200 12 >feed2
	timeout 60 python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(open(sys.argv[2], "rb").read())
s.shutdown(socket.SHUT_WR)
f = s.makefile("rb")
for i in range(int(sys.argv[3])):
    sys.stdout.buffer.write(f.readline())
s.close()' "$T/sock" feed2 200 >r3
	[ "$(grep -c '^unique	' r3)" -eq 200 ] || fail "$(head r3)"
	dsend "unix:$T/sock" feed2 >r4
	seen_replies feed2 | assert_same - r4
	stop_daemon
}

@test "--check-config: what a start would refuse, found without starting (exit 2); bad listeners and --http are usage errors" {
	# Usage errors exit 2, before anything listens.
	mhrun --listen bogus:foo
	assert_status 2
	assert_err_has "--listen bogus:foo: use unix:PATH, tcp:HOST:PORT or tls:HOST:PORT"
	mhrun --listen "unix:$T/sock" --http 17799
	assert_status 2
	assert_err_has "--http 17799: use HOST:PORT"
	[ ! -e "$T/sock" ]
	mhrun --listen tcp:no.such.host.invalid:7700
	assert_status 2
	assert_err_has "--listen tcp:no.such.host.invalid:7700"
	# A configuration with everything wrong: each said, nothing started.
	{
		printf 'listen = unix:%s/sock\nlisten = tls:127.0.0.1:7443\n' "$T"
		printf 'tls-cert = %s/missing.pem\ntls-key = %s/missing.key\n' "$T" "$T"
		printf 'log-file = %s/no/such/dir/log\noutput = %s/nodir/out\n' "$T" "$T"
		printf 'http = 0.0.0.0:7799\n'
	} >bad.conf
	mhrun --config bad.conf --check-config
	assert_status 2
	assert_err_has "--tls-cert $T/missing.pem"
	assert_err_has "--log-file $T/no/such/dir/log"
	assert_err_has "--output $T/nodir/out"
	assert_err_has "--http 0.0.0.0:7799: /metrics and /healthz have no authentication"
	[ ! -e "$T/sock" ]
	[ ! -s "$T/out" ]
	# A good one: OK on stdout, exit 0, still nothing started.
	printf 'listen = unix:%s/sock\nformat = tsv\ndb = %s/db\nhttp = 127.0.0.1:7799\n' \
	    "$T" "$T" >good.conf
	mhrun --config good.conf --check-config
	assert_status 0
	grep -qx "mhfilter: configuration OK: good.conf" "$T/out"
	[ ! -e "$T/sock" ] && [ ! -e "$T/db" ]
	# The index's place must be a directory.
	touch notadir
	mhrun --db notadir --listen "unix:$T/sock" --check-config
	assert_status 2
	assert_err_has "--db notadir: not a directory"
	# A unix socket in a directory that is not there.
	mhrun --listen "unix:$T/nodir/sock" --check-config
	assert_status 2
	assert_err_has "--listen $T/nodir/sock: its directory $T/nodir"
	# A file cannot ask for the check itself (it would never serve).
	printf 'listen = unix:%s/sock\ncheck-config = yes\n' "$T" >self.conf
	mhrun --config self.conf
	assert_status 2
	assert_err_has "self.conf:2: unknown key 'check-config'"
	[ ! -e "$T/sock" ]
}

@test "blank lines of TSV and JSON Lines are no records: skipped, no reply, as the stream does" {
	printf '{"id":"a","text":"The quick brown fox jumps over the lazy dog"}\n\n   \n\t\r\n{"id":"b","text":"Something else entirely, about the weather"}\n' >in.jsonl
	start_daemon -f jsonl --listen "unix:$T/sock"
	dsend "unix:$T/sock" in.jsonl >replies
	printf 'unique\ta\nunique\tb\n' | assert_same - replies
	stop_daemon
	printf 'a\tThe quick brown fox jumps over the lazy dog\n\n  \nb\tSomething else entirely, about the weather\n' >in.tsv
	start_daemon -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" in.tsv >replies
	printf 'unique\ta\nunique\tb\n' | assert_same - replies
	stop_daemon
	# The stream writes the same records.
	mhrun -f tsv in.tsv
	printf 'a\tThe quick brown fox jumps over the lazy dog\nb\tSomething else entirely, about the weather\n' |
	    assert_out
}

@test "-v: a log line for each duplicate with both ids, from a file and from a daemon's client" {
	make_abcd
	mhrun -v -f tsv in
	assert_status 0
	assert_err_has "in:2: <b>: duplicate of <a>, similarity 0.9"
	grep -q '<a>: unique' "$T/err" && fail "a line for a unique record"
	mhrun -f tsv in
	[ ! -s "$T/err" ]
	start_daemon -v -f tsv --listen "unix:$T/sock"
	dsend "unix:$T/sock" in >replies
	stop_daemon
	grep -q 'connection 1, record 2: <b>: duplicate of <a>, similarity 0\.9' "$T/derr" ||
	    fail "$(cat "$T/derr")"
}

@test "replies that never went, twice: still replays, for the daemon and for another process on the index" {
	gen_tsv 200 9 >feed
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	# Two clients in a row send the feed and go away unanswered: the
	# first one's records are this run's, the second one's replays of
	# them; neither reply went.
	dleave "unix:$T/sock" feed 200
	dleave "unix:$T/sock" feed 400
	wait_delivered "unix:$T/sock" 400
	sleep 0.5	# (the marks of the lost batches are committed)
	# Another process on the index while the daemon runs: nothing of
	# the feed was delivered, so it writes it all (replays).
	run "$MHFILTER" -f tsv -d db feed
	[ "$status" -eq 0 ] || fail "status $status: $output"
	[ "$(printf '%s\n' "$output" | grep -c .)" -eq 200 ] ||
	    fail "the stream wrote $(printf '%s\n' "$output" | grep -c .) of 200"
	# The stream delivered them: the daemon's next client sees them.
	dsend "unix:$T/sock" feed >r1
	seen_replies feed | assert_same - r1
	# Once more, without the other process: lost twice, then answered.
	gen_tsv 200 10 >feed2
	dleave "unix:$T/sock" feed2 600
	dleave "unix:$T/sock" feed2 800
	dsend "unix:$T/sock" feed2 >r2
	cut -f1 feed2 | sed 's/^/unique	/; s/$/	replay/' | assert_same - r2
	dsend "unix:$T/sock" feed2 >r3
	seen_replies feed2 | assert_same - r3
	stop_daemon
}

@test "a batch whose replies never went, sent again: each duplicate matches what it matched the first time, never a record after it" {
	local A="the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat near the window of the old house"
	printf 'a\t%s\nb\t%s again\nc\t%s again q\n' "$A" "$A" "$A" >abc
	# The stream: b a duplicate of a, c of b.
	mhrun -f tsv -a abc
	assert_status 0
	printf 'unique\t-\t-\ta\nduplicate\ta\t0.9450\tb\nduplicate\tb\t0.9820\tc\n' |
	    assert_same - <(cut -f1-4 "$T/out")
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dleave "unix:$T/sock" abc 3
	wait_delivered "unix:$T/sock" 3
	dsend "unix:$T/sock" abc >r1
	printf 'unique\ta\treplay\nduplicate\tb\ta\t0.9450\nduplicate\tc\tb\t0.9820\n' |
	    assert_same - r1
	stop_daemon
}

@test "two clients in one batch, one gone without its replies: its record is a replay when it comes again, the other's records are seen" {
	start_daemon -f tsv -d db --batch-delay 300ms --listen "unix:$T/sock"
	# b sends five records and reads every reply; a sends one in the
	# same batch (--batch-delay) and goes away at once.
	timeout 60 python3 -c '
import socket, sys, time
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    return s
def readall(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out.decode()
        out += d
B = b"".join(b"B%d\tclient bee record %d with words %d\n" % (i, i, i * 31)
    for i in range(5))
A = b"A1\tclient ay sends a record and goes away\n"
b = conn()
a = conn()
b.sendall(B)
a.sendall(A)
time.sleep(0.05)
a.close()
b.shutdown(socket.SHUT_WR)
print(readall(b), end="")
time.sleep(0.6)
for data in (B, A):
    s = conn()
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    print(readall(s), end="")' "$T/sock" >r
	{
		for i in 0 1 2 3 4; do printf 'unique\tB%d\n' $i; done
		for i in 0 1 2 3 4; do
			printf 'duplicate\tB%d\tB%d\t1.0000\tseen\n' $i $i
		done
		printf 'unique\tA1\treplay\n'
	} | assert_same - r
	stop_daemon
}

@test "a batch of replays whose commit failed: sent again, still replays, not seen" {
	gen_tsv 200 7 >feed
	# Run 1: the client goes away unanswered: all 200 undelivered.
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dleave "unix:$T/sock" feed 200
	wait_delivered "unix:$T/sock" 200
	sleep 0.5	# (the marks of the lost batch are committed)
	stop_daemon
	# Run 2: the index's second sync fails once (the first is the start's,
	# of the number the daemon takes for its ids): the commit of the
	# first batch, the feed and a new record (which the batch must
	# write); the daemon goes on.
	printf 'new1\tcompletely fresh words nobody has seen in this index\n' |
	    cat - feed >feed2
	FAULT_PATH=data.mdb FAULT_CALLS=fdatasync FAULT_AT=2 FAULT_ERRNO=EIO \
	    FAULT_LOG="$T/faults" LD_PRELOAD="$(fault_preload)" \
	    start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed2 >r1
	[ "$(grep -c '^error	' r1)" -eq 201 ] ||
	    fail "the batch did not fail" "$(cut -f1 r1 | sort | uniq -c)"
	dsend "unix:$T/sock" feed >r2
	cut -f1 feed | sed 's/^/unique	/; s/$/	replay/' | assert_same - r2
	dsend "unix:$T/sock" feed >r3
	seen_replies feed | assert_same - r3
	stop_daemon
}

@test "two clients send the same records with ids at once: each record answered unique once in all, the other answer seen" {
	gen_tsv 5000 3 >feed
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >ra &
	local pa=$!
	dsend "unix:$T/sock" feed >rb &
	local pb=$!
	wait $pa || fail "client a: status $?"
	wait $pb || fail "client b: status $?"
	stop_daemon
	[ "$(cat ra rb | grep -c '^unique	')" -eq 5000 ] ||
	    fail "$(cat ra rb | grep -c '^unique	') unique answers, not 5000"
	[ "$(cat ra rb | grep '^unique	' | cut -f2 | sort -u | wc -l)" \
	    -eq 5000 ] || fail "an id answered unique twice"
	[ "$(cat ra rb | grep -c '	seen$')" -eq 5000 ] ||
	    fail "$(cat ra rb | grep -c '	seen$') seen, not 5000"
}

# Line records have no id of their own: the daemon gives each one,
# RUN:CONN:NUMBER, another on every connection.
@test "line records: replies that never went are replays when the records come again on another connection, identical copies judged as the stream judges them" {
	line_replies_lost db
	# After kill -9, once the marks are committed: the same.
	sleep 1
	kill -9 "$DPID"
	wait_exit "$DPID" 30
	start_daemon -f line -d db --listen "unix:$T/sock"
	dsend "unix:$T/sock" feed >r3
	[ "$(grep -c '^duplicate	.*	1\.0000$' r3)" -eq 302 ] ||
	    fail "$(grep -v '1\.0000$' r3 | head)"
	stop_daemon
}

@test "a feed polled again by many clients at once: every record they were answered is seen after a restart" {
	for i in 1 2 3 4; do gen_tsv 400 "$i" | sed "s/^/c$i-/" >feed$i; done
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	pids=()
	for i in 1 2 3 4; do dsend "unix:$T/sock" feed$i >r$i & pids+=($!); done
	wait "${pids[@]}"
	for i in 1 2 3 4; do
		[ "$(grep -c '^unique	' r$i)" -eq 400 ] || fail "client $i: $(grep -vc '^unique' r$i) not unique"
	done
	stop_daemon
	start_daemon -f tsv -d db --listen "unix:$T/sock"
	pids=()
	for i in 1 2 3 4; do dsend "unix:$T/sock" feed$i >s$i & pids+=($!); done
	wait "${pids[@]}"
	stop_daemon
	for i in 1 2 3 4; do
		seen_replies feed$i | assert_same - s$i
	done
}

@test "SIGINT also exits 0; SIGUSR1 logs the statistics" {
	start_daemon --listen "unix:$T/sock"
	printf 'one\ntwo\n' | dsend "unix:$T/sock" >/dev/null
	kill -USR1 "$DPID"
	wait_log "stats records=2 unique=2"
	kill -INT "$DPID"
	wait_exit "$DPID" 30
	[ "$status" -eq 0 ]
	grep -q 'stopping on SIGINT' "$T/derr"
}

@test "--stats: the statistics are logged at exit" {
	start_daemon --stats --listen "unix:$T/sock"
	printf 'one\none\n' | dsend "unix:$T/sock" >/dev/null
	stop_daemon
	grep -q 'stats records=2 unique=1 replayed=0 duplicates=1' "$T/derr"
}

@test "--log-file: messages go to the file; SIGHUP reopens it" {
	"$MHFILTER" --log-file log --listen "unix:$T/sock" 2>stderr &
	DPID=$!
	BG_PIDS+=("$DPID")
	for i in $(seq 400); do grep -qs 'ready:' log && break; sleep 0.05; done
	grep -q 'ready:' log
	[ ! -s stderr ]
	mv log log.1
	kill -HUP "$DPID"
	for i in $(seq 400); do [ -s log ] && break; sleep 0.05; done
	grep -q 'SIGHUP: output and log reopened' log
	stop_daemon
	grep -q 'stopping on SIGTERM' log
	# Each line of a log file starts with its time (no journal stamps
	# it), RFC 3339 in UTC, today's.
	grep -vE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z mhfilter: ' log log.1 &&
	    fail "a line without its time"
	grep -q "^$(date -u +%Y-%m-%d)T.* mhfilter: stopping on SIGTERM" log
}

@test "a live socket is not taken over; a stale one is replaced" {
	start_daemon --listen "unix:$T/sock"
	first="$DPID"
	mhrun --listen "unix:$T/sock"
	assert_status 1
	assert_err_has "--listen unix:$T/sock: another process is listening on it"
	kill -9 "$first"
	wait_exit "$first"
	[ -S "$T/sock" ]
	start_daemon --listen "unix:$T/sock"
	printf 'x\n' | dsend "unix:$T/sock" | grep -q '^unique'
	stop_daemon
}

@test "usage: files in daemon mode, a bad --listen, --http alone, bad durations" {
	mhrun --listen "unix:$T/sock" somefile
	assert_status 2
	assert_err_has "no files in daemon mode"
	# A listener that cannot be is a usage error, as documented (2).
	mhrun --listen "udp:1.2.3.4:5"
	assert_status 2
	assert_err_has "--listen udp:1.2.3.4:5: use unix:PATH, tcp:HOST:PORT or tls:HOST:PORT"
	mhrun --listen "tcp:127.0.0.1"
	assert_status 2
	mhrun --http 127.0.0.1:0 </dev/null
	assert_status 2
	assert_err_has "--http needs --listen"
	mhrun --batch-delay 5parsecs --listen "unix:$T/sock"
	assert_status 2
	assert_err_has "--batch-delay: '5parsecs': unknown unit"
	mhrun --batch-delay 61s --listen "unix:$T/sock"
	assert_status 2
	assert_err_has "out of range"
	mhrun --max-clients 0 --listen "unix:$T/sock"
	assert_status 2
	[ ! -e "$T/sock" ]
}

@test "--config: long options as keys; the command line overrides; errors name the line" {
	set -o pipefail
	make_abcd
	cat >conf <<-EOF
	# a comment, then a blank line

	format = tsv
	listen = unix:$T/other
	batch-delay = 1ms
	quiet = yes
	annotate = no
	EOF
	# The file's --listen is replaced by the command line's.
	start_daemon --config conf --listen "unix:$T/sock"
	[ ! -e "$T/other" ]
	dsend "unix:$T/sock" in >replies
	abcd_replies | assert_same - replies
	stop_daemon
	# It applies to the stdin mode as well; -a on the command line.
	grep -v '^listen' conf >conf2
	mhrun --config=conf2 -a in
	assert_status 0
	mhf -f tsv -a in | assert_out
	# Errors.
	printf 'format = tsv\nthreshold = 7\n' >bad
	mhrun --config bad
	assert_status 2
	assert_err_has "bad:2: --threshold: '7' is out of range"
	printf '\nno-such-option = 1\n' >bad
	mhrun --config bad
	assert_status 2
	assert_err_has "bad:2: unknown key 'no-such-option'"
	printf 'db\n' >bad
	mhrun --config bad
	assert_status 2
	assert_err_has "bad:1: db needs a value"
	printf 'quiet = maybe\n' >bad
	mhrun --config bad
	assert_status 2
	assert_err_has "bad:1: quiet takes yes or no"
	printf 'help\n' >bad
	mhrun --config bad
	assert_status 2
	assert_err_has "bad:1: unknown key 'help'"
	mhrun --config missing
	assert_status 2
	assert_err_has "missing: No such file or directory"
}

@test "--http: /metrics in the Prometheus text format, /healthz, 404 elsewhere" {
	make_abcd
	start_daemon -f tsv --listen "unix:$T/sock" --http 127.0.0.1:0
	dsend "unix:$T/sock" in >/dev/null
	h="$(http_addr)"
	[[ "$h" =~ ^127\.0\.0\.1:[1-9][0-9]*$ ]] || fail "http address '$h'"
	timeout 60 python3 "$CLIENT" http "$h" /metrics >metrics
	head -n 1 metrics | grep -qx 200
	grep -qx '# TYPE mhfilter_records_total counter' metrics
	# Each record once, by verdict: the four sum to the records sent.
	grep -qx 'mhfilter_records_total{verdict="unique"} 2' metrics
	grep -qx 'mhfilter_records_total{verdict="duplicate"} 1' metrics
	grep -qx 'mhfilter_records_total{verdict="empty"} 1' metrics
	sum="$(sed -n 's/^mhfilter_records_total{verdict="[a-z_]*"} //p' metrics |
	    awk '{ s += $1 } END { print s }')"
	[ "$sum" -eq 4 ] || fail "verdicts sum to $sum"
	# No metric a sum would count twice.
	if grep -q '^mhfilter_\(errors\|unique\|duplicates\)_total' metrics; then
		fail "a metric counting records twice:" "$(cat metrics)"
	fi
	grep -qx '# TYPE mhfilter_index_documents gauge' metrics
	grep -qx 'mhfilter_index_documents 3' metrics
	grep -qx '# TYPE mhfilter_batch_duration_seconds histogram' metrics
	grep -qx 'mhfilter_batch_duration_seconds_bucket{le="+Inf"} 1' metrics
	grep -qx 'mhfilter_batch_duration_seconds_count 1' metrics
	grep -q '^mhfilter_batch_duration_seconds_sum [0-9]' metrics
	grep -q '^mhfilter_build_info{version="[0-9.]*",index_format="[0-9]*",scheme="[0-9]*",scheme_name="[^"]*"} 1$' metrics
	for m in process_start_time_seconds process_resident_memory_bytes \
	    process_cpu_seconds_total process_open_fds process_max_fds; do
		grep -q "^$m [0-9]" metrics || fail "no $m"
	done
	# The text format is valid: HELP and TYPE before the samples, names,
	# labels, cumulative buckets ending with +Inf (and promtool's lint).
	tail -n +2 metrics >exposition
	python3 "$E2E_DIR/promcheck.py" exposition || fail "$(cat exposition)"
	if command -v promtool >/dev/null; then
		promtool check metrics <exposition || fail "promtool"
	else
		echo "# promtool is absent: checked by promcheck.py only" >&3
	fi
	# STATS keeps its keys.
	s="$(printf '#mhfilter stats\n' | dsend "unix:$T/sock")"
	[ "$(stats_of records <<<"$s")" = 4 ]
	[ "$(stats_of errors <<<"$s")" = 0 ]
	timeout 60 python3 "$CLIENT" http "$h" /healthz >health
	printf '200\nok\n' | assert_same - health
	timeout 60 python3 "$CLIENT" http "$h" /nope | head -n 1 | grep -qx 404
	# Stopping, while a client that reads nothing keeps it draining:
	# /healthz says so (503), for a load balancer to stop sending.
	timeout 60 python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
time.sleep(30)' "$T/sock" &
	local cl=$! i
	BG_PIDS+=("$cl")
	# (Two: it, and the one asking.)
	for i in $(seq 200); do
		[ "$(dstat "unix:$T/sock" clients)" -ge 2 ] && break
		sleep 0.05
	done
	kill -TERM "$DPID"
	wait_log "stopping on SIGTERM"
	timeout 60 python3 "$CLIENT" http "$h" /healthz >health
	head -n 1 health | grep -qx 503 || fail "$(cat health)"
	grep -q stopping health || fail "$(cat health)"
	kill "$cl"
	wait_exit "$DPID" 30
}

@test "retention works in daemon mode: --max-docs expires the oldest documents batch by batch" {
	gen_tsv 50 >in
	start_daemon -f tsv -d db --max-docs 10 --batch 10 --listen "unix:$T/sock"
	for i in 0 1 2 3 4; do
		sed -n "$((i * 10 + 1)),$((i * 10 + 10))p" in | dsend "unix:$T/sock" >/dev/null
	done
	[ "$(dstat "unix:$T/sock" records)" -eq 50 ]
	expired="$(dstat "unix:$T/sock" expired)"
	docs="$(dstat "unix:$T/sock" index_documents)"
	[ "$expired" -ge 30 ] && [ "$((docs + expired))" -eq 50 ] ||
	    fail "$expired expired, $docs documents"
	stop_daemon
}

@test "-o in stdin mode: the output goes to the file, truncated first" {
	printf 'a\nb\na\n' >in
	printf 'old content that must go\n' >out.txt
	mhrun -o out.txt in
	assert_status 0
	[ ! -s "$T/out" ]
	printf 'a\nb\n' | assert_same - out.txt
	mhrun --output /nonexistent/dir/out in
	assert_status 1
	assert_err_has "--output /nonexistent/dir/out: No such file or directory"
}
