#!/usr/bin/env bats
# The client, mhfilter --connect ADDR: the same input through a daemon
# must give the bytes and the exit status the stream gives on its own,
# over unix:, tcp: and tls:, in every output mode and format; and the
# daemon restarted (SIGTERM, SIGKILL), busy or closing an idle client in
# the middle of an input loses nothing and writes nothing twice.  Every
# server is started here, on a unix socket or 127.0.0.1, and stopped here.

load helpers
load daemon-helpers

# Records with near-duplicates in format $1 ($2 originals, a third of them
# copied later with a word or two changed, copies of copies and several
# copies of one included, so that some have several matches), to stdout.
make_input() {
	python3 - "$1" "$2" <<'EOF'
import json, random, sys
fmt, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda "
         "mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega "
         "red green blue cyan magenta yellow black white").split()
texts = []
for i in range(n):
    if texts and rnd.random() < 0.3:
        w = texts[rnd.randrange(len(texts))][0].split()
        w[rnd.randrange(len(w))] = rnd.choice(words)
        texts.append((" ".join(w), True))
        continue
    texts.append((" ".join(rnd.choice(words) for _ in range(30)), False))
out = sys.stdout
for i, (t, _) in enumerate(texts):
    if fmt == "line":
        out.write(t + "\n")
    elif fmt == "tsv":
        out.write("r%d\t%s\n" % (i, t))
    elif fmt == "jsonl":
        out.write(json.dumps({"id": "j%d" % i, "text": t}) + "\n")
    else:
        out.write("From sender@example.org Mon Jan  1 00:00:%02d 2024\n"
                  % (i % 60))
        out.write("From: sender@example.org\nSubject: note %d\n" % i)
        # Every fifth has no Message-ID: its id is made of its content.
        if i % 5:
            out.write("Message-ID: <m%d@example.org>\n" % i)
        out.write("\n%s\n\n" % t)
EOF
}

# Certificates for the tls: tests (as tls.bats makes them): a CA, the
# server's for localhost and 127.0.0.1, a client's, and another CA.
setup_file() {
	C="$BATS_FILE_TMPDIR/certs"
	export C
	command -v openssl >/dev/null 2>&1 || return 0
	mkdir -p "$C"
	cd "$C" || return 1
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
	printf 'extendedKeyUsage=clientAuth\n' >client.ext
	for ca in ca other; do
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		    -out "$ca.key" 2>/dev/null &&
		    openssl req -x509 -new -key "$ca.key" -subj "/CN=$ca" \
		    -days 30 -out "$ca.pem" 2>/dev/null || return 1
	done
	for c in server:1001:server.ext client:2001:client.ext; do
		IFS=: read -r name serial ext <<<"$c"
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		    -out "$name.key" 2>/dev/null &&
		    openssl req -new -key "$name.key" -subj "/CN=$name" \
		    -out "$name.csr" 2>/dev/null &&
		    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key \
		    -set_serial "$serial" -days 30 -extfile "$ext" \
		    -out "$name.pem" 2>/dev/null || return 1
	done
}

# Start a daemon of format $1 on a fresh index at address kind $2 (unix,
# tcp or tls), more daemon options after; its address goes to $ADDR.
serve() {
	local fmt="$1" kind="$2"

	shift 2
	rm -rf "$T/db"
	case "$kind" in
	unix)
		start_daemon -f "$fmt" -d "$T/db" --listen "unix:$T/sock" "$@"
		ADDR="unix:$T/sock" ;;
	tcp)
		start_daemon -f "$fmt" -d "$T/db" --listen tcp:127.0.0.1:0 "$@"
		# The log holds this test's earlier daemons too: the last.
		ADDR="$(sed -n 's/.*listening on \(tcp:[^ ]*\).*/\1/p' \
		    "$T/derr" | tail -n 1)" ;;
	tls)
		start_daemon -f "$fmt" -d "$T/db" --listen tls:127.0.0.1:0 \
		    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
		    --tls-client-ca "$C/ca.pem" "$@"
		ADDR="$(sed -n 's/.*listening on \(tls:[^ ]*\).*/\1/p' \
		    "$T/derr" | tail -n 1)" ;;
	esac
	[ -n "$ADDR" ] || fail "no address in the log" "$(cat "$T/derr")"
}

# The stream's output and status on input $1 with options $2..., into
# $T/want and $WANT_STATUS, with a fresh index.
stream_of() {
	local in="$1"

	shift
	rm -rf "$T/sdb"
	WANT_STATUS=0
	timeout 120 "$MHFILTER" -d "$T/sdb" "$@" <"$in" >"$T/want" \
	    2>"$T/swarn" || WANT_STATUS=$?
}

# The client's output and status on input $1 with options $2..., into
# $T/got and $GOT_STATUS (TLS options added for a tls: address).
client_of() {
	local in="$1" tls=()

	shift
	[[ "$ADDR" == tls:* ]] && tls=(--tls-ca "$C/ca.pem" \
	    --tls-cert "$C/client.pem" --tls-key "$C/client.key")
	GOT_STATUS=0
	timeout 120 "$MHFILTER" --connect "$ADDR" "${tls[@]}" "$@" <"$in" \
	    >"$T/got" 2>"$T/cerr" || GOT_STATUS=$?
}

