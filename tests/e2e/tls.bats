#!/usr/bin/env bats
# TLS listeners (--listen tls:HOST:PORT): the protocol inside TLS, client
# certificates (mutual TLS), what is refused, certificate rotation on
# SIGHUP, start-up errors; and the refusal of plaintext tcp: beyond
# loopback.  Everything on 127.0.0.1, with certificates made here by the
# openssl command.

load helpers
load daemon-helpers

# Make the certificates once: a CA and its server (serials 1001, 1002)
# and client certificates, an expired client certificate of the same CA,
# and another CA with a client certificate of its own.
setup_file() {
	local top="$E2E_DIR/../.."

	command -v openssl >/dev/null 2>&1 ||
	    skip "the openssl command is not installed (Debian package openssl)"
	# The C client of make bench-tls (built here if $TLSCLIENT is not
	# set): it sends close_notify right after its last record.
	if [ -z "${TLSCLIENT:-}" ]; then
		TLSCLIENT="$BATS_FILE_TMPDIR/tlsclient"
		${CC:-cc} -std=c11 -D_GNU_SOURCE -I "$(dirname "$MHFILTER")" \
		    -o "$TLSCLIENT" "$top/tests/bench/tlsclient.c" \
		    $(pkg-config --cflags --libs openssl) ||
		    fail "cannot build tlsclient"
	fi
	export TLSCLIENT
	C="$BATS_FILE_TMPDIR/certs"
	export C
	mkdir -p "$C"
	cd "$C" || return 1
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
	printf 'extendedKeyUsage=clientAuth\n' >client.ext
	make_ca ca && make_ca other || return 1
	make_cert server ca 1001 server.ext &&
	    make_cert server2 ca 1002 server.ext &&
	    make_cert client ca 2001 client.ext &&
	    make_cert stranger other 3001 client.ext || return 1
	# Expired: valid for one day in 2020 (openssl ca sets both dates).
	printf '%s\n' '[ca]' 'default_ca = d' '[d]' 'database = index.txt' \
	    'new_certs_dir = .' 'serial = serial' 'default_md = sha256' \
	    'policy = p' 'copy_extensions = none' '[p]' \
	    'commonName = supplied' >ca.cnf
	: >index.txt
	echo 4001 >serial
	key expired && openssl req -new -key expired.key -subj /CN=expired \
	    -out expired.csr 2>/dev/null &&
	    openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key \
	    -in expired.csr -out expired.pem -notext \
	    -startdate 20200101000000Z -enddate 20200102000000Z \
	    >ca.log 2>&1 || fail "openssl ca failed" "$(cat ca.log)"
}

# An EC key in $1.key.
key() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
	    -out "$1.key" 2>/dev/null
}

# A self-signed CA certificate $1.pem (CN=$1) and its key.
make_ca() {
	key "$1" && openssl req -x509 -new -key "$1.key" -subj "/CN=$1" \
	    -days 30 -out "$1.pem" 2>/dev/null || fail "CA $1 not made"
}

# Certificate $1.pem (CN=$1) signed by CA $2, serial $3, extensions $4.
make_cert() {
	key "$1" && openssl req -new -key "$1.key" -subj "/CN=$1" \
	    -out "$1.csr" 2>/dev/null &&
	    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
	    -set_serial "$3" -days 30 -extfile "$4" -out "$1.pem" \
	    2>/dev/null || fail "certificate $1 not made"
}

# The TLS listener of the daemon started last, from its log.
tls_addr() {
	sed -n 's/.*listening on \(tls:[^ ]*\).*/\1/p' "$T/derr" | tail -n 1
}

# Send stdin over TLS to $1 as client $2 (a name under $C, or "" for no
# certificate); the replies on stdout, the status of client.py in $status.
tls_send() {
	status=0
	CLIENT_CA="$C/ca.pem" CLIENT_CERT="${2:+$C/$2.pem}" \
	    CLIENT_KEY="${2:+$C/$2.key}" dsend "$1" || status=$?
}

# The serial number of the certificate the server at $1 presents.
served_serial() {
	local hp="${1#tls:}"

	timeout 20 openssl s_client -connect "$hp" -CAfile "$C/ca.pem" \
	    -cert "$C/client.pem" -key "$C/client.key" </dev/null 2>/dev/null |
	    openssl x509 -noout -serial
}

# Eight records: four unrelated texts, then each again.
make_records() {
	printf 'r1\tThe quick brown fox jumps over the lazy dog\n' >in
	printf 'r2\tSomething else entirely, about the weather\n' >>in
	printf 'r3\tA recipe for bread: flour, water, salt, yeast\n' >>in
	printf 'r4\tMinutes of the meeting held on a rainy Tuesday\n' >>in
	sed 's/^r/s/' in >>in
}

# The replies to make_records' records.
check_replies() {
	local n

	n="$(grep -c '^unique	r[1-4]$' "$1")"
	[ "$n" -eq 4 ] || fail "$n unique replies, expected 4:" "$(cat "$1")"
	n="$(grep -c '^duplicate	s\([1-4]\)	r\1	1\.0000$' "$1")"
	[ "$n" -eq 4 ] || fail "$n duplicate replies, expected 4:" "$(cat "$1")"
	[ "$(wc -l <"$1")" -eq 8 ] || fail "not 8 replies:" "$(cat "$1")"
}

@test "mutual TLS: a client with a certificate of --tls-client-ca is served the same protocol" {
	make_records
	start_daemon -f tsv --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	[[ "$addr" =~ ^tls:127\.0\.0\.1:[1-9][0-9]*$ ]] || fail "address '$addr'"
	tls_send "$addr" client <in >replies
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat replies)"
	check_replies replies
	printf '#mhfilter version\n' | tls_send "$addr" client >v
	grep -q '^version	protocol=1	' v || fail "$(cat v)"
	stop_daemon
}

@test "refused: plaintext, no certificate, another CA's, expired; a connected client goes on" {
	make_records
	start_daemon -f tsv -v --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	# The good client sends one record every 0.4 s meanwhile.
	(CLIENT_CHUNK_LINES=1 CLIENT_CHUNK_PAUSE=0.4 tls_send "$addr" client \
	    <in >good) &
	good=$!
	BG_PIDS+=("$good")
	wait_log "client certificate /CN=client"

	# Plaintext on the TLS port: no reply, only a closed connection.
	dsend "tcp:${addr#tls:}" in >plain 2>plain.err || true
	[ ! -s plain ] || fail "a plaintext client got replies:" "$(cat plain)"
	wait_log "TLS handshake failed: wrong version number"
	for who in "" stranger expired; do
		tls_send "$addr" "$who" <in >bad 2>bad.err
		[ "$status" -eq 3 ] ||
		    fail "client '$who': status $status, expected 3" \
		    "$(cat bad bad.err)"
		[ ! -s bad ] || fail "client '$who' got replies:" "$(cat bad)"
		grep -q '^client: tls: ' bad.err || fail "$(cat bad.err)"
	done
	grep -q 'peer did not return a certificate' "$T/derr" ||
	    fail "no certificate: not logged" "$(cat "$T/derr")"
	grep -q 'certificate verify failed (unable to get local issuer certificate)' "$T/derr" ||
	    fail "another CA's: not logged" "$(cat "$T/derr")"
	grep -q 'certificate verify failed (certificate has expired)' "$T/derr" ||
	    fail "expired: not logged" "$(cat "$T/derr")"

	wait "$good"
	check_replies good
	[ "$(grep -c 'client certificate /CN=client' "$T/derr")" -eq 1 ] ||
	    fail "a refused client was admitted:" "$(cat "$T/derr")"
	printf '#mhfilter stats\n' | tls_send "$addr" client >stats
	[ "$(stats_of tls_refused <stats)" = 4 ] || fail "$(cat stats)"
	stop_daemon
}

@test "TLS 1.2 is served; TLS 1.1 is refused" {
	start_daemon -f tsv --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	hp="$(tls_addr)"
	hp="${hp#tls:}"
	printf 'a\tone record\n' | timeout 20 openssl s_client -quiet \
	    -connect "$hp" -tls1_2 -CAfile "$C/ca.pem" -cert "$C/client.pem" \
	    -key "$C/client.key" >v12 2>v12.err &
	BG_PIDS+=($!)
	wait_lines v12 20
	[ "$(cat v12)" = "unique	a" ] || fail "$(cat v12 v12.err)"
	run timeout 20 openssl s_client -connect "$hp" -tls1_1 \
	    -cipher 'DEFAULT@SECLEVEL=0' -CAfile "$C/ca.pem" \
	    -cert "$C/client.pem" -key "$C/client.key" </dev/null
	[ "$status" -ne 0 ] || fail "TLS 1.1 was served: $output"
	wait_log "TLS handshake failed: unsupported protocol"
	stop_daemon
}