# Input $1 of format $2 over address kind $3, in each output mode given
# after: the client's bytes and status must be the stream's.
same_as_stream() {
	local in="$1" fmt="$2" kind="$3" mode

	shift 3
	for mode in "$@"; do
		[ "$mode" = default ] && mode=
		stream_of "$in" -f "$fmt" $mode
		serve "$fmt" "$kind"
		client_of "$in" -f "$fmt" $mode
		stop_daemon || return 1
		[ "$GOT_STATUS" -eq "$WANT_STATUS" ] || fail "$fmt ${mode:-default}" \
		    "over $kind: status $GOT_STATUS, the stream's $WANT_STATUS" \
		    "$(cat "$T/cerr")" || return 1
		[ -s "$T/want" ] || fail "$fmt ${mode:-default}: no output" ||
		    return 1
		assert_same "$T/want" "$T/got" || fail "$fmt ${mode:-default}" \
		    "over $kind" || return 1
	done
}

@test "unix: the stream's bytes in every mode, with line, tsv, jsonl and mail" {
	local fmt

	for fmt in line tsv jsonl mail; do
		make_input "$fmt" 600 >"in.$fmt"
		same_as_stream "in.$fmt" "$fmt" unix default -a -D -p \
		    --clusters "-a --group" "-p --group"
	done
	# Each mode had duplicates to show: -a names matches by number; some
	# records have several matches (-p), some groups several members.
	make_input line 600 >in
	stream_of in -a
	grep -q '^duplicate	[0-9]*	' "$T/want" || fail "no duplicates"
	stream_of in -p
	[ "$(cut -f2 "$T/want" | sort | uniq -d | wc -l)" -gt 10 ] ||
	    fail "few records with several matches" "$(head "$T/want")"
	stream_of in --clusters
	[ "$(cut -f2 "$T/want" | sort | uniq -c | awk '$1 > 2' | wc -l)" \
	    -gt 10 ] || fail "few groups of three or more"
}

@test "two daemons started together on one index make ids of their own: a client of one never takes the other's record for one of its own" {
	local W='the daily weather report says heavy rain is expected across the northern coast through thursday'
	local i
	start_daemon -f line -d db --listen "unix:$T/a.sock"
	"$MHFILTER" -f line -d db --listen "unix:$T/b.sock" 2>"$T/berr" &
	local bpid=$!
	BG_PIDS+=("$bpid")
	# (Its log, not a connection: the weather must be b's connection 1,
	# as the other line is a's.)
	for i in $(seq 200); do
		grep -q 'ready:' "$T/berr" && break
		sleep 0.1
	done
	# Through b, the weather; through a, another line, then the weather
	# again: its match is b's record, not a's first line.
	printf '%s\n' "$W" >w
	"$MHFILTER" -f line --connect "unix:$T/b.sock" w >/dev/null
	printf '%s\n%s!\n' 'an unrelated sentence about stock markets closing higher on tuesday after inflation data' "$W" >in
	run "$MHFILTER" -f line --connect "unix:$T/a.sock" -a in
	[ "$status" -eq 0 ] || fail "status $status: $output"
	[ "$(printf '%s\n' "$output" | sed -n 1p | cut -f1)" = unique ] ||
	    fail "$output"
	# b's id (RUN:CONN:1), as the daemon gives it; not a's line 1.
	printf '%s\n' "$output" | sed -n 2p | cut -f1,2 >got
	grep -qE '^duplicate	[0-9]+:[0-9]+:1$' got || fail "$(cat got)"
	kill -TERM "$bpid"
	wait_exit "$bpid" 30
	stop_daemon
}

# Records the client decides itself (a line over --max-bytes, a blank JSON
# line) split a connection's numbers into runs (client_map_add), in which
# a match's RUN:CONN:NUMBER is looked up: one every few records, and -a
# and -p name every match as the stream does.
@test "records the client decides itself among the others (over --max-bytes, blank JSON lines): -a and -p name every match as the stream does" {
	local mode

	make_input line 3000 | awk '{ print } NR % 3 == 0 {
	    printf "%0500d\n", NR }' >in.line
	make_input line 3000 | python3 -c '
import json, sys
for i, l in enumerate(sys.stdin):
    print(json.dumps({"text": l.rstrip("\n")}))
    if i % 3 == 2:
        print()' >in.jsonl
	for mode in -a -p; do
		same_as_stream in.line line unix "$mode --max-bytes 400" ||
		    return 1
		# A match by its number: "duplicate N SIM", or "N M SIM".
		grep -Eq '^(duplicate	)?[0-9]+	[0-9.]+	' "$T/want" ||
		    fail "$mode: no matches named" "$(head "$T/want")"
		[ "$(grep -c 'over --max-bytes' "$T/cerr")" -eq 1000 ] ||
		    fail "$mode: not every long line refused" "$(head "$T/cerr")"
		same_as_stream in.jsonl jsonl unix "$mode" || return 1
	done
}

# An mbox of four messages: the first holds a NUL byte in its body, the
# third is a copy of the second (another Message-ID), the fourth is new.
nul_mbox() {
	local n

	for n in 1 2 3 4; do
		printf 'From a@example.org Tue Jul  1 10:00:0%d 2025\n' "$n"
		printf 'From: a@example.org\nMessage-ID: <n%d@example.org>\n' "$n"
		printf 'Subject: note %d\n\n' "$n"
		case $n in
		1) printf 'The backup ran at noon; its log holds a NUL here: '
		   printf '\0 and goes on after it for a while longer.\n' ;;
		2|3) printf 'Lunch is at noon in the usual place; bring your '
		   printf 'own sandwiches, the kitchen is closed for repairs.\n' ;;
		4) printf 'The disk images of the three test machines are '
		   printf 'attached, taken this morning before the upgrade.\n' ;;
		esac
		printf '\n'
	done
}