@test "socat's OPENSSL address: its end of input (close_notify) is a half-close, every record answered" {
	command -v socat >/dev/null 2>&1 || skip "socat is not installed (Debian package socat)"
	seq 2000 | sed 's/^/text number /' >feed
	start_daemon --listen tls:127.0.0.1:0 --tls-cert "$C/server.pem" \
	    --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	timeout 60 socat -t 30 - "OPENSSL:${addr#tls:},cert=$C/client.pem,key=$C/client.key,cafile=$C/ca.pem,commonname=localhost" \
	    <feed >replies
	[ "$(wc -l <replies)" -eq 2000 ] || fail "$(wc -l <replies) replies"
	# In order, the last one the 2000th record's (id RUN:CONN:RECNO).
	[ "$(cut -f2 replies | cut -d: -f3 | uniq | wc -l)" -eq 2000 ] &&
	    [ "$(tail -n 1 replies | cut -f2 | cut -d: -f3)" = 2000 ] ||
	    fail "$(tail -n 3 replies)"
	stop_daemon
}

@test "a feed sent again over TLS, by socat and by a client that closes at once: every item seen, none a replay" {
	command -v socat >/dev/null 2>&1 || skip "socat is not installed (Debian package socat)"
	local i n

	seq 40 | sed 's/^\(.*\)$/a\1\tItem number \1 of the feed, with words of its own: \1 \1/' >feed
	start_daemon -f tsv --db db --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	for i in 1 2 3; do
		timeout 60 socat -t 30 - "OPENSSL:${addr#tls:},cert=$C/client.pem,key=$C/client.key,cafile=$C/ca.pem,commonname=localhost" \
		    <feed >replies$i || fail "socat $i failed"
		[ "$(wc -l <replies$i)" -eq 40 ] || fail "run $i: $(cat replies$i)"
	done
	n="$(grep -c '^unique	a[0-9]*$' replies1 || true)"
	[ "$n" -eq 40 ] || fail "first run: $n unique:" "$(cat replies1)"
	for i in 2 3; do
		# Its replies were taken: each item seen, not a replay.
		n="$(grep -c '^duplicate	a\([0-9]*\)	a\1	1\.0000	seen$' replies$i || true)"
		[ "$n" -eq 40 ] || fail "run $i: $n seen:" "$(sort replies$i | uniq -c | head)"
	done
	# The test's client, which closes as soon as it has its replies.
	tls_send "$addr" client <feed >replies4
	[ "$status" -eq 0 ] || fail "client status $status"
	n="$(grep -c '	seen$' replies4 || true)"
	[ "$n" -eq 40 ] || fail "client: $n seen:" "$(cat replies4)"
	stop_daemon
}

@test "a TCP half-close without close_notify ends a TLS client's input: every record answered" {
	# Small batches: replies are still to be written when the end comes
	# (libevent stops writing at the end of a TLS stream).
	seq 20000 | sed 's/^/text number /' >feed
	start_daemon --batch 50 --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	CLIENT_TIMEOUT=30 CLIENT_TLS_FIN=1 tls_send "$(tls_addr)" client \
	    <feed >replies
	[ "$status" -eq 0 ] || fail "client status $status"
	[ "$(wc -l <replies)" -eq 20000 ] || fail "$(wc -l <replies) replies"
	# One record, then the end at once, read together with it: the
	# record still counts (libevent reports the end before it has put
	# the last bytes in the input).
	for i in $(seq 30); do
		printf 'record %d\n' "$i" |
		    CLIENT_TLS_FIN=1 tls_send "$(tls_addr)" client
	done >short
	[ "$(wc -l <short)" -eq 30 ] || fail "$(wc -l <short) replies of 30"
	stop_daemon
}