@test "mail with a NUL byte inside a message: the stream's bytes, every verdict in step" {
	nul_mbox >in.mbox
	[ "$(tr -cd '\0' <in.mbox | wc -c)" -eq 1 ] || fail "no NUL in the input"
	same_as_stream in.mbox mail unix default -a
	# The copy is a duplicate of the second message, the fourth unique.
	grep -q '^X-Mhfilter: duplicate.*n2@example.org' "$T/got" ||
	    fail "the copy not a duplicate of n2" "$(grep ^X-Mhfilter "$T/got")"
	[ "$(grep -c '^X-Mhfilter: unique' "$T/got")" -eq 3 ] ||
	    fail "not three unique" "$(grep ^X-Mhfilter "$T/got")"
}

@test "mail over the daemon's --max-bytes (an attachment of 9 MB): written through unjudged, the messages after it judged" {
	python3 - >in.mbox <<'P'
import base64, random
rnd = random.Random(3)
def msg(n, body, att=None):
    out = ["From a@example.org Tue Jul  1 10:00:0%d 2025" % n,
           "From: a@example.org", "Message-ID: <b%d@example.org>" % n,
           "Subject: note %d" % n, "MIME-Version: 1.0"]
    if att is None:
        out += ["", body, ""]
    else:
        out += ['Content-Type: multipart/mixed; boundary="xx"', "",
                "--xx", "Content-Type: text/plain", "", body, "--xx",
                "Content-Type: application/octet-stream",
                "Content-Transfer-Encoding: base64", ""]
        b = base64.b64encode(att).decode()
        out += [b[i:i + 76] for i in range(0, len(b), 76)]
        out += ["--xx--", ""]
    return "\n".join(out) + "\n"
lunch = ("Lunch is at noon in the usual place; bring your own sandwiches, "
         "the kitchen is closed for repairs until the end of the month.")
print(msg(1, lunch), end="")
print(msg(2, "The disk images of the test machines, taken this morning "
      "before the upgrade, in case we roll back on Thursday.",
      bytes(rnd.getrandbits(8) for _ in range(9 << 20))), end="")
print(msg(3, lunch), end="")
P
	[ "$(wc -c <in.mbox)" -gt $((12 << 20)) ] || fail "the input is small"
	same_as_stream in.mbox mail unix default
	[ "$(grep -c '^Message-ID: <b' "$T/got")" -eq 2 ] ||
	    fail "not two messages" "$(grep '^Message-ID' "$T/got")"
	serve mail unix
	client_of in.mbox -f mail -a
	stop_daemon
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	grep -q '^X-Mhfilter: unchecked; reason=too-large' "$T/got" ||
	    fail "no reason given" "$(grep '^X-Mhfilter' "$T/got")"
	grep -q '^X-Mhfilter: duplicate; of=<b1@example.org>' "$T/got" ||
	    fail "the third message not judged" "$(grep '^X-Mhfilter' "$T/got")"
	# The warning names the limit to raise: --max-bytes, not --max-message.
	grep -q ':9: over --max-bytes (8388608 bytes, the most the daemon takes): passed through unchecked' \
	    "$T/cerr" || fail "$(cat "$T/cerr")"
}

# Input $1 with every block of $2 records followed by the same block
# again (records as make_input makes them: lines, or mbox messages).
repeat_blocks() {
	python3 - "$1" "$2" <<'P'
import re, sys
data = open(sys.argv[1]).read()
if data.startswith("From "):
    recs = re.split(r"(?m)^(?=From sender@)", data)[1:]
else:
    recs = data.splitlines(True)
k = int(sys.argv[2])
for i in range(0, len(recs), k):
    sys.stdout.write("".join(recs[i:i + k]) * 2)
P
}

@test "records with ids sent twice on one connection, the copy while the first is in flight: the stream's bytes, each written once" {
	local fmt

	for fmt in tsv jsonl mail; do
		make_input "$fmt" 3000 >base
		repeat_blocks base 500 >"in.$fmt"
		same_as_stream "in.$fmt" "$fmt" unix default -a
	done
	# Each record of the tsv feed is written once.
	make_input tsv 3000 >base
	repeat_blocks base 500 >in.tsv
	serve tsv unix
	client_of in.tsv -f tsv
	stop_daemon
	[ "$(wc -l <"$T/got")" -eq "$(sort -u "$T/got" | wc -l)" ] ||
	    fail "records written twice"
}

# 200 records sent over address kind $1 by a client killed with its
# replies on their way ($2 before: killed before the batch closes, 2 s
# after its first record) or unread in its socket (stopped: stopped
# before, killed once they came); run again, it must write every record.
killed_then_again() {
	local pid

	gen_tsv 200 7 >feed
	serve tsv "$1" --batch-delay 2s
	"$MHFILTER" -f tsv --connect "$ADDR" feed >o1 2>e1 &
	pid=$!
	sleep 0.7
	if [ "$2" = stopped ]; then
		kill -STOP "$pid"
		wait_delivered "$ADDR" 200
		sleep 0.5	# the replies in its socket
	fi
	kill -9 "$pid"
	wait "$pid" || true
	[ "$2" = stopped ] || wait_delivered "$ADDR" 200
	[ ! -s o1 ] || fail "the first run wrote $(wc -l <o1) records"
	client_of feed -f tsv
	stop_daemon
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	[ "$(wc -l <"$T/got")" -eq 200 ] ||
	    fail "the second run wrote $(wc -l <"$T/got") of 200"
}

@test "tcp: a client killed before its replies, run again: every record written (the replies its socket took after it died were not delivered)" {
	killed_then_again tcp before
}

@test "unix: a client stopped with its replies unread, then killed, run again: every record written" {
	killed_then_again unix stopped
}

@test "a client killed with its replies read and its output blocked, run again: every record written by one run or the other" {
	local pid rd

	gen_tsv 3000 7 >feed
	serve tsv unix --batch-delay 2s
	# Its output is a pipe whose reader stops before the replies come:
	# the client reads them and blocks writing what they decide.
	mkfifo out.fifo
	cat out.fifo >o1 &
	rd=$!
	"$MHFILTER" -f tsv --connect "$ADDR" feed >out.fifo 2>e1 &
	pid=$!
	sleep 0.7
	kill -STOP "$rd"
	wait_delivered "$ADDR" 3000
	sleep 1
	kill -9 "$pid"
	wait "$pid" || true
	kill -CONT "$rd"
	wait "$rd"
	# What the pipe took was written, but for a record cut short; the
	# batch it ends was not told taken, so the second run writes it all
	# again, as the stream does a batch it was killed writing.
	[ "$(tail -c 1 o1)" = "" ] || sed -i '$d' o1
	[ "$(wc -l <o1)" -lt 3000 ] || fail "the output did not block"
	client_of feed -f tsv
	stop_daemon
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	sort -u o1 "$T/got" >both
	sort feed >all
	assert_same all both
}

@test "a Maildir whose messages start with From lines, From_ lines or not: the stream's bytes" {
	mkdir -p md/cur md/new md/tmp
	printf 'From jane@example.org\nFrom: jane@example.org\nDate: Tue, 02 Jun 2020 10:00:00 +0000\nSubject: hello\nMessage-ID: <j1@example.org>\n\nA message body with a few words in it, enough to be judged here.\n' \
	    >md/new/1.host
	printf 'From bob@example.org Mon Jan  1 00:00:00 2024\nFrom: bob@example.org\nSubject: other\nMessage-ID: <b1@example.org>\n\nAnother body, of other words than the first one has.\nFrom the desk of Bob\n' \
	    >md/new/2.host
	serve mail unix
	timeout 60 "$MHFILTER" -f mail -a md >want
	timeout 60 "$MHFILTER" -f mail --connect "$ADDR" -a md >got ||
	    fail "status $?"
	stop_daemon
	assert_same want got
}

# Records of feed $1 with a bad record in bad (a record over the client's
# --max-bytes 300, or invalid JSON), sent with --on-bad-input fail (more
# client options after), then the fixed feed: every record written by one
# run or the other.  (Those of the batch the first run stopped in, whose
# later replies were not taken, may be written again: a replay.)
fail_then_fixed() {
	local feed="$1" st=0

	shift
	timeout 60 "$MHFILTER" --connect "$ADDR" --on-bad-input fail "$@" \
	    bad >o1 2>e1 || st=$?
	[ "$st" -eq 3 ] || fail "status $st, not 3" "$(cat e1)"
	timeout 60 "$MHFILTER" --connect "$ADDR" "${@:1:2}" "$feed" >o2 2>e2 ||
	    fail "status $?" "$(cat e2)"
	stop_daemon
	[ "$(wc -l <o1)" -gt 0 ] || fail "the first run wrote nothing"
	sort -u o1 o2 >both
	sort "$feed" >all
	assert_same all both
	# With $ONCE, none twice.
	[ -z "${ONCE:-}" ] || [ "$(sort o1 o2 | uniq -d | wc -l)" -eq 0 ] ||
	    fail "written twice:" "$(sort o1 o2 | uniq -d)"
}

@test "--on-bad-input fail, the client's own too-long record: the replies read after it are not told taken; run again, every record written" {
	gen_tsv 60 3 >feed
	{ head -n 10 feed; printf 'big\t%s\n' "$(head -c 600 /dev/zero | tr '\0' x)"
	    tail -n +11 feed; } >bad
	serve tsv unix --batch-delay 200ms
	fail_then_fixed feed -f tsv --max-bytes 300
}

@test "--on-bad-input fail in client and daemon, invalid JSON: the records before it told taken, though the daemon closes; run again, every record written once" {
	gen_tsv 60 4 | python3 -c '
import json, sys
for l in sys.stdin:
    i, t = l.rstrip("\n").split("\t")
    print(json.dumps({"id": i, "text": t}))' >feed
	{ head -n 30 feed; echo '{"id": "broken", "text": '; tail -n +31 feed; } >bad
	serve jsonl unix --batch-delay 100ms --on-bad-input fail
	# Its batch ends at the invalid record: all told taken.
	ONCE=1 fail_then_fixed feed -f jsonl
}

# The client with options $@ (--connect $ADDR), its output into o1 through
# a pipe whose reader stops for 7 s before the first replies come (the
# client blocks writing them meanwhile); its status into $SLOW_STATUS.
slow_client() {
	blocked_client "$@"
	sleep 7
	kill -CONT "$BLOCKED_RD"
	SLOW_STATUS=0
	wait "$BLOCKED_CL" || SLOW_STATUS=$?
	wait "$BLOCKED_RD"
}

# Start a client to $ADDR with options $@ whose output is a pipe to a
# reader stopped (SIGSTOP), which writes o1 once let go (kill -CONT
# "$BLOCKED_RD"); the client's pid is in $BLOCKED_CL, its stderr in e1.
blocked_client() {
	mkfifo out.fifo
	cat out.fifo >o1 &
	BLOCKED_RD=$!
	BG_PIDS+=("$BLOCKED_RD")
	exec 7>out.fifo		# (bats has 3)
	sleep 0.3
	kill -STOP "$BLOCKED_RD"
	"$MHFILTER" --connect "$ADDR" "$@" >&7 2>e1 &
	BLOCKED_CL=$!
	BG_PIDS+=("$BLOCKED_CL")
	exec 7>&-
}