@test "close_notify read with the last records: every record counts and is answered" {
	start_daemon -f tsv --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	# Records and close_notify in one write: libevent reports the end
	# before it has put those records in the input.
	make_records
	CLIENT_CA="$C/ca.pem" CLIENT_CERT="$C/client.pem" \
	    CLIENT_KEY="$C/client.key" timeout 60 python3 "$CLIENT" tlsend \
	    "$(tls_addr)" in replies
	check_replies replies
	# The C client of make bench-tls, 20,000 records five times.
	seq 20000 | sed 's/^/text number /' >feed
	for i in 1 2 3 4 5; do
		out="$(timeout 60 "$TLSCLIENT" "$(tls_addr)" "$C/ca.pem" \
		    "$C/client.pem" "$C/client.key" feed)" ||
		    fail "tlsclient failed"
		[ "${out#* }" = 20000 ] || fail "run $i: ${out#* } replies"
	done
	stop_daemon
}

@test "the limits over TLS: an over-long record, an idle client, one that never reads its replies" {
	start_daemon -f tsv --max-bytes 1K --idle-timeout 1s \
	    --listen tls:127.0.0.1:0 --tls-cert "$C/server.pem" \
	    --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	{
		printf 'a\tA short record\n'
		printf 'b\t%s\n' "$(head -c 3000 /dev/zero | tr '\0' x)"
		printf 'c\tanswered after it\n'
	} >long
	tls_send "$addr" client <long >replies
	[ "$(sed -n 1p replies)" = "unique	a" ] || fail "$(cat replies)"
	# (answered with its own id, b: its first bytes hold it; skipped,
	# the default --on-bad-input, so the connection goes on)
	sed -n 2p replies | grep -q '^error	b	too-long	record of .* bytes is over --max-bytes 1024$' ||
	    fail "$(cat replies)"
	[ "$(sed -n 3p replies)" = "unique	c" ] || fail "$(cat replies)"
	[ "$(wc -l <replies)" -eq 3 ] || fail "$(cat replies)"
	: >empty
	CLIENT_CA="$C/ca.pem" CLIENT_CERT="$C/client.pem" \
	    CLIENT_KEY="$C/client.key" timeout 60 python3 "$CLIENT" raw \
	    "$addr" empty idle
	grep -q '^error	-	idle	nothing received for 1 s (--idle-timeout)$' idle ||
	    fail "$(cat idle)"
	stop_daemon

	start_daemon --max-bytes 64K --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key"
	addr="$(tls_addr)"
	CLIENT_CA="$C/ca.pem" timeout 120 python3 "$CLIENT" stuck "$addr" \
	    stuck.out &
	BG_PIDS+=($!)
	wait_lines stuck.out 90
	read -r what sent <stuck.out
	[ "$what" = blocked ] || fail "the client sent $sent bytes unhindered"
	gen_tsv 500 >in
	tls_send "$addr" "" <in >replies
	[ "$(wc -l <replies)" -eq 500 ] || fail "$(wc -l <replies) replies"
	rss="$(rss_kb "$DPID")"
	[ "$rss" -lt 200000 ] || fail "daemon RSS $rss kB"
	stop_daemon
}

@test "connections that never finish a TLS handshake are closed after --idle-timeout: they do not hold --max-clients' places" {
	start_daemon -f tsv --idle-timeout 1s --max-clients 3 \
	    --listen tls:127.0.0.1:0 --listen "unix:$T/sock" \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key"
	addr="$(tls_addr)"
	# Three TCP connections that send no ClientHello, one that sends
	# half of one; each still open 4 s later says what the daemon did.
	timeout 60 python3 -c '
import socket, sys, time
host, port = sys.argv[1].split(":")[1:]
held = [socket.create_connection((host, int(port))) for i in range(3)]
time.sleep(4)
u = socket.socket(socket.AF_UNIX)
u.connect(sys.argv[2])
u.sendall(b"x\tsome text for the unix client\n")
u.shutdown(socket.SHUT_WR)
print(u.makefile().read(), end="")
for s in held:
    s.settimeout(5)
    print("closed" if s.recv(100) == b"" else "open")' "$addr" "$T/sock" >out
	printf 'unique\tx\nclosed\nclosed\nclosed\n' | assert_same - out
	wait_log "no TLS handshake in 1 s: closed"
	stop_daemon
}