# Wait until the daemon has done all it will, its CPU time staying put
# for half a second (up to 30 s): its replies wait for a client.
daemon_settled() {
	local i now last=-1

	for i in $(seq 60); do
		now="$(cut -d' ' -f14,15 "/proc/$DPID/stat")"
		[ "$now" = "$last" ] && break
		last="$now"
		sleep 0.5
	done
}

@test "a client whose output is slower than --idle-timeout: not idle while its replies are not told taken; run again, nothing written twice" {
	# Ids of 300 bytes: more replies than its socket holds, so that the
	# daemon waits to write as well as to read.
	gen_tsv 8000 8 | sed "s/^id/$(printf 'x%.0s' $(seq 290))/" >feed
	serve tsv unix --idle-timeout 1s
	# The client blocks with every reply sent, past the idle timeout
	# and the daemon's linger.
	slow_client -f tsv feed
	[ "$SLOW_STATUS" -eq 0 ] || fail "status $SLOW_STATUS" "$(cat e1)"
	client_of feed -f tsv
	stop_daemon
	[ "$(wc -l <o1)" -eq 8000 ] || fail "the first run wrote $(wc -l <o1)"
	[ "$GOT_STATUS" -eq 0 ] && [ ! -s "$T/got" ] ||
	    fail "the second run wrote $(wc -l <"$T/got")" "$(cat "$T/cerr")"
}

# A client that acks may owe 'taken' for at most so many batches (16384),
# more than --connect sends ahead by default: with batches of one record
# (a slow feed's, or --batch 1) a client that keeps up owes as many as it
# has records in flight, and the daemon lost the oldest past 1,024 (a
# second run wrote 1,973 of 3,000 again).
@test "batches of one record, 2,000 in flight: a client that keeps up owes them all; run again, nothing written twice" {
	gen_tsv 3000 17 >feed
	serve tsv unix --batch 1
	client_of feed -f tsv --connect-window 2000
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	[ "$(wc -l <"$T/got")" -eq 3000 ] ||
	    fail "the first run wrote $(wc -l <"$T/got")"
	client_of feed -f tsv --connect-window 2000
	stop_daemon
	[ "$GOT_STATUS" -eq 0 ] && [ ! -s "$T/got" ] ||
	    fail "the second run wrote $(wc -l <"$T/got")" "$(cat "$T/cerr")"
}

# A client that acks and then says nothing (its output blocked for good,
# here its reader stopped) is spared by --idle-timeout for 30 s at least,
# then closed: it held its connection, and the only --max-clients place,
# until the daemon stopped.  The next client is served.
@test "a client that acks and then says nothing for 30 s is closed, and frees its --max-clients place" {
	gen_tsv 8000 8 | sed "s/^id/$(printf 'x%.0s' $(seq 290))/" >feed
	serve tsv unix --idle-timeout 1s --max-clients 1
	blocked_client -f tsv feed
	# The next, told "busy", tries again for some 45 s.
	gen_tsv 100 9 >other
	client_of other -f tsv --connect-retries 14
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	[ "$(wc -l <"$T/got")" -eq 100 ] || fail "wrote $(wc -l <"$T/got")"
	grep -q "no word of its replies for [0-9]* s: closed" "$T/derr" ||
	    fail "$(cat "$T/derr")"
	# Let go, the first client writes every record, at least once.
	kill -CONT "$BLOCKED_RD"
	wait_exit "$BLOCKED_CL" 120 || return 1
	[ "$status" -eq 0 ] || fail "status $status" "$(cat e1)"
	wait "$BLOCKED_RD"
	[ "$(sort -u o1 | wc -l)" -eq 8000 ] || fail "wrote $(sort -u o1 | wc -l)"
	stop_daemon
}

@test "--on-bad-input fail in the daemon, a client whose output is slower than the daemon's linger: its last 'taken' heard; run again, nothing written twice" {
	gen_tsv 3000 81 | python3 -c '
import json, sys
for l in sys.stdin:
    i, t = l.rstrip("\n").split("\t")
    print(json.dumps({"id": i, "text": t}))' >feed
	{ head -n 1500 feed; echo '{"id": "broken", "text": '
	    tail -n +1501 feed; } >bad
	serve jsonl unix --batch-delay 100ms --on-bad-input fail
	# Blocked past the daemon's 5 s linger.
	slow_client -f jsonl --on-bad-input fail bad
	[ "$SLOW_STATUS" -eq 3 ] || fail "status $SLOW_STATUS" "$(cat e1)"
	client_of feed -f jsonl
	stop_daemon
	[ "$(wc -l <o1)" -eq 1500 ] || fail "the first run wrote $(wc -l <o1)"
	[ "$(sort o1 "$T/got" | uniq -d | wc -l)" -eq 0 ] ||
	    fail "written twice: $(sort o1 "$T/got" | uniq -d | wc -l)"
}

@test "--connect -o FILE whose sync fails: exit 1 with one message naming the file; its records not told taken, written again by the next run" {
	local st=0

	gen_tsv 300 9 >feed
	serve tsv unix
	FAULT_PATH=out.tsv FAULT_CALLS=fdatasync FAULT_AT=1 FAULT_TIMES=0 \
	    LD_PRELOAD="$(fault_preload)" timeout 60 "$MHFILTER" -f tsv \
	    --connect "$ADDR" -o out.tsv feed 2>e1 || st=$?
	[ "$st" -eq 1 ] || fail "status $st" "$(cat e1)"
	[ "$(grep -c 'out.tsv: sync error' e1)" -eq 1 ] || fail "$(cat e1)"
	client_of feed -f tsv
	stop_daemon
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	[ "$(wc -l <"$T/got")" -eq 300 ] ||
	    fail "the second run wrote $(wc -l <"$T/got") of 300"
}