@test "server-only TLS from a configuration file: any client is served" {
	make_records
	cat >conf <<EOF
format = tsv
listen = tls:127.0.0.1:0
tls-cert = $C/server.pem
tls-key = $C/server.key
EOF
	start_daemon --config conf
	tls_send "$(tls_addr)" "" <in >replies
	[ "$status" -eq 0 ] || fail "client status $status"
	check_replies replies
	stop_daemon
}

@test "SIGHUP re-reads the certificate for new connections; bad files keep the one in use" {
	make_records
	cp "$C/server.pem" cert.pem
	cp "$C/server.key" key.pem
	start_daemon -f tsv --listen tls:127.0.0.1:0 --tls-cert cert.pem \
	    --tls-key key.pem --tls-client-ca "$C/ca.pem"
	addr="$(tls_addr)"
	[ "$(served_serial "$addr")" = "serial=03E9" ] ||
	    fail "first serial: $(served_serial "$addr")"
	cp "$C/server2.pem" cert.pem
	cp "$C/server2.key" key.pem
	kill -HUP "$DPID"
	wait_log "TLS certificate and key reloaded"
	[ "$(served_serial "$addr")" = "serial=03EA" ] ||
	    fail "after SIGHUP: $(served_serial "$addr")"
	# A key of another certificate: logged, the current one stays.
	cp "$C/client.key" key.pem
	kill -HUP "$DPID"
	wait_log "the TLS certificate in use stays"
	grep -q 'key values mismatch' "$T/derr" || fail "$(cat "$T/derr")"
	[ "$(served_serial "$addr")" = "serial=03EA" ] ||
	    fail "after a bad SIGHUP: $(served_serial "$addr")"
	tls_send "$addr" client <in >replies
	check_replies replies
	stop_daemon
}

@test "socket activation: a socket named tls serves TLS; without --tls-cert it is an error" {
	command -v systemd-socket-activate >/dev/null ||
	    skip "systemd-socket-activate is not installed (Debian package systemd)"
	make_records
	port="$(python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
	# It listens at once and execs mhfilter (same pid) on the first
	# connection, with LISTEN_FDNAMES=tls.
	systemd-socket-activate -l "127.0.0.1:$port" --fdname=tls \
	    -E TMPDIR="$T" "$MHFILTER" -f tsv --tls-cert "$C/server.pem" \
	    --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" \
	    2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "Listening on 127.0.0.1:$port"
	tls_send "tls:127.0.0.1:$port" client <in >replies
	check_replies replies
	grep -qF "listening on tls:127.0.0.1:$port (from systemd)" "$T/derr" ||
	    fail "$(cat "$T/derr")"
	stop_daemon

	systemd-socket-activate -l "127.0.0.1:$port" --fdname=tls \
	    -E TMPDIR="$T" "$MHFILTER" 2>>"$T/derr" &
	DPID=$!
	BG_PIDS+=("$DPID")
	wait_log "Listening on 127.0.0.1:$port" 20 2
	tls_send "tls:127.0.0.1:$port" client <in >replies 2>/dev/null
	wait_exit "$DPID" 30
	[ "$status" -eq 1 ] || fail "status $status" "$(cat "$T/derr")"
	grep -qF "a socket named tls (from systemd) needs --tls-cert and --tls-key" \
	    "$T/derr" || fail "$(cat "$T/derr")"
}

@test "start-up: a bad certificate or key is exit 1 naming it; missing or stray TLS options are usage errors" {
	mhrun --listen tls:127.0.0.1:0 --tls-cert nonexistent.pem \
	    --tls-key "$C/server.key" </dev/null
	assert_status 1
	assert_err_has "--tls-cert nonexistent.pem: "
	printf 'not a certificate\n' >junk.pem
	mhrun --listen tls:127.0.0.1:0 --tls-cert junk.pem \
	    --tls-key "$C/server.key" </dev/null
	assert_status 1
	assert_err_has "--tls-cert junk.pem: "
	mhrun --listen tls:127.0.0.1:0 --tls-cert "$C/server.pem" \
	    --tls-key "$C/client.key" </dev/null
	assert_status 1
	assert_err_has "--tls-key $C/client.key: key values mismatch"
	mhrun --listen tls:127.0.0.1:0 --tls-cert "$C/server.pem" \
	    --tls-key "$C/server.key" --tls-client-ca junk.pem </dev/null
	assert_status 1
	assert_err_has "--tls-client-ca junk.pem: "
	mhrun --listen tls:127.0.0.1:0 </dev/null
	assert_status 2
	assert_err_has "needs --tls-cert and --tls-key"
	mhrun --listen tcp:127.0.0.1:0 --tls-cert "$C/server.pem" </dev/null
	assert_status 2
	assert_err_has "go with --listen tls:HOST:PORT"
}

@test "OpenSSL is loaded for tls: listeners only, from the TLS module" {
	LD_DEBUG=files mhrun -f line --stats "$DATA/sample-news.txt"
	assert_status 0
	if loaded | grep -E 'libssl|libcrypto|mhfilter-tls'; then
		fail "loaded for a stream:" "$(loaded)"
	fi
	make_records
	LD_DEBUG=files start_daemon -f tsv --listen tcp:127.0.0.1:0
	dsend "$(tcp_addr)" <in >replies
	check_replies replies
	stop_daemon
	loaded "$T/derr" | grep -q 'libevent_core' ||
	    fail "no loader trace of the daemon:" "$(cat "$T/derr")"
	if loaded "$T/derr" | grep -E 'libssl|libcrypto|mhfilter-tls'; then
		fail "loaded for a tcp: listener:" "$(loaded "$T/derr")"
	fi
	: >"$T/derr"
	LD_DEBUG=files start_daemon -f tsv --listen tls:127.0.0.1:0 \
	    --tls-cert "$C/server.pem" --tls-key "$C/server.key" \
	    --tls-client-ca "$C/ca.pem"
	tls_send "$(tls_addr)" client <in >replies
	[ "$status" -eq 0 ] || fail "client status $status" "$(cat replies)"
	check_replies replies
	stop_daemon
	loaded "$T/derr" | grep -q '/mhfilter-tls\.so$' ||
	    fail "no module:" "$(loaded "$T/derr")"
	loaded "$T/derr" | grep -q 'libssl\.so' ||
	    fail "no libssl:" "$(loaded "$T/derr")"
	loaded "$T/derr" | grep -q 'libcrypto\.so' ||
	    fail "no libcrypto:" "$(loaded "$T/derr")"
}

@test "without its TLS module, a tls: listener is exit 1 saying so; other listeners serve" {
	[ ! -e "$TLS_MODULE_INSTALLED" ] ||
	    skip "a TLS module is installed in $TLS_MODULE_INSTALLED"
	cp "$MHFILTER" alone
	status=0
	timeout 60 ./alone --listen tls:127.0.0.1:0 --tls-cert "$C/server.pem" \
	    --tls-key "$C/server.key" </dev/null >"$T/out" 2>"$T/err" ||
	    status=$?
	assert_status 1
	assert_err_has 'cannot load TLS support: '
	assert_err_has 'mhfilter-tls.so'
	make_records
	MHFILTER="$PWD/alone" start_daemon -f tsv --listen tcp:127.0.0.1:0
	dsend "$(tcp_addr)" <in >replies
	check_replies replies
	stop_daemon
}

@test "plaintext tcp: beyond loopback is refused (status 2, use tls:) unless --trusted-network" {
	for a in tcp:0.0.0.0:0 'tcp::0' 'tcp:*:0' 'tcp:[::]:0'; do
		mhrun --listen "$a" </dev/null
		assert_status 2
		assert_err_has "--listen $a: refused: plaintext TCP beyond loopback"
		assert_err_has "use tls:HOST:PORT"
		assert_err_has "--trusted-network"
	done
	printf 'listen = tcp:0.0.0.0:0\n' >conf
	mhrun --config conf </dev/null
	assert_status 2
	assert_err_has "refused: plaintext TCP beyond loopback"
	# Loopback by name or address, and a trusted network, start.
	start_daemon --listen tcp:localhost:0 --listen tcp:127.0.0.2:0
	stop_daemon
	start_daemon --listen tcp:0.0.0.0:0 --trusted-network
	grep -q 'listening on tcp:0\.0\.0\.0:' "$T/derr" || fail "$(cat "$T/derr")"
	stop_daemon
}

@test "--http with no host serves on loopback only" {
	start_daemon --listen "unix:$T/sock" --http :0
	[[ "$(http_addr)" =~ ^127\.0\.0\.1:[1-9][0-9]*$ ]] ||
	    fail "HTTP on '$(http_addr)'"
	stop_daemon
}