@test "tcp: the stream's bytes, default and -a, line and tsv" {
	make_input line 2000 >in.line
	make_input tsv 2000 >in.tsv
	same_as_stream in.line line tcp default -a
	same_as_stream in.tsv tsv tcp default -a -D
}

@test "tls: a batch that failed to commit, its error line read with the replies before it: those applied once, its records sent again" {
	local i fp

	[ -f "$C/ca.pem" ] ||
	    skip "the openssl command is not installed (Debian package openssl)"
	for i in $(seq 0 9); do
		printf 'id%d\tsome text number %d with several words in it\n' "$i" "$i"
	done >feed
	python3 "$E2E_DIR/failing-daemon.py" "$C/server.pem" "$C/server.key" \
	    port log &
	fp=$!
	BG_PIDS+=("$fp")
	for i in $(seq 100); do [ -s port ] && break; sleep 0.05; done
	timeout 60 "$MHFILTER" -f tsv --connect "tls:127.0.0.1:$(cat port)" \
	    --tls-ca "$C/ca.pem" feed >got 2>err || fail "status $?" "$(cat err)"
	kill "$fp"
	# id1 is the only duplicate; id2 and id3 went again on connection 2.
	[ "$(cut -f1 got | tr '\n' ' ')" = "id0 id2 id3 id4 id5 id6 id7 id8 id9 " ] ||
	    fail "$(cat got)" "$(cat log)"
	grep -q '^conn2 id2$' log && grep -q '^conn2 id3$' log || fail "$(cat log)"
}

@test "tls: the stream's bytes with a client certificate; a wrong CA exits 1" {
	command -v openssl >/dev/null 2>&1 ||
	    skip "the openssl command is not installed (Debian package openssl)"
	make_input tsv 1500 >in.tsv
	make_input jsonl 1500 >in.jsonl
	same_as_stream in.tsv tsv tls default -a
	same_as_stream in.jsonl jsonl tls -D
	serve tsv tls
	run timeout 60 "$MHFILTER" --connect "$ADDR" --connect-retries 0 \
	    --tls-ca "$C/other.pem" --tls-cert "$C/client.pem" \
	    --tls-key "$C/client.key" -f tsv <in.tsv
	[ "$status" -eq 1 ] || fail "status $status" "$output"
	[[ "$output" == *"--connect $ADDR: TLS: "*"certificate verify failed"* ]] ||
	    fail "$output"
	# No client certificate: the daemon refuses the handshake.
	run timeout 60 "$MHFILTER" --connect "$ADDR" --connect-retries 1 \
	    --tls-ca "$C/ca.pem" -f tsv <in.tsv
	[ "$status" -eq 1 ] || fail "status $status" "$output"
	[[ "$output" == *"--connect $ADDR: "*"gave up after 2 attempts"* ]] ||
	    fail "$output"
	stop_daemon
}

# A stand-in for a daemon of an older version on unix socket $T/old, for
# one connection: a command is an unknown one (an error line), a record
# unique.
old_daemon() {
	timeout 60 python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
f = c.makefile("rb")
for line in f:
    if line.startswith(b"#mhfilter "):
        c.sendall(b"error\t-\tcommand\tunknown command\n")
    else:
        c.sendall(b"unique\t" + line.split(b"\t")[0] + b"\n")
' "$T/old" &
	BG_PIDS+=($!)
	for i in $(seq 100); do [ -S "$T/old" ] && break; sleep 0.05; done
}

@test "-p against a daemon that does not know '#mhfilter pairs' (an older version): exit 1, saying so" {
	old_daemon
	make_input tsv 20 >in
	run timeout 60 "$MHFILTER" --connect "unix:$T/old" -f tsv -p <in
	[ "$status" -eq 1 ] || fail "status $status" "$output"
	[[ "$output" == *"--connect unix:$T/old: the daemon does not know '#mhfilter pairs'"* ]] ||
	    fail "$output"
}

@test "a daemon that does not know '#mhfilter ack' (an older version): every record written, its replies counted by its socket" {
	old_daemon
	make_input tsv 20 >in
	run timeout 60 "$MHFILTER" --connect "unix:$T/old" -f tsv -v <in
	[ "$status" -eq 0 ] || fail "status $status" "$output"
	[[ "$output" == *"does not take '#mhfilter ack'"* ]] || fail "$output"
	[ "$(grep -c '^[a-z0-9]*	' <<<"$output")" -eq 20 ] || fail "$output"
}

@test "exit statuses: no daemon (1, naming it), bad input under fail (3), usage (2), a closed output (141)" {
	make_input tsv 200 >in
	run timeout 60 "$MHFILTER" --connect "unix:$T/nothing" \
	    --connect-retries 2 <in
	[ "$status" -eq 1 ] || fail "status $status" "$output"
	[[ "$output" == *"--connect unix:$T/nothing: "*"gave up after 3 attempts"* ]] ||
	    fail "$output"
	[ "${#lines[@]}" -eq 1 ] || fail "$output"

	# A line without a TAB in the middle: the stream's output and 3.
	{ head -n 100 in; printf 'no tab here\n'; tail -n +101 in; } >bad
	stream_of bad -f tsv --on-bad-input=fail
	[ "$WANT_STATUS" -eq 3 ] || fail "stream status $WANT_STATUS"
	serve tsv unix
	client_of bad -f tsv --on-bad-input=fail
	[ "$GOT_STATUS" -eq 3 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	assert_same "$T/want" "$T/got"
	grep -q 'no TAB between id and text: stopping' "$T/cerr" ||
	    fail "$(cat "$T/cerr")"
	# Skipped (the default) and passed: as the stream, status 0.
	stop_daemon
	serve tsv unix
	stream_of bad -f tsv --on-bad-input=pass -a
	client_of bad -f tsv --on-bad-input=pass -a
	[ "$GOT_STATUS" -eq 0 ] && [ "$WANT_STATUS" -eq 0 ] ||
	    fail "status $GOT_STATUS, $WANT_STATUS" "$(cat "$T/cerr")"
	assert_same "$T/want" "$T/got"
	grep -q '^invalid	-	-	no tab here$' "$T/got" || fail "not passed"
	# A record over --max-bytes is skipped here, never sent.
	stop_daemon
	serve tsv unix
	{ head -n 5 in; printf 'big\t%02000d\n' 0; tail -n 5 in; } >big
	stream_of big -f tsv --max-bytes 1k -a
	client_of big -f tsv --max-bytes 1k -a
	[ "$GOT_STATUS" -eq 0 ] || fail "status $GOT_STATUS" "$(cat "$T/cerr")"
	assert_same "$T/want" "$T/got"
	# The reader of the output went away: 141, quietly.
	stop_daemon
	serve tsv unix
	make_input tsv 20000 >long
	{ rc=0; timeout 60 "$MHFILTER" --connect "$ADDR" -f tsv <long \
	    2>"$T/cerr" || rc=$?; echo "$rc" >"$T/rc"; } | head -n 1 >/dev/null
	status="$(cat "$T/rc")"
	[ "$status" -eq 141 ] || fail "status $status" "$(cat "$T/cerr")"
	stop_daemon

	run timeout 60 "$MHFILTER" --connect "udp:127.0.0.1:1" <in
	[ "$status" -eq 2 ] || fail "status $status" "$output"
	run timeout 60 "$MHFILTER" --connect "unix:$T/sock" --stats <in
	[ "$status" -eq 2 ] || fail "status $status" "$output"
	run timeout 60 "$MHFILTER" --connect "unix:$T/sock" \
	    --listen "unix:$T/other" <in
	[ "$status" -eq 2 ] || fail "status $status" "$output"
}

# The client's output $3 against the stream's $2, records of format $1
# (mail, or a line a record) after the daemon was killed: every record of the stream's,
# in order, and nothing else but a record whose identical text was written
# before (mhfilter(1), Feeds, replays and crashes: a record without an id
# of its own is a replay when an identical text is in a batch a killed
# run may not have delivered), at most six batches of them.
assert_stream_or_again() {
	python3 - "$@" <<'EOF'
import re, sys
fmt, want, got = sys.argv[1:4]
def records(path):
    data = open(path, "rb").read()
    if fmt == "mail":
        return [r for r in re.split(rb"(?m)^(?=From )", data) if r]
    return data.split(b"\n")
want, got = records(want), records(got)
written, i, again = set(), 0, 0
for j, r in enumerate(got):
    if i < len(want) and r == want[i]:
        i += 1
    elif r in written:
        again += 1
    else:
        sys.exit("record %d of the output is not the stream's record %d "
                 "(of %d), nor a text written before:\n%r\n%r"
                 % (j + 1, i + 1, len(want), r[:300],
                    want[i][:300] if i < len(want) else b"(none)"))
    written.add(r)
if i != len(want):
    sys.exit("records lost: the stream's from %d of %d on (the first: %r)"
             % (i + 1, len(want), want[i][:300]))
if again > 6 * 4000:
    sys.exit("%d records written again" % again)
EOF
}

# The daemon stopped with signal $1 once the client has written $2 lines,
# then started again on the same index and socket: the client's output
# must be the stream's (after SIGKILL, with identical texts that may be
# written again: assert_stream_or_again).  After SIGTERM the daemon waits
# 10 s for its clients to say they took their last replies: a client
# slower than that (its output's fdatasync stalled by a loaded disk) has
# them come back as replays, as after SIGKILL, and the daemon says so;
# a test below (the client's output blocked) makes that case on purpose.
restart_mid_input() {
	local sig="$1" after="$2" cl

	make_input line 60000 >long
	stream_of long
	serve line unix
	timeout 300 "$MHFILTER" --connect "$ADDR" -v <long >"$T/got" \
	    2>"$T/cerr" &
	cl=$!
	BG_PIDS+=("$cl")
	wait_lines "$T/got" 60 "$after" || return 1
	kill "-$sig" "$DPID"
	wait_exit "$DPID" 30 || return 1
	start_daemon -f line -d "$T/db" --listen "unix:$T/sock"
	wait_exit "$cl" 240 || return 1
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat "$T/cerr")"
	# It was cut off and came back.
	grep -q "connected" "$T/cerr" || fail "$(cat "$T/cerr")"
	[ "$(grep -c ': connected$' "$T/cerr")" -ge 2 ] ||
	    fail "no second connection:" "$(cat "$T/cerr")"
	[ "$(wc -l <"$T/got")" -gt "$after" ] || fail "nothing after"
	if [ "$sig" = KILL ] ||
	    grep -q 'did not take their last replies' "$T/derr"; then
		assert_stream_or_again line "$T/want" "$T/got"
	else
		assert_same "$T/want" "$T/got" ||
		    fail "the daemon's log:" "$(cat "$T/derr")" \
		    "the client's:" "$(grep -v ': [0-9]*: ' "$T/cerr")"
	fi
	stop_daemon
}

@test "the daemon restarted with SIGTERM in the middle of an input: nothing lost or written twice" {
	restart_mid_input TERM 2000
}

# A client whose output is blocked (its reader stopped) owes the daemon
# 'taken' for the replies it was sent; the daemon stopped (SIGTERM) waits
# 10 s for them, not longer (a client that never takes them must not hold
# a restart), says so and exits 0, counting them not delivered.  The
# client, let go, writes the records it has replies for, sends the others
# again to the daemon started again, which answers a later identical text
# of an undelivered one as a replay: every record, at least once.
@test "the daemon stopped (SIGTERM) while a client's output is blocked: it exits in 10 s, saying so; the client, let go, writes every record" {
	make_input line 60000 >long
	stream_of long
	serve line unix
	blocked_client long
	daemon_settled
	kill -TERM "$DPID"
	wait_exit "$DPID" 30 || return 1
	[ "$status" -eq 0 ] || fail "daemon status $status" "$(cat "$T/derr")"
	grep -q '1 clients did not take their last replies in 10 s' \
	    "$T/derr" || fail "$(cat "$T/derr")"
	start_daemon -f line -d "$T/db" --listen "unix:$T/sock"
	kill -CONT "$BLOCKED_RD"
	wait_exit "$BLOCKED_CL" 240 || return 1
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat e1)"
	wait "$BLOCKED_RD"
	assert_stream_or_again line "$T/want" o1
	stop_daemon
}

@test "the daemon killed (SIGKILL) in the middle of an input: nothing lost, nothing written twice but identical texts" {
	restart_mid_input KILL 2000
}

# Records without an id of their own (-f line, JSON Lines without an id
# field: the daemon numbers them RUN:CONN:NUMBER), committed and never
# answered: the client is stopped, so that the daemon's replies fill
# its socket and wait in the daemon, which is killed then.  The client,
# let go, sends them again to the daemon restarted, which has new numbers
# for them: each is a replay of its identical text in a killed run's
# undelivered batch, written; none is a duplicate of itself.
@test "the daemon killed with answers committed and never sent, records without ids: sent again, each written" {
	local fmt cl

	for fmt in line jsonl; do
		make_input line 60000 >long
		[ "$fmt" = jsonl ] && python3 -c '
import json, sys
for l in sys.stdin:
    print(json.dumps({"text": l.rstrip("\n")}))' <long >long.jsonl &&
		    mv long.jsonl long
		stream_of long -f "$fmt"
		serve "$fmt" unix
		# (Not under timeout(1), whose child SIGSTOP would not stop;
		# wait_exit bounds it.)
		# A window of replies larger than any socket's buffer and
		# the daemon's (REPLY_HIGH) together.
		"$MHFILTER" --connect "$ADDR" --connect-window 50000 -v \
		    -f "$fmt" <long >"$T/got" 2>"$T/cerr" &
		cl=$!
		BG_PIDS+=("$cl")
		wait_lines "$T/got" 60 1000 || return 1
		kill -STOP "$cl"
		daemon_settled
		kill -KILL "$DPID"
		wait_exit "$DPID" 30 || return 1
		start_daemon -f "$fmt" -d "$T/db" --listen "unix:$T/sock"
		kill -CONT "$cl"
		wait_exit "$cl" 240 || return 1
		[ "$status" -eq 0 ] ||
		    fail "$fmt: client status $status" "$(cat "$T/cerr")"
		grep -q 'records not answered' "$T/cerr" ||
		    fail "$fmt: nothing was left unanswered" "$(cat "$T/cerr")"
		assert_stream_or_again "$fmt" "$T/want" "$T/got"
		stop_daemon
	done
}

@test "busy: with --max-clients 1 held, the client waits its turn and loses nothing" {
	make_input tsv 3000 >in
	stream_of in -f tsv -a
	serve tsv unix -v --max-clients 1
	: >empty
	timeout 120 python3 "$CLIENT" raw "$ADDR" empty held &
	HELD=$!
	BG_PIDS+=("$HELD")
	wait_log "connection 1 from"
	timeout 120 "$MHFILTER" --connect "$ADDR" -v -f tsv -a <in \
	    >"$T/got" 2>"$T/cerr" &
	cl=$!
	BG_PIDS+=("$cl")
	# Refused at least twice, then let in.
	wait_log "busy" 20 2
	kill "$HELD"
	wait_exit "$cl" 60
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat "$T/cerr")"
	grep -q 'error busy' "$T/cerr" || fail "$(cat "$T/cerr")"
	assert_same "$T/want" "$T/got"
	stop_daemon
}

@test "a producer that pauses: what it sent is answered and written during the pause" {
	local cl i

	make_input line 1500 >in
	serve line unix
	{ cat in; sleep 4; } | "$MHFILTER" --connect "$ADDR" >got 2>cerr &
	cl=$!
	BG_PIDS+=("$cl")
	for i in $(seq 60); do
		[ "$(wc -l <got)" -gt 0 ] && break
		sleep 0.05
	done
	# Within 3 s of a pause of 4 (the client read no reply before).
	[ "$(wc -l <got)" -gt 0 ] || fail "nothing written in the pause"
	wait "$cl" || fail "status $?" "$(cat cerr)"
	stop_daemon
}

@test "an idle timeout of 1 s with a paused producer: the client reconnects and loses nothing" {
	make_input line 3000 >in
	stream_of in -a
	serve line unix --idle-timeout 1s
	{ head -n 1500 in; sleep 2.5; tail -n +1501 in; } |
	    timeout 120 "$MHFILTER" --connect "$ADDR" -v -a >"$T/got" \
	    2>"$T/cerr"
	status=$?
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat "$T/cerr")"
	grep -q 'error idle' "$T/cerr" || fail "not idled:" "$(cat "$T/cerr")"
	assert_same "$T/want" "$T/got"
	stop_daemon
}
